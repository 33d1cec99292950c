"""`advsim audit`'s options: their flags, defaults (read from the built-in config, so
the two cannot disagree), help and examples."""

from __future__ import annotations

import argparse

from advsim.cli._common import _positive_int, _seed
from advsim.cli._names import (
    AUDIT_ASSUMPTIONS,
    AUDIT_METHODS,
    AUDIT_OPTION_KEYS,
    MECHANISM_ALIASES,
    SIDES,
    STRATEGY_KEYS,
    THRESHOLD_SELECTIONS,
    builtin_config,
)

__all__ = ["AUDIT_CONFIG", "AUDIT_EXAMPLES", "audit_options"]

#: The built-in experiment's config (the TOML's tables); the parser's defaults come from it.
AUDIT_CONFIG = builtin_config("audit")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


AUDIT_EXAMPLES = """\
examples:
  advsim audit                                  # the built-in experiment (a few minutes)
  advsim audit --steps 10 100 --trials 1e5 --noise-multiplier 1 --sampling-prob 0.1
  advsim audit --mechanism linear-data --dim 20 --out results/run1   # eps_delta: the default
  advsim audit --method eps_delta --sides one --threshold bonferroni --min-count 20
  advsim audit --out results/run2 --resume      # continue a killed run (same options)
  advsim audit --streaming --trials 100000000 --steps 25   # counted: memory independent of N
"""

#: The built-in audit's T values (the parser's default for --steps).
_STEPS = tuple(AUDIT_CONFIG["grid"]["steps"])


def _threshold_help() -> str:
    """`--threshold`'s help: every `advsim.audits.THRESHOLD_SELECTIONS`, with the flags of
    the options it takes."""
    flags = {option: _flag(key) for key, option in STRATEGY_KEYS.items()}
    strategies = [
        s + (f" (with {', '.join(flags[o] for o in opts)})" if opts else "")
        for s, opts in THRESHOLD_SELECTIONS.items()
        if s not in ("by_sample_size", "split", "same")
    ]
    return (
        "by_sample_size (default): the best rigorous strategy for the number of runs "
        "(rank_split from 3 runs per world, else split); split: choose the threshold on "
        "half the runs, count on the other half (held out); same: on all runs "
        "(optimistic); or a strategy "
        "of advsim.audits.audit: " + ", ".join(strategies) + "; or module:Class, a "
        "ThresholdStrategy of your own"
    )


def _threshold_selection(value: str) -> str:
    """`--threshold`'s value: an alias of `THRESHOLD_SELECTIONS` or a class path
    `module:Class` (resolved when the audit runs, like `--mechanism`'s)."""
    if value in THRESHOLD_SELECTIONS or (":" in value and all(value.partition(":")[::2])):
        return value
    raise argparse.ArgumentTypeError(
        f"invalid choice: {value!r} (choose from {', '.join(THRESHOLD_SELECTIONS)}, or "
        "module:Class)"
    )


#: The threshold strategies' options (`advsim.sweep._config.STRATEGY_KEYS`, one flag each):
#: type, metavar and help.
_STRATEGY_FLAGS = {
    "audit_threshold": (
        float,
        "TAU",
        "--threshold explicit only: the threshold of the test, fixed without these scores",
    ),
    "num_splits": (
        _positive_int,
        "K",
        "--threshold multi_split only: the number of split audits (default: that of "
        "advsim.audits.audit)",
    ),
    "selection_fraction": (
        float,
        "F",
        "--threshold projected_split or rank_split only: the share of each world that "
        "plans the thresholds, in (0, 1) (default: that of advsim.audits.audit)",
    ),
}


#: `advsim audit`'s options and their help (the formatter appends each default).
_AUDIT_HELP = {
    "--mechanism": "an alias ("
    + ", ".join(MECHANISM_ALIASES)
    + ") or any mechanism class path module:Class (or module:Class.factory) that takes "
    "steps, sampling_prob, noise_multiplier and clip_norm; linear: the 1-D linear process "
    "(the heuristic's tight case); linear-data: with a dataset of other examples (--dim, "
    "--num-examples, --data-*)",
    "--mechanism-arg": "NAME=VALUE: an argument of the mechanism's own constructor (or "
    "factory), repeatable, e.g. --mechanism-arg strength=0.5; VALUE is read as a TOML "
    "value (0.5, 3, true, [1, 2], \"text\"), else as a string; the class checks it. The "
    "arguments the command sets with flags (steps, sampling_prob, noise_multiplier, "
    "target_epsilon, clip_norm, the data flags) are refused here",
    "--adversary": "projection, llr, or any adversary class path module:Class (its "
    "arguments: --adversary-arg)",
    "--adversary-arg": "NAME=VALUE: an argument of the adversary's constructor, repeatable, "
    "read as --mechanism-arg's VALUE",
    "--method": "the audit; what its eps_lower assumes: "
    + "; ".join(f"{name}: {AUDIT_ASSUMPTIONS[name]}" for name in AUDIT_METHODS)
    + " (default: family for a mechanism in the heuristic's family, linear, where its "
    "assumption is exact; eps_delta, assumption-free, for every other mechanism)",
    "--steps": "numbers of steps, one row each (default: " + " ".join(map(str, _STEPS)) + ")",
    "--sampling-prob": "Poisson sampling probability q in (0, 1]",
    "--noise-multiplier": "sigma (default: calibrated to --target-epsilon for each T)",
    "--target-epsilon": "calibrate sigma so that composition gives this eps at --delta "
    f"(default: {AUDIT_CONFIG['mechanism']['target_epsilon']:g}, unless --noise-multiplier "
    "is given)",
    "--delta": "delta of every epsilon, in (0, 1) (the bounds beside the audit are infinite "
    "at delta = 0)",
    "--trials": "simulated runs per world (1e5 is accepted)",
    "--seed": "key of the simulation (and of the dataset, for linear-data)",
    "--confidence": "of the Clopper-Pearson intervals behind eps_lower, in (0.5, 1)",
    "--threshold": _threshold_help(),
    **{_flag(key): text for key, (_, _, text) in _STRATEGY_FLAGS.items()},
    "--sides": "two: both orders of the neighbouring pair, the larger of the test's two "
    "(eps, delta) inequalities; one: only 'score high means canary in' (jax_privacy's "
    "one_sided). Both bound FPR and FNR at level (1 - confidence) / 2 each; family takes "
    "only two, gdp gives the same number under both",
    "--min-count": "least false positives and false negatives at the threshold for eps_point",
    "--audit-seed": "seed of the audit's split of the runs (default: --seed)",
    "--streaming": "audit each T by a streaming audit: a pilot of --pilot-runs runs per "
    "world, on a key of its own, plans up to 6 threshold tests; the --trials runs per world "
    "are only counted (memory independent of --trials, for 1e8 runs and more), and "
    "eps_lower is the assumption-free eps_delta bound, rigorous (held out by "
    "construction). Takes --method eps_delta (its default) and --threshold by_sample_size "
    "(its default) or split only",
    "--pilot-runs": "--streaming only: the pilot's runs per world, in [2, --trials] "
    "(default: 10%% of --trials within [1e4, 2e7])",
    "--clip-norm": "clipping norm C of the per-example gradients",
    "--dim": "linear-data only: model dimension (default: 10)",
    "--num-examples": "linear-data only: examples besides the canary (default: 100)",
    "--data-distribution": "linear-data only: the other examples' gradients (default: gaussian)",
    "--data-scale": "linear-data only: their scale (default: 1.0)",
    "--chunk-size": "runs per compiled chunk; results do not depend on it (default: chosen "
    "from the device's memory)",
}


def audit_options() -> list[tuple[str, dict]]:
    """`(flag, add_argument keywords)` of `advsim audit`, defaults read from the built-in
    config (`advsim/sweep/audit.toml`), so that the two cannot disagree."""
    sweep, mech = AUDIT_CONFIG["sweep"], AUDIT_CONFIG["mechanism"]
    count, real = _positive_int, float
    spec = [  # flag, type or choices, default, metavar
        ("--mechanism", str, mech["name"], "NAME"),
        ("--mechanism-arg", "append", None, "NAME=VALUE"),
        ("--adversary", str, AUDIT_CONFIG["adversary"]["name"], "NAME"),
        ("--adversary-arg", "append", None, "NAME=VALUE"),
        ("--method", list(AUDIT_METHODS), None, None),
        ("--steps", count, _STEPS, "T"),
        ("--sampling-prob", real, mech["sampling_prob"], "q"),
        ("--noise-multiplier", real, None, "SIGMA"),
        ("--target-epsilon", real, None, "EPS"),
        ("--delta", real, sweep["delta"], None),
        ("--trials", count, sweep["trials"], "N"),
        ("--seed", _seed, sweep["seed"], None),
        ("--confidence", real, sweep["confidence"], None),
        ("--threshold", _threshold_selection, sweep["threshold_selection"], "NAME"),
        *(
            (_flag(key), _STRATEGY_FLAGS[key][0], None, _STRATEGY_FLAGS[key][1])
            for key in STRATEGY_KEYS
        ),
        ("--sides", list(SIDES), AUDIT_OPTION_KEYS["sides"], None),
        ("--min-count", count, AUDIT_OPTION_KEYS["min_count"], "N"),
        ("--audit-seed", _seed, None, "S"),
        ("--streaming", bool, False, None),  # the sweep's STREAMING_KEYS, off by default
        ("--pilot-runs", count, None, "N"),
        ("--clip-norm", real, mech["clip_norm"], "C"),
        ("--dim", count, None, "D"),
        ("--num-examples", count, None, "N"),
        ("--data-distribution", ["zero", "gaussian", "sphere"], None, None),
        ("--data-scale", real, None, "S"),
        ("--chunk-size", count, None, "N"),
    ]
    out = []
    for flag, kind, default, metavar in spec:
        if kind is bool:
            kw = {"action": "store_true"}
        elif kind == "append":
            kw = {"action": "append", "metavar": metavar}
        elif isinstance(kind, list):
            kw = {"choices": kind}
        else:
            kw = {"type": kind, "metavar": metavar}
        if flag == "--steps":
            kw["nargs"] = "+"
        out.append((flag, {**kw, "default": default, "help": _AUDIT_HELP[flag]}))
    return out

"""`advsim audit`: the built-in sweep config with the command's options in its place, checked
and run through the sweep runner (the flags and their help are in `_audit_options`, the
printed table and time report in `_audit_table`).

The experiment is `advsim/sweep/audit.toml` (`advsim.sweep.builtin_config("audit")`): a
grid over T, sigma calibrated per T (or given), every T with the same seed. The command's
options replace the config's values (the parser's defaults are read from it), and
`advsim.sweep.run_sweep` computes, stores (atomically, resumable with `--resume`) and
reports the cells, as for any sweep; the command prints each row as its cell finishes,
then the notes, where the time went and the plot.

Where the mechanism has the capability (a scalar model: `linear`, and `linear-data` with
`--dim 1`), each row also carries the exact epsilon of the last model (`advsim.exact`) and
its refinement-estimated error, beside eps_lower and the bounds; for the linear process
without data it equals the heuristic (Theorem 1 of arXiv:2410.06186 is exact there), and
both are printed. `--no-exact` leaves it out (the exact engine compiles once per T:
seconds each).

`--streaming [--pilot-runs N]` audits each T by a streaming audit (the sweep's
`streaming = true`, `advsim.experiment.run_audit(..., streaming=True)`): a pilot plans the
threshold tests, the `--trials` runs are only counted, and eps_lower is the
assumption-free, rigorous (eps, delta) bound.
"""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from advsim.cli._audit_options import AUDIT_CONFIG, AUDIT_EXAMPLES, _flag, audit_options
from advsim.cli._audit_table import format_notes, format_row, shows_exact, table_head, time_report
from advsim.cli._class_args import class_args
from advsim.cli._common import (
    UsageError,
    _add_run_options,
    _check,
    _cleanup_if_empty,
    _command,
    _one_line,
    _para,
    _prepare_out,
)
from advsim.cli._names import (
    AUDIT_OPTION_KEYS,
    MECHANISM_ALIASES,
    STRATEGY_KEYS,
    THRESHOLD_SELECTIONS,
    builtin_config,
)

# The library (jax, the accountant, the plots) is imported inside the functions that run
# the command: building the parser needs only the names above (`advsim --help` starts at
# once).
if TYPE_CHECKING:
    from advsim.sweep import SweepError

__all__ = ["AUDIT_CONFIG", "add_audit_command"]


#: Flags that only the mechanisms built from a dataset take, and their constructor names.
_DATA_FLAGS = {
    "dim": "dim",
    "num_examples": "num_examples",
    "data_distribution": "distribution",
    "data_scale": "scale",
}


def _mechanism_plugin(name: str):
    """The mechanism `--mechanism` names: a sweep alias or a class path `module:Class`."""
    from advsim.sweep import resolve

    try:
        return resolve("mechanism", name, "--mechanism")
    except ValueError as err:
        raise UsageError(str(err)) from None


def _mechanism_kwargs(args) -> dict:
    """The data flags as constructor arguments; refuses those the mechanism does not take."""
    from advsim.sweep import resolve

    plugin = _mechanism_plugin(args.mechanism)
    kwargs = {}
    for dest, param in _DATA_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if "num_examples" not in plugin.params:
            takers = [
                n for n in MECHANISM_ALIASES if "num_examples" in resolve("mechanism", n).params
            ]
            raise UsageError(
                f"{_flag(dest)} does not apply to --mechanism {args.mechanism} (it has no "
                f"dataset); drop it, or use --mechanism {' or '.join(takers)}"
            )
        kwargs[param] = value
    if "num_examples" in plugin.params:
        kwargs["data_seed"] = args.seed
    return kwargs


def _strategy_settings(args) -> dict:
    """The threshold strategy's options given on the command line, by sweep key; refuses
    one that `--threshold` does not take, and `--threshold explicit` without its threshold."""
    from advsim._validation import check_finite, check_in_interval

    given = {k: getattr(args, k) for k in STRATEGY_KEYS if getattr(args, k) is not None}
    takes = THRESHOLD_SELECTIONS.get(args.threshold, ())
    for key, value in given.items():
        option = STRATEGY_KEYS[key]
        if option not in takes:
            takers = [s for s, opts in THRESHOLD_SELECTIONS.items() if option in opts]
            raise UsageError(
                f"{_flag(key)} applies to --threshold {' or '.join(takers)} only, not "
                f"--threshold {args.threshold}"
            )
        if key == "selection_fraction":
            _check(_flag(key), check_in_interval, value, 0.0, 1.0)
        elif key == "audit_threshold":
            _check(_flag(key), check_finite, value)
    if args.threshold == "explicit" and "audit_threshold" not in given:
        raise UsageError(
            "--threshold explicit needs --audit-threshold, a threshold fixed without these scores"
        )
    return given


def _method(args) -> str:
    """The audit method: `--method`, else "eps_delta" with `--streaming` (the statement a
    streaming audit makes), else the default decided on the built mechanism
    (`advsim.experiment.default_audit_method`: "family" for a mechanism in the heuristic's
    family, where its assumption is exact, else the assumption-free "eps_delta"; the
    sweep decides each cell the same way). A mechanism that cannot be built gets
    "eps_delta" here: building the config names its error."""
    if args.method is not None:
        return args.method
    if args.streaming:
        return "eps_delta"
    from advsim.experiment import default_audit_method

    try:
        mechanism = _build_mechanism(args, _own_args(args))
    except (TypeError, ValueError):
        return "eps_delta"
    return default_audit_method(mechanism)


def _build_mechanism(args, own: dict):
    """The mechanism the options describe at the smallest T (sigma 1 where it is
    calibrated), built by its class as a sweep builds a cell's: its alias or class path
    with the command's flags and `own`, the `--mechanism-arg` arguments."""
    sigma = 1.0 if args.noise_multiplier is None else args.noise_multiplier
    return _mechanism_plugin(args.mechanism).build(
        steps=min(args.steps),
        sampling_prob=args.sampling_prob,
        noise_multiplier=sigma,
        clip_norm=args.clip_norm,
        **_mechanism_kwargs(args),
        **own,
    )


def _own_args(args) -> dict:
    """The `--mechanism-arg` arguments by name (`class_args`: well formed, each once, none
    the command sets with a flag of its own)."""
    return class_args("--mechanism-arg", args.mechanism_arg, _MECHANISM_FLAGS)


def _check_mechanism_args(args) -> None:
    """Checks the `--mechanism-arg` arguments by building the mechanism with them: the
    class's own error, on one line, naming the flags, the class and the arguments it
    takes."""
    own = _own_args(args)
    if not own:
        return
    given = " ".join(f"--mechanism-arg {name}={value!r}" for name, value in own.items())
    where = f"--mechanism {args.mechanism} {given}"
    try:
        _build_mechanism(args, own)
    except (TypeError, ValueError) as err:
        plugin = _mechanism_plugin(args.mechanism)
        takes = ", ".join(p for p in plugin.params if p not in _MECHANISM_FLAGS)
        unknown = not plugin.any_key and any(name not in plugin.params for name in own)
        hint = f" (its own arguments: {takes or 'none'})" if unknown else ""
        raise UsageError(f"{where}: {_one_line(err)}{hint}") from None


def _check_audit_settings(args) -> None:
    """Refuses audit options the method does not take (`--sides one` with the family
    audit), and those a `--streaming` audit does not take (`--method gdp`, `--threshold
    same`, a `--pilot-runs` outside [2, --trials]; `--pilot-runs` without `--streaming`),
    naming the flags, before anything runs."""
    from advsim.sweep._config import check_audit_options

    if args.pilot_runs is not None and not args.streaming:
        raise UsageError(
            f"--pilot-runs applies to --streaming only (the pilot that plans the streaming "
            f"audit's tests); add --streaming, or drop --pilot-runs {args.pilot_runs}"
        )
    method = _method(args)
    settings = {
        "method": method,
        "confidence": args.confidence,
        "threshold_selection": args.threshold,
        "trials": args.trials,
        **_audit_settings(args),
    }
    try:
        check_audit_options(settings)
    except (TypeError, ValueError) as err:
        if args.streaming:
            raise UsageError(f"--streaming: {_in_flags(_one_line(err))}") from None
        how = "" if args.method is not None else f" (the default for --mechanism {args.mechanism})"
        raise UsageError(f"--method {method}{how}: {_in_flags(_one_line(err))}") from None


def _audit_settings(args) -> dict:
    """The audit's options beyond the strategy's as sweep settings: `sides`, `min_count`
    and `streaming` always (the sweep drops them at their defaults, so the cells are those
    of a config without them), `audit_seed` and `pilot_runs` only when given."""
    out = {"sides": args.sides, "min_count": args.min_count, "streaming": args.streaming}
    if args.audit_seed is not None:
        out["audit_seed"] = args.audit_seed
    if args.pilot_runs is not None:
        out["pilot_runs"] = args.pilot_runs
    return out


#: What the command sets with flags of its own, by constructor name: refused as a
#: --mechanism-arg (`class_args`).
_MECHANISM_FLAGS = {
    "name": "--mechanism",
    "steps": "--steps",
    "sampling_prob": "--sampling-prob",
    "noise_multiplier": "--noise-multiplier",
    "target_epsilon": "--target-epsilon",
    "clip_norm": "--clip-norm",
    "data_seed": "--seed",
    **{param: _flag(dest) for dest, param in _DATA_FLAGS.items()},
}


def _adversary_args(args) -> dict:
    """The adversary's `--adversary-arg` arguments, checked by building it: its sweep
    alias or class path, with those arguments."""
    from advsim.sweep import resolve

    kwargs = class_args("--adversary-arg", args.adversary_arg, {"name": "--adversary"})
    try:
        resolve("adversary", args.adversary, "--adversary").build(**kwargs)
    except TypeError as err:
        raise UsageError(
            f"--adversary {args.adversary}: {_one_line(err)} (its arguments: --adversary-arg "
            "NAME=VALUE)"
        ) from None
    except ValueError as err:
        raise UsageError(f"--adversary {args.adversary}: {_one_line(err)}") from None
    return kwargs


def _check_audit_args(args) -> float | None:
    """Every check that needs no computation; returns the target epsilon (None: sigma
    given)."""
    from advsim._limits import check_chunk_size, check_steps, check_trials
    from advsim._validation import (
        check_delta,
        check_in_interval,
        check_positive,
        check_probability,
    )

    if args.noise_multiplier is not None and args.target_epsilon is not None:
        raise UsageError(
            "give either --noise-multiplier or --target-epsilon, not both (sigma is given, "
            "or calibrated to the target)"
        )
    if args.resume and not args.out:
        raise UsageError("--resume needs --out DIR, the folder of the audit to continue")
    _check("--sampling-prob", check_probability, args.sampling_prob)
    _check("--delta", check_delta, args.delta)
    _check("--confidence", check_in_interval, args.confidence, 0.5, 1.0)
    _check("--clip-norm", check_positive, args.clip_norm)
    _check("--trials", check_trials, args.trials)
    if args.chunk_size is not None:
        _check("--chunk-size", check_chunk_size, args.chunk_size)
    for steps in args.steps:
        _check("--steps", check_steps, steps)
    if args.data_scale is not None:
        _check("--data-scale", check_positive, args.data_scale)
    _mechanism_plugin(args.mechanism)
    _check_mechanism_args(args)
    _strategy_settings(args)
    _check_audit_settings(args)
    twice = sorted({t for t in args.steps if args.steps.count(t) > 1})
    if twice:
        raise UsageError(f"--steps lists T={twice[0]} twice; give each T once (one row each)")
    if args.noise_multiplier is not None:
        _check("--noise-multiplier", check_positive, args.noise_multiplier)
        return None
    target = AUDIT_CONFIG["mechanism"]["target_epsilon"]
    target = target if args.target_epsilon is None else args.target_epsilon
    _check("--target-epsilon", check_positive, target)
    return target


def _config(args, target: float | None):
    """The built-in config with the command's options in place of its values."""
    from advsim.sweep import parse_config

    data = builtin_config("audit")
    data["sweep"].update(
        seed=args.seed,
        trials=args.trials,
        delta=args.delta,
        confidence=args.confidence,
        threshold_selection=args.threshold,
        **_strategy_settings(args),
        **_audit_settings(args),
    )
    # Without --method, the sweep's default for the mechanism: "family" for the linear
    # process (the built-in config's, the same cells), "eps_delta" for every other one.
    data["sweep"].pop("method", None)
    if args.method is not None:
        data["sweep"]["method"] = args.method
    if args.chunk_size is not None:
        data["sweep"]["chunk_size"] = args.chunk_size
    sigma = {"noise_multiplier": args.noise_multiplier} if target is None else {}
    data["mechanism"] = {
        "name": args.mechanism,
        "sampling_prob": args.sampling_prob,
        "clip_norm": args.clip_norm,
        **({"target_epsilon": target} if target is not None else sigma),
        **_mechanism_kwargs(args),
        **_own_args(args),
    }
    data["adversary"] = {"name": args.adversary, **_adversary_args(args)}
    data["grid"] = {"steps": list(args.steps)}
    if args.no_exact:
        data["sweep"]["exact"] = False
    from advsim.sweep._checks import CellError

    try:  # builds and checks every T's run: a bad parameter fails before anything runs
        return parse_config(data)
    except CellError as err:  # a T out of a computation's reach, in this command's words
        raise UsageError(f"T={err.params['steps']}: {_in_flags(err.reason)}") from None
    except (TypeError, ValueError) as err:
        raise UsageError(f"--mechanism {args.mechanism}: {_one_line(err)}") from None


#: The sweep keys of the options, as the messages of the sweep's checks name them.
_KEY_FLAGS = {
    "threshold_selection": "--threshold",
    **{
        key: _flag(key)
        for key in (
            "noise_multiplier",
            "target_epsilon",
            "sampling_prob",
            "delta",
            "trials",
            "method",
            *AUDIT_OPTION_KEYS,
            "pilot_runs",  # not `streaming`: the messages say "a streaming audit"
        )
    },
}


def _in_flags(text: str) -> str:
    """A message of the sweep's checks in this command's words: its keys as the flags."""
    import re

    return re.sub(r"\b(" + "|".join(_KEY_FLAGS) + r")\b", lambda m: _KEY_FLAGS[m[1]], text)


def _cmd_audit(args) -> int:
    from tqdm.auto import tqdm

    from advsim.plotting import plot_eps_vs_steps
    from advsim.sweep import SweepError, run_sweep

    target = _check_audit_args(args)
    config = _config(args, target)
    method = _method(args)
    how = f"{method} audit"
    if args.streaming:
        from advsim.streaming import default_pilot_runs

        pilot = default_pilot_runs(args.trials) if args.pilot_runs is None else args.pilot_runs
        how = f"streaming {how} (a pilot of {pilot:,} runs per world plans the tests)"
    out = (
        Path(args.out)
        if args.out
        else Path("advsim-results") / ("audit-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    )
    _prepare_out(args, out, "audit", "run.json")  # before the header: one line only
    sigma_text = (
        f"sigma={args.noise_multiplier:g}"
        if target is None
        else (f"sigma calibrated to composition eps={target:g}")
    )
    print(
        f"advsim audit: {args.mechanism}, q={args.sampling_prob:g}, {sigma_text} at "
        f"delta={args.delta:g}, {args.trials:,} runs per world, {how}; results go to {out}",
        flush=True,
    )

    shown, fresh = [], []  # every row printed; those computed now (not found by --resume)
    exact = shows_exact(config)
    head = table_head(exact)

    def show(row: dict, computed: bool) -> None:
        lines = [] if shown else [head, "-" * len(head)]
        shown.append(row)
        if computed:
            fresh.append(row)
        for line in [*lines, format_row(row, exact)]:
            tqdm.write(line, file=sys.stdout)
        sys.stdout.flush()

    start = time.perf_counter()
    with _cleanup_if_empty(out):
        try:
            rows = run_sweep(config, out, resume=args.resume, progress=not args.quiet, on_cell=show)
        except SweepError as err:
            raise _usage_error(err, args, target, out, len(shown)) from None
    for line in format_notes(rows, exact):
        print(line)
    streaming = "streaming " if args.streaming else ""
    title = (
        f"{args.mechanism}, q={args.sampling_prob:g}, {streaming}{method} audit, "
        f"{args.trials:g} runs/world"
    )
    tic = time.perf_counter()
    paths = plot_eps_vs_steps(rows, out / "eps_vs_steps", title=title)
    plotting = time.perf_counter() - tic
    print(time_report(fresh, plotting, time.perf_counter() - start))
    print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, " + ", ".join(map(str, paths)))
    return 0


def _usage_error(err: SweepError, args, target, out: Path, finished: int) -> Exception:
    """A failed cell in the command's words (its options, its T); other sweep errors
    (a folder holding another audit, a damaged cell file) as they are."""
    from advsim.sweep import CalibrationError

    cause = err.__cause__
    kept = f"; the {finished} finished rows are in {out} (--resume continues)" if finished else ""
    if isinstance(cause, CalibrationError):
        reason = cause.reason
        if "value_discretization_interval" in reason:  # a knob this command does not have
            reason = (
                "it needs a noise multiplier smaller than the composition bound's PLD "
                "accountant takes at this --sampling-prob"
            )
        return UsageError(
            f"cannot calibrate sigma for T={cause.steps} to --target-epsilon {target:g} at "
            f"--delta {args.delta:g} (q={args.sampling_prob:g}): {_in_flags(reason)}; try "
            f"another --delta or --target-epsilon, or give --noise-multiplier{kept}"
        )
    if err.cell is not None and isinstance(cause, TypeError | ValueError | ArithmeticError):
        return UsageError(f"T={err.cell.params['steps']}: {_in_flags(_one_line(cause))}{kept}")
    return err


def add_audit_command(sub) -> None:
    """Adds `advsim audit` to the subcommands `sub`."""
    a = _command(
        sub,
        _cmd_audit,
        "audit",
        help="simulate a mechanism, audit it, compare with the bounds (default: built-in "
        "experiment)",
        description=_para(
            "Simulates both worlds (canary in, canary out) for each T, audits the "
            "scores and prints one row per T as soon as it is done: sigma, eps_lower, eps_point, "
            "the exact epsilon of the last model with its refinement-estimated error (where the "
            "mechanism has the capability: a scalar model), the heuristic and composition "
            "bounds, and what eps_lower certifies; then where the "
            "time went. With no options: the linear 1-D process, q=0.01, sigma calibrated to "
            "composition eps=8 at delta=1e-5 for each T, 1e6 runs per world, family auditing "
            "(the linear process is the heuristic family's own case, where that audit's "
            "assumption is exact; any other --mechanism is audited with the assumption-free "
            "eps_delta unless --method says otherwise)."
        ),
        epilog=AUDIT_EXAMPLES,
    )
    for flag, kwargs in audit_options():
        a.add_argument(flag, **kwargs)
    a.add_argument(
        "--no-exact",
        action="store_true",
        help="leave out the exact epsilon column (advsim.exact, default: computed where the "
        "mechanism has the capability; it compiles once per T, seconds each)",
    )
    _add_run_options(
        a,
        out_help="output folder (default: advsim-results/audit-<time>)",
        resume_help="continue the audit in --out (same options): keep the finished T, "
        "verified, run the rest",
    )

"""Command line: `advsim audit` (the main job), `advsim bound`, `advsim sweep`, `advsim plot`,
`advsim figure`.

`advsim audit` with no arguments runs the built-in experiment, a sweep config shipped with
the package (`advsim/sweep/audit.toml`): the linear 1-D process with q = 0.01, sigma
calibrated so that composition gives eps = 8 at delta = 1e-5 for each T, 10^6 runs per
world per T, family auditing. It runs through the sweep runner like any sweep (one
checksummed file per finished T, `--resume` continues a killed run), prints each row of
the table as soon as it is done, then where the time went, and writes CSV, JSON and a
PNG/PDF plot into an output folder whose name it prints. `advsim sweep CONFIG.toml --out
DIR [--resume]` runs a grid (see `advsim.sweep`) and `advsim plot DIR` draws its figures;
`advsim figure NAME [--quick] [--out DIR] [--resume]` runs a seed figure
(`advsim.figures`, `advsim figure --list`).

Errors: a user error (a bad option, an out-of-range value, an unusable output folder, a
damaged sweep folder) prints one line naming what is wrong and how to fix it, exits with
status 2 and leaves nothing behind (output folders are created only once there is
something to write into them). Anything else is a bug: its traceback is shown, with a line
that says so.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from pathlib import Path

from advsim import bounds
from advsim._io import git_commit, package_version
from advsim._validation import (
    check_delta,
    check_positive,
    check_probability,
)
from advsim.audits import AUDIT_METHODS, AUDITS, THRESHOLD_SELECTIONS
from advsim.cli._audit import AUDIT_CONFIG, _cmd_audit, _flag
from advsim.cli._common import (
    UsageError,
    _add_run_options,
    _check,
    _check_out,
    _cleanup_if_empty,
    _one_line,
    _positive_int,
    _seed,
)
from advsim.figures import list_figures, run_figure
from advsim.sweep import MECHANISM_ALIASES, SweepError, load_config, plot_sweep, run_sweep
from advsim.sweep._config import STRATEGY_KEYS

__all__ = ["UsageError", "build_parser", "main"]

#: max_{t <= T} takes under a second at T = 10^5 (branch and bound over t), longer beyond.
_MAX_OVER_STEPS_LIMIT = 100_000
_BUG_LINE = (
    "advsim: internal error: this is a bug in advsim, not in your input; please report it "
    "to the advsim maintainers (an issue on the project's tracker) with the command line "
    "and the traceback above"
)


# ------------------------------------------------------------------------------ bound


def _cmd_bound(args) -> int:
    _check("--sampling-prob", check_probability, args.sampling_prob)
    _check("--noise-multiplier", check_positive, args.noise_multiplier)
    _check("--delta", check_delta, args.delta)
    n = args.canary_steps
    if n is not None and n > args.steps:
        raise UsageError(f"--canary-steps must be in [1, --steps = {args.steps}], got {n}")
    kw = {"canary_steps": n} if n is not None else {}
    pos = (args.delta, args.steps, args.sampling_prob, args.noise_multiplier)
    rows = [
        ("heuristic (last iterate)", lambda: bounds.heuristic_epsilon(*pos, **kw)),
        ("heuristic, max over t <= T", lambda: bounds.heuristic_epsilon_max_over_steps(*pos))
        if n is None and args.steps <= _MAX_OVER_STEPS_LIMIT
        else None,
        ("composition (all iterates)", lambda: bounds.composition_epsilon(*pos, **kw)),
        ("full batch (DP-GD)", lambda: bounds.full_batch_epsilon(*pos, **kw)),
    ]
    print(
        f"T={args.steps} q={args.sampling_prob:g} sigma={args.noise_multiplier:g} "
        f"delta={args.delta:g}" + (f" canary_steps={n}" if n is not None else ""),
        flush=True,
    )
    if n is None and args.steps > _MAX_OVER_STEPS_LIMIT:
        print(
            f"  (max over t <= T skipped for T > {_MAX_OVER_STEPS_LIMIT}: it takes longer; "
            "use advsim.bounds.heuristic_epsilon_max_over_steps)"
        )
    failed = []
    for row in rows:
        if row is None:
            continue
        name, compute = row
        try:
            eps = compute()
        except (ValueError, RuntimeError, ArithmeticError, MemoryError) as err:
            # A bound out of its method's reach at these parameters: say why, go on.
            failed.append(name)
            print(f"  {name:<28} not available: {_one_line(err)}", flush=True)
            continue
        value = f"{eps:.6g}" if math.isfinite(eps) else str(eps)
        print(f"  {name:<28} eps = {value}", flush=True)
    if len(failed) == sum(r is not None for r in rows):
        raise UsageError(
            "no bound can be computed at these parameters (see above); check --delta and "
            "--noise-multiplier"
        )
    return 0


# ------------------------------------------------------------------------------ sweeps


def _cmd_sweep(args) -> int:
    config = load_config(args.config)
    executor = "local" if args.ray is None else "ray"
    out = Path(args.out)
    _check_out("--out", out)
    n = len(config.cells())
    print(f"advsim sweep: {n} cells ({config.mode} mode) -> {out}", flush=True)
    rows = run_sweep(
        config,
        out,
        resume=args.resume,
        progress=not args.quiet,
        executor=executor,
        ray_address=args.ray or None,
    )
    total = sum(float(r["wall_time_s"]) for r in rows)
    print(
        f"wrote {out / 'results.csv'} and {out / 'results.json'} ({len(rows)} cells, "
        f"{total:.1f} s of cell time); figures: advsim plot {out}"
    )
    return 0


def _cmd_plot(args) -> int:
    for path in plot_sweep(args.dir):
        print(path)
    return 0


def _cmd_figure(args) -> int:
    if args.list or not args.name:
        for name, title in list_figures().items():
            print(f"{name:<16} {title}")
        return 0
    if args.name not in list_figures():
        raise UsageError(
            f"no figure named {args.name!r}; the figures: {', '.join(list_figures())} "
            "(advsim figure --list)"
        )
    out = Path(args.out or f"advsim-results/{args.name}" + ("-quick" if args.quick else ""))
    _check_out("--out", out)
    with _cleanup_if_empty(out):
        run_figure(
            args.name, quick=args.quick, out=out, resume=args.resume, progress=not args.quiet
        )
    return 0


# ------------------------------------------------------------------------------ parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the descriptions' line breaks; appends each option's default to its help."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (
            "(default" in text
            or not action.option_strings
            or action.default in (None, False, argparse.SUPPRESS)
        ):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (raised as `UsageError`)."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)", prog=self.prog)


_AUDIT_EXAMPLES = """\
examples:
  advsim audit                                  # the built-in experiment (a few minutes)
  advsim audit --steps 10 100 --trials 1e5 --noise-multiplier 1 --sampling-prob 0.1
  advsim audit --mechanism linear-data --dim 20 --method eps_delta --out results/run1
  advsim audit --out results/run2 --resume      # continue a killed run (same options)
"""

_SWEEP_DESCRIPTION = """\
Runs a grid of audits (or bounds only) from a TOML config, one cell per grid point, into
--out: DIR/cells/<id>.json (each finished cell, written atomically with a checksum),
DIR/results.csv and results.json (the table), DIR/run.json (config and provenance). A
killed sweep loses at most the cells in flight: --resume finishes it.

The config (read as data, never code):
  [sweep]       mode = "audit" or "bounds"; seed; trials, delta, method, confidence, ...;
                exact = false: no exact epsilon column (default: where the mechanism has
                the capability, the exact epsilon of the last model, advsim.exact)
  [mechanism]   name = an alias (linear, linear-data, landscape, gradient-canary) or a
                class path "module:Class"; the other keys go to its constructor
  [adversary]   name = an alias (projection, llr, ...) or a class path (audit mode)
  [grid]        parameter = [values, ...]; the cells are the product (first key slowest)
  [[cases]]     optional sub-grids merged over [grid]
Every key and value is checked before anything runs. Example files:
scripts/configs/linear_4x5.toml (a 4 x 5 sigma x q grid, about a minute) and the README's
"Sweeps" section; the full reference: python -c "import advsim.sweep; help(advsim.sweep)".
"""

_SWEEP_EXAMPLES = """\
examples:
  advsim sweep scripts/configs/linear_4x5.toml --out advsim-results/linear-4x5
  advsim sweep scripts/configs/linear_4x5.toml --out advsim-results/linear-4x5 --resume
  advsim plot advsim-results/linear-4x5
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
        if s not in ("split", "same")
    ]
    return (
        "split: choose the threshold on half the runs, count on the other half (held out); "
        "same: on all runs (optimistic); or a strategy of advsim.audits.audit: "
        + ", ".join(strategies)
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
        "--threshold projected_split only: the share of each world that chooses the "
        "thresholds, in (0, 1) (default: that of advsim.audits.audit)",
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
    "--adversary": "projection, llr, or any adversary class path module:Class that takes no "
    "arguments",
    "--method": "the audit; what its eps_lower assumes: "
    + "; ".join(f"{name}: {AUDITS[name].assumption}" for name in AUDIT_METHODS),
    "--steps": "numbers of steps, one row each (default: " + " ".join(map(str, _STEPS)) + ")",
    "--sampling-prob": "Poisson sampling probability q in (0, 1]",
    "--noise-multiplier": "sigma (default: calibrated to --target-epsilon for each T)",
    "--target-epsilon": "calibrate sigma so that composition gives this eps at --delta "
    f"(default: {AUDIT_CONFIG['mechanism']['target_epsilon']:g}, unless --noise-multiplier "
    "is given)",
    "--delta": "delta of every epsilon",
    "--trials": "simulated runs per world (1e5 is accepted)",
    "--seed": "key of the simulation (and of the dataset, for linear-data)",
    "--confidence": "of the Clopper-Pearson intervals behind eps_lower, in (0.5, 1)",
    "--threshold": _threshold_help(),
    **{_flag(key): text for key, (_, _, text) in _STRATEGY_FLAGS.items()},
    "--clip-norm": "clipping norm C of the per-example gradients",
    "--dim": "linear-data only: model dimension (default: 10)",
    "--num-examples": "linear-data only: examples besides the canary (default: 100)",
    "--data-distribution": "linear-data only: the other examples' gradients (default: gaussian)",
    "--data-scale": "linear-data only: their scale (default: 1.0)",
    "--chunk-size": "runs per compiled chunk; results do not depend on it (default: chosen "
    "from the device's memory)",
}


def _audit_options() -> list[tuple[str, dict]]:
    """`(flag, add_argument keywords)` of `advsim audit`, defaults read from the built-in
    config (`advsim/sweep/audit.toml`), so that the two cannot disagree."""
    sweep, mech = AUDIT_CONFIG["sweep"], AUDIT_CONFIG["mechanism"]
    count, real = _positive_int, float
    spec = [  # flag, type or choices, default, metavar
        ("--mechanism", str, mech["name"], "NAME"),
        ("--adversary", str, AUDIT_CONFIG["adversary"]["name"], "NAME"),
        ("--method", list(AUDIT_METHODS), sweep["method"], None),
        ("--steps", count, _STEPS, "T"),
        ("--sampling-prob", real, mech["sampling_prob"], "q"),
        ("--noise-multiplier", real, None, "SIGMA"),
        ("--target-epsilon", real, None, "EPS"),
        ("--delta", real, sweep["delta"], None),
        ("--trials", count, sweep["trials"], "N"),
        ("--seed", _seed, sweep["seed"], None),
        ("--confidence", real, sweep["confidence"], None),
        ("--threshold", list(THRESHOLD_SELECTIONS), sweep["threshold_selection"], None),
        *(
            (_flag(key), _STRATEGY_FLAGS[key][0], None, _STRATEGY_FLAGS[key][1])
            for key in STRATEGY_KEYS
        ),
        ("--clip-norm", real, mech["clip_norm"], "C"),
        ("--dim", count, None, "D"),
        ("--num-examples", count, None, "N"),
        ("--data-distribution", ["zero", "gaussian", "sphere"], None, None),
        ("--data-scale", real, None, "S"),
        ("--chunk-size", count, None, "N"),
    ]
    out = []
    for flag, kind, default, metavar in spec:
        kw = {"choices": kind} if isinstance(kind, list) else {"type": kind, "metavar": metavar}
        if flag == "--steps":
            kw["nargs"] = "+"
        out.append((flag, {**kw, "default": default, "help": _AUDIT_HELP[flag]}))
    return out


def _para(text: str) -> str:
    """A description paragraph, wrapped (the formatter keeps line breaks as written)."""
    return textwrap.fill(text, width=88)


def _version() -> str:
    return f"advsim {package_version()} (commit {git_commit()})"


def _command(sub, func, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand's parser (defaults shown in its help) that runs `func(args)`."""
    parser = sub.add_parser(name, formatter_class=_Formatter, **kwargs)
    parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="advsim",
        description="Simulate and audit hidden-state DP-SGD.",
        formatter_class=_Formatter,
        epilog="examples:\n  advsim audit\n  advsim bound --steps 1000 --sampling-prob 0.01 "
        "--noise-multiplier 1\n  advsim figure --list\n\n'advsim COMMAND --help' for a "
        "command's options.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

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
            "composition eps=8 at delta=1e-5 for each T, 1e6 runs per world, family auditing."
        ),
        epilog=_AUDIT_EXAMPLES,
    )
    for flag, kwargs in _audit_options():
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

    b = _command(
        sub,
        _cmd_bound,
        "bound",
        help="print the heuristic, composition and full-batch epsilons",
        description=_para(
            "The reference epsilons of DP-SGD with T steps, Poisson sampling q and "
            "noise multiplier sigma: the last-iterate heuristic (Theorem 1 of arXiv:2410.06186) "
            "and its max over t <= T, composition (dp-accounting's PLD), full batch (DP-GD)."
        ),
        epilog="example:\n  advsim bound --steps 1000 --sampling-prob 0.01 "
        "--noise-multiplier 1 --delta 1e-6\n",
    )
    b.add_argument(
        "--steps", type=_positive_int, required=True, metavar="T", help="number of steps (required)"
    )
    b.add_argument(
        "--sampling-prob",
        type=float,
        required=True,
        metavar="q",
        help="Poisson sampling probability q in (0, 1] (required)",
    )
    b.add_argument(
        "--noise-multiplier", type=float, required=True, metavar="SIGMA", help="sigma (required)"
    )
    b.add_argument("--delta", type=float, default=1e-5, help="delta of every epsilon")
    b.add_argument(
        "--canary-steps",
        type=_positive_int,
        default=None,
        metavar="N",
        help="steps that can carry the canary (default: all T)",
    )

    s = _command(
        sub,
        _cmd_sweep,
        "sweep",
        help="run a grid of audits (or bounds only) from a TOML config, resumably",
        description=_SWEEP_DESCRIPTION,
        epilog=_SWEEP_EXAMPLES,
    )
    s.add_argument("config", help="the sweep's TOML file")
    _add_run_options(
        s,
        out_required=True,
        out_help="output folder (required)",
        resume_help="continue the sweep in --out: skip finished cells, verify their files",
    )
    s.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the cells as Ray tasks (pip install 'advsim[ray]'); ADDRESS of "
        "a cluster (e.g. auto), default a local Ray instance",
    )

    p = _command(
        sub,
        _cmd_plot,
        "plot",
        help="draw a sweep's heatmaps and curves into DIR/figures/",
        epilog="example:\n  advsim plot advsim-results/linear-4x5\n",
    )
    p.add_argument("dir", help="a sweep's output folder")

    f = _command(
        sub,
        _cmd_figure,
        "figure",
        help="run a seed figure (its sweeps, tables and plot); --list names them",
        description=_para(
            "Each figure is a small file (advsim/figures/defs/NAME.toml): sweep "
            "configs, derived tables, a plot function. Writes into --out: a folder per sweep, "
            "the tables (.csv, .json) and the figure (.png, .pdf)."
        ),
        epilog="examples:\n  advsim figure --list\n  advsim figure figure1 --quick\n"
        "  advsim figure figure4 --out DIR --resume\n",
    )
    f.add_argument("name", nargs="?", help="the figure (see --list)")
    f.add_argument("--list", action="store_true", help="list the figures and exit")
    f.add_argument(
        "--quick", action="store_true", help="a coarse grid and few runs (under a minute each)"
    )
    _add_run_options(
        f,
        out_help="output folder (default: advsim-results/NAME, NAME-quick with --quick)",
        resume_help="continue the sweeps in --out",
    )
    return parser


def main(argv=None) -> int:
    """Runs the command line; returns the exit status (0 success, 2 a user error).

    A user error (`UsageError`, a `ValueError` or `TypeError` from the library, a
    `SweepError`, an `OSError` of the file system) prints one line on stderr; anything
    else is a bug: the traceback, then a line saying so.
    """
    command = "advsim"
    try:
        args = build_parser().parse_args(argv)
        command = f"advsim {args.command}"
        return args.func(args)
    except SystemExit as stop:  # --help, --version
        return stop.code if isinstance(stop.code, int) else 0
    except (UsageError, ValueError, TypeError, SweepError) as err:
        command = getattr(err, "prog", None) or command
        print(f"{command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:  # the file system (a full disk, a file removed under us)
        where = f" ({err.filename})" if err.filename else ""
        print(f"{command}: error: {err.strerror or _one_line(err)}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        import traceback

        traceback.print_exc()
        print(_BUG_LINE, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""Command line: `advsim audit` (the main job), `advsim bound`, `advsim sweep`, `advsim plot`,
`advsim figure`.

`advsim audit` with no arguments runs the built-in experiment: the linear 1-D process with
q = 0.01, sigma calibrated so that composition gives eps = 8 at delta = 1e-5 for each T,
10^6 runs per world per T, family auditing; it prints each row of the table as soon as it
is done, then where the time went, and writes CSV, JSON and a PNG/PDF plot into an output
folder whose name it prints. `advsim sweep CONFIG.toml --out DIR [--resume]` runs a grid
(see `advsim.sweep`) and `advsim plot DIR` draws its figures; `advsim figure NAME [--quick]
[--out DIR] [--resume]` runs a seed figure (`advsim.figures`, `advsim figure --list`).

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
from advsim.cli._audit import _MECHANISMS, _cmd_audit
from advsim.cli._common import (
    UsageError,
    _check,
    _check_out,
    _cleanup_if_empty,
    _one_line,
    _positive_int,
    _seed,
)
from advsim.experiment import DEFAULT_STEPS
from advsim.figures import list_figures, run_figure
from advsim.sweep import SweepError, load_config, plot_sweep, run_sweep

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
"""

_SWEEP_DESCRIPTION = """\
Runs a grid of audits (or bounds only) from a TOML config, one cell per grid point, into
--out: DIR/cells/<id>.json (each finished cell, written atomically with a checksum),
DIR/results.csv and results.json (the table), DIR/run.json (config and provenance). A
killed sweep loses at most the cells in flight: --resume finishes it.

The config (read as data, never code):
  [sweep]       mode = "audit" or "bounds"; seed; trials, delta, method, confidence, ...
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


def _para(text: str) -> str:
    """A description paragraph, wrapped (the formatter keeps line breaks as written)."""
    return textwrap.fill(text, width=88)


def _version() -> str:
    return f"advsim {package_version()} (commit {git_commit()})"


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
    fmt = {"formatter_class": _Formatter}

    a = sub.add_parser(
        "audit",
        help="simulate a mechanism, audit it, compare with the bounds (default: built-in "
        "experiment)",
        description=_para(
            "Simulates both worlds (canary in, canary out) for each T, audits the "
            "scores and prints one row per T as soon as it is done: sigma, eps_lower, eps_point, "
            "the heuristic and composition bounds, and what eps_lower certifies; then where the "
            "time went. With no options: the linear 1-D process, q=0.01, sigma calibrated to "
            "composition eps=8 at delta=1e-5 for each T, 1e6 runs per world, family auditing."
        ),
        epilog=_AUDIT_EXAMPLES,
        **fmt,
    )
    a.add_argument(
        "--mechanism",
        choices=list(_MECHANISMS),
        default="linear",
        help="linear: the 1-D linear process (the heuristic's tight case); linear-data: the "
        "linear process with a dataset of other examples (--dim, --num-examples, --data-*)",
    )
    a.add_argument(
        "--adversary",
        default="projection",
        metavar="NAME",
        help="projection, llr, or any adversary class path module:Class that takes no arguments",
    )
    a.add_argument(
        "--method",
        choices=["family", "gdp", "eps_delta", "tradeoff"],
        default="family",
        help="family: eps_lower assumes the run is in the heuristic's family (true for these "
        "linear processes); gdp: assumes a Gaussian trade-off curve; eps_delta, tradeoff: "
        "assume nothing (rigorous)",
    )
    a.add_argument(
        "--steps",
        type=_positive_int,
        nargs="+",
        default=None,
        metavar="T",
        help="numbers of steps, one row each (default: " + " ".join(map(str, DEFAULT_STEPS)) + ")",
    )
    a.add_argument(
        "--sampling-prob",
        type=float,
        default=0.01,
        metavar="q",
        help="Poisson sampling probability q in (0, 1]",
    )
    a.add_argument(
        "--noise-multiplier",
        type=float,
        default=None,
        metavar="SIGMA",
        help="sigma (default: calibrated to --target-epsilon for each T)",
    )
    a.add_argument(
        "--target-epsilon",
        type=float,
        default=None,
        metavar="EPS",
        help="calibrate sigma so that composition gives this eps at --delta "
        "(default: 8, unless --noise-multiplier is given)",
    )
    a.add_argument("--delta", type=float, default=1e-5, help="delta of every epsilon")
    a.add_argument(
        "--trials",
        type=_positive_int,
        default=10**6,
        metavar="N",
        help="simulated runs per world (1e5 is accepted)",
    )
    a.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="key of the simulation (and of the dataset, for linear-data)",
    )
    a.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="of the Clopper-Pearson intervals behind eps_lower, in (0.5, 1)",
    )
    a.add_argument(
        "--threshold",
        choices=["split", "same"],
        default="split",
        help="split: choose the threshold on half the runs, count on the other "
        "half (held out); same: on all runs (optimistic)",
    )
    a.add_argument(
        "--clip-norm",
        type=float,
        default=1.0,
        metavar="C",
        help="clipping norm C of the per-example gradients",
    )
    a.add_argument(
        "--dim",
        type=_positive_int,
        default=None,
        metavar="D",
        help="linear-data only: model dimension (default: 10)",
    )
    a.add_argument(
        "--num-examples",
        type=_positive_int,
        default=None,
        metavar="N",
        help="linear-data only: examples besides the canary (default: 100)",
    )
    a.add_argument(
        "--data-distribution",
        choices=["zero", "gaussian", "sphere"],
        default=None,
        help="linear-data only: the other examples' gradients (default: gaussian)",
    )
    a.add_argument(
        "--data-scale",
        type=float,
        default=None,
        metavar="S",
        help="linear-data only: their scale (default: 1.0)",
    )
    a.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help="runs per compiled chunk; results do not depend on it (default: "
        "chosen from the device's memory)",
    )
    a.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder (default: advsim-results/audit-<time>)",
    )
    a.add_argument("--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=_cmd_audit)

    b = sub.add_parser(
        "bound",
        help="print the heuristic, composition and full-batch epsilons",
        description=_para(
            "The reference epsilons of DP-SGD with T steps, Poisson sampling q and "
            "noise multiplier sigma: the last-iterate heuristic (Theorem 1 of arXiv:2410.06186) "
            "and its max over t <= T, composition (dp-accounting's PLD), full batch (DP-GD)."
        ),
        epilog="example:\n  advsim bound --steps 1000 --sampling-prob 0.01 "
        "--noise-multiplier 1 --delta 1e-6\n",
        **fmt,
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
    b.set_defaults(func=_cmd_bound)

    s = sub.add_parser(
        "sweep",
        help="run a grid of audits (or bounds only) from a TOML config, resumably",
        description=_SWEEP_DESCRIPTION,
        epilog=_SWEEP_EXAMPLES,
        **fmt,
    )
    s.add_argument("config", help="the sweep's TOML file")
    s.add_argument("--out", required=True, metavar="DIR", help="output folder (required)")
    s.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep in --out: skip finished cells, verify their files",
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
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=_cmd_sweep)

    p = sub.add_parser(
        "plot",
        help="draw a sweep's heatmaps and curves into DIR/figures/",
        epilog="example:\n  advsim plot advsim-results/linear-4x5\n",
        **fmt,
    )
    p.add_argument("dir", help="a sweep's output folder")
    p.set_defaults(func=_cmd_plot)

    f = sub.add_parser(
        "figure",
        help="run a seed figure (its sweeps, tables and plot); --list names them",
        description=_para(
            "Each figure is a small file (advsim/figures/defs/NAME.toml): sweep "
            "configs, derived tables, a plot function. Writes into --out: a folder per sweep, "
            "the tables (.csv, .json) and the figure (.png, .pdf)."
        ),
        epilog="examples:\n  advsim figure --list\n  advsim figure figure1 --quick\n"
        "  advsim figure figure4 --out DIR --resume\n",
        **fmt,
    )
    f.add_argument("name", nargs="?", help="the figure (see --list)")
    f.add_argument("--list", action="store_true", help="list the figures and exit")
    f.add_argument(
        "--quick", action="store_true", help="a coarse grid and few runs (under a minute each)"
    )
    f.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder (default: advsim-results/NAME, NAME-quick with --quick)",
    )
    f.add_argument("--resume", action="store_true", help="continue the sweeps in --out")
    f.add_argument("--quiet", action="store_true", help="no progress bars")
    f.set_defaults(func=_cmd_figure)
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
        if args.command == "audit" and args.steps is None:
            args.steps = list(DEFAULT_STEPS)
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

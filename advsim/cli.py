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
import contextlib
import datetime
import math
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from tqdm.auto import tqdm

from advsim import bounds
from advsim._io import git_commit, package_version, provenance, write_csv, write_json
from advsim._validation import (
    check_delta,
    check_in_interval,
    check_int,
    check_positive,
    check_probability,
)
from advsim.experiment import DEFAULT_STEPS, run_audit
from advsim.figures import list_figures, run_figure
from advsim.mechanisms import LinearProcess
from advsim.plotting import plot_eps_vs_steps
from advsim.sweep import MECHANISM_ALIASES, SweepError, load_config, plot_sweep, resolve, run_sweep

__all__ = ["UsageError", "build_parser", "main"]

#: max_{t <= T} costs about T^1.5: seconds at T = 10^3-10^4, minutes beyond.
_MAX_OVER_STEPS_LIMIT = 10_000
#: The largest seed `jax.random.key` takes (a 64-bit signed integer).
_MAX_SEED = 2**63 - 1
_BUG_LINE = (
    "advsim: internal error: this is a bug in advsim, not in your input; please report it "
    "to the advsim maintainers (an issue on the project's tracker) with the command line "
    "and the traceback above"
)


class UsageError(Exception):
    """A user error: printed as one line, exit status 2, no traceback.

    Attributes:
        prog: the command it belongs to ("advsim audit"), where the parser knows it.
    """

    def __init__(self, message: str, prog: str | None = None):
        super().__init__(message)
        self.prog = prog


# ------------------------------------------------------------------------------ helpers


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _positive_int(text: str) -> int:
    try:
        value = float(text)  # accept 1e6
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(value)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not 0 <= value <= _MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2^63 - 1], got {text}")
    return value


def _check(flag: str, check, value, *args, **kwargs):
    """Runs an `advsim._validation` check with the flag's name in its message."""
    try:
        return check(flag, value, *args, **kwargs)
    except (TypeError, ValueError) as err:
        raise UsageError(str(err)) from None


def _check_out(flag: str, out: Path) -> None:
    """Refuses an output folder that cannot be used, before any work and without creating
    anything: an existing file, a parent that is a file, a place where nothing can be
    created (probed with a temporary folder, removed at once)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{flag} {out} is an existing file, not a folder; choose a folder path")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {out}: {parent} is a file, not a folder; choose another path")
    try:
        probe = tempfile.mkdtemp(prefix=".advsim-probe-", dir=parent)
    except OSError as err:
        raise UsageError(
            f"{flag} {out}: cannot create anything in {parent} ({err.strerror}); choose a "
            "writable folder"
        ) from None
    os.rmdir(probe)


@contextlib.contextmanager
def _cleanup_if_empty(out: Path):
    """Removes `out` (and the parents this run created) if the block fails before writing
    anything into it, so that a failed run leaves no empty folder behind."""
    created = []
    path = out
    while not path.exists():
        created.append(path)
        path = path.parent
    try:
        yield
    except BaseException:
        for path in created:  # deepest first
            with contextlib.suppress(OSError):
                if path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
        raise


# ------------------------------------------------------------------------------ audit

#: Flags that only the mechanisms built from a dataset take, and their constructor names.
_DATA_FLAGS = {
    "dim": "dim",
    "num_examples": "num_examples",
    "data_distribution": "distribution",
    "data_scale": "scale",
}


def _audit_mechanisms() -> dict:
    """The sweep aliases of the linear processes (the heuristic's tight case, the one the
    audit's defaults and the table's columns are made for), resolved."""
    out = {}
    for name in MECHANISM_ALIASES:
        plugin = resolve("mechanism", name)
        owner = getattr(plugin.factory, "__self__", plugin.factory)
        if owner is LinearProcess:
            out[name] = plugin
    return out


_MECHANISMS = _audit_mechanisms()


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _mechanism_kwargs(args) -> dict:
    """The data flags as constructor arguments; refuses those the mechanism does not take."""
    plugin = _MECHANISMS[args.mechanism]
    kwargs = {}
    for dest, param in _DATA_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if "num_examples" not in plugin.params:
            takers = [n for n, p in _MECHANISMS.items() if "num_examples" in p.params]
            raise UsageError(
                f"{_flag(dest)} does not apply to --mechanism {args.mechanism} (it has no "
                f"dataset); drop it, or use --mechanism {' or '.join(takers)}"
            )
        kwargs[param] = value
    if "num_examples" in plugin.params:
        kwargs["data_seed"] = args.seed
    return kwargs


def _build_mechanism(args, steps: int, sigma: float):
    return _MECHANISMS[args.mechanism].build(
        steps=steps,
        sampling_prob=args.sampling_prob,
        noise_multiplier=sigma,
        clip_norm=args.clip_norm,
        **_mechanism_kwargs(args),
    )


def _build_adversary(name: str):
    """An adversary that takes no arguments, by sweep alias or class path."""
    try:
        return resolve("adversary", name, "--adversary").build()
    except TypeError as err:
        raise UsageError(f"--adversary {name!r} needs arguments ({err}); use a sweep") from None
    except ValueError as err:
        raise UsageError(str(err)) from None


def _eps(value, mark: str = "") -> str:
    return "n/a" if value is None else f"{value:.3f}{mark}"


_HEAD = (
    f"{'T':>6} {'sigma':>8} {'eps_lower':>10} {'eps_point':>10} {'heuristic':>10} "
    f"{'composition':>12}  guarantee of eps_lower"
)


def _format_row(r) -> str:
    above = bool(r.get("eps_point_above_composition"))
    guarantee = r.get("guarantee", "")
    if r.get("assumption_rejected"):
        guarantee += ", assumption REJECTED"
    return (
        f"{r['steps']:>6d} {r['noise_multiplier']:>8.4f} {_eps(r['eps_lower']):>10} "
        f"{_eps(r['eps_point'], '!' if above else ''):>10} {r['heuristic']:>10.3f} "
        f"{r['composition']:>12.3f}  {guarantee}"
    )


def _format_notes(rows) -> list[str]:
    """What the table's markers mean (only those that occur).

    `!` after eps_point: the estimate lies above the composition bound, outside the
    possible range for DP-SGD (too few runs for the rates it needs); `n/a`: no number (the
    reason is in results.json); `REJECTED` in the guarantee column: the audit's assumption
    failed its held-out check, so its eps_lower is not credible.
    """
    lines = []
    if any(r.get("eps_point_above_composition") for r in rows):
        lines.append(
            "! eps_point lies above the composition bound: an estimate outside the possible "
            "range (too few runs for the rates it reads)"
        )
    if any(r.get("eps_lower") is None or r.get("eps_point") is None for r in rows):
        lines.append("n/a: no number; results.json says why (eps_lower_note, eps_point_note)")
    if any(r.get("assumption_rejected") for r in rows):
        lines.append(
            "REJECTED: the audit's assumption failed its check on the held-out runs; "
            "use --method eps_delta or tradeoff for an assumption-free bound"
        )
    if any(r.get("guarantee") != "rigorous" for r in rows):
        lines.append(
            "eps_lower is an (eps, delta) lower bound at the stated confidence under the "
            "assumption named in the guarantee column ('rigorous' = none, held-out threshold)"
        )
    return lines


def _format_table(rows) -> str:
    """The whole audit table (header, rows, notes), as `advsim audit` prints it."""
    return "\n".join([_HEAD, "-" * len(_HEAD), *map(_format_row, rows), *_format_notes(rows)])


def _check_audit_args(args) -> float | None:
    """Every check that needs no computation; returns the target epsilon (None: sigma
    given)."""
    if args.noise_multiplier is not None and args.target_epsilon is not None:
        raise UsageError(
            "give either --noise-multiplier or --target-epsilon, not both (sigma is given, "
            "or calibrated to the target)"
        )
    _check("--sampling-prob", check_probability, args.sampling_prob)
    _check("--delta", check_delta, args.delta)
    _check("--confidence", check_in_interval, args.confidence, 0.5, 1.0)
    _check("--clip-norm", check_positive, args.clip_norm)
    _check("--trials", check_int, args.trials, minimum=2)
    if args.noise_multiplier is not None:
        _check("--noise-multiplier", check_positive, args.noise_multiplier)
        return None
    target = 8.0 if args.target_epsilon is None else args.target_epsilon
    _check("--target-epsilon", check_positive, target)
    return target


def _calibrate(target: float, args, steps: int) -> float:
    try:
        return bounds.calibrate_noise_multiplier(
            target, args.delta, steps, args.sampling_prob, progress=False if args.quiet else None
        )
    except (ValueError, RuntimeError, ArithmeticError) as err:
        raise UsageError(
            f"cannot calibrate sigma for T={steps} to --target-epsilon {target:g} at --delta "
            f"{args.delta:g} (q={args.sampling_prob:g}): {_one_line(err)}; try another "
            "--delta or --target-epsilon, or give --noise-multiplier"
        ) from None


def _cmd_audit(args) -> int:
    target = _check_audit_args(args)
    if args.data_scale is not None:
        _check("--data-scale", check_positive, args.data_scale)
    adversary = _build_adversary(args.adversary)
    for steps in args.steps:  # every T's mechanism, built before anything runs
        try:
            _build_mechanism(args, steps, 1.0 if target is not None else args.noise_multiplier)
        except (TypeError, ValueError) as err:
            raise UsageError(f"--mechanism {args.mechanism} at T={steps}: {err}") from None
    out = (
        Path(args.out)
        if args.out
        else Path("advsim-results") / ("audit-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    )
    _check_out("--out", out)
    config = {k: v for k, v in vars(args).items() if k != "func"}
    config["target_epsilon"] = target
    sigma_text = (
        f"sigma={args.noise_multiplier:g}"
        if target is None
        else (f"sigma calibrated to composition eps={target:g}")
    )
    print(
        f"advsim audit: {args.mechanism}, q={args.sampling_prob:g}, {sigma_text} at "
        f"delta={args.delta:g}, {args.trials:,} runs per world, {args.method} audit; "
        f"results go to {out}",
        flush=True,
    )

    rows, calibration = [], []
    bar = tqdm(args.steps, desc="audit", unit="T", disable=args.quiet, leave=False)
    start = time.perf_counter()
    with _cleanup_if_empty(out):
        for i, steps in enumerate(bar):
            sigma = args.noise_multiplier
            if sigma is None:
                bar.set_postfix_str(f"T={steps}, calibrating sigma", refresh=True)
                tic = time.perf_counter()
                sigma = _calibrate(target, args, steps)
                calibration.append(time.perf_counter() - tic)
            bar.set_postfix(T=steps, sigma=f"{sigma:.3f}")
            try:
                record = run_audit(
                    _build_mechanism(args, steps, sigma),
                    adversary,
                    trials=args.trials,
                    seed=args.seed,
                    method=args.method,
                    delta=args.delta,
                    confidence=args.confidence,
                    threshold_selection=args.threshold,
                    chunk_size=args.chunk_size,
                    progress=not args.quiet,
                )
            except (TypeError, ValueError) as err:
                raise UsageError(
                    f"T={steps}, sigma={sigma:g}: {_one_line(err)}"
                    + (f"; the {len(rows)} finished rows are in {out}" if rows else "")
                ) from None
            rows.append(record.to_dict())
            # Results so far are always complete files: a killed run keeps what it finished.
            out.mkdir(parents=True, exist_ok=True)
            write_csv(out / "results.csv", rows)
            write_json(out / "results.json", {"provenance": provenance(config), "rows": rows})
            lines = ([_HEAD, "-" * len(_HEAD)] if i == 0 else []) + [_format_row(rows[-1])]
            for line in lines:
                tqdm.write(line, file=sys.stdout)
            sys.stdout.flush()
    for line in _format_notes(rows):
        print(line)
    title = (
        f"{args.mechanism}, q={args.sampling_prob:g}, {args.method} audit, "
        f"{args.trials:g} runs/world"
    )
    tic = time.perf_counter()
    paths = plot_eps_vs_steps(rows, out / "eps_vs_steps", title=title)
    plotting = time.perf_counter() - tic
    print(_time_report(rows, sum(calibration), plotting, time.perf_counter() - start))
    print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, " + ", ".join(map(str, paths)))
    return 0


def _time_report(rows, calibration: float, plotting: float, total: float) -> str:
    """Where the time went, measured: calibration here, the rest by `run_audit`."""
    parts = [
        ("calibration", calibration),
        ("compilation", sum(r["compile_time_s"] for r in rows)),
        ("simulation", sum(r["simulate_time_s"] for r in rows)),
        ("audit", sum(r["audit_time_s"] for r in rows)),
        ("bounds", sum(r["bounds_time_s"] for r in rows)),
        ("plot", plotting),
    ]
    other = max(total - sum(t for _, t in parts), 0.0)
    text = ", ".join(f"{name} {t:.1f} s" for name, t in parts if name != "calibration" or t)
    return f"time: {total:.1f} s in all: {text}, other {other:.1f} s"


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
            f"  (max over t <= T skipped for T > {_MAX_OVER_STEPS_LIMIT}: it takes minutes; "
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

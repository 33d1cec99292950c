"""Command line: `advsim audit` (the main job), `advsim bound`, `advsim sweep`, `advsim plot`,
`advsim figure`.

`advsim audit` with no arguments runs the built-in experiment: the linear 1-D process with
q = 0.01, sigma calibrated so that composition gives eps = 8 at delta = 1e-5 for each T,
10^6 runs per world per T, family auditing; it prints a table and writes CSV, JSON and a
PNG/PDF plot into an output folder whose name it prints. `advsim sweep CONFIG.toml --out DIR
[--resume]` runs a grid (see `advsim.sweep`) and `advsim plot DIR` draws its figures;
`advsim figure NAME [--quick] [--out DIR] [--resume]` runs a seed figure (`advsim.figures`,
`advsim figure --list`).
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path

from tqdm.auto import tqdm

from advsim import bounds
from advsim._io import provenance, write_csv, write_json
from advsim.experiment import DEFAULT_STEPS, run_audit
from advsim.figures import list_figures, run_figure
from advsim.mechanisms import LinearProcess
from advsim.plotting import plot_eps_vs_steps
from advsim.sweep import SweepError, load_config, plot_sweep, resolve, run_sweep

__all__ = ["main"]

#: max_{t <= T} costs about T^1.5: seconds at T = 10^3-10^4, minutes beyond.
_MAX_OVER_STEPS_LIMIT = 10_000

_COLUMNS = ("steps", "noise_multiplier", "eps_lower", "eps_point", "heuristic", "composition")


def _positive_int(text: str) -> int:
    value = float(text)  # accept 1e6
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return int(value)


def _build_mechanism(args, steps: int, sigma: float):
    if args.mechanism == "linear":
        return LinearProcess(steps, args.sampling_prob, sigma, clip_norm=args.clip_norm)
    return LinearProcess.with_data(
        steps, args.sampling_prob, sigma, clip_norm=args.clip_norm, dim=args.dim,
        num_examples=args.num_examples, distribution=args.data_distribution,
        scale=args.data_scale, data_seed=args.seed,
    )


def _build_adversary(name: str):
    """An adversary that takes no arguments, by sweep alias or class path."""
    try:
        return resolve("adversary", name, "--adversary").build()
    except TypeError as err:
        raise ValueError(f"--adversary {name!r} needs arguments ({err}); use a sweep") from None


def _eps(value, mark: str = "") -> str:
    return "n/a" if value is None else f"{value:.3f}{mark}"


def _format_table(rows) -> str:
    """The audit table, with what each eps_lower certifies beside it.

    Markers: `!` after eps_point: the estimate lies above the composition bound, outside
    the possible range for DP-SGD (too few runs for the rates it needs); `n/a`: no
    number (the reason is in results.json); `REJECTED` in the guarantee column: the
    audit's assumption failed its held-out check, so its eps_lower is not credible.
    """
    head = (
        f"{'T':>6} {'sigma':>8} {'eps_lower':>10} {'eps_point':>10} {'heuristic':>10} "
        f"{'composition':>12}  guarantee of eps_lower"
    )
    lines = [head, "-" * len(head)]
    marks = set()
    for r in rows:
        above = bool(r.get("eps_point_above_composition"))
        guarantee = r.get("guarantee", "")
        if r.get("assumption_rejected"):
            guarantee += ", assumption REJECTED"
            marks.add("rejected")
        if above:
            marks.add("above")
        if r.get("eps_lower") is None or r.get("eps_point") is None:
            marks.add("na")
        lines.append(
            f"{r['steps']:>6d} {r['noise_multiplier']:>8.4f} {_eps(r['eps_lower']):>10} "
            f"{_eps(r['eps_point'], '!' if above else ''):>10} {r['heuristic']:>10.3f} "
            f"{r['composition']:>12.3f}  {guarantee}"
        )
    if "above" in marks:
        lines.append(
            "! eps_point lies above the composition bound: an estimate outside the possible "
            "range (too few runs for the rates it reads)"
        )
    if "na" in marks:
        lines.append("n/a: no number; results.json says why (eps_lower_note, eps_point_note)")
    if "rejected" in marks:
        lines.append(
            "REJECTED: the audit's assumption failed its check on the held-out runs; "
            "use --method eps_delta or tradeoff for an assumption-free bound"
        )
    if any(r.get("guarantee") != "rigorous" for r in rows):
        lines.append(
            "eps_lower is an (eps, delta) lower bound at the stated confidence under the "
            "assumption named in the guarantee column ('rigorous' = none, held-out threshold)"
        )
    return "\n".join(lines)


def _cmd_audit(args) -> int:
    if args.noise_multiplier is not None and args.target_epsilon is not None:
        raise SystemExit("give either --noise-multiplier or --target-epsilon, not both")
    target = 8.0 if args.noise_multiplier is None and args.target_epsilon is None else (
        args.target_epsilon
    )
    adversary = _build_adversary(args.adversary)
    out = Path(args.out) if args.out else Path("advsim-results") / (
        "audit-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    out.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in vars(args).items() if k != "func"}
    config["target_epsilon"] = target
    print(f"advsim audit: writing results to {out}", flush=True)

    rows = []
    bar = tqdm(args.steps, desc="audit", unit="T", disable=args.quiet)
    for steps in bar:
        sigma = args.noise_multiplier
        if sigma is None:
            sigma = bounds.calibrate_noise_multiplier(target, args.delta, steps, args.sampling_prob)
        bar.set_postfix(T=steps, sigma=f"{sigma:.3f}")
        record = run_audit(
            _build_mechanism(args, steps, sigma), adversary,
            trials=args.trials, seed=args.seed, method=args.method, delta=args.delta,
            confidence=args.confidence, threshold_selection=args.threshold,
            chunk_size=args.chunk_size, progress=not args.quiet,
        )
        rows.append(record.to_dict())
        # Results so far are always complete files: a killed run keeps what it finished.
        write_csv(out / "results.csv", rows)
        write_json(out / "results.json", {"provenance": provenance(config), "rows": rows})
    print(_format_table(rows))
    title = (
        f"{args.mechanism}, q={args.sampling_prob:g}, {args.method} audit, "
        f"{args.trials:g} runs/world"
    )
    paths = plot_eps_vs_steps(rows, out / "eps_vs_steps", title=title)
    print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, " + ", ".join(map(str, paths)))
    return 0


def _cmd_bound(args) -> int:
    n = args.canary_steps
    kw = {"canary_steps": n} if n is not None else {}
    rows = [
        ("heuristic (last iterate)", bounds.heuristic_epsilon(
            args.delta, args.steps, args.sampling_prob, args.noise_multiplier, **kw)),
        ("heuristic, max over t <= T", bounds.heuristic_epsilon_max_over_steps(
            args.delta, args.steps, args.sampling_prob, args.noise_multiplier))
        if n is None and args.steps <= _MAX_OVER_STEPS_LIMIT else None,
        ("composition (all iterates)", bounds.composition_epsilon(
            args.delta, args.steps, args.sampling_prob, args.noise_multiplier, **kw)),
        ("full batch (DP-GD)", bounds.full_batch_epsilon(
            args.delta, args.steps, args.sampling_prob, args.noise_multiplier, **kw)),
    ]
    print(
        f"T={args.steps} q={args.sampling_prob:g} sigma={args.noise_multiplier:g} "
        f"delta={args.delta:g}" + (f" canary_steps={n}" if n is not None else "")
    )
    if n is None and args.steps > _MAX_OVER_STEPS_LIMIT:
        print(f"  (max over t <= T skipped for T > {_MAX_OVER_STEPS_LIMIT}: it takes minutes; "
              "use advsim.bounds.heuristic_epsilon_max_over_steps)")
    for row in rows:
        if row is not None:
            name, eps = row
            value = f"{eps:.6g}" if math.isfinite(eps) else str(eps)
            print(f"  {name:<28} eps = {value}")
    return 0


def _cmd_sweep(args) -> int:
    config = load_config(args.config)
    executor = "local" if args.ray is None else "ray"
    out = Path(args.out)
    n = len(config.cells())
    print(f"advsim sweep: {n} cells ({config.mode} mode) -> {out}", flush=True)
    try:
        rows = run_sweep(
            config, out, resume=args.resume, progress=not args.quiet, executor=executor,
            ray_address=args.ray or None,
        )
    except SweepError as err:
        print(f"advsim sweep: error: {err}", file=sys.stderr)
        return 2
    total = sum(float(r["wall_time_s"]) for r in rows)
    print(
        f"wrote {out / 'results.csv'} and {out / 'results.json'} ({len(rows)} cells, "
        f"{total:.1f} s of cell time); figures: advsim plot {out}"
    )
    return 0


def _cmd_plot(args) -> int:
    try:
        paths = plot_sweep(args.dir)
    except SweepError as err:
        print(f"advsim plot: error: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _cmd_figure(args) -> int:
    if args.list or not args.name:
        for name, title in list_figures().items():
            print(f"{name:<16} {title}")
        return 0
    try:
        run_figure(args.name, quick=args.quick, out=args.out, resume=args.resume,
                   progress=not args.quiet)
    except SweepError as err:
        print(f"advsim figure: error: {err}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advsim", description="Simulate and audit hidden-state DP-SGD."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    a = sub.add_parser(
        "audit",
        help="simulate a mechanism, audit it, compare with the bounds (default: built-in "
        "experiment)",
        description="With no options: the linear 1-D process, q=0.01, sigma calibrated to "
        "composition eps=8 at delta=1e-5 for each T, 1e6 runs per world, family auditing.",
    )
    a.add_argument("--mechanism", choices=["linear", "linear-data"], default="linear")
    a.add_argument(
        "--adversary", default="projection", metavar="NAME",
        help="projection (default), llr, or any adversary class path module:Class that "
        "takes no arguments",
    )
    a.add_argument(
        "--method", choices=["family", "gdp", "eps_delta", "tradeoff"], default="family",
        help="family: eps_lower assumes the run is in the heuristic's family (true for these "
        "linear processes); gdp: assumes a Gaussian trade-off curve; eps_delta, tradeoff: "
        "assume nothing (rigorous). The table prints each bound's guarantee",
    )
    a.add_argument("--steps", type=_positive_int, nargs="+", default=None, metavar="T")
    a.add_argument("--sampling-prob", type=float, default=0.01)
    a.add_argument("--noise-multiplier", type=float, default=None,
                   help="sigma (default: calibrated to --target-epsilon for each T)")
    a.add_argument("--target-epsilon", type=float, default=None,
                   help="calibrate sigma so composition gives this eps at --delta (default 8)")
    a.add_argument("--delta", type=float, default=1e-5)
    a.add_argument("--trials", type=_positive_int, default=10**6, help="runs per world")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--confidence", type=float, default=0.95)
    a.add_argument("--threshold", choices=["split", "same"], default="split",
                   help="split: choose on half, count on the other (held out); same: optimistic")
    a.add_argument("--clip-norm", type=float, default=1.0)
    a.add_argument("--dim", type=_positive_int, default=10, help="linear-data: model dimension")
    a.add_argument("--num-examples", type=_positive_int, default=100,
                   help="linear-data: other examples")
    a.add_argument("--data-distribution", choices=["zero", "gaussian", "sphere"],
                   default="gaussian")
    a.add_argument("--data-scale", type=float, default=1.0)
    a.add_argument("--chunk-size", type=_positive_int, default=None)
    a.add_argument(
        "--out", default=None, help="output folder (default: advsim-results/audit-<time>)"
    )
    a.add_argument("--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=_cmd_audit)

    b = sub.add_parser("bound", help="print the heuristic, composition and full-batch epsilons")
    b.add_argument("--steps", type=_positive_int, required=True, metavar="T")
    b.add_argument("--sampling-prob", type=float, required=True)
    b.add_argument("--noise-multiplier", type=float, required=True)
    b.add_argument("--delta", type=float, default=1e-5)
    b.add_argument("--canary-steps", type=_positive_int, default=None,
                   help="steps that can carry the canary (default: all T)")
    b.set_defaults(func=_cmd_bound)

    s = sub.add_parser(
        "sweep",
        help="run a grid of audits (or bounds only) from a TOML config, resumably",
        description="One cell per grid point; each finished cell is written atomically to "
        "DIR/cells/, the table to DIR/results.csv and results.json, provenance to "
        "DIR/run.json. See advsim.sweep for the config format.",
    )
    s.add_argument("config", help="the sweep's TOML file")
    s.add_argument("--out", required=True, help="output folder")
    s.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out: skip finished cells, verify their files")
    s.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the cells as Ray tasks (pip install 'advsim[ray]'); ADDRESS of "
                   "a cluster (e.g. auto), default a local Ray instance")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("plot", help="draw a sweep's heatmaps and curves into DIR/figures/")
    p.add_argument("dir", help="a sweep's output folder")
    p.set_defaults(func=_cmd_plot)

    f = sub.add_parser(
        "figure", help="run a seed figure (its sweeps, tables and plot); --list names them",
        description="Each figure is a small file (advsim/figures/defs/NAME.toml): sweep "
        "configs, derived tables, a plot function. Writes into --out: a folder per sweep, "
        "the tables (.csv, .json) and the figure (.png, .pdf).",
    )
    f.add_argument("name", nargs="?", help="the figure (see --list)")
    f.add_argument("--list", action="store_true", help="list the figures and exit")
    f.add_argument("--quick", action="store_true", help="a coarse grid, few runs (~1 minute)")
    f.add_argument("--out", default=None, help="output folder (default advsim-results/NAME)")
    f.add_argument("--resume", action="store_true", help="continue the sweeps in --out")
    f.add_argument("--quiet", action="store_true", help="no progress bars")
    f.set_defaults(func=_cmd_figure)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "audit" and args.steps is None:
        args.steps = list(DEFAULT_STEPS)
    try:
        return args.func(args)
    except ValueError as err:  # bad parameters: one clear line, no traceback
        print(f"advsim {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

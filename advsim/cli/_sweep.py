"""`advsim sweep`: a grid of audits (or bounds only) from a TOML config, resumably."""

from __future__ import annotations

from pathlib import Path

from advsim.cli._common import _add_run_options, _command, _prepare_out

__all__ = ["add_sweep_command"]

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
scripts/configs/linear_4x5.toml (a 4 x 5 sigma x q grid, about a minute) and
scripts/configs/landscape_heatmap.toml; a walk-through: the tutorial docs/tutorials/sweep.md;
the full reference: python -c "import advsim.sweep; help(advsim.sweep)".
"""

_SWEEP_EXAMPLES = """\
examples:
  advsim sweep scripts/configs/linear_4x5.toml --out advsim-results/linear-4x5
  advsim sweep scripts/configs/linear_4x5.toml --out advsim-results/linear-4x5 --resume
  advsim plot advsim-results/linear-4x5
"""


def _cmd_sweep(args) -> int:
    from advsim.sweep import load_config, run_sweep  # here: the parser imports no jax

    config = load_config(args.config)
    executor = "local" if args.ray is None else "ray"
    out = Path(args.out)
    _prepare_out(args, out, "sweep", "run.json", refuse_existing=False)
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
    figures = f"; figures: advsim plot {out}" if config.swept else ""  # one cell: none
    print(
        f"wrote {out / 'results.csv'} and {out / 'results.json'} ({len(rows)} cells, "
        f"{total:.1f} s of cell time){figures}"
    )
    return 0


def add_sweep_command(sub) -> None:
    """Adds `advsim sweep` to the subcommands `sub`."""
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

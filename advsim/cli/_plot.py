"""`advsim plot`: the usual figures of a sweep folder."""

from __future__ import annotations

from advsim.cli._common import _command

__all__ = ["add_plot_command"]

_PLOT_DESCRIPTION = """\
Draws the usual figures of a sweep folder (one written by advsim sweep or advsim audit,
or a sweep's folder inside advsim figure's) into DIR/figures/, as PNG and PDF:
  - epsilon against the swept parameter (against T where T is swept): the heuristic,
    composition and full-batch bounds as lines, the audit's epsilon as markers; one panel
    per value of the other swept parameters;
  - with two or more swept parameters on a full grid (no [[cases]]): heatmaps over the
    first two of every epsilon column, and of the ratios heuristic / composition,
    eps_lower / heuristic and, where the cells have it, heuristic / exact epsilon.
An unfinished sweep is drawn from its finished cells. Refused: a folder with no finished
cell, or a sweep of one cell (nothing is swept, so there is no axis to draw along).
"""


def _cmd_plot(args) -> int:
    from pathlib import Path

    from advsim.sweep import plot_sweep  # here: the parser imports no jax

    paths = plot_sweep(args.dir)
    for path in paths:
        print(path)
    print(f"advsim plot: wrote {len(paths)} files into {Path(args.dir) / 'figures'}")
    return 0


def add_plot_command(sub) -> None:
    """Adds `advsim plot` to the subcommands `sub`."""
    p = _command(
        sub,
        _cmd_plot,
        "plot",
        help="draw a sweep's heatmaps and curves into DIR/figures/",
        description=_PLOT_DESCRIPTION,
        epilog="example:\n  advsim plot advsim-results/linear-4x5\n",
    )
    p.add_argument("dir", help="a sweep's output folder")

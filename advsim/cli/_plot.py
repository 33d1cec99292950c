"""`advsim plot`: the usual figures of a sweep folder."""

from __future__ import annotations

from advsim.cli._common import _command

__all__ = ["add_plot_command"]


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
        epilog="example:\n  advsim plot advsim-results/linear-4x5\n",
    )
    p.add_argument("dir", help="a sweep's output folder")

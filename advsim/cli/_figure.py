"""`advsim figure`: a seed figure (its sweeps, tables and plot), or the list of them."""

from __future__ import annotations

from pathlib import Path

from advsim.cli._common import (
    UsageError,
    _add_run_options,
    _cleanup_if_empty,
    _command,
    _para,
    _prepare_out,
)

__all__ = ["add_figure_command"]


def _cmd_figure(args) -> int:
    from advsim.figures import list_figures, run_figure  # here: the parser imports no jax

    if args.list or not args.name:
        for name, title in list_figures().items():
            print(f"{name:<16} {title}")
        return 0
    if args.name not in list_figures():
        raise UsageError(
            f"no figure named {args.name!r}; the figures: {', '.join(list_figures())} "
            "(advsim figure --list)"
        )
    given = args.out
    out = Path(args.out or f"advsim-results/{args.name}" + ("-quick" if args.quick else ""))
    # A figure's sweeps are its sub-folders; a table figure keeps its cells in cells/.
    markers = ("*/run.json", "cells/*.json")
    other = Path(f"advsim-results/{args.name}" + ("" if args.quick else "-quick"))
    hint = ""
    if args.resume and not given and any(any(other.glob(m)) for m in markers):
        flag = "without --quick" if args.quick else "with --quick"
        hint = f" (a run {flag} is in {other}: give the same options as that run)"
    _prepare_out(args, out, f"run of figure {args.name}", *markers, hint=hint)
    with _cleanup_if_empty(out):
        run_figure(
            args.name, quick=args.quick, out=out, resume=args.resume, progress=not args.quiet
        )
    return 0


def add_figure_command(sub) -> None:
    """Adds `advsim figure` to the subcommands `sub`."""
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
        "--quick",
        action="store_true",
        help="a coarse grid and few runs (figure4 and figure14 take longest: their exact "
        "laws of the last model, one per cell)",
    )
    _add_run_options(
        f,
        out_help="output folder (default: advsim-results/NAME, NAME-quick with --quick)",
        resume_help="continue the sweeps in --out",
    )

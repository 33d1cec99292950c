"""Command line: `advsim audit` (the main job), `advsim bound`, `advsim sweep`, `advsim plot`,
`advsim figure`, `advsim search`.

`advsim audit` with no arguments runs the built-in experiment, a sweep config shipped with
the package (`advsim/sweep/audit.toml`): the linear 1-D process with q = 0.01, sigma
calibrated so that composition gives eps = 8 at delta = 1e-5 for each T, 10^6 runs per
world per T, family auditing. It runs through the sweep runner like any sweep (one
checksummed file per finished T, `--resume` continues a killed run), prints each row of
the table as soon as it is done, then where the time went, and writes CSV, JSON and a
PNG/PDF plot into an output folder whose name it prints. `advsim sweep CONFIG.toml --out
DIR [--resume]` runs a grid (see `advsim.sweep`) and `advsim plot DIR` draws its figures;
`advsim figure NAME [--quick] [--out DIR] [--resume]` runs a seed figure
(`advsim.figures`, `advsim figure --list`); `advsim search CONFIG.toml --out DIR
[--resume]` searches a 1-D construction against its exact epsilon (`advsim.search`).

Each command lives in its own module (`_audit`, `_bound`, `_sweep`, `_plot`, `_figure`,
`_search`), with its options; `_common` holds the checks and the parser pieces they
share. Building the parser imports neither jax nor the accountant (`advsim --help`
answers at once): the command modules import the library inside the functions that run a
command, and the registries' names the parser shows come from `_names` (tested equal to
their sources).

Compiled programs persist between runs: once the command line is parsed, JAX's persistent
compilation cache is turned on in `$XDG_CACHE_HOME/advsim/jax` (default
`~/.cache/advsim/jax`), or in `$JAX_COMPILATION_CACHE_DIR` where that is set;
`ADVSIM_NO_COMPILE_CACHE=1` turns it off, and a folder that cannot be written is skipped
(`_common.compile_cache_dir`).

Errors: a user error (a bad option, an out-of-range value, an unusable output folder, a
damaged sweep folder) prints one line naming what is wrong and how to fix it, exits with
status 2 and leaves nothing behind (output folders are created only once there is
something to write into them). Anything else is a bug: its traceback is shown, with a line
that says so.
"""

from __future__ import annotations

import argparse
import sys

from advsim.cli import _interrupt
from advsim.cli._audit import add_audit_command
from advsim.cli._bound import add_bound_command
from advsim.cli._common import UsageError, _enable_compile_cache, _Formatter, _one_line, _Parser
from advsim.cli._figure import add_figure_command
from advsim.cli._plot import add_plot_command
from advsim.cli._search import add_search_command
from advsim.cli._sweep import add_sweep_command

__all__ = ["UsageError", "build_parser", "main"]

_BUG_LINE = (
    "advsim: internal error: this is a bug in advsim, not in your input; please report it "
    "to the advsim maintainers (an issue on the project's tracker) with the command line "
    "and the traceback above"
)


def _version() -> str:
    from advsim._io import git_commit, package_version

    return f"advsim {package_version()} (commit {git_commit()})"


class _VersionAction(argparse.Action):
    """--version: prints `_version()`, looked up only when asked (it runs git), and exits."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        kwargs.setdefault("help", "show the version and commit, and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The `advsim` parser: one subcommand per module of `advsim.cli`."""
    parser = _Parser(
        prog="advsim",
        description="Simulate and audit hidden-state DP-SGD.",
        formatter_class=_Formatter,
        epilog="examples:\n  advsim audit\n  advsim bound --steps 1000 --sampling-prob 0.01 "
        "--noise-multiplier 1\n  advsim figure --list\n\n'advsim COMMAND --help' for a "
        "command's options.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    for add_command in (
        add_audit_command,
        add_bound_command,
        add_sweep_command,
        add_plot_command,
        add_figure_command,
        add_search_command,
    ):
        add_command(sub)
    return parser


def _sweep_errors() -> tuple[type[Exception], ...]:
    """`advsim.sweep.SweepError` once a command has imported the sweep runner (none can be
    raised before): `main` imports no jax for --help."""
    sweep = sys.modules.get("advsim.sweep")
    return (sweep.SweepError,) if sweep is not None else ()


#: The library each command runs on, imported during start-up (`_start_up`).
_LIBRARIES = {
    "audit": ("advsim.sweep", "advsim.plotting"),
    "bound": ("advsim.bounds",),
    "figure": ("advsim.figures",),
    "plot": ("advsim.sweep",),
    "search": ("advsim.search",),
    "sweep": ("advsim.sweep",),
}


def _start_up(command: str) -> None:
    """The compilation cache, and the imports of the command's library: the part of a
    command during which Ctrl-C ends the process at once (`advsim.cli._interrupt`)."""
    import importlib

    _enable_compile_cache()
    for module in _LIBRARIES.get(command, ()):
        importlib.import_module(module)


def _interrupted(command: str, args) -> str:
    """The line an interrupted command ends with: for a command that can resume (it has
    --resume), what is kept in its folder and how to continue it."""
    from pathlib import Path

    out = getattr(args, "out", None)  # the command sets it to the folder it writes into
    if out is None or not hasattr(args, "resume"):
        return f"{command}: interrupted"
    out = Path(out)
    resume = f"run the same command with --out {out} --resume to continue it"
    state = out / "state.json"  # a search's progress, saved at its checkpoints
    if state.is_file():
        try:
            import json

            evaluations = f"{len(json.loads(state.read_text())['trace'])} evaluations, "
        except (OSError, ValueError, KeyError, TypeError):
            evaluations = ""
        return (
            f"{command}: interrupted; the search's progress up to its last checkpoint "
            f"({evaluations}{state.name}) is kept in {out}: {resume}"
        )
    runs = [*out.glob("run.json"), *out.glob("*/run.json")] if out.is_dir() else []
    if not runs:  # no sweep started
        return f"{command}: interrupted before anything was finished; nothing was kept"
    cells = sum(len(list((run.parent / "cells").glob("*.json"))) for run in runs)
    return (
        f"{command}: interrupted; what was finished is kept in {out} ({cells} finished "
        f"cell{'s' if cells != 1 else ''}): {resume}"
    )


def main(argv=None) -> int:
    """Runs the command line; returns the exit status (0 success, 2 a user error, 130
    interrupted).

    A user error (`UsageError`, a `ValueError` or `TypeError` from the library, a
    `SweepError`, an `OSError` of the file system) prints one line on stderr; anything
    else is a bug: the traceback, then a line saying so. Ctrl-C stops every command within
    2 seconds, at any moment, with a line saying what was kept; whatever a command ends
    with after Ctrl-C counts as the interruption.
    """
    command, args = "advsim", None
    with _interrupt.sigint_handling(lambda: _interrupted(command, args)) as session:
        try:
            args = build_parser().parse_args(argv)
            command = f"advsim {args.command}"
            _start_up(args.command)
            _interrupt.started(session)
            status = args.func(args)
        except SystemExit as stop:  # --help, --version
            status = stop.code if isinstance(stop.code, int) else 0
        except BaseException as err:  # noqa: BLE001 (each kind is reported below)
            status = _report(err, command, args)
        _interrupt.finished(session, status)
        return status


def _report(err: BaseException, command: str, args) -> int:
    """Prints what ended a command (`main`) and returns its exit status."""
    if isinstance(err, KeyboardInterrupt) or _interrupt.interrupted():
        if _interrupt.claim_report():  # else the watchdog is ending the process with it
            print(_interrupted(command, args), file=sys.stderr)
        return 130
    if isinstance(err, (UsageError, ValueError, TypeError, *_sweep_errors())):
        command = getattr(err, "prog", None) or command
        print(f"{command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    if isinstance(err, OSError):  # the file system (a full disk, a file removed under us)
        where = f" ({err.filename})" if err.filename else ""
        print(f"{command}: error: {err.strerror or _one_line(err)}{where}", file=sys.stderr)
        return 2
    if not isinstance(err, Exception):  # GeneratorExit and the like: not ours to report
        raise err
    import traceback

    traceback.print_exception(err)
    print(_BUG_LINE, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

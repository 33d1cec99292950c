"""The command line's shared pieces: the one-line user error, the checks that raise it and
the parser's formatting."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import textwrap
from pathlib import Path

__all__ = ["UsageError"]


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
    bad = argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    try:
        value = int(text)  # exact, however many digits
    except ValueError:
        try:
            value = float(text)  # accept 1e6
        except ValueError:
            raise bad from None
        if not value.is_integer():
            raise bad from None
    if value < 1:
        raise bad
    return int(value)


def _seed(text: str) -> int:
    from advsim._limits import MAX_SEED  # the range of every seed (no jax)

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2^64 - 1], got {text}")
    return value


def _folder(text: str) -> str:
    """An output folder's path: any text but the empty one (which `Path` reads as the
    current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a folder, got {text!r}")
    return text


def _add_run_options(parser, *, out_help: str, resume_help: str, out_required=False) -> None:
    """--out DIR, --resume and --quiet: the options of every command that runs sweeps."""
    parser.add_argument(
        "--out", type=_folder, required=out_required, default=None, metavar="DIR", help=out_help
    )
    parser.add_argument("--resume", action="store_true", help=resume_help)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


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


def _check_resume(out: Path, what: str, *markers: str, hint: str = "") -> None:
    """Refuses --resume on a folder that holds nothing to continue: none of `markers`
    (file names or glob patterns, relative to `out`, e.g. "run.json", "*/run.json") is
    there. `what` names the work ("sweep", "search"); `hint` ends the message."""
    if not out.is_dir():
        raise UsageError(
            f"--resume: {out} does not exist, so there is no {what} to continue; run "
            f"without --resume to start one{hint}"
        )
    if not any(any(out.glob(marker)) for marker in markers):
        found = "it is empty" if not any(out.iterdir()) else f"it has no {markers[0]}"
        raise UsageError(
            f"--resume: {out} holds no {what} to continue ({found}); run without --resume "
            f"to start one there, or give the folder of the run to continue{hint}"
        )


def _prepare_out(
    args, out: Path, what: str, *markers: str, hint: str = "", refuse_existing: bool = True
) -> None:
    """The output-folder checks every command makes before any work: `out` usable
    (`_check_out`), recorded in `args.out` (the folder an interruption names), something
    to continue there under --resume (`_check_resume`), and, without --resume, no earlier
    `what` in it (any of `markers`, file names or glob patterns relative to `out`), unless
    `refuse_existing` is False (`advsim sweep`: `run_sweep` refuses it after taking the
    folder's lock, so that a sweep running there is named first)."""
    _check_out("--out", out)
    args.out = str(out)
    if args.resume:
        _check_resume(out, what, *markers, hint=hint)
    elif refuse_existing and any(any(out.glob(marker)) for marker in markers):
        article = "an" if what[0] in "aeiou" else "a"
        raise UsageError(
            f"--out {out} already holds {article} {what}; pass --resume to continue it, or "
            "choose a new --out folder"
        )


@contextlib.contextmanager
def _cleanup_if_empty(out: Path):
    """Removes `out` (and the parents this run created) if the block fails before writing
    anything into it, so that a failed run leaves no empty folder behind."""
    from advsim._interrupt import undo_if_stopped

    created = []
    path = out
    while not path.exists():
        created.append(path)
        path = path.parent

    def remove_empty() -> None:
        for path in created:  # deepest first
            with contextlib.suppress(OSError):
                if path.is_dir() and not any(path.iterdir()):
                    path.rmdir()

    try:
        with undo_if_stopped(remove_empty):  # also when Ctrl-C stops the process at once
            yield
    except BaseException:
        remove_empty()
        raise


# ---------------------------------------------------------------------- compilation cache

#: Programs that took at least this long to compile are kept in the persistent cache: all
#: of them. JAX's default, 1 s, leaves out most of the engine's programs (0.1-1 s each on
#: 2 cores); measured on a second `advsim audit --steps 10 100 --trials 1e5`, keeping all
#: (35 files, 0.6 MB) took 1.5 s less CPU than keeping those over 0.1 s (10 files).
_CACHE_MIN_COMPILE_SECS = 0.0


def compile_cache_dir(environ=os.environ) -> Path | None:
    """Where `advsim`'s commands keep compiled programs between runs, None for nowhere.

    JAX's persistent compilation cache: `$JAX_COMPILATION_CACHE_DIR` where it is set (JAX
    reads it itself), else `$XDG_CACHE_HOME/advsim/jax` (default `~/.cache/advsim/jax`).
    None where `ADVSIM_NO_COMPILE_CACHE` is set to anything but "" or "0", and where the
    folder cannot be created or written.
    """
    if environ.get("ADVSIM_NO_COMPILE_CACHE", "") not in ("", "0"):
        return None
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        folder = Path(environ["JAX_COMPILATION_CACHE_DIR"])
    else:
        home = environ.get("HOME") or os.path.expanduser("~")
        base = environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
        folder = Path(base) / "advsim" / "jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def _enable_compile_cache(environ=os.environ) -> Path | None:
    """Turns on JAX's persistent compilation cache in `compile_cache_dir()` (imports jax:
    called once the command line is parsed, before the command runs); returns the folder.
    A minimum compile time set in `JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS` is kept."""
    folder = compile_cache_dir(environ)
    if folder is None:
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", _CACHE_MIN_COMPILE_SECS)
    return folder


# ------------------------------------------------------------------------------ parsers


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


def _para(text: str) -> str:
    """A description paragraph, wrapped (the formatter keeps line breaks as written)."""
    return textwrap.fill(text, width=88)


def _command(sub, func, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand's parser (defaults shown in its help) that runs `func(args)`."""
    parser = sub.add_parser(name, formatter_class=_Formatter, **kwargs)
    parser.set_defaults(func=func)
    return parser

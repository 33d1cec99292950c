"""Result files: atomic writes and provenance (config, versions, devices, commit)."""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path

__all__ = ["atomic_path", "git_commit", "package_version", "provenance", "write_csv", "write_json"]

_PACKAGES = ("advsim", "jax", "jaxlib", "equinox", "numpy", "scipy", "dp-accounting", "matplotlib")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside `path`; renames it onto `path` only on success.

    A crash or kill at any moment leaves either the old file or the complete new one, never
    a half-written file (the rename is atomic on POSIX file systems). The file gets the
    permissions the user's umask gives a new file (`tempfile.mkstemp` alone would make it
    readable by its owner only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _umask() -> int:
    """The process's umask (read from /proc where it can be, without changing it; else set
    and restored at once)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf/nan; write them as strings, never silently
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_json(path, data) -> None:
    """Writes `data` as indented JSON, atomically."""
    text = json.dumps(_jsonable(data), indent=2, sort_keys=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n")


def write_csv(path, rows: Sequence[Mapping], columns: Sequence[str] | None = None) -> None:
    """Writes one row per mapping (columns: the given ones, else the first row's keys)."""
    columns = list(columns or (rows[0].keys() if rows else []))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _fmt(row.get(k)) for k in columns})
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue())


def _fmt(value):
    if isinstance(value, float):
        return repr(value)
    return value


def _run_git(here: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(here), *args], capture_output=True, text=True, timeout=5, check=True
    ).stdout.strip()


def _checkout_commit(here: Path) -> str | None:
    """The commit of the git checkout that `here` is tracked in (with "+dirty" if tracked
    files differ from it), or None: not a checkout, or `here` is not tracked there (an
    installed copy inside some other repository's ignored folder, such as a venv)."""
    try:
        if not _run_git(here, "ls-files", "--", "__init__.py"):
            return None
        commit = _run_git(here, "rev-parse", "HEAD")
        dirty = _run_git(here, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def git_commit() -> str:
    """The commit advsim was run from: its git checkout's (an editable install, or the
    source tree on the path), else the one recorded when the installed package was built
    (`pip install .` from a clone), else "unknown" (e.g. built from an archive without git).
    """
    here = Path(__file__).resolve().parent
    commit = _checkout_commit(here)
    if commit is not None:
        return commit
    try:
        from advsim import _build_info  # generated at build time; absent in a checkout
    except ImportError:
        return "unknown"
    return getattr(_build_info, "GIT_COMMIT", None) or "unknown"


def package_version() -> str:
    """advsim's installed version (package metadata), or "unknown" when not installed."""
    try:
        return metadata.version("advsim")
    except metadata.PackageNotFoundError:
        return "unknown"


def provenance(config: Mapping | None = None) -> dict:
    """What made a result: config, command line, package versions, JAX devices, commit."""
    import jax

    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    devices = jax.devices()
    return {
        "config": dict(config or {}),
        "command": sys.argv,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "versions": versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in devices],
        "jax_x64": bool(jax.config.jax_enable_x64),
    }

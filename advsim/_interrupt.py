"""What a process stopped at once must undo first.

On Ctrl-C the command line lets the interrupted work unwind (its `finally` blocks and
`except BaseException` handlers remove what a failed run leaves behind); where the main
thread cannot unwind in time (it is inside a compilation or another call into compiled
code, which Python cannot interrupt), the command line ends the process without
unwinding, after running the cleanups registered here. A cleanup must be safe to run
from another thread while the work it undoes is stalled, and safe to run twice (the
unwinding may have run it already).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

__all__ = ["run_cleanups", "undo_if_stopped"]

_CLEANUPS: list[Callable[[], None]] = []
_LOCK = threading.Lock()


@contextlib.contextmanager
def undo_if_stopped(cleanup: Callable[[], None]) -> Iterator[None]:
    """Registers `cleanup` for the duration of the block: `run_cleanups` calls it if the
    process is stopped without unwinding while the block runs."""
    with _LOCK:
        _CLEANUPS.append(cleanup)
    try:
        yield
    finally:
        with _LOCK:
            with contextlib.suppress(ValueError):
                _CLEANUPS.remove(cleanup)


def run_cleanups() -> None:
    """Calls every registered cleanup, the innermost first; one that fails is skipped."""
    with _LOCK:
        cleanups = list(reversed(_CLEANUPS))
    for cleanup in cleanups:
        with contextlib.suppress(Exception):
            cleanup()

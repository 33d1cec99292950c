"""Ctrl-C on the command line: every command stops within `STOP_WITHIN_S` seconds of
SIGINT, at any moment, and ends with one line saying what was kept (exit status 130).

Python delivers SIGINT as a `KeyboardInterrupt` raised in the main thread between two
bytecodes. That fails three ways, each handled here:

- raised inside a callback whose exceptions Python ignores (a garbage-collection callback
  such as XLA's, a `__del__`), it is printed as "Exception ignored" and lost: the hook
  on such exceptions (`sys.unraisablehook`) delivers it again at the next bytecode;
- raised while an extension module initialises (jaxlib, during start-up), it breaks the
  import (an ImportError, or a crash): during start-up the signal is only recorded, and
  the process ends at once (nothing has been written yet);
- while the main thread is inside compiled code (an XLA compilation, a long kernel), no
  bytecode runs, so nothing is raised until that call returns: a watchdog thread, woken
  by the signal itself (`signal.set_wakeup_fd`), ends the process `GRACE_S` after the
  signal if the main thread has not finished by then, first running the cleanups
  registered in `advsim._interrupt` (the files of a run that finished nothing) and
  printing the same line the main thread would have. Every file a resume reads is
  written atomically, so ending the process at any moment loses only the work in
  flight.

A second Ctrl-C ends the process at once, the same way. The status stays 130 under
`python -m` too, where CPython would otherwise end the process by SIGINT after an
interrupt that passed through exec'd code (`finished`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["GRACE_S", "STOP_WITHIN_S", "finished", "sigint_handling", "started"]

#: The promise: a command stops within this many seconds of Ctrl-C.
STOP_WITHIN_S = 2.0
#: Seconds the interrupted main thread gets to unwind (and Python to shut down) before
#: the watchdog ends the process; the rest of `STOP_WITHIN_S` is margin for the exit.
GRACE_S = 1.0


class _Session:
    """One command's SIGINT state, shared by the handler (main thread), the hook on
    ignored exceptions (main thread) and the watchdog (its own thread)."""

    def __init__(self, message: Callable[[], str]):
        self.message = message
        self.lock = threading.Lock()
        self.signalled_at: float | None = None  # the first SIGINT
        self.starting = True  # start-up (imports): record, never raise
        self.delivered = False  # a KeyboardInterrupt is on its way up the main thread
        self.redeliveries = 0  # SIGINTs simulated by `redeliver`, not the user's
        self.reported = False  # the line is printed (by the main thread or the watchdog)
        self.status: int | None = None  # main's exit status, once it returned
        self.seen = False  # the watchdog has seen a SIGINT
        self.wake: socket.socket | None = None  # writes to the watchdog
        self.done = threading.Event()  # the command returned

    def claim(self) -> bool:
        """True for the first caller only: it prints the line."""
        with self.lock:
            first, self.reported = not self.reported, True
            return first


_SESSION: _Session | None = None
#: What the hook on ignored exceptions writes to the watchdog (not a signal number).
_REDELIVER = b"\xff"


def interrupted() -> bool:
    """Whether a SIGINT arrived during the running command."""
    return _SESSION is not None and _SESSION.signalled_at is not None


def claim_report() -> bool:
    """For the main thread's `except KeyboardInterrupt`: True if it is the one to print
    the interruption's line (False: the watchdog is ending the process and prints it)."""
    return _SESSION is None or _SESSION.claim()


def _forget_unhandled_interrupt() -> None:
    """Clears CPython's process-wide flag "a KeyboardInterrupt went unhandled".

    CPython sets that flag when a KeyboardInterrupt leaves code run by `exec` or `eval`
    of a string (`run_eval_code_obj` in Python/pythonrun.c), even where an outer frame
    catches it, and clears it only when the next such code starts. `python -m` reads it
    after the program's `SystemExit` and, where it is set, ends the process by SIGINT
    (status -2) whatever exit status was asked. The signal lands inside such code often
    enough to be seen (1 run in 30 of a sweep interrupted during a cell): dataclasses and
    scipy.stats build methods from strings at run time. Running an empty string is
    what clears the flag. The `advsim` script exits before the flag is read, so only
    `python -m advsim.cli` needs this; a command's exit status is the one it returned."""
    exec("")  # an empty program: its only effect is the reset above


def _on_sigint(signum, frame) -> None:
    session = _SESSION
    if session is None:  # between sessions: Python's own behaviour
        raise KeyboardInterrupt
    with session.lock:
        if session.signalled_at is None:
            session.signalled_at = time.monotonic()
        if session.starting or session.delivered or session.reported:
            return  # recorded; start-up ends in `started`, the watchdog keeps the time
        session.delivered = True
    raise KeyboardInterrupt


def _unraisable(hook):
    """`sys.unraisablehook` that delivers again a KeyboardInterrupt Python ignored."""

    def unraisable(info) -> None:
        session = _SESSION
        if session is not None and issubclass(info.exc_type, KeyboardInterrupt):
            with session.lock:
                session.delivered = False
            # Not from here (a handler run inside this hook would be ignored too): the
            # watchdog simulates the signal again, for the main thread's next bytecode.
            with contextlib.suppress(OSError):
                session.wake.send(_REDELIVER)
            return
        hook(info)

    return unraisable


def _stdout_flushed() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()


def _end_now(session: _Session) -> None:
    """Ends the process without unwinding: the cleanups, the line, exit status 130 (or
    main's own status where it has returned and only Python's shutdown is slow)."""
    if session.claim():
        from advsim._interrupt import run_cleanups

        run_cleanups()
        try:
            line = session.message()
        except Exception:  # noqa: BLE001 (the line must not stop the exit)
            line = "advsim: interrupted"
        tqdm_std = sys.modules.get("tqdm.std")
        bars = tqdm_std is not None and len(getattr(tqdm_std.tqdm, "_instances", ())) > 0
        _stdout_flushed()
        with contextlib.suppress(OSError):
            os.write(2, (("\n" if bars else "") + line + "\n").encode())
        os._exit(130)
    _stdout_flushed()
    os._exit(130 if session.status is None else session.status)


def _watch(session: _Session, wakeup: socket.socket) -> None:
    """The watchdog: waits for SIGINT on the wake-up socket, then for the main thread."""
    while True:
        try:
            data = wakeup.recv(64)
        except OSError:
            return
        if not data:  # closed: the command ended without a signal
            return
        for byte in data:
            if byte == _REDELIVER[0]:
                import _thread

                with session.lock:
                    session.redeliveries += 1  # the SIGINT byte it writes is not the user's
                _thread.interrupt_main()  # `_on_sigint` runs at the main thread's next bytecode
                continue
            if byte != signal.SIGINT:
                continue
            with session.lock:
                if session.redeliveries:  # one of `_unraisable`'s, not the user's
                    session.redeliveries -= 1
                    continue
                again, session.seen = session.seen, True
                starting = session.starting
                if session.signalled_at is None:
                    session.signalled_at = time.monotonic()
                first = session.signalled_at
            if again or starting:  # a second Ctrl-C, or nothing written yet: now
                _end_now(session)
            threading.Thread(
                target=_deadline, args=(session, first), name="advsim-sigint", daemon=True
            ).start()


def _deadline(session: _Session, first: float) -> None:
    left = first + GRACE_S - time.monotonic()
    if left > 0:
        time.sleep(left)
    # Still running `GRACE_S` after Ctrl-C: the main thread is stuck in compiled code, or
    # Python's shutdown is slow. (A session that ended normally has no watchdog.)
    _end_now(session)


@contextlib.contextmanager
def sigint_handling(message: Callable[[], str]) -> Iterator[_Session | None]:
    """SIGINT handling for one command (module docstring); `message()` gives the line
    that says what was kept. Yields the session (None where signals cannot be handled:
    outside the main thread); call `started(session)` once start-up is over.

    On leaving, Python's own handling is restored, unless a SIGINT arrived: then the
    watchdog stays, so that the process still ends within `GRACE_S` of it.
    """
    global _SESSION
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    session = _Session(message)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    session.wake = writer
    previous_handler = signal.signal(signal.SIGINT, _on_sigint)
    try:
        previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        previous_fd = None
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(previous_hook)
    watchdog = threading.Thread(
        target=_watch, args=(session, reader), name="advsim-sigint-watch", daemon=True
    )
    _SESSION = session
    watchdog.start()
    try:
        yield session
    finally:
        session.done.set()
        if session.signalled_at is None:
            if previous_fd is not None:
                signal.set_wakeup_fd(previous_fd)
            signal.signal(signal.SIGINT, previous_handler)
            sys.unraisablehook = previous_hook
            _SESSION = None
            writer.close()  # the watchdog sees the end of its socket and returns
            watchdog.join()
            reader.close()


def finished(session: _Session | None, status: int) -> None:
    """Records the command's exit status (the watchdog exits with it if Python's shutdown
    outlasts `GRACE_S`), and makes it the status the process exits with
    (`_forget_unhandled_interrupt`)."""
    _forget_unhandled_interrupt()
    if session is not None:
        session.status = status


def started(session: _Session | None) -> None:
    """Ends start-up: from here SIGINT raises KeyboardInterrupt; one that arrived during
    start-up is raised now (if the watchdog has not ended the process first)."""
    if session is None:
        return
    with session.lock:
        session.starting = False
        pending = session.signalled_at is not None and not session.reported
        if pending:
            session.delivered = True
    if pending:
        raise KeyboardInterrupt

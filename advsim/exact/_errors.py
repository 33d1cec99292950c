"""The errors the exact engine raises when a propagation cannot run, loses mass or is
stopped, and the stop request a thread can make."""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["GridTooLargeError", "LostMassError"]


class GridTooLargeError(ValueError):
    """The grid an exact propagation needs would not fit in the memory allowed."""


class LostMassError(FloatingPointError):
    """More mass left the grid (or a count window) than the tolerance allows."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def _check_lost(mechs, lost_steps, far_steps, lows, highs, lost_tolerance: float, t0: int):
    for i in range(lost_steps.shape[0]):
        cumulative = np.cumsum(lost_steps[i])
        over = np.flatnonzero(cumulative > lost_tolerance)
        if over.size:
            k = int(over[0])
            far = far_steps[i][np.isfinite(far_steps[i])]
            where = (f"; the drift sent mass {far[0]:.6g} away from the grid's centre"
                     if far.size else "")  # fmt: skip
            raise LostMassError(
                f"{type(mechs[i]).__name__} (batch item {i}): by step {t0 + k}, mass "
                f"{cumulative[k]:.3g} left the grid [{lows[i]:.6g}, {highs[i]:.6g}] or a "
                f"count window, above lost_tolerance = {lost_tolerance:.3g}{where}. Pass a "
                "wider support=(lo, hi) if the law is bounded, or raise lost_tolerance",
                i,
            )


#: A thread's request to stop (`stop_when`): its `event`, checked between chunks of steps.
_STOP = threading.local()


class Stopped(Exception):
    """Raised by the engine on a thread whose `stop_when` event is set (between chunks of
    steps): a computation abandoned, by `advsim._exact_columns.ExactBeside`."""


def stop_when(event: threading.Event | None) -> None:
    """On the calling thread, makes the engine raise `Stopped` at its next chunk of steps
    once `event` is set (None: never)."""
    _STOP.event = event


def _check_stop(t0: int, steps: int) -> None:
    stop = getattr(_STOP, "event", None)
    if stop is not None and stop.is_set():
        raise Stopped(f"stopped at step {t0} of {steps}")

"""The exact columns of a record: the exact epsilon of the last model, computed once per
mechanism in a process, and, for a sweep, beside its simulations.

`exact_columns` gives `EXACT_COLUMNS` for any mechanism (`advsim.exact.last_iterate_epsilon`
where the mechanism has the capability, else empty with the reason). Each distinct
mechanism and settings is computed once per process (`_EXACT_CACHE`); a call that finds
another thread computing the same one waits for its value instead of computing it again.

`ExactBeside` computes a list of them on a thread of its own while the caller goes on
(the sweep runner starts one for its cells' exact columns, so that they run beside the
simulations and audits, whose host work leaves a core idle): the values are the very
ones `exact_columns` gives in the foreground (the engine's values depend on its
arguments only, never on what ran before: `advsim.exact._programs`), and the thread
stops between chunks of the engine's steps when told (`stop`), so an interrupt is not
held up by the rest of a computation.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable, Iterable

import jax
import numpy as np

from advsim._mechanism import AbstractMechanism
from advsim._validation import check_delta
from advsim.exact import (
    DEFAULT_CELLS_PER_SD,
    check_scalar_law,
    estimate_seconds,
    grid_work,
    last_iterate_epsilon,
)
from advsim.exact._cost import duration
from advsim.exact._plan import check_ladder

__all__ = [
    "BESIDE_THREAD",
    "EXACT_COLUMNS",
    "EXACT_MAX_WORK",
    "EXACT_REFINEMENTS",
    "EXACT_RTOL",
    "ExactBeside",
    "exact_columns",
    "timed_exact_columns",
]

EXACT_COLUMNS = ("exact_epsilon", "exact_error", "exact_error_kind", "exact_note")
"""The exact columns of a record or table row, in table order (`exact_columns`):
`exact_epsilon`, the exact epsilon(delta) of the last model (the finest grid's value);
`exact_error`, its numerical error as a refinement estimate (the change between the two
finest grids, plus the lost mass's effect; never a bound); `exact_error_kind`, what the
error is ("refinement estimate"); `exact_note`, why the columns are empty, where they are."""
EXACT_REFINEMENTS = 3
"""The most grids of the exact engine by default: 6, 12 and 24 nodes per noise sd (the
engine's own default count, and the sweeps' most, `advsim audit` included); with
`EXACT_RTOL` a row stops at the second grid once its error estimate is within it."""
EXACT_RTOL = 1e-4
"""The relative tolerance `exact_columns` asks of the exact engine's error estimate
(`advsim.exact.last_iterate_epsilon`'s `rtol`): grids are added until the change between
the two finest is at most 1e-4 of epsilon, or `EXACT_REFINEMENTS` grids are reached. A
row thus drops the third grid only where its estimate is already within 1e-4 (the fixed
three grids state errors up to about 1e-3 of epsilon on the accuracy table's rows,
`docs/guide/exact.md`), and keeps the three-grid value and error otherwise."""
EXACT_MAX_WORK = 1e8
"""`exact_columns` skips (with a note) a mechanism whose coarsest grid holds more than this
many nodes x steps (x count components): about a minute of CPU and more. The linear
process at T = 1000 takes 1.5e7 (10 s with its compilation); at T = 10^4, q = 0.001,
sigma = 0.8 it takes 8.9e8 (over 20 minutes)."""


#: Finished exact results (`exact_columns`), by mechanism and settings: the last ones kept.
_EXACT_CACHE: collections.OrderedDict = collections.OrderedDict()
_EXACT_CACHE_SIZE = 1024
#: The keys being computed now, each with the event its computing thread sets when done.
_EXACT_RUNNING: dict = {}
_EXACT_LOCK = threading.Lock()
#: The name of an `ExactBeside`'s thread (the audit's stopwatches leave its compilations out).
BESIDE_THREAD = "advsim-exact-beside"
#: Seconds each value computed by an `ExactBeside` took, by key, until a caller reads them
#: (`timed_exact_columns`).
_SECONDS_BESIDE: dict = {}


def _fingerprint(mechanism) -> tuple | None:
    """A hashable key of everything that determines a mechanism's law: its pytree structure
    (class and static fields) and its leaves' values; None where one cannot be made."""
    try:
        leaves, treedef = jax.tree.flatten(mechanism)
        parts = []
        for leaf in leaves:
            if isinstance(leaf, bool | int | float | complex | str | None):
                parts.append((type(leaf).__name__, leaf))
            else:
                a = np.asarray(leaf)
                if a.dtype == object:
                    return None
                parts.append((a.dtype.str, a.shape, a.tobytes()))
        key = (treedef, tuple(parts))
        hash(key)
        return key
    except (TypeError, ValueError):  # an unhashable static field, a leaf numpy cannot read
        return None


def exact_columns(mechanism: AbstractMechanism, delta: float, **settings) -> dict:
    """The `EXACT_COLUMNS` of a mechanism: the exact epsilon(delta) of its last model where
    it has the capability, else empty with the reason.

    A mechanism has the capability when it is an `advsim.AbstractScalarLaw` that passes
    `advsim.exact.check_scalar_law` (scalar model, gradients functions of (m, t), no
    per-example data): then `advsim.exact.last_iterate_epsilon(mechanism, delta,
    refinements=..., rtol=..., cells_per_sd=...)` gives `exact_epsilon` (the finest grid's
    value) and `exact_error` (the change between the two finest grids: a refinement
    estimate, not a bound: `exact_error_kind`), on the adaptive ladder: grids are added
    until that error is at most `rtol` times epsilon, at least 2, at most `refinements`
    (a row that does not reach it keeps the finest grid's value and error). A
    mechanism without it (a vector model, per-example data) gets None in every column and
    the reason in `exact_note`; so does one the engine refuses at these parameters (a grid
    over the memory cap, mass leaving the grid, a field not finite), with the engine's
    message, and one whose coarsest grid exceeds `max_work` nodes x steps (minutes of
    CPU: call `advsim.exact.last_iterate_epsilon` for it): nothing is raised for a missing
    exact value.

    Each distinct mechanism (class, static fields and array values) is computed once per
    process: a replicate, or any later row with the same mechanism and settings, reuses it.

    Args:
        mechanism: any advsim mechanism (for an audit: the one the adversary crafted).
        delta: delta in (0, 1).
        **settings: optional keywords:
            `refinements`, the most grids, each twice as fine as the last (2-6); with
            `rtol=None`, the exact count (1-6, where 1 gives no estimate; default
            `EXACT_REFINEMENTS`);
            `rtol`, the relative tolerance on the error estimate, in (0, 1), or None for
            a fixed `refinements` grids (default `EXACT_RTOL`, 1e-4);
            `cells_per_sd`, nodes per noise sd of the coarsest grid;
            `max_work`, the largest coarsest grid computed, in nodes x steps x count
            components (None: no limit; default `EXACT_MAX_WORK`);
            `progress`, the engine's tqdm bar over the steps (None: automatic for long
            runs; default False).

    Returns:
        `{"exact_epsilon", "exact_error", "exact_error_kind", "exact_note"}`.
    """
    return timed_exact_columns(mechanism, delta, **settings)[0]


def timed_exact_columns(
    mechanism: AbstractMechanism,
    delta: float,
    *,
    refinements: int = EXACT_REFINEMENTS,
    rtol: float | None = EXACT_RTOL,
    cells_per_sd: float = DEFAULT_CELLS_PER_SD,
    max_work: float | None = EXACT_MAX_WORK,
    progress: bool | None = False,
) -> tuple[dict, float | None]:
    """`(exact_columns(...), seconds)`: the seconds its computation took, here or on an
    `ExactBeside` thread (reported once, to the first caller that reads the value), or
    None for a value found in the cache. The arguments are `exact_columns`'s."""
    delta, refinements, rtol = _checked(delta, refinements, rtol)
    try:
        check_scalar_law(mechanism)
    except (TypeError, ValueError) as err:
        note = f"no exact value: {_message(err)}"
        return {**dict.fromkeys(EXACT_COLUMNS), "exact_note": note}, None
    return _columns(mechanism, delta, refinements, rtol, cells_per_sd, max_work, progress)


def _checked(delta, refinements, rtol) -> tuple:
    delta = check_delta("delta", delta)
    refinements, rtol = check_ladder(refinements, rtol)
    return delta, refinements, rtol


def _key(mechanism, delta, refinements, rtol, cells_per_sd, max_work):
    """The cache key of a mechanism and settings (None where the mechanism has none)."""
    key = _fingerprint(mechanism)
    if key is None:
        return None
    return (key, float(delta), int(refinements), rtol, float(cells_per_sd), max_work)


def _columns(mechanism, delta, refinements, rtol, cells_per_sd, max_work, progress):
    """`(the columns, seconds the computation took or None for a value found)`: from the
    cache; else, where another thread is computing the same (`ExactBeside`), its value
    once it is done; else computed here (and cached). Arguments checked."""
    key = _key(mechanism, delta, refinements, rtol, cells_per_sd, max_work)
    while key is not None:
        with _EXACT_LOCK:
            try:
                found = _EXACT_CACHE.get(key)
            except (TypeError, ValueError):  # a key that cannot be compared: no caching
                key = None
                break
            if found is not None:
                _EXACT_CACHE.move_to_end(key)
                return dict(found), _SECONDS_BESIDE.pop(key, None)
            running = _EXACT_RUNNING.get(key)
            if running is None:
                _EXACT_RUNNING[key] = threading.Event()
                break
        running.wait()  # then read its value; if it failed, compute it here
    tic = time.perf_counter()
    try:
        out = _exact_or_note(
            mechanism, delta, refinements, rtol, cells_per_sd, max_work, progress
        )  # fmt: skip
        seconds = time.perf_counter() - tic
        if key is not None:
            with _EXACT_LOCK:
                _EXACT_CACHE[key] = dict(out)
                while len(_EXACT_CACHE) > _EXACT_CACHE_SIZE:
                    _EXACT_CACHE.popitem(last=False)
                if threading.current_thread().name == BESIDE_THREAD:  # for its reader
                    _SECONDS_BESIDE[key] = seconds
    finally:
        if key is not None:
            with _EXACT_LOCK:
                _EXACT_RUNNING.pop(key).set()
    return out, seconds


def _exact_or_note(
    mechanism, delta, refinements, rtol, cells_per_sd, max_work, progress
) -> dict:
    empty = dict.fromkeys(EXACT_COLUMNS)
    try:
        if max_work is not None:
            work = grid_work(mechanism, cells_per_sd)
            if work > max_work:
                seconds = estimate_seconds(
                    mechanism, delta, cells_per_sd=cells_per_sd, refinements=refinements
                )  # fmt: skip
                return {**empty, "exact_note": (
                    f"skipped: predicted to take about {duration(seconds)} on 2 CPU cores "
                    f"(advsim.exact.estimate_seconds; the coarsest grid would be {work:.2g} "
                    f"nodes x steps x count components at {mechanism.steps:,} steps, above "
                    f"max_work = {max_work:.2g}); call advsim.exact.last_iterate_epsilon"
                )}  # fmt: skip
        result = last_iterate_epsilon(
            mechanism, delta, refinements=refinements, rtol=rtol, cells_per_sd=cells_per_sd,
            progress=progress,
        )  # fmt: skip
    except (ValueError, ArithmeticError) as err:  # out of the engine's reach (ValueError:
        # a grid over the memory cap, a parameter; FloatingPointError: lost mass, a field)
        return {**empty, "exact_note": f"exact engine: {_message(err)}"}
    error = float(result.error)
    note = None
    if not math.isfinite(error):  # nan: one grid; inf: the engine's estimate is unbounded
        note = f"exact_error is {error}: no finite refinement estimate (advsim.exact)"
    elif not result.error_reliable:  # outside the regime where its coverage was measured
        note = (
            f"exact_error may not cover the actual error: observed order "
            f"{result.observed_order:.3g} > 3, where the estimate's measured coverage failed"
            f" (docs/guide/exact.md); the previous grid difference, "
            f"{abs(result.differences[-2]):.3g}, covered every such case"
            if math.isfinite(result.observed_order) and result.observed_order > 3.0
            else "unresolved: epsilon beyond the grid's float64 resolution (advsim.exact)"
        )
    return {
        "exact_epsilon": float(result.epsilon),
        "exact_error": error,
        "exact_error_kind": result.error_kind,
        "exact_note": note,
    }


def _message(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__



class ExactBeside:
    """Computes exact columns on a thread of its own, in order, while the caller goes on.

    Each job is a function of no arguments, called on the thread, that returns the
    `(mechanism, delta, settings)` of one `exact_columns` call (`settings`: its keyword
    arguments but `progress`), or None to skip it. Its value goes into the cache that
    `exact_columns` reads, and a foreground call that asks for it while it is being
    computed waits for it: no value is computed twice. The seconds each took are kept
    for `timed_exact_columns`. A job that raises is skipped (the foreground call
    computes it, and raises, where it belongs).

    `stop()` asks the thread to stop (between jobs, and inside the engine between its
    chunks of 100 steps: 0.45 s a chunk at T = 3000, q = 0.01 on 2 CPU cores; a chunk's
    compilation, or the grid of a very long run, takes seconds) and waits for it.

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> mech = LinearProcess(steps=5, sampling_prob=0.1, noise_multiplier=1.0)
        >>> beside = ExactBeside([lambda: (mech, 1e-5, {})])
        >>> beside.stop(finish=True)  # wait for every job
        >>> round(exact_columns(mech, 1e-5)["exact_epsilon"], 4)  # the value it computed
        1.8395
    """

    def __init__(self, jobs: Iterable[Callable[[], tuple | None]]):
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(list(jobs),), name=BESIDE_THREAD, daemon=True
        )
        self._thread.start()

    def _run(self, jobs) -> None:
        from advsim.exact._api import Stopped, stop_when

        stop_when(self._stop)
        for job in jobs:
            if self._stop.is_set():
                return
            try:
                made = job()
                if made is None:
                    continue
                mechanism, delta, settings = made
                timed_exact_columns(mechanism, delta, **settings, progress=False)
            except Stopped:
                return
            except Exception:  # noqa: BLE001, S112 (the foreground call raises it)
                continue

    def stop(self, *, finish: bool = False, timeout: float | None = None) -> None:
        """Stops the thread (`finish`: after its last job) and waits for it (at most
        `timeout` seconds, where given: the thread is a daemon, and goes on to its next
        stopping point unwaited)."""
        if not finish:
            self._stop.set()
        self._thread.join(timeout)


r"""What an exact propagation will cost, known before any of it runs.

`estimate_seconds(mechanism, delta)` predicts the wall time of
`last_iterate_epsilon(mechanism, delta)` from the grids it will run (their nodes, FFT
sizes, count components and steps, all planned on the host) and a cost per unit of work
measured on a 2-core CPU. `last_iterate_epsilon` warns with `ExactCostWarning` before a
computation predicted to take more than `WARN_SECONDS`, and again before the log-space
ladder (an epsilon beyond `resolution_limit(delta)`) when that one is.
"""

from __future__ import annotations

import math
import warnings

from advsim._validation import check_delta, check_int, check_positive
from advsim.exact._plan import NOISE_SDS, ladder, layout

__all__ = ["WARN_SECONDS", "ExactCostWarning", "estimate_seconds"]

#: Computations predicted to take longer than this (seconds) warn before they start.
WARN_SECONDS = 60.0
#: Seconds per FFT point x log2(FFT points) x step of the grid propagation (both worlds
#: in one complex FFT), measured on 2 cores.
FFT_SECONDS = 2.5e-9
#: Seconds per part x component x step of the drift (deposit and fields), both worlds.
DRIFT_SECONDS = 3e-9
#: Seconds per node x kernel tap x step of the log-space convolution (both worlds, the
#: maximum and the sum), measured on 2 cores.
TAP_SECONDS = 1.2e-8
#: Seconds per compilation of a propagation (one per grid shape).
COMPILE_SECONDS = 3.0


class ExactCostWarning(UserWarning):
    """An exact propagation is predicted to run longer than `WARN_SECONDS`; raised (as a
    warning) before it starts, with the estimate and how to make it cheaper."""


def _grid_seconds(mech, cells_per_sd, refinements, support) -> float:
    """The grid propagation's time: each of `refinements` grids (twice as many nodes as
    the one before, at most) for every step, in chunks of 100 steps."""
    lay = layout(mech, cells_per_sd, support)
    steps = math.ceil(mech.steps / 100) * 100 if mech.steps > 100 else mech.steps
    components = 3 * math.prod(lay.windows)
    parts = 2 if lay.split else 1
    total = 0.0
    for k in range(refinements):
        nodes = lay.nodes * 2**k
        kernel = int(math.ceil(NOISE_SDS * lay.widest / (lay.spacing / 2**k))) + 1
        fft = ladder(nodes + (4 if lay.projected else 1) * kernel + 8)
        per_step = FFT_SECONDS * fft * math.log2(fft) + DRIFT_SECONDS * nodes * parts * components
        total += steps * per_step
    return total + COMPILE_SECONDS * min(refinements, 2)


def _log_seconds(mech, delta, cells_per_sd, refinements, support) -> float:
    """The log-space ladder's time, sized for the first epsilon it tries (`targets`)."""
    from advsim.exact._logladder import _chunk, log_plan_work, targets

    steps = math.ceil(mech.steps / _chunk(mech.steps)) * _chunk(mech.steps)
    work = log_plan_work(mech, delta, cells_per_sd=cells_per_sd, refinements=refinements,
                         support=support, eps_max=targets(mech, delta)[0])  # fmt: skip
    shapes = len({nodes for nodes, _, _ in work})
    total = sum(steps * nodes * (TAP_SECONDS * taps + DRIFT_SECONDS * 3 * components)
                for nodes, taps, components in work)  # fmt: skip
    return total + COMPILE_SECONDS * shapes


def estimate_seconds(
    mechanism,
    delta: float = 1e-5,
    *,
    cells_per_sd: float = 6.0,
    refinements: int = 3,
    support: tuple[float, float] | None = None,
    log_space: bool = False,
) -> float:
    r"""The predicted wall time (seconds, on 2 CPU cores) of `last_iterate_epsilon`.

    Planned on the host from the grids the call would run: for each of `refinements`
    grids, its steps x (the FFT's points x $\log_2$ points, plus the drift's nodes x count
    components), and a compilation per grid shape; with `log_space`, the log-space ladder
    that an epsilon beyond `resolution_limit(delta)` needs (nodes x kernel taps per step).
    Each unit's cost was measured on a 2-core CPU (`docs/guide/exact.md`, "Its cost"):
    the estimate is an order of magnitude (measured within a factor of about 2 to 3 of the
    actual time), not a promise. It assumes the finer grids are not trimmed, so it errs
    high for a law that stays narrow.

    Args:
        mechanism: an `AbstractScalarLaw` mechanism.
        delta: $\delta$ (sets the log-space grids' depth).
        cells_per_sd, refinements, support: as in `last_iterate_epsilon`.
        log_space: estimate the log-space ladder instead of the grid ladder.

    Raises:
        ValueError: `delta`, `cells_per_sd` or `refinements` out of range, and what
            `last_iterate_epsilon` raises for a construction it cannot carry.

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> mech = LinearProcess(steps=100_000, sampling_prob=0.01, noise_multiplier=0.6)
        >>> estimate_seconds(mech, 1e-5) > 3600  # hours: last_iterate_epsilon warns first
        True
    """
    delta = check_delta("delta", delta)
    cells_per_sd = check_positive("cells_per_sd", cells_per_sd)
    refinements = check_int("refinements", refinements, minimum=1, maximum=6)
    if log_space:
        return _log_seconds(mechanism, delta, cells_per_sd, refinements, support)
    return _grid_seconds(mechanism, cells_per_sd, refinements, support)


def warn_if_slow(seconds: float, what: str, how: str, stacklevel: int = 4) -> None:
    """Warn with `ExactCostWarning` when `seconds` exceeds `WARN_SECONDS`."""
    if seconds > WARN_SECONDS:
        warnings.warn(
            f"{what} is predicted to take about {duration(seconds)} on 2 CPU cores "
            f"(advsim.exact.estimate_seconds); {how}",
            ExactCostWarning,
            stacklevel=stacklevel,
        )


def warn_if_slow_batch(mechs, buckets, nodes, delta, cells_per_sd, refinements, support):
    """`warn_if_slow` for a batch run in `buckets` (each on its largest member's grids, by
    `nodes`): the estimate of each bucket's largest member, times the bucket's size."""
    largest = [max(bucket, key=nodes.__getitem__) for bucket in buckets]
    seconds = sum(
        len(bucket) * estimate_seconds(mechs[i], delta, cells_per_sd=cells_per_sd,
                                       refinements=refinements, support=support)
        for bucket, i in zip(buckets, largest, strict=True)
    )  # fmt: skip
    batch = f", a batch of {len(mechs)}" if len(mechs) > 1 else ""
    warn_if_slow(
        seconds,
        f"the exact epsilon of {type(mechs[0]).__name__} (T = {mechs[0].steps}{batch})",
        "lower cells_per_sd or refinements, pass rtol, or leave the exact epsilon out",
        stacklevel=5,
    )


def duration(seconds: float) -> str:
    """A predicted duration in the unit a reader takes in: '40 s', '3 min', '12.8 h'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

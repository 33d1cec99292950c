r"""The noise multiplier whose composition epsilon (dp_accounting's PLD) is a target: for
one run (`calibrate_noise_multiplier`) or for several horizons at once
(`calibrate_noise_multipliers`, what a sweep over T asks for).

The contract of both: sigma with `composition_epsilon(delta, ..., sigma) <= target <
composition_epsilon(delta, ..., sigma - tol)`, on the same grid. The epsilons are
`advsim.bounds.composition_epsilon`'s own (dp_accounting's numbers, cached), so
`bounds_for` at the returned sigma reads the one the search found.

The search, coarse to fine, for one number of canary steps $n$:

1. On the coarse grid (1e-2: 1/100 of the default's points, a few ms a run), on log sigma
   and log(1 + eps), where the coarse epsilon is nearly linear: secant steps from the
   central-limit approximation of the subsampled Gaussian (`_central_limit_sigma`) until
   the root is bracketed (widened by doubling or halving sigma where they do not reach
   it), then Brent's method on the bracket to 1e-6 relative.
2. Secant steps on each grid 10 times finer (1e-3, ...), each started from the coarser
   grid's root and slope, to the tolerance.
3. On the requested grid: one run at the root predicted from the last two grids' roots (a
   grid 10 times finer moves the root by `_FINER_SHIFT` times what the last refinement
   moved it) and, when the slope puts the root within tol of it, the run that completes
   the pair sigma, sigma - tol: two runs on the requested grid, the least the contract
   can be checked with. Otherwise a pair around the corrected estimate, regula falsi
   between misses, bisection as the last resort (`_settle`).

At `advsim audit`'s cells (q = 0.01, eps = 8, delta = 1e-5, T = 1..1000, grid 1e-4) that
is 5-6 coarse runs, 2-3 on 1e-3 and 2 on 1e-4 per T, and the runs on 1e-4 (about 0.2 s
each, `advsim.bounds._composition`) are 80% of the time: 4.1-5.9 s of CPU for the seven
T, against 12-16 s for the previous search (2-3 runs on 1e-4 per T through
dp_accounting's own loops, 0.5-0.9 s each), both measured in one script on a 2-core
machine whose cores other jobs kept busy (11.3 s was the previous search's on a quiet
one).

Several horizons (`calibrate_noise_multipliers`) share one search per distinct $n$, run on
up to two threads: a search holds the interpreter lock only between its array operations
(FFTs, complex powers and the other array arithmetic release it; a probe thread beside a
run on 1e-4 waited at most 8 ms for it, 3 ms at the 99th percentile), so two searches
can run on two cores at once (on the busy machine above this process got one core's worth
either way: 1 and 2 threads took the same time). Every result is cached under the arguments of
`calibrate_noise_multiplier`, so a sweep that calibrates its cells up front
(`advsim.sweep.run_sweep`) finds each cell's sigma there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.optimize import brentq
from tqdm.auto import tqdm

from advsim._cores import usable_cores
from advsim._validation import check_delta, check_int, check_positive, check_probability
from advsim.bounds._composition import (
    _CALIBRATED,
    _PROGRESS_SECONDS,
    _VDI,
    DeltaOutOfReachError,
    _check,
    _estimated_seconds,
    _pld_epsilon,
)
from advsim.bounds._gdp import gdp_epsilon, gdp_mu
from advsim.bounds._pld_fast import smallest_sigma

__all__ = ["calibrate_noise_multiplier", "calibrate_noise_multipliers"]

# The coarsest grid of the search.
_COARSE_VDI = 1e-2
# The root on a grid 10 times finer than the last, predicted as r_last + _FINER_SHIFT *
# (r_before_last - r_last) (the roots of q = 0.01, eps = 8, delta = 1e-5 on 1e-2, 1e-3 and
# 1e-4 give -0.017 at T = 5, -0.015 at T = 50, -0.013 at T = 500, -0.012 at T = 1000). It
# only places the first run on the requested grid: a wrong value costs one run, never the
# result.
_FINER_SHIFT = -0.014
# d log(1 + eps) / d log sigma near the roots of `advsim audit`'s cells (-1.9 at T = 1, -2.8
# at T = 1000): the coarse search's first step.
_LOG_SLOPE = -2.5
# Threads of `calibrate_noise_multipliers` (one search each).
_MAX_WORKERS = 2


def _levels(vdi: float) -> list[float]:
    """The grids of the search, coarse to fine: vdi times 10^k, k >= 0, the coarsest at
    most `_COARSE_VDI` (just [vdi] for vdi > _COARSE_VDI / 10)."""
    k = 0
    while vdi * 10 ** (k + 1) <= _COARSE_VDI * (1 + 1e-9):
        k += 1
    return [vdi * 10**j for j in range(k, 0, -1)] + [vdi]


def _central_limit_sigma(target: float, delta: float, q: float, n: int) -> float:
    r"""sigma at which $\mu = q\sqrt{n(e^{1/\sigma^2} - 1)}$-GDP (the central-limit
    approximation of n Poisson-subsampled Gaussian steps, arXiv:1905.02383 Theorem 3.5)
    gives the target: a starting point only (the PLD root is 1.1 times it at q = 0.01,
    eps = 8, T = 1..1000)."""
    mu = gdp_mu(target, delta)
    return 1.0 / math.sqrt(math.log1p((mu / (q * math.sqrt(n))) ** 2))


def _secant(g, x0: float, slope: float, xtol: float, max_steps: int = 8):
    """Secant iteration on a decreasing g from x0 with a first slope; returns the root
    estimate and the last secant slope (kept when a new one is not negative and finite)."""
    x_prev, g_prev = x0, g(x0)
    x = x0 - g_prev / slope
    for _ in range(max_steps):
        if not x > 0:
            x = 0.5 * x_prev
        gx = g(x)
        if x != x_prev:
            s = (gx - g_prev) / (x - x_prev)
            if math.isfinite(s) and s < 0:
                slope = s
        x_new = x - gx / slope
        x_prev, g_prev, x = x, gx, x_new
        if abs(x - x_prev) <= xtol:
            break
    return x, slope


def _settle(g, r: float, slope: float, tol: float, known=None, max_tries: int = 10) -> float:
    """sigma with g(sigma) <= 0 < g(sigma - tol), searched around the estimate r.

    Each try evaluates g at r + 0.45 tol and, when the slope puts the root within tol
    below, at r - 0.55 tol (an interval of width tol that holds r); a miss moves r by
    regula falsi between the nearest points of either sign (or a secant step when all
    points have one sign). After `max_tries` misses, plain bisection on the bracket found;
    it returns `hi` with g(hi) <= 0 and g(lo) > 0 for some lo in [hi - tol, hi).
    `known`: values of g already computed, {sigma: g(sigma)}.
    """
    known = dict(known or {})

    def at(x):
        if x not in known:
            known[x] = g(x)
        return known[x]

    def sides():
        pos = [x for x, v in known.items() if v > 0]
        neg = [x for x, v in known.items() if v <= 0]
        return (max(pos) if pos else None), (min(neg) if neg else None)

    for _ in range(max_tries):
        lo, hi = sides()
        if lo is not None and hi is not None and 0 < hi - lo <= tol:
            at(hi - tol)  # g(hi - tol) > 0 whenever g decreases
            return hi
        a = r + 0.45 * tol
        ga = at(a)
        # Evaluate a - tol only when the root may lie within tol below a (by the slope).
        if ga <= 0 and a - ga / slope >= a - 1.5 * tol and at(a - tol) > 0:
            return a
        lo, hi = sides()
        if lo is not None and hi is not None and lo < hi:
            glo, ghi = known[lo], known[hi]
            r = lo - glo * (hi - lo) / (ghi - glo)
            # Keep the next pair inside the bracket.
            r = min(max(r, lo + 0.55 * tol), hi - 0.45 * tol)
        else:
            x = lo if lo is not None else hi
            pts = sorted(known, key=lambda p: abs(p - x))[:2]
            if len(pts) == 2 and pts[0] != pts[1]:
                s = (known[pts[0]] - known[pts[1]]) / (pts[0] - pts[1])
                if math.isfinite(s) and s < 0:
                    slope = s
            r = x - known[x] / slope
            if not r > 0:
                r = 0.5 * x
    lo, hi = sides()
    while lo is None:  # widen downwards until g > 0 (g decreases in sigma)
        lo = 0.5 * min(known)
        lo = lo if at(lo) > 0 else None
    while hi is None or hi < lo:
        hi = 2.0 * max(known)
        hi = hi if at(hi) <= 0 else None
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if at(mid) > 0 else (lo, mid)
    return hi


def _settle_near(g, r: float, slope: float, tol: float) -> float:
    """`_settle`'s answer from a close estimate r of the root: g at r, and, when the slope
    puts the root within tol of r, at r - tol (g(r) <= 0: r is the answer if g(r - tol) >
    0) or at r + tol (g(r) > 0: r + tol is, if g(r + tol) <= 0). Two evaluations when r is
    within about tol of the root; `_settle` from the corrected estimate otherwise."""
    gr = g(r)
    root = r - gr / slope
    known = {r: gr}
    if gr <= 0 and r - 0.98 * tol < root and r - tol > 0:
        known[r - tol] = g(r - tol)
        if known[r - tol] > 0:
            return r
    elif gr > 0 and root < r + 0.98 * tol:
        known[r + tol] = g(r + tol)
        if known[r + tol] <= 0:
            return r + tol
    return _settle(g, root, slope, tol, known)


def _calibrate_gaussian(target: float, delta: float, n: int, tol: float) -> float:
    """q = 1: composition is sqrt(n)/sigma-GDP exactly (`composition_epsilon`'s closed
    form), whose sigma for the target is sqrt(n) / gdp_mu(target, delta)."""

    def gap(sigma):
        return gdp_epsilon(delta, math.sqrt(n) / sigma) - target

    sigma = math.sqrt(n) / gdp_mu(target, delta)
    return _settle(gap, sigma, -target / sigma, tol)


def _calibrate_pld(target, delta, q, n, vdi, tol, progress) -> float:
    """The search of the module docstring for $q < 1$."""
    levels = _levels(vdi)
    # The grids hold about 1/sigma^2 points: below sigma_min the requested one would not
    # fit in memory (`_pld_fast.MAX_GRID_POINTS`), so the search stays above it.
    sigma_min = smallest_sigma(q, vdi)
    bars = []  # the progress bar, once the coarse search has estimated the rest

    def gap_at(level):
        def gap(sigma):
            eps = _pld_epsilon(q, sigma, n, level, delta)
            for bar in bars:
                bar.update(1)
                bar.set_postfix(vdi=f"{level:g}", sigma=f"{sigma:.6g}", eps=f"{eps:.6g}")
            return eps - target

        return gap

    # Coarsest grid, on log sigma and log(1 + eps), where the coarse epsilon is nearly
    # linear: secant steps from the central-limit guess until the root is bracketed (each
    # aims a little past it), then Brent's method on the bracket to 1e-6 relative (the
    # coarse root places the finer grids' first runs).
    top = gap_at(levels[0])
    seen: dict[float, float] = {}  # coarse gap per sigma

    def log_gap(x):
        sigma = math.exp(x)
        seen[sigma] = gap = top(sigma)
        return math.log1p(gap + target) - math.log1p(target)

    floor = math.log(sigma_min)
    x = max(math.log(_central_limit_sigma(target, delta, q, n)), floor)
    fx = log_gap(x)
    lo, hi = (x, None) if fx > 0 else (None, x)  # log sigma with the gap > 0, <= 0
    slope = _LOG_SLOPE
    for _ in range(4):
        if lo is not None and hi is not None:
            break
        x_new = max(min(x - 1.05 * fx / slope, x + 1.0), x - 1.0, floor)
        if x_new == x:  # at sigma_min with the gap <= 0
            break
        f_new = log_gap(x_new)
        s = (f_new - fx) / (x_new - x)
        slope = s if math.isfinite(s) and s < 0 else slope
        x, fx = x_new, f_new
        if fx > 0:
            lo = x if lo is None else max(lo, x)
        else:
            hi = x if hi is None else min(hi, x)
    # Else widen: double sigma until the gap is <= 0, halve it (down to sigma_min) until
    # it is > 0.
    while hi is None:
        hi = lo + math.log(2.0)
        lo, hi = (hi, None) if log_gap(hi) > 0 else (lo, hi)
    while lo is None:
        if hi <= floor:
            raise ValueError(
                f"target_epsilon={target!r} needs a noise multiplier below {sigma_min:.3g}, "
                f"too small for the PLD grid value_discretization_interval={vdi!r}; use a "
                "coarser grid or a smaller target_epsilon"
            )
        lo = max(hi - math.log(2.0), floor)
        lo, hi = (lo, hi) if log_gap(lo) > 0 else (None, lo)
    if len(levels) == 1:
        r = brentq(top, math.exp(lo), math.exp(hi), xtol=tol)
        return _settle(top, r, -target / r, tol)
    r = math.exp(brentq(log_gap, lo, hi, xtol=1e-6, rtol=1e-15))
    # The coarse slope from the run nearest the root and the next nearest at least 1e-5 r
    # from it (the coarse epsilon's slope varies by < 1% over 1e-7 r: measured at T = 10
    # and 1000), else over 2% of sigma.
    near = sorted(seen, key=lambda sigma: abs(sigma - r))
    apart = [sigma for sigma in near[1:] if abs(sigma - near[0]) >= 1e-5 * r]
    slope = (seen[near[0]] - seen[apart[0]]) / (near[0] - apart[0]) if apart else math.nan
    if not (math.isfinite(slope) and slope < 0):
        slope = (top(1.02 * r) - top(r)) / (0.02 * r)
    if not (math.isfinite(slope) and slope < 0):
        slope = -target / r
    roots = [r]
    # Up-front estimate of the rest: about 2 runs on the requested grid near r, and a
    # tenth of one per secant step on each grid in between.
    seconds = _estimated_seconds(q, r, n, vdi) * (2.0 + 0.3 * (len(levels) - 2))
    if progress is None:
        progress = seconds > _PROGRESS_SECONDS
    with tqdm(
        desc=f"calibrate sigma (n={n}, q={q:g}, ~{seconds:.0f} s)",
        unit="PLD",
        disable=not progress,
        leave=False,
    ) as bar:
        bars.append(bar)
        # Each finer grid starts from the coarser one's root and slope (their roots
        # differ by ~ the coarser grid's pessimism: a few secant steps).
        for level in levels[1:-1]:
            r, slope = _secant(gap_at(level), r, slope, tol)
            roots.append(r)
        if len(roots) >= 2:
            r = roots[-1] + _FINER_SHIFT * (roots[-2] - roots[-1])
        return _settle_near(gap_at(levels[-1]), r, slope, tol)


def _checked(target_epsilon, delta, value_discretization_interval, tol):
    return (
        check_positive("target_epsilon", target_epsilon),
        check_delta("delta", delta),
        check_positive("value_discretization_interval", value_discretization_interval),
        check_positive("tol", tol),
    )


def _calibrate(target, delta, q, n, vdi, tol, progress) -> float:
    """One search (uncached), with the delta error naming the calibration."""
    if q == 1.0:
        return _calibrate_gaussian(target, delta, n, tol)
    try:
        return _calibrate_pld(target, delta, q, n, vdi, tol, progress)
    except DeltaOutOfReachError as err:
        raise DeltaOutOfReachError(
            f"calibrate_noise_multiplier: delta={delta!r} is out of the PLD accountant's "
            f"reach ({err})"
        ) from None


def calibrate_noise_multiplier(
    target_epsilon,
    delta,
    steps,
    sampling_prob,
    *,
    canary_steps=None,
    value_discretization_interval=_VDI,
    tol=1e-6,
    progress: bool | None = None,
) -> float:
    r"""The smallest noise multiplier whose composition epsilon is at most the target.

    Returns sigma with `composition_epsilon(delta, ..., sigma) <= target_epsilon <
    composition_epsilon(delta, ..., sigma - tol)` (same discretization; the accountant is
    dp_accounting's PLD, as in `composition_epsilon`, whose numbers these are, cached).

    The search, coarse to fine (the speed guide has the timings):

    1. On the coarse grid (1e-2: 1/100 of the default's points): secant steps from the
       central-limit approximation of the subsampled Gaussian until the root is
       bracketed, then Brent's method.
    2. A few secant steps on each grid 10 times finer (1e-3), started from the coarser
       grid's root and slope.
    3. On the requested grid: a run at the root predicted from the last two grids' roots
       and, usually, the one run that completes the pair sigma, sigma - tol (2 accountant
       runs); a pair around the corrected estimate, regula falsi between misses,
       bisection as the last resort otherwise.

    For $q = 1$ the composition is $\sqrt{n}/\sigma$-GDP exactly (as in
    `composition_epsilon`), and sigma comes from the closed form, with the same contract.
    Results are cached per arguments (a sweep's cells with the same run share one
    search; `calibrate_noise_multipliers` fills the same cache for several T at once),
    and the composition epsilon at the returned sigma is cached for `bounds_for`.

    Args:
        target_epsilon: the epsilon to reach, > 0.
        delta: $\delta \in (0, 1)$; for $q < 1$ above the accountant's mass at infinite
            loss (~1.5e-15).
        steps: $T \ge 1$.
        sampling_prob: $q \in (0, 1]$.
        canary_steps: $n \in [1, T]$, or those steps (distinct, in $[1, T]$; only their number
            is read) (default $T$).
        value_discretization_interval: the PLD grid spacing, > 0.
        tol: absolute tolerance on sigma, > 0.
        progress: a tqdm bar (stderr) counting accountant runs after the coarse search,
            with an up-front estimate of their time in its title; default: when that
            estimate exceeds 5 s.

    Returns:
        sigma with `composition_epsilon(delta, ..., sigma) <= target_epsilon` (same
        discretization), and epsilon above the target at sigma - tol.

    Raises:
        ValueError: on invalid inputs; for a delta the accountant cannot reach (the
            message gives the range), or a target that needs a noise multiplier too
            small for the grid (it names value_discretization_interval).

    Example:
        >>> round(calibrate_noise_multiplier(4.377178, 1e-5, 100, 1.0), 4)  # mu = 1
        10.0
    """
    target = check_positive("target_epsilon", target_epsilon)
    delta = check_delta("delta", delta)
    # sigma is what is sought: 1.0 stands in for it in the shared check.
    steps, q, _, n, vdi = _check(
        steps, sampling_prob, 1.0, canary_steps, value_discretization_interval
    )
    tol = check_positive("tol", tol)
    key = (target, delta, steps, q, n, vdi, tol)
    return _CALIBRATED.get_or(key, lambda: _calibrate(target, delta, q, n, vdi, tol, progress))


def calibrate_noise_multipliers(
    target_epsilon,
    delta,
    steps: Sequence[int],
    sampling_prob,
    *,
    canary_steps: Sequence[int] | None = None,
    value_discretization_interval=_VDI,
    tol=1e-6,
    progress: bool | None = None,
) -> list[float]:
    r"""`calibrate_noise_multiplier` for several horizons at once, e.g. a sweep over T.

    Each returned sigma has `calibrate_noise_multiplier`'s contract for its T (and n):
    `composition_epsilon(delta, T, q, sigma, canary_steps=n) <= target_epsilon <
    composition_epsilon(delta, T, q, sigma - tol, canary_steps=n)` on the same grid.
    Composition depends on the run only through n, so horizons with the same n share one
    search; distinct n are searched on up to two threads at once. Every result is cached
    under the arguments of `calibrate_noise_multiplier`, which then returns it at once
    (so does this function for horizons already calibrated). A failure for one n leaves
    the others cached.

    Args:
        target_epsilon: the epsilon to reach, > 0.
        delta: $\delta \in (0, 1)$; for $q < 1$ above the accountant's mass at infinite
            loss (~1.5e-15).
        steps: the horizons $T_i \ge 1$, a non-empty sequence of integers.
        sampling_prob: $q \in (0, 1]$, the same for all.
        canary_steps: $n_i \in [1, T_i]$, one per horizon (default: $n_i = T_i$).
        value_discretization_interval: the PLD grid spacing, > 0.
        tol: absolute tolerance on sigma, > 0.
        progress: a tqdm bar (stderr) over the searches; default: when there are at least
            two and the first runs on the requested grid are estimated at more than 5 s
            in all.

    Returns:
        One sigma per horizon, in the order of `steps`.

    Raises:
        ValueError: on invalid inputs (an entry of steps or canary_steps is named by its
            index); as `calibrate_noise_multiplier` for a horizon out of reach (the first
            such one in the order of `steps`).

    Example:
        >>> sigmas = calibrate_noise_multipliers(4.377178, 1e-5, [25, 100], 1.0)
        >>> [round(s, 4) for s in sigmas]  # mu = 1: sigma = sqrt(T)
        [5.0, 10.0]
    """
    target, delta, vdi, tol = _checked(target_epsilon, delta, value_discretization_interval, tol)
    q = check_probability("sampling_prob", sampling_prob)
    if isinstance(steps, str | bytes) or not isinstance(steps, Sequence | np.ndarray):
        raise TypeError(f"steps must be a sequence of integers, got {steps!r}")
    if len(steps) == 0:
        raise ValueError("steps must hold at least one horizon, got an empty sequence")
    horizons = [check_int(f"steps[{i}]", t, minimum=1) for i, t in enumerate(steps)]
    if canary_steps is None:
        counts = list(horizons)
    else:
        if isinstance(canary_steps, str | bytes) or not isinstance(
            canary_steps, Sequence | np.ndarray
        ):
            raise TypeError(f"canary_steps must be a sequence of integers, got {canary_steps!r}")
        if len(canary_steps) != len(horizons):
            raise ValueError(
                f"canary_steps must hold one count per horizon ({len(horizons)}), got "
                f"{len(canary_steps)}"
            )
        counts = [
            check_int(f"canary_steps[{i}]", c, maximum=t)
            for i, (t, c) in enumerate(zip(horizons, canary_steps, strict=True))
        ]
    keys = [(target, delta, t, q, c, vdi, tol) for t, c in zip(horizons, counts, strict=True)]
    results: dict[int, float] = {}  # per n
    for key in keys:
        found, sigma = _CALIBRATED.lookup(key)
        if found:
            results.setdefault(key[4], sigma)
    todo = sorted({c for c in counts if c not in results})
    errors: dict[int, BaseException] = {}

    def search(n):
        try:
            sigma = _calibrate(target, delta, q, n, vdi, tol, False)
        except (ValueError, RuntimeError, ArithmeticError) as err:
            errors[n] = err
            return n, None
        for key in keys:
            if key[4] == n:
                _CALIBRATED.put(key, sigma)
        return n, sigma

    if progress is None:
        seconds = (
            sum(
                2.0 * _estimated_seconds(q, _central_limit_sigma(target, delta, q, n), n, vdi)
                for n in todo
            )
            if q < 1.0
            else 0.0
        )
        progress = len(todo) >= 2 and seconds > _PROGRESS_SECONDS
    workers = max(1, min(_MAX_WORKERS, usable_cores(), len(todo)))
    with (
        tqdm(total=len(todo), desc="calibrate sigma", unit="T", disable=not progress) as bar,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        # Largest n first: their searches take longest.
        for n, sigma in pool.map(search, todo[::-1]):
            if sigma is not None:
                results[n] = sigma
            bar.update(1)
    for c in counts:  # the first failure in the order of steps
        if c in errors:
            raise errors[c]
    return [results[c] for c in counts]

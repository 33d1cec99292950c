r"""The composition bound (every iterate released) via dp_accounting's PLD accountant.

DP-SGD that publishes every iterate is the $n$-fold composition of the Poisson subsampled
Gaussian mechanism (sampling probability $q$, noise multiplier $\sigma$) over the $n$
steps that can carry the canary. Its tight $(\varepsilon, \delta)$ comes from
`dp_accounting.pld.PLDAccountant` (privacy loss distributions, add-or-remove-one
adjacency), never from a hand-written composition here.

A learning-rate schedule (`Accounting.step_sizes`) does not change it: the update of step
t is multiplied by the public nonzero constant $\eta_t$, so the iterates at one schedule
are an invertible post-processing of the iterates at another (divide each update by its
$\eta_t$), and the privacy of releasing all of them is the same. An `Accounting` with a
schedule is therefore accepted and its step sizes ignored.

Accuracy of the default `value_discretization_interval = 1e-4`: the accountant rounds
pessimistically, so the reported epsilon is an upper bound on the exact composition
epsilon (the tail mass it truncates is accounted for too). The rounding adds at most
`canary_steps * value_discretization_interval` in principle; measured against the interval
2e-5 it adds 7e-6 at $T = 10^3$ and 3e-5 at $T = 10^4$ ($q = 0.01$, $\sigma = 1$,
$\delta = 10^{-5}$), and 3e-9 for $q = 1$ ($T = 10^3$, $\sigma = 30$, checked against the
exact Gaussian value).

Speed: one step's PLD is built by `advsim.bounds._pld_fast` (dp_accounting's arithmetic on
the whole grid at once, bit for bit its PMF), then composed and read by dp_accounting.
$T = 1000$ at $q = 0.01$, $\sigma = 0.6$ takes about 0.7 s, $T = 1$ at $\sigma = 0.34$
0.8 s; smaller $\sigma$ widens the privacy-loss grid (about $1/\sigma^2$ points) and
costs more. Epsilons are cached per $(q, \sigma, n, \text{grid}, \delta)$, the last few
PLDs per $(q, \sigma, n, \text{grid})$, and calibrated noise multipliers per their
arguments, so `bounds_for` after `calibrate_noise_multiplier` (as `advsim audit` and
sweeps with `target_epsilon` do) reads the composition epsilon the calibration found.
"""

from __future__ import annotations

import collections
import math

from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy.optimize import brentq
from tqdm.auto import tqdm

from advsim._accounting import Accounting
from advsim._validation import (
    check_delta,
    check_nonnegative,
    check_positive,
)
from advsim.bounds._gdp import full_batch_epsilon, gdp_delta, gdp_epsilon, gdp_mu
from advsim.bounds._heuristic import heuristic_epsilon
from advsim.bounds._pld_fast import check_grid, composed_pld, grid_size, smallest_sigma
from advsim.bounds._run import run_parameters

__all__ = [
    "bounds_for",
    "calibrate_noise_multiplier",
    "composition_delta",
    "composition_epsilon",
]

_VDI = 1e-4
# The coarsest grid of the calibration's search (see calibrate_noise_multiplier).
_COARSE_VDI = 1e-2
# Seconds per grid point of one PLD run (build, compose, read), measured on the 2-core
# machine of README's Speed section (0.8 s for the 8.6e5 points of T = 1, sigma = 0.34);
# only for the progress bars' up-front estimates.
_SECONDS_PER_POINT = 1e-6
# Show a progress bar by default when a call is expected to take longer than this.
_PROGRESS_SECONDS = 5.0


class DeltaOutOfReachError(ValueError, RuntimeError):
    """delta below the mass dp_accounting's PLD keeps at infinite privacy loss (a
    ValueError for the caller's delta; a RuntimeError, as before, for old handlers)."""


def _check(steps, sampling_prob, noise_multiplier, canary_steps, value_discretization_interval):
    # A learning-rate schedule does not change composition (module docstring).
    steps, q, sigma, n = run_parameters(
        steps, sampling_prob, noise_multiplier, canary_steps, schedule="ignore"
    )
    vdi = check_positive("value_discretization_interval", value_discretization_interval)
    return steps, q, sigma, n, vdi


class _LRU(collections.OrderedDict):
    """A small least-recently-used cache (a dict that forgets its oldest entries)."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def get_or(self, key, compute):
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = compute()
        self[key] = value
        while len(self) > self.maxsize:
            self.popitem(last=False)
        return value


# PLDs are large (up to ~10^7 floats): keep the last few small ones; epsilons and
# calibrated noise multipliers are floats: keep many.
_PLDS = _LRU(4)
_EPSILONS = _LRU(4096)
_CALIBRATED = _LRU(1024)


# PLDs larger than this many grid points (40 MB) are not kept.
_PLD_CACHE_POINTS = 5_000_000


def _pld(q: float, sigma: float, n: int, vdi: float, bar=None) -> pld_lib.PrivacyLossDistribution:
    """What dp_accounting's `PLDAccountant(vdi)` holds after composing n steps of
    `PoissonSampledDpEvent(q, GaussianDpEvent(sigma))` ($q < 1$; bit for bit; cached when
    it holds at most `_PLD_CACHE_POINTS` points)."""
    key = (q, sigma, n, vdi)
    if key in _PLDS:
        return _PLDS.get_or(key, None)
    pld = composed_pld(q, sigma, n, vdi, bar=bar)
    if pld._pmf_remove.size + pld._pmf_add.size <= _PLD_CACHE_POINTS:  # noqa: SLF001
        _PLDS.get_or(key, lambda: pld)
    return pld


def _pld_epsilon(q: float, sigma: float, n: int, vdi: float, delta: float, bar=None) -> float:
    """`PLDAccountant.get_epsilon(delta)` of that PLD (cached: calibration, `bounds_for`
    and repeated cells ask for the same numbers)."""

    def compute():
        pld = _pld(q, sigma, n, vdi, bar)
        eps = float(pld.get_epsilon_for_delta(delta))
        if not math.isfinite(eps):
            inf_mass = max(pld._pmf_remove._infinity_mass, pld._pmf_add._infinity_mass)  # noqa: SLF001
            raise DeltaOutOfReachError(
                f"composition epsilon inf for {q=}, {sigma=}, {n=}, {delta=}: "
                f"dp_accounting's PLD keeps {inf_mass:.3g} of mass at infinite privacy "
                f"loss here (1e-15 of it from truncating tails), so delta must be in "
                f"({inf_mass:.3g}, 1) for the composition bound"
            )
        return eps

    return _EPSILONS.get_or((q, sigma, n, vdi, delta), compute)


def _estimated_seconds(q: float, sigma: float, n: int, vdi: float) -> float:
    """A rough up-front estimate of one PLD run (grid points times a measured rate)."""
    return _SECONDS_PER_POINT * grid_size(q, sigma, vdi) * (1.0 + 0.05 * math.log2(n))


def _stage_bar(q: float, sigma: float, n: int, vdi: float, progress: bool | None) -> tqdm:
    """A bar over one PLD run's three stages, shown when asked or when the run is not
    cached and expected to take more than `_PROGRESS_SECONDS`."""
    check_grid(q, sigma, vdi)
    if progress is None:
        progress = (q, sigma, n, vdi) not in _PLDS and (
            _estimated_seconds(q, sigma, n, vdi) > _PROGRESS_SECONDS
        )
    if progress:
        seconds = _estimated_seconds(q, sigma, n, vdi)
        desc = f"composition PLD (n={n}, sigma={sigma:g}, ~{seconds:.0f} s)"
    else:
        desc = "composition PLD"
    return tqdm(total=3, desc=desc, unit="stage", disable=not progress, leave=False)


def composition_epsilon(
    delta,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=_VDI,
    progress: bool | None = None,
) -> float:
    r"""eps(delta) of DP-SGD releasing every iterate (tight composition, PLD accounting).

    The $n$-fold composition of `PoissonSampledDpEvent(q, GaussianDpEvent(sigma))`,
    accounted by dp_accounting's `PLDAccountant`; when $q = 1$ the exact closed form
    ($\sqrt{n}/\sigma$-GDP, Corollary 3.3 of arXiv:1905.02383).
    Pessimistic: an upper bound on the exact value, within about 1e-5 at $T = 10^3$ for
    the default discretization (see the module docstring).

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$ (bounds `canary_steps`), or an `advsim.Accounting` (then nothing else).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, the number of steps that can sample the canary
            (default $T$); only those steps are composed.
        value_discretization_interval: the PLD grid spacing, > 0.
        progress: a tqdm bar (stderr) over the accountant's three stages (build one
            step, compose, compose with the identity), its title an up-front estimate of
            the time; default: when that estimate exceeds 5 s (small sigma, fine grid).

    Returns:
        eps >= 0.

    Raises:
        ValueError: on invalid inputs; a noise multiplier too small for the grid (the
            message names the range); a delta below the mass the accountant keeps at
            infinite privacy loss (~1.5e-15; also a RuntimeError, as it was).

    Example:
        >>> round(composition_epsilon(1e-5, 100, 1.0, 10.0), 3)  # = gdp_epsilon(1e-5, 1)
        4.377
    """
    delta = check_delta("delta", delta)
    _, q, sigma, n, vdi = _check(
        steps, sampling_prob, noise_multiplier, canary_steps, value_discretization_interval
    )
    if q == 1.0:
        # n Gaussian mechanisms compose exactly to sqrt(n)/sigma-GDP (Corollary 3.3 of
        # arXiv:1905.02383): the closed form, with no grid (a PLD grid at T = 10^6,
        # sigma = 0.05 would need 29 TiB).
        return gdp_epsilon(delta, math.sqrt(n) / sigma)
    with _stage_bar(q, sigma, n, vdi, progress) as bar:
        return max(_pld_epsilon(q, sigma, n, vdi, delta, bar), 0.0)


def composition_delta(
    eps,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=_VDI,
    progress: bool | None = None,
) -> float:
    r"""delta(eps) of DP-SGD releasing every iterate (tight composition, PLD accounting).

    See `composition_epsilon`; pessimistic (an upper bound on the exact delta).

    Args:
        eps: $\varepsilon \ge 0$, finite.
        steps: $T \ge 1$, or an `advsim.Accounting` (then nothing else).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$ (default $T$).
        value_discretization_interval: the PLD grid spacing, > 0.
        progress: as in `composition_epsilon`.

    Returns:
        delta in [0, 1].

    Example:
        >>> round(composition_delta(1.0, 1, 1.0, 1.0), 4)  # Gaussian mechanism, mu = 1
        0.1269
    """
    eps = check_nonnegative("eps", eps)
    _, q, sigma, n, vdi = _check(
        steps, sampling_prob, noise_multiplier, canary_steps, value_discretization_interval
    )
    if q == 1.0:  # exact: sqrt(n)/sigma-GDP, as in composition_epsilon
        return gdp_delta(eps, math.sqrt(n) / sigma)
    with _stage_bar(q, sigma, n, vdi, progress) as bar:
        delta = float(_pld(q, sigma, n, vdi, bar).get_delta_for_epsilon(eps))
    # The accountant's pessimistic rounding can pass 1 by ~1e-10 where the exact delta is
    # within rounding of 1 (eps = 0, q = 0.99, sigma = 0.2, n = 50: 1 + 1.9e-10); 1 is
    # then the (valid, tight) answer. Anything further from [0, 1] is an error.
    if not 0.0 <= delta <= 1.0 + 1e-6:
        raise RuntimeError(f"PLDAccountant returned delta {delta!r} for {q=}, {sigma=}, {n=}")
    return min(delta, 1.0)


def _levels(vdi: float) -> list[float]:
    """The grids of the search, coarse to fine: vdi times 10^k, k >= 0, the coarsest at
    most `_COARSE_VDI` (just [vdi] for vdi > _COARSE_VDI / 10)."""
    k = 0
    while vdi * 10 ** (k + 1) <= _COARSE_VDI * (1 + 1e-9):
        k += 1
    return [vdi * 10**j for j in range(k, 0, -1)] + [vdi]


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


def _settle(g, r: float, slope: float, tol: float, max_tries: int = 10) -> float:
    """sigma with g(sigma) <= 0 < g(sigma - tol), searched around the estimate r.

    Each try evaluates g at r + 0.45 tol and, when the slope puts the root within tol
    below, at r - 0.55 tol (an interval of width tol that holds r); a miss moves r by
    regula falsi between the nearest points of either sign (or a secant step when all
    points have one sign). After `max_tries` misses, plain bisection on the bracket found;
    it returns `hi` with g(hi) <= 0 and g(lo) > 0 for some lo in [hi - tol, hi).
    """
    known: dict[float, float] = {}

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


def _calibrate_gaussian(target: float, delta: float, n: int, tol: float) -> float:
    """q = 1: composition is sqrt(n)/sigma-GDP exactly (`composition_epsilon`'s closed
    form), whose sigma for the target is sqrt(n) / gdp_mu(target, delta)."""

    def gap(sigma):
        return gdp_epsilon(delta, math.sqrt(n) / sigma) - target

    sigma = math.sqrt(n) / gdp_mu(target, delta)
    return _settle(gap, sigma, -target / sigma, tol)


def _calibrate_pld(target, delta, steps, q, n, vdi, tol, progress) -> float:
    levels = _levels(vdi)
    sigma_hi = 1.05 * math.sqrt(n) / gdp_mu(target, delta)

    def heuristic_gap(log_sigma):
        eps = heuristic_epsilon(delta, steps, q, math.exp(log_sigma), canary_steps=n)
        return eps - target

    hi = math.log(sigma_hi)
    lo = hi - 1.0
    while heuristic_gap(lo) < 0:
        lo -= 1.0
    sigma_lo = 0.999 * math.exp(brentq(heuristic_gap, lo, hi, xtol=1e-12, rtol=1e-12))

    # The grids hold about 1/sigma^2 points: below sigma_min the requested one would not
    # fit in memory (`_pld_fast.MAX_GRID_POINTS`), so the search stays above it.
    sigma_min = smallest_sigma(q, vdi)
    sigma_lo = max(sigma_lo, sigma_min)
    bars = []  # the progress bar, once the coarse search has estimated the rest

    def gap_at(level):
        def gap(sigma):
            eps = _pld_epsilon(q, sigma, n, level, delta)
            for bar in bars:
                bar.update(1)
                bar.set_postfix(vdi=f"{level:g}", sigma=f"{sigma:.6g}", eps=f"{eps:.6g}")
            return eps - target

        return gap

    # Coarsest grid: Brent's method on the theoretical bracket (cheap: 1/100 of the points
    # of the default grid), widened if the coarse grid's pessimism needs it.
    top = gap_at(levels[0])
    while top(sigma_hi) > 0:
        sigma_lo, sigma_hi = sigma_hi, 2.0 * sigma_hi
    while top(sigma_lo) <= 0:
        if sigma_lo <= sigma_min:
            raise ValueError(
                f"target_epsilon={target!r} needs a noise multiplier below {sigma_min:.3g}, "
                f"too small for the PLD grid value_discretization_interval={vdi!r}; use a "
                "coarser grid or a smaller target_epsilon"
            )
        sigma_lo, sigma_hi = max(0.5 * sigma_lo, sigma_min), sigma_lo
    if len(levels) == 1:
        r = brentq(top, sigma_lo, sigma_hi, xtol=tol)
    else:
        # On log sigma and log(1 + eps), where the coarse epsilon is nearly linear (a few
        # Brent steps), to 1e-3 relative: the finer grids' roots differ by about that.
        def log_gap(x):
            return math.log1p(top(math.exp(x)) + target) - math.log1p(target)

        r = math.exp(brentq(log_gap, math.log(sigma_lo), math.log(sigma_hi), xtol=1e-3))
    # A slope over 2% of sigma (the coarse epsilon is only smooth to ~ its grid).
    slope = (top(1.02 * r) - top(r)) / (0.02 * r)
    if not (math.isfinite(slope) and slope < 0):
        slope = -target / r
    # Up-front estimate of the rest: about 3 runs on the requested grid near r, and a
    # tenth of one per secant step on each grid in between.
    seconds = _estimated_seconds(q, r, n, vdi) * (3.0 + 0.3 * (len(levels) - 2))
    if progress is None:
        progress = seconds > _PROGRESS_SECONDS
    with tqdm(
        desc=f"calibrate sigma (n={n}, q={q:g}, ~{seconds:.0f} s)",
        unit="PLD",
        disable=not progress,
        leave=False,
    ) as bar:
        bars.append(bar)
        # Each finer grid starts from the coarser one's answer and slope (their roots
        # differ by ~ the coarser grid's pessimism: a few secant steps).
        for level in levels[1:-1]:
            r, slope = _secant(gap_at(level), r, slope, max(tol, 1e-6 * r))
        return _settle(gap_at(levels[-1]), r, slope, tol)


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

    The search, coarse to fine (Section "Speed" of the README has the timings):

    1. A bracket from theory: the last-iterate heuristic is a post-processing of the
       composition, so the sigma at which `heuristic_epsilon` equals the target is a
       lower end; full-batch DP with noise $\sigma$ (no amplification by sampling)
       dominates the subsampled composition, so $1.05\sqrt{n}/\mu$ with
       $\mu$ = `gdp_mu(target, delta)` is an upper end.
    2. Brent's method on the coarse grid (1e-2: 1/100 of the default's points), then a
       few secant steps on each grid 10 times finer (1e-3), started from the coarser
       grid's root and slope.
    3. On the requested grid: the pair sigma, sigma - tol around the secant estimate
       (usually 3 accountant runs in all, the first of them the secant step), regula
       falsi between misses, bisection as the last resort.

    For $q = 1$ the composition is $\sqrt{n}/\sigma$-GDP exactly (as in
    `composition_epsilon`), and sigma comes from the closed form, with the same contract.
    Results are cached per arguments (a sweep's cells with the same run share one
    search), and the composition epsilon at the returned sigma is cached for
    `bounds_for`.

    Args:
        target_epsilon: the epsilon to reach, > 0.
        delta: $\delta \in (0, 1)$; for $q < 1$ above the accountant's mass at infinite
            loss (~1.5e-15).
        steps: $T \ge 1$.
        sampling_prob: $q \in (0, 1]$.
        canary_steps: $n \in [1, T]$ (default $T$).
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
    if q == 1.0:
        return _CALIBRATED.get_or(key, lambda: _calibrate_gaussian(target, delta, n, tol))
    try:
        return _CALIBRATED.get_or(
            key, lambda: _calibrate_pld(target, delta, steps, q, n, vdi, tol, progress)
        )
    except DeltaOutOfReachError as err:
        raise DeltaOutOfReachError(
            f"calibrate_noise_multiplier: delta={delta!r} is out of the PLD accountant's "
            f"reach ({err})"
        ) from None


def bounds_for(accounting: Accounting, delta) -> dict[str, float]:
    r"""The three reference epsilons of a run: heuristic, composition, full batch.

    - "heuristic": Theorem 1 of arXiv:2410.06186, `heuristic_epsilon(delta, accounting)`:
      $T$ steps of noise, the canary in `accounting.num_canary_steps` of them and, when
      the accounting has a learning-rate schedule (`step_sizes`), at that schedule
      ($\mathcal{N}(X, s^2)$ against $\mathcal{N}(0, s^2)$ with
      $X = \sum_{t \in \text{canary steps}} \eta_t b_t$ and
      $s = \sigma\sqrt{\sum_t \eta_t^2}$; see `heuristic_epsilon`);
    - "composition": `composition_epsilon` over the canary steps (every iterate released);
    - "full_batch": `full_batch_epsilon`, full-batch DP-GD with noise sigma / q.

    The last two do not depend on a schedule: they bound the release of every iterate,
    and scaling each update by a public nonzero constant $\eta_t$ is an invertible
    post-processing of the iterates.

    Args:
        accounting: an `advsim.Accounting` record of the run.
        delta: $\delta \in (0, 1)$.

    Returns:
        A dict with keys "heuristic", "composition" and "full_batch".

    Raises:
        ValueError: a bad delta; a schedule whose heuristic has no closed form here
            (`heuristic_epsilon`).

    Example:
        >>> from advsim import Accounting
        >>> b = bounds_for(Accounting(3, 0.1, 1.0, (1, 2, 3)), 1e-6)
        >>> round(b["heuristic"], 3)
        2.222
        >>> landscape = Accounting(25, 1.0, 4.0, (1,), step_sizes=(1.0,) + (0.25,) * 24)
        >>> round(bounds_for(landscape, 1e-5)["heuristic"], 3)  # mu = 1 / (4 sqrt(2.5))
        0.561
    """
    if not isinstance(accounting, Accounting):
        raise TypeError(f"accounting must be an advsim.Accounting, got {type(accounting)!r}")
    delta = check_delta("delta", delta)
    return {
        "heuristic": heuristic_epsilon(delta, accounting),
        "composition": composition_epsilon(delta, accounting),
        "full_batch": full_batch_epsilon(delta, accounting),
    }

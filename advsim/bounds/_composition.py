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
the whole grid at once, bit for bit its PMF); the self-composition, the composition with
the identity and the epsilon reading are dp_accounting's too, with its three Python-level
loops done on arrays (`_composed_pld`, `_pld_epsilon_for_delta`; the same floats, see
there and `tests/advsim/test_bounds_calibrate.py`). $T = 1000$ at $q = 0.01$,
$\sigma = 0.59$ takes 0.21 s of CPU, $T = 1$ at $\sigma = 0.34$ 0.23 s (0.45 and 0.61 s
through dp_accounting's own loops; measured on a 2-core machine busy with other jobs);
a third of it is the step's PLD, a third the FFTs; smaller $\sigma$ widens the
privacy-loss grid (about $1/\sigma^2$ points) and costs more. Epsilons are cached per
$(q, \sigma, n, \text{grid}, \delta)$ and the last few PLDs per
$(q, \sigma, n, \text{grid})$, so `bounds_for` after a calibration
(`advsim.bounds.calibrate_noise_multiplier`, as `advsim audit` and sweeps with
`target_epsilon` do) reads the composition epsilon the calibration found.
"""

from __future__ import annotations

import collections
import math
import threading

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import fft, signal, special
from tqdm.auto import tqdm

from advsim._accounting import Accounting
from advsim._validation import (
    check_delta,
    check_nonnegative,
    check_positive,
)
from advsim.bounds._gdp import full_batch_epsilon, gdp_delta, gdp_epsilon
from advsim.bounds._heuristic import heuristic_epsilon
from advsim.bounds._pld_fast import check_grid, gaussian_pld, grid_size
from advsim.bounds._run import run_parameters

__all__ = [
    "bounds_for",
    "composition_delta",
    "composition_epsilon",
]

_VDI = 1e-4
# Seconds per grid point of one PLD run (build, compose, read), measured on a 2-core
# machine (0.23-0.3 s for the 5.6e5 points of T = 1, sigma = 0.34); only for the progress
# bars' up-front estimates.
_SECONDS_PER_POINT = 5e-7
# Show a progress bar by default when a call is expected to take longer than this.
_PROGRESS_SECONDS = 5.0
# dp_accounting's default tail_mass_truncation of PLD.self_compose and PLD.compose.
_TAIL = 1e-15


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
    """A small least-recently-used cache (a dict that forgets its oldest entries), safe to
    share between threads (the calibration of several horizons runs two at once); a value
    is computed outside the lock, so two threads may compute the same one."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize
        self.lock = threading.Lock()

    def lookup(self, key):
        """`(True, value)` for a cached key (now the most recent), else `(False, None)`."""
        with self.lock:
            if key in self:
                self.move_to_end(key)
                return True, self[key]
        return False, None

    def put(self, key, value):
        with self.lock:
            self[key] = value
            self.move_to_end(key)
            while len(self) > self.maxsize:
                self.popitem(last=False)
        return value

    def get_or(self, key, compute):
        found, value = self.lookup(key)
        return value if found else self.put(key, compute())


# PLDs are large (up to ~10^7 floats): keep the last few small ones; epsilons and
# calibrated noise multipliers are floats: keep many.
_PLDS = _LRU(4)
_EPSILONS = _LRU(4096)
_CALIBRATED = _LRU(1024)


# PLDs larger than this many grid points (40 MB) are not kept.
_PLD_CACHE_POINTS = 5_000_000


# ------------------------------------------------------------------------------------------
# dp_accounting's composition and epsilon, with its Python-level loops done on arrays.
#
# `composed_pld` (advsim.bounds._pld_fast) follows PLDAccountant: the step's PLD, then
# `PrivacyLossDistribution.self_compose(n)` and `identity().compose(...)`; reading epsilon is
# `get_epsilon_for_delta`. Three parts of those are Python loops or per-call overhead:
# the Chernoff truncation bounds of the self-composition (scipy's `logsumexp` at 40 orders,
# 0.3 s of a 0.4 s self-composition at sigma = 0.34), the tail truncation after composing
# with the identity (a loop over the grid) and the epsilon reading (a loop over the grid).
# Below, each is computed so that the result is the same floats: the FFTs are dp_accounting's
# expressions verbatim, running sums are `np.cumsum` (a sequential accumulation, the same
# additions in the same order as the loops), exponentials are `math.exp` as there, and
# approximations only locate an integer (a bound's rounding, a loop's stopping index) where
# it is unambiguous, with dp_accounting's own expression evaluated wherever it is not.

# A bound on |approximate - scipy logsumexp| of a log moment generating function below:
# both are within ~2e-14 of the exact value (terms exp(a) with |a| <= 20 and 20
# multiplications, a pairwise sum of positive terms), so 1e-12 leaves a 50-fold margin.
_LOG_MGF_ERROR = 1e-12
# Relative margin around a stopping test log(x) >= loss, where np.log stands in for
# math.log (they differ by at most an ulp or two).
_LOG_MARGIN = 1e-13
# Losses per block of the epsilon reading (it usually stops in the top half of the grid).
_READ_BLOCK = 32768


def _self_convolve_bounds(probs: np.ndarray, n: int) -> tuple[int, int]:
    r"""`common.compute_self_convolve_bounds(probs, n, _TAIL)`, the same integers.

    There the log moment generating function at the orders $\pm k/L$, $k = 1..20$ ($L$ the
    length), is scipy's `logsumexp`; here $\sum_i p_i x_i^{\pm k}$ with
    $x_i = e^{i/L}$ by repeated multiplication (40 passes over the array instead of 40
    `logsumexp` calls), which is within `_LOG_MGF_ERROR` of it. Each Chernoff bound's
    ceiling (floor) is taken from the approximation where it cannot change within that
    error; otherwise, and for PMFs with negative entries, from scipy's `logsumexp` itself.
    """
    length = len(probs)
    upper, lower = (length - 1) * n, 0
    # dp_accounting's orders: -20/L, ..., -1/L, 1/L, ..., 20/L.
    orders = np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / length
    sums = np.full(len(orders), np.nan)
    if np.all(probs >= 0):
        ramp = np.arange(length) * (1.0 / length)
        for sign in (-1, 1):
            x = np.exp(sign * ramp)
            terms = np.array(probs, dtype=np.float64)
            for k in range(1, 21):
                terms *= x
                sums[20 - k if sign < 0 else 19 + k] = terms.sum()
    log_two_over_tail = math.log(2 / _TAIL)
    for order, total in zip(orders, sums, strict=True):
        rounding = math.ceil if order > 0 else math.floor
        bound = None
        if total > 0 and math.isfinite(total):
            approx = (n * math.log(total) + log_two_over_tail) / order
            err = n * _LOG_MGF_ERROR / abs(order) + 1e-13 * abs(approx) + 1e-9
            if math.isfinite(approx) and rounding(approx - err) == rounding(approx + err):
                bound = rounding(approx)
        if bound is None:  # dp_accounting's expression
            log_mgf = special.logsumexp(np.arange(length) * order, b=probs)
            exact = (n * log_mgf + log_two_over_tail) / order
            if not math.isfinite(exact):
                continue
            bound = rounding(exact)
        if order > 0:
            upper = min(upper, bound)
        else:
            lower = max(lower, bound)
    return lower, upper


def _self_compose(pmf: pld_pmf.PLDPmf, n: int) -> pld_pmf.PLDPmf:
    """`pmf.self_compose(n)` (tail truncation `_TAIL`), the same PMF."""
    if not isinstance(pmf, pld_pmf.DensePLDPmf):
        return pmf.self_compose(n, _TAIL)  # sparse: at most 1000 points
    probs = pmf._probs  # noqa: SLF001
    lower, upper = _self_convolve_bounds(probs, n)
    # common.self_convolve, verbatim.
    output_len = upper - lower + 1
    fast_len = fft.next_fast_len(max(output_len, len(probs)))
    out = np.real(fft.ifft(fft.fft(probs, fast_len) ** n))
    out = np.roll(out, -lower)[:output_len]
    # DensePLDPmf.self_compose, verbatim.
    inf_prob = _TAIL - math.expm1(n * math.log1p(-pmf._infinity_mass))  # noqa: SLF001
    return pld_pmf.DensePLDPmf(
        pmf._discretization,  # noqa: SLF001
        pmf._lower_loss * n + lower,  # noqa: SLF001
        np.array(out),
        inf_prob,
        pmf._pessimistic_estimate,  # noqa: SLF001
    )


def _prefix_to_truncate(probs: np.ndarray, threshold: float) -> int:
    """The loop `_find_prefix_to_truncate` of `pld_pmf._truncate_tails`: the first index
    where the running sum exceeds threshold (the length if none)."""
    above = np.flatnonzero(np.cumsum(probs) > threshold)
    return int(above[0]) if above.size else len(probs)


def _compose(pmf1: pld_pmf.PLDPmf, pmf2: pld_pmf.PLDPmf) -> pld_pmf.PLDPmf:
    """`pld_pmf.compose_pmfs(pmf1, pmf2, _TAIL)`, the same PMF."""
    sparse = isinstance(pmf1, pld_pmf.SparsePLDPmf) and isinstance(pmf2, pld_pmf.SparsePLDPmf)
    if sparse or not pmf1._pessimistic_estimate:  # noqa: SLF001 (small; never optimistic here)
        return pld_pmf.compose_pmfs(pmf1, pmf2, _TAIL)
    a, b = pmf1.to_dense_pmf(), pmf2.to_dense_pmf()
    # DensePLDPmf.compose and _truncate_tails (pessimistic), verbatim but for the loops.
    probs = signal.fftconvolve(a._probs, b._probs)  # noqa: SLF001
    inf_a, inf_b = a._infinity_mass, b._infinity_mass  # noqa: SLF001
    infinity_mass = inf_a + inf_b - inf_a * inf_b
    left = _prefix_to_truncate(probs, _TAIL / 2)
    right = len(probs) - _prefix_to_truncate(np.flip(probs), _TAIL / 2)
    right = max(right, left + 1)
    left_mass, right_mass = np.sum(probs[:left]), np.sum(probs[right:])
    truncated = probs[left:right]
    truncated[0] += left_mass
    return pld_pmf.DensePLDPmf(
        a._discretization,  # noqa: SLF001
        a._lower_loss + b._lower_loss + left,  # noqa: SLF001
        truncated,
        infinity_mass + right_mass,
        True,
    )


def _composed_pld(q: float, sigma: float, n: int, vdi: float, bar=None):
    """`advsim.bounds._pld_fast.composed_pld(q, sigma, n, vdi)`: what PLDAccountant holds
    after n Poisson-subsampled Gaussian steps ($q < 1$), the same PLD; `bar`, if given, is
    advanced by one after each of the three stages."""
    step = gaussian_pld(sigma, q, vdi)
    if bar is not None:
        bar.update(1)
    pmfs = [_self_compose(p, n) for p in (step._pmf_remove, step._pmf_add)]  # noqa: SLF001
    if bar is not None:
        bar.update(1)
    # identity(vdi).compose(...): the identity is symmetric, the step's PLD is not.
    identity = pld_lib.identity(value_discretization_interval=vdi)._pmf_remove  # noqa: SLF001
    out = pld_lib.PrivacyLossDistribution(*(_compose(identity, p) for p in pmfs))
    if bar is not None:
        bar.update(1)
    return out


def _pmf_epsilon_for_delta(pmf: pld_pmf.PLDPmf, delta: float) -> float:
    """`pmf.get_epsilon_for_delta(delta)`, the same float.

    dp_accounting's `_get_epsilon_for_delta` walks the losses from the top, adding each
    probability to an upper mass and `math.exp(-loss) * prob` to a lower mass, and stops
    at the first loss with `log((upper - delta) / lower) >= loss`. Here the losses
    (`itertools.count`'s repeated subtraction) and both masses are `np.cumsum`s of the same
    terms (continued from block to block: the same sequential additions), the stopping test
    is evaluated on blocks of `_READ_BLOCK` losses (`np.log`, with `math.log` wherever it is
    within `_LOG_MARGIN` of a tie) until it holds, and the value is read as there.
    """
    if not isinstance(pmf, pld_pmf.DensePLDPmf):
        return pmf.get_epsilon_for_delta(delta)
    infinity_mass = pmf._infinity_mass  # noqa: SLF001
    if infinity_mass > delta:
        return math.inf
    probs = pmf._probs[::-1]  # noqa: SLF001
    m, step = len(probs), -pmf._discretization  # noqa: SLF001
    # losses[j]: the j-th loss from the top; upper[j], lower[j]: the masses before step j
    # (upper[m], lower[m]: after the last); filled block by block.
    losses, upper, lower = np.empty(m), np.empty(m + 1), np.empty(m + 1)
    top = (pmf._lower_loss + m - 1) * pmf._discretization  # noqa: SLF001
    upper[0], lower[0] = infinity_mass, 0.0
    end = m
    for start in range(0, m, _READ_BLOCK):
        stop = min(m, start + _READ_BLOCK)
        first = top if start == 0 else losses[start - 1] + step
        losses[start:stop] = np.cumsum(np.concatenate(([first], np.full(stop - start - 1, step))))
        loss = losses[start:stop]
        upper[start : stop + 1] = np.cumsum(
            np.concatenate((upper[start : start + 1], probs[start:stop]))
        )
        terms = np.fromiter(map(math.exp, (-loss).tolist()), np.float64, stop - start)
        block = np.concatenate((lower[start : start + 1], terms * probs[start:stop]))
        lower[start : stop + 1] = np.cumsum(block)
        u, low = upper[start:stop], lower[start:stop]
        valid = (u > delta) & (low > 0)
        with np.errstate(all="ignore"):
            test = np.log((u - delta) / low) - loss
        margin = _LOG_MARGIN * np.maximum(np.abs(loss), 1.0)
        holds = valid & (test > margin)
        for j in np.flatnonzero(valid & (np.abs(test) <= margin)):
            holds[j] = math.log((u[j] - delta) / low[j]) >= loss[j]
        hits = np.flatnonzero(holds)
        if hits.size:
            end = start + int(hits[0])
            break
    # The loop's early return: after adding step j < end, upper >= delta with lower == 0.
    zero = np.flatnonzero((upper[1 : end + 1] >= delta) & (lower[1 : end + 1] == 0))
    if zero.size:
        return max(0, losses[zero[0]])
    mass_upper, mass_lower = upper[end], lower[end]
    if mass_upper <= mass_lower + delta:
        return 0
    return math.log((mass_upper - delta) / mass_lower)


def _pld_epsilon_for_delta(pld: pld_lib.PrivacyLossDistribution, delta: float) -> float:
    """`pld.get_epsilon_for_delta(delta)`, the same float."""
    eps = _pmf_epsilon_for_delta(pld._pmf_remove, delta)  # noqa: SLF001
    if pld._symmetric:  # noqa: SLF001
        return eps
    return max(eps, _pmf_epsilon_for_delta(pld._pmf_add, delta))  # noqa: SLF001


def _pld(q: float, sigma: float, n: int, vdi: float, bar=None) -> pld_lib.PrivacyLossDistribution:
    """What dp_accounting's `PLDAccountant(vdi)` holds after composing n steps of
    `PoissonSampledDpEvent(q, GaussianDpEvent(sigma))` ($q < 1$; bit for bit; cached when
    it holds at most `_PLD_CACHE_POINTS` points)."""
    key = (q, sigma, n, vdi)
    found, pld = _PLDS.lookup(key)
    if found:
        return pld
    pld = _composed_pld(q, sigma, n, vdi, bar=bar)
    if pld._pmf_remove.size + pld._pmf_add.size <= _PLD_CACHE_POINTS:  # noqa: SLF001
        _PLDS.put(key, pld)
    return pld


def _pld_epsilon(q: float, sigma: float, n: int, vdi: float, delta: float, bar=None) -> float:
    """`PLDAccountant.get_epsilon(delta)` of that PLD (cached: calibration, `bounds_for`
    and repeated cells ask for the same numbers)."""

    def compute():
        pld = _pld(q, sigma, n, vdi, bar)
        eps = float(_pld_epsilon_for_delta(pld, delta))
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
        canary_steps: $n \in [1, T]$, the number of steps that can sample the canary,
            or those steps (distinct, in $[1, T]$; only their number is read) (default
            $T$); only those steps are composed.
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
        canary_steps: $n \in [1, T]$, or those steps (distinct, in $[1, T]$; only their number
            is read) (default $T$).
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

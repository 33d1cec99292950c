r"""dp_accounting's PLD of the Poisson-subsampled Gaussian, built without its scalar loop.

`dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism(sigma,
sampling_prob=q)` (connect-the-dots discretization, Algorithm 1 of arXiv:2207.04380)
evaluates the hockey-stick divergence of one step on a grid of privacy losses
$\varepsilon_i = i \cdot d$; its `GaussianPrivacyLoss.get_delta_for_epsilon` inverts the
privacy loss one grid point at a time in Python (`inverse_privacy_loss`, about 5 us per
call, $2 \times 2 \cdot 10^5$ calls for $\sigma = 0.34$, $q = 0.01$, $d = 10^{-4}$), which
is about three quarters of a PLD run. `gaussian_pld` does the same arithmetic, operation
for operation, on the whole grid at once with numpy, and hands the resulting deltas to
dp_accounting's own `create_pmf_pessimistic_connect_dots_fixed_gap`; composition and
epsilon stay dp_accounting's (`composed_pld` follows `PLDAccountant` step by step).

The result is bit-for-bit dp_accounting's (`tests/advsim/test_bounds_pld_fast.py`
compares the PMFs and epsilons with `==`). Grid points where the scalar code takes a
special branch (the loss at $\pm\log(1 - q)$, a zero loss, an argument outside the domain
of its `log_a_times_exp_b_plus_c`) are passed to dp_accounting's scalar
`inverse_privacy_loss` itself.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as plm

__all__ = [
    "MAX_GRID_POINTS",
    "check_grid",
    "composed_pld",
    "gaussian_pld",
    "grid_size",
    "smallest_sigma",
]

#: Largest number of grid points of one step's PLD (8 bytes each, several copies in
#: flight: ~2 GB at the limit; about a minute per run on a 2-core machine).
MAX_GRID_POINTS = 50_000_000


def _privacy_losses(q: float, sigma: float):
    return [
        plm.GaussianPrivacyLoss(sigma, sampling_prob=q, adjacency_type=adjacency)
        for adjacency in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD)
    ]


def _grid(loss: plm.GaussianPrivacyLoss, vdi: float) -> tuple[int, int]:
    """The rounded epsilon range of one adjacency, as dp_accounting computes it."""
    bounds = loss.connect_dots_bounds()
    return math.floor(bounds.epsilon_lower / vdi), math.ceil(bounds.epsilon_upper / vdi)


def grid_size(q: float, sigma: float, vdi: float) -> int:
    """Grid points of one step's PLD (both adjacencies, before composition): a cheap
    (scalar) estimate of the memory and time a PLD run needs."""
    total = 0
    for loss in _privacy_losses(q, sigma)[: 1 if q == 1.0 else 2]:
        lo, hi = _grid(loss, vdi)
        total += hi - lo + 1
    return total


def smallest_sigma(q: float, vdi: float) -> float:
    """The smallest noise multiplier (to 1%) whose one-step grid fits `MAX_GRID_POINTS`
    (bisection on `grid_size`, which decreases in sigma)."""
    lo, hi = 1e-12, 1e3
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if grid_size(q, mid, vdi) <= MAX_GRID_POINTS else (mid, hi)
    return hi


def _inverse_privacy_loss(loss: plm.GaussianPrivacyLoss, eps: np.ndarray) -> np.ndarray:
    """`loss.inverse_privacy_loss(e)` for every e in `eps`, elementwise the same floats.

    Mirrors `AdditiveNoisePrivacyLoss._inverse_privacy_loss_{add,remove}` (via
    `common.log_a_times_exp_b_plus_c` and `_log_sub`) and
    `GaussianPrivacyLoss._inverse_privacy_loss_without_subsampling_remove`.
    """
    s = loss.sensitivity
    var = loss._standard_deviation**2  # noqa: SLF001 (the same float dp_accounting uses)
    q = loss.sampling_prob
    add = loss.adjacency_type == plm.AdjacencyType.ADD
    if q == 1.0:
        x = -0.5 * s - eps * var / s
        return s + x if add else x
    edge = -math.log(1 - q) if add else math.log(1 - q)
    b = -eps if add else eps
    log_a = np.log(1 / q)
    log_minus_c = np.log(-(1 - 1 / q))
    d = b + log_a
    # Special branches of the scalar code (and a margin around them), done by it.
    near_edge = np.abs(eps - edge) <= 1e-6 * max(abs(edge), 1e-300)
    outside = (eps > edge) if add else (eps < edge)
    special = near_edge | outside | (b == 0) | (log_minus_c >= d)
    # Where exp(...) reaches 1 (log1p(-1) = -inf) the entry is special: redone below.
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        value = d + np.log1p(-np.exp(log_minus_c - d))
    plw = -value if add else value
    x = -0.5 * s - plw * var / s
    if add:
        x = s + x
    if np.any(special):
        idx = np.flatnonzero(special)
        x[idx] = [loss.inverse_privacy_loss(e) for e in eps[idx]]
    return x


def _delta_for_epsilon(loss: plm.GaussianPrivacyLoss, epsilons: np.ndarray) -> np.ndarray:
    """`loss.get_delta_for_epsilon(epsilons)` (an array), with the inversion vectorised."""
    deltas = np.zeros_like(epsilons, dtype=float)
    q = loss.sampling_prob
    if q == 1.0:
        inverse = np.full_like(epsilons, True, dtype=bool)
    elif loss.adjacency_type == plm.AdjacencyType.ADD:
        inverse = epsilons < -math.log1p(-q)
    else:
        inverse = epsilons > math.log1p(-q)
        other = np.logical_not(inverse)
        deltas[other] = -np.expm1(epsilons[other])
    eps_inv = epsilons[inverse]
    x = _inverse_privacy_loss(loss, eps_inv)
    deltas[inverse] = loss.mu_upper_cdf(x) - np.exp(eps_inv + loss.mu_lower_log_cdf(x))
    return np.clip(deltas, 0, 1)


def _connect_dots_pmf(vdi: float, lo: int, hi: int, deltas: np.ndarray) -> pld_pmf.PLDPmf:
    """`pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lo, hi, deltas)`.

    A grid of more than `_MAX_PMF_SPARSE_SIZE` points becomes a `DensePLDPmf` there by way
    of a Python dict of every point and back (a second of dict traffic at 4e5 points);
    here the same probabilities (the pessimistic connect-the-dots masses of Algorithm 1 of
    arXiv:2207.04380, the same numpy expressions) go into the `DensePLDPmf` directly.
    """
    if hi - lo + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE:  # noqa: SLF001
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lo, hi, deltas)
    deltas = np.asarray(deltas, dtype=np.float64)
    if np.any(deltas < 0) or np.any(deltas > 1):
        raise ValueError(f"deltas are not between 0 and 1 : deltas={deltas}.")
    if np.any(np.diff(deltas) > pld_pmf._DELTA_DIFF_TOLERANCE):  # noqa: SLF001
        raise ValueError(f"deltas are not in non-increasing order: deltas={deltas}.")
    deltas = np.minimum.accumulate(deltas)
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    # Mass at the first point: 1 - delta_1 + (delta_2 - delta_1) / (e^d - 1); in between:
    # ((delta_{i+1} - delta_i) - e^d (delta_i - delta_{i-1})) / (e^d - 1); at the last
    # point: (delta_n - delta_{n-1}) / (e^{-d} - 1); delta_n goes to +infinity.
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(vdi)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(vdi)) / math.expm1(vdi)
    probs[-1] = diffs[-1] / math.expm1(-vdi)
    probs = np.maximum(0.0, probs)
    return pld_pmf.DensePLDPmf(vdi, lo, probs, deltas[-1], True)


def _single_pmf(loss: plm.GaussianPrivacyLoss, vdi: float) -> pld_pmf.PLDPmf:
    lo, hi = _grid(loss, vdi)
    rounded = np.arange(lo, hi + 1)
    deltas = _delta_for_epsilon(loss, rounded * vdi)
    return _connect_dots_pmf(vdi, lo, hi, deltas)


def gaussian_pld(sigma: float, q: float, vdi: float) -> pld_lib.PrivacyLossDistribution:
    """`from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=vdi)`
    with dp_accounting's other defaults (sensitivity 1, pessimistic, connect the dots,
    add or remove one), bit for bit.

    Raises:
        ValueError: if the grid would exceed `MAX_GRID_POINTS` (noise_multiplier too
            small for this discretization).
    """
    check_grid(q, sigma, vdi)
    losses = _privacy_losses(q, sigma)
    pmf_remove = _single_pmf(losses[0], vdi)
    if q == 1.0:
        return pld_lib.PrivacyLossDistribution(pmf_remove)
    return pld_lib.PrivacyLossDistribution(pmf_remove, _single_pmf(losses[1], vdi))


def check_grid(q: float, sigma: float, vdi: float) -> None:
    """Raises the ValueError of `gaussian_pld` when one step's grid would be too large."""
    size = grid_size(q, sigma, vdi)
    if size > MAX_GRID_POINTS:
        raise ValueError(
            f"noise_multiplier={sigma!r} is too small for the PLD accountant at "
            f"value_discretization_interval={vdi!r}: one step's privacy-loss grid would "
            f"hold {size:.3g} points (at most {MAX_GRID_POINTS:.0e}); noise_multiplier "
            f"must be >= {smallest_sigma(q, vdi):.3g} at this grid and sampling_prob "
            "(or use a coarser value_discretization_interval)"
        )


def composed_pld(
    q: float, sigma: float, n: int, vdi: float, *, bar=None
) -> pld_lib.PrivacyLossDistribution:
    """What `PLDAccountant(value_discretization_interval=vdi)` holds after composing
    `SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), n)` ($q < 1$):
    the identity PLD composed with the step's PLD self-composed $n$ times.

    `bar`, if given, is a tqdm bar advanced by one after each of the three stages.
    """
    step = gaussian_pld(sigma, q, vdi)
    if bar is not None:
        bar.update(1)
    step = step.self_compose(n)
    if bar is not None:
        bar.update(1)
    out = pld_lib.identity(value_discretization_interval=vdi).compose(step)
    if bar is not None:
        bar.update(1)
    return out

r"""The composition bound (every iterate released) via dp_accounting's PLD accountant.

DP-SGD that publishes every iterate is the $n$-fold composition of the Poisson subsampled
Gaussian mechanism (sampling probability $q$, noise multiplier $\sigma$) over the $n$
steps that can carry the canary. Its tight $(\varepsilon, \delta)$ comes from
`dp_accounting.pld.PLDAccountant` (privacy loss distributions, add-or-remove-one
adjacency), never from a hand-written composition here.

Accuracy of the default `value_discretization_interval = 1e-4`: the accountant rounds
pessimistically, so the reported epsilon is an upper bound on the exact composition
epsilon (the tail mass it truncates is accounted for too). The rounding adds at most
`canary_steps * value_discretization_interval` in principle; measured against the interval
2e-5 it adds 7e-6 at $T = 10^3$ and 3e-5 at $T = 10^4$ ($q = 0.01$, $\sigma = 1$,
$\delta = 10^{-5}$), and 3e-9 for $q = 1$ ($T = 10^3$, $\sigma = 30$, checked against the
exact Gaussian value). $T = 1000$ at $q = 0.01$, $\sigma = 1$ takes about a second;
smaller $\sigma$ widens the privacy-loss grid and costs more.
"""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from scipy.optimize import brentq

from advsim._accounting import Accounting
from advsim._validation import (
    check_delta,
    check_nonnegative,
    check_positive,
)
from advsim.bounds._gdp import full_batch_epsilon, gdp_delta, gdp_epsilon, gdp_mu
from advsim.bounds._heuristic import heuristic_epsilon
from advsim.bounds._run import run_parameters

__all__ = [
    "bounds_for",
    "calibrate_noise_multiplier",
    "composition_delta",
    "composition_epsilon",
]

_VDI = 1e-4


def _check(steps, sampling_prob, noise_multiplier, canary_steps, value_discretization_interval):
    steps, q, sigma, n = run_parameters(steps, sampling_prob, noise_multiplier, canary_steps)
    vdi = check_positive("value_discretization_interval", value_discretization_interval)
    return steps, q, sigma, n, vdi


def _event(q: float, sigma: float, n: int) -> dp_event.DpEvent:
    step = dp_event.GaussianDpEvent(sigma)
    if q < 1.0:
        step = dp_event.PoissonSampledDpEvent(q, step)
    return dp_event.SelfComposedDpEvent(step, n)


def _accountant(q, sigma, n, vdi) -> pld_privacy_accountant.PLDAccountant:
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    acc.compose(_event(q, sigma, n))
    return acc


def composition_epsilon(
    delta,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=_VDI,
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

    Returns:
        eps >= 0.

    Raises:
        ValueError: on invalid inputs.
        RuntimeError: if the accountant returns a non-finite epsilon.

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
    eps = float(_accountant(q, sigma, n, vdi).get_epsilon(delta))
    if not math.isfinite(eps):
        raise RuntimeError(
            f"PLDAccountant returned epsilon {eps!r} for {q=}, {sigma=}, {n=}, {delta=}: "
            "dp_accounting's PLD keeps ~1.5e-15 of mass at infinite privacy loss, so "
            "deltas below about 2e-15 are out of its reach"
        )
    return max(eps, 0.0)


def composition_delta(
    eps,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=_VDI,
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
    delta = float(_accountant(q, sigma, n, vdi).get_delta(eps))
    # The accountant's pessimistic rounding can pass 1 by ~1e-10 where the exact delta is
    # within rounding of 1 (eps = 0, q = 0.99, sigma = 0.2, n = 50: 1 + 1.9e-10); 1 is
    # then the (valid, tight) answer. Anything further from [0, 1] is an error.
    if not 0.0 <= delta <= 1.0 + 1e-6:
        raise RuntimeError(f"PLDAccountant returned delta {delta!r} for {q=}, {sigma=}, {n=}")
    return min(delta, 1.0)


def calibrate_noise_multiplier(
    target_epsilon,
    delta,
    steps,
    sampling_prob,
    *,
    canary_steps=None,
    value_discretization_interval=_VDI,
    tol=1e-6,
) -> float:
    r"""The smallest noise multiplier whose composition epsilon is at most the target.

    `dp_accounting.calibrate_dp_mechanism` (Brent's method, then a check that the returned
    sigma meets the target) with the same PLD accountant as `composition_epsilon`. The
    search starts from a bracket given by theory: the last-iterate heuristic is a
    post-processing of the composition, so the sigma at which `heuristic_epsilon` equals
    the target is a lower end; full-batch DP-GD with noise $\sigma$ (no amplification by
    sampling) dominates the subsampled composition, so $1.05\sqrt{n}/\mu$ with
    $\mu$ = `gdp_mu(target, delta)` is an upper end. A first pass with a coarse
    discretization (1e-2) narrows the bracket, so that the accurate (and, at small sigma,
    expensive) accountant is only run near the answer.

    Args:
        target_epsilon: the epsilon to reach, > 0.
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$.
        sampling_prob: $q \in (0, 1]$.
        canary_steps: $n \in [1, T]$ (default $T$).
        value_discretization_interval: the PLD grid spacing, > 0.
        tol: absolute tolerance on sigma, > 0.

    Returns:
        sigma with `composition_epsilon(delta, ..., sigma) <= target_epsilon` (same
        discretization), within `tol` of the smallest such sigma.

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

    sigma_hi = 1.05 * math.sqrt(n) / gdp_mu(target, delta)

    def heuristic_gap(log_sigma):
        eps = heuristic_epsilon(delta, steps, q, math.exp(log_sigma), canary_steps=n)
        return eps - target

    hi = math.log(sigma_hi)
    lo = hi - 1.0
    while heuristic_gap(lo) < 0:
        lo -= 1.0
    sigma_lo = 0.999 * math.exp(brentq(heuristic_gap, lo, hi, xtol=1e-12, rtol=1e-12))

    def calibrate(lower, upper, interval, tolerance):
        return float(
            dp_accounting.calibrate_dp_mechanism(
                lambda: pld_privacy_accountant.PLDAccountant(
                    value_discretization_interval=interval
                ),
                lambda sigma: _event(q, sigma, n),
                target,
                delta,
                bracket_interval=dp_accounting.ExplicitBracketInterval(lower, upper),
                tol=tolerance,
            )
        )

    coarse = 1e-2
    if vdi >= coarse:
        return calibrate(sigma_lo, sigma_hi, vdi, tol)
    sigma_c = calibrate(sigma_lo, sigma_hi, coarse, 1e-4 * sigma_hi)
    # The coarse accountant over-estimates epsilon by a few percent at most, so its sigma
    # is a little above the answer; fall back to the full bracket if it is not.
    try:
        return calibrate(max(sigma_lo, 0.93 * sigma_c), min(sigma_hi, 1.01 * sigma_c), vdi, tol)
    except ValueError:
        return calibrate(sigma_lo, sigma_hi, vdi, tol)


def bounds_for(accounting: Accounting, delta) -> dict[str, float]:
    r"""The three reference epsilons of a run: heuristic, composition, full batch.

    - "heuristic": Theorem 1 of arXiv:2410.06186, `heuristic_epsilon` with
      `steps=accounting.steps` and `canary_steps=accounting.num_canary_steps`;
    - "composition": `composition_epsilon` over the canary steps (every iterate released);
    - "full_batch": `full_batch_epsilon`, full-batch DP-GD with noise sigma / q.

    Args:
        accounting: an `advsim.Accounting` record of the run.
        delta: $\delta \in (0, 1)$.

    Returns:
        A dict with keys "heuristic", "composition" and "full_batch".

    Example:
        >>> from advsim import Accounting
        >>> b = bounds_for(Accounting(3, 0.1, 1.0, (1, 2, 3)), 1e-6)
        >>> round(b["heuristic"], 3)
        2.222
    """
    if not isinstance(accounting, Accounting):
        raise TypeError(f"accounting must be an advsim.Accounting, got {type(accounting)!r}")
    delta = check_delta("delta", delta)
    return {
        "heuristic": heuristic_epsilon(delta, accounting),
        "composition": composition_epsilon(delta, accounting),
        "full_batch": full_batch_epsilon(delta, accounting),
    }

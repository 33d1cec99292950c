r"""Gaussian differential privacy and the full-batch bound.

$\mu$-GDP (Dong, Roth and Su, arXiv:1905.02383) is the privacy of distinguishing
$\mathcal{N}(0, 1)$ from $\mathcal{N}(\mu, 1)$. Its exact $(\varepsilon, \delta)$ profile is
Corollary 2.13 there:

$$\delta(\varepsilon) = \Phi(-\varepsilon/\mu + \mu/2)
  - e^{\varepsilon}\Phi(-\varepsilon/\mu - \mu/2).$$

Full-batch DP-GD is exactly such a mechanism (Appendix B of arXiv:2410.06186): $n$ steps
with sensitivity 1 and noise multiplier $\sigma$ compose to $\sqrt{n}/\sigma$-GDP, and for
linear losses the last iterate alone is just as revealing.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import erf, erfinv, log_ndtr, ndtri

from advsim._validation import (
    check_delta,
    check_nonnegative,
)
from advsim.bounds._mixture import MAX_SNR
from advsim.bounds._run import run_parameters

__all__ = ["full_batch_epsilon", "gdp_delta", "gdp_epsilon", "gdp_mu"]

_LOG_FLOOR = -1.0e4
_XTOL = 1e-14
_RTOL = 4.0 * 2.0**-52  # the smallest relative tolerance brentq accepts


def _log_delta(eps: float, u: float, mu: float) -> float:
    """log delta of mu-GDP at the rejection threshold u = eps / mu + mu / 2, floored:
    log(A - e^eps B) with A = Phi(mu - u), B = Phi(-u)."""
    log_a = float(log_ndtr(mu - u))
    if log_a == -math.inf:  # A = 0 in double precision, and 0 <= delta <= A
        return _LOG_FLOOR
    d = eps + float(log_ndtr(-u)) - log_a
    if d >= 0:
        return _LOG_FLOOR
    tail = math.log(-math.expm1(d)) if d > -math.log(2.0) else math.log1p(-math.exp(d))
    return max(log_a + tail, _LOG_FLOOR)


def _check_mu(mu) -> float:
    mu = check_nonnegative("mu", mu)
    if mu > MAX_SNR:
        raise ValueError(f"mu must be in [0, {MAX_SNR:g}] (epsilon would overflow), got {mu!r}")
    return mu


def gdp_delta(eps, mu) -> float:
    r"""delta(eps) of $\mu$-GDP, Corollary 2.13 of arXiv:1905.02383.

    $\delta = \Phi(-\varepsilon/\mu + \mu/2) - e^{\varepsilon}\Phi(-\varepsilon/\mu - \mu/2)$,
    computed as $A \cdot (1 - e^{\log B - \log A})$ with both logs from `log_ndtr`, so that
    neither term underflows before the difference is taken; at $\varepsilon = 0$ it is
    $\mathrm{erf}(\mu / (2\sqrt{2}))$.

    Args:
        eps: $\varepsilon \ge 0$, finite.
        mu: $\mu \in [0, 10^{100}]$ ($\mu = 0$ is perfect privacy).

    Returns:
        delta in [0, 1).

    Raises:
        ValueError: on a negative or non-finite `eps` or `mu`.

    Example:
        >>> round(gdp_delta(1.0, 1.0), 6)
        0.126937
    """
    eps = check_nonnegative("eps", eps)
    mu = _check_mu(mu)
    if mu == 0.0:
        return 0.0
    if eps == 0.0:
        return float(erf(mu / (2.0 * math.sqrt(2.0))))
    log_d = _log_delta(eps, eps / mu + 0.5 * mu, mu)
    return 0.0 if log_d <= _LOG_FLOOR else math.exp(log_d)


def gdp_epsilon(delta, mu) -> float:
    r"""eps(delta) of $\mu$-GDP: the inverse of Corollary 2.13 of arXiv:1905.02383.

    One `brentq` root find over the rejection threshold $u$ (with
    $\varepsilon = \mu u - \mu^2 / 2$) of $\log \delta(u) = \log \delta$.

    Args:
        delta: $\delta \in (0, 1)$.
        mu: $\mu \in [0, 10^{100}]$.

    Returns:
        eps >= 0; 0 when $\mu = 0$ or when $\delta(0) = \mathrm{erf}(\mu/(2\sqrt 2)) \le \delta$.

    Raises:
        ValueError: on invalid inputs.

    Example:
        >>> round(gdp_epsilon(1e-5, 1.0), 4)
        4.3772
    """
    delta = check_delta("delta", delta)
    mu = _check_mu(mu)
    if mu == 0.0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    log_delta = math.log(delta)
    lo = 0.5 * mu  # eps = 0
    hi = mu - ndtri(delta)  # delta(u) <= Phi(mu - u) = delta

    def f(x):
        return _log_delta(mu * x - 0.5 * mu * mu, x, mu) - log_delta

    if not f(lo) > 0 > f(hi):
        # Only for huge mu (1e8 and beyond at delta = 1e-5): eps = mu u - mu^2 / 2 cancels
        # beyond float64's precision, so the bracket's ends cannot be told apart.
        raise ValueError(
            f"mu={mu:g} is too large for gdp_epsilon in float64 (eps would be about "
            f"mu^2 / 2 = {0.5 * mu * mu:.3g}); valid for mu up to about 3e7"
        )
    u = brentq(f, lo, hi, xtol=_XTOL, rtol=_RTOL)
    return max(mu * u - 0.5 * mu * mu, 0.0)


def gdp_mu(eps, delta) -> float:
    r"""The $\mu$ for which $\mu$-GDP has exactly delta(eps) = delta.

    Inverts Corollary 2.13 of arXiv:1905.02383 in $\mu$ ($\delta$ increases with $\mu$
    from 0 to 1): closed form $2\sqrt{2}\,\mathrm{erf}^{-1}(\delta)$ at $\varepsilon = 0$,
    otherwise a `brentq` root find over $\log \mu$.

    Args:
        eps: $\varepsilon \ge 0$, finite.
        delta: $\delta \in (0, 1)$.

    Returns:
        mu > 0.

    Raises:
        ValueError: on invalid inputs.

    Example:
        >>> round(gdp_mu(gdp_epsilon(1e-5, 1.0), 1e-5), 9)
        1.0
    """
    eps = check_nonnegative("eps", eps)
    delta = check_delta("delta", delta)
    if eps == 0.0:
        return float(2.0 * math.sqrt(2.0) * erfinv(delta))
    log_delta = math.log(delta)

    def f(log_mu):
        mu = math.exp(log_mu)
        return _log_delta(eps, eps / mu + 0.5 * mu, mu) - log_delta

    # delta(eps, mu) -> 0 as mu -> 0 and -> 1 as mu -> inf: expand a bracket in log mu.
    lo, hi = -1.0, 1.0
    while f(hi) < 0:
        lo, hi = hi, 2.0 * hi
    while f(lo) > 0:
        lo, hi = 2.0 * lo if lo < 0 else lo - 1.0, lo
    log_mu = brentq(f, lo, hi, xtol=_XTOL, rtol=_RTOL)
    return math.exp(log_mu)


def full_batch_epsilon(
    delta, steps, sampling_prob=None, noise_multiplier=None, *, canary_steps=None
) -> float:
    r"""eps(delta) of full-batch DP-GD with the same expected signal-to-noise ratio.

    DP-GD with $q = 1$ and noise multiplier $\sigma / q$ (the batch always holds the
    canary, and the noise is scaled to the expected batch) over the $n$ steps that carry
    the canary is $\mu$-GDP with $\mu = q\sqrt{n}/\sigma$ (Appendix B of
    arXiv:2410.06186; composition of Gaussian mechanisms, Corollary 3.3 of
    arXiv:1905.02383), converted exactly with `gdp_epsilon`. With $n = T$ this is both the
    composition and the last-iterate bound of full-batch DP-GD. A learning-rate schedule
    (`Accounting.step_sizes`) does not change it: it bounds the release of every iterate,
    and scaling each update by a public nonzero constant is invertible post-processing.

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$ (bounds `canary_steps`), or an `advsim.Accounting` (then nothing else).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, the number of steps carrying the canary, or those steps
            (distinct, in $[1, T]$; only their number is read) (default $T$).

    Returns:
        eps >= 0.

    Raises:
        ValueError: on invalid inputs.

    Example:
        >>> round(full_batch_epsilon(1e-5, 100, 0.1, 1.0), 4)  # mu = 1
        4.3772
    """
    delta = check_delta("delta", delta)
    # A learning-rate schedule does not change it (the docstring).
    _, q, sigma, n = run_parameters(
        steps, sampling_prob, noise_multiplier, canary_steps, schedule="ignore"
    )
    return gdp_epsilon(delta, q * math.sqrt(n) / sigma)

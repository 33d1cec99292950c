"""Score generators and independent oracles shared by the audit tests.

Every expected number in tests/audits comes from one of these closed forms (or from
`advsim.bounds`, whose GDP conversion is itself checked against `gdp_epsilon_oracle`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import scipy.stats

from advsim import Accounting, Scores


def gaussian_scores(mu: float, n: int, seed: int) -> Scores:
    """canary_in ~ N(mu, 1), canary_out ~ N(0, 1): exactly the mu-GDP Gaussian mechanism
    (its trade-off curve is G_mu, Dong-Roth-Su arXiv:1905.02383, Definition 2.7)."""
    rng = np.random.default_rng(seed)
    return Scores(rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n))


def family_scores(steps: int, q: float, sigma: float, n: int, seed: int) -> Scores:
    """canary_in ~ Binomial(T, q) + N(0, T sigma^2), canary_out ~ N(0, T sigma^2): the pair
    of Theorem 1 of arXiv:2410.06186 (linear losses, canary in every step)."""
    rng = np.random.default_rng(seed)
    scale = math.sqrt(steps) * sigma
    canary_in = rng.binomial(steps, q, n) + rng.normal(0.0, scale, n)
    return Scores(canary_in, rng.normal(0.0, scale, n))


def every_step(steps: int, q: float, sigma: float) -> Accounting:
    return Accounting(steps, q, sigma, canary_steps=tuple(range(1, steps + 1)))


def gdp_delta_oracle(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP: Corollary 2.13 of arXiv:1905.02383,
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    return float(
        scipy.stats.norm.cdf(-eps / mu + mu / 2)
        - math.exp(eps) * scipy.stats.norm.cdf(-eps / mu - mu / 2)
    )


def gdp_epsilon_oracle(delta: float, mu: float) -> float:
    """Inverts `gdp_delta_oracle` with Brent's method (xtol 1e-12)."""
    if gdp_delta_oracle(0.0, mu) <= delta:
        return 0.0
    return scipy.optimize.brentq(lambda e: gdp_delta_oracle(e, mu) - delta, 0.0, 100.0, xtol=1e-12)


def randomized_response_scores(eps: float, n: int, seed: int) -> Scores:
    """Binary scores of randomized response: 1 w.p. p = e^eps / (1 + e^eps) with the canary,
    w.p. 1 - p without. A pure eps-DP mechanism for which the threshold test at 1 is
    optimal, so the (eps, delta) audit can come close to the truth with few runs."""
    rng = np.random.default_rng(seed)
    p = math.exp(eps) / (1 + math.exp(eps))
    return Scores(
        (rng.random(n) < p).astype(np.float64), (rng.random(n) < 1 - p).astype(np.float64)
    )


def randomized_response_epsilon(eps: float, delta: float) -> float:
    """eps(delta) of randomized response: its hockey-stick divergence is
    delta(e') = max(0, p - e^{e'} (1 - p)) (the set {1} is optimal), so
    eps(delta) = log(e^eps - delta (1 + e^eps)) (clamped at 0)."""
    return max(0.0, math.log(math.exp(eps) - delta * (1 + math.exp(eps))))


def clopper_pearson_reference(k, n: int, level: float):
    """The one-sided Clopper-Pearson upper bound on a rate with `k` of `n` events, failing
    with probability `level`: the (1 - level) quantile of Beta(k + 1, n - k), scipy's (1
    when k = n)."""
    k = np.asarray(k)
    return np.where(k < n, scipy.stats.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1)), 1.0)


def eps_delta_reference(fpr_upper, fnr_upper, delta: float):
    """The largest eps that the rate bounds exclude by the two (eps, delta)-DP
    inequalities FPR + e^eps FNR >= 1 - delta and FNR + e^eps FPR >= 1 - delta (Kairouz,
    Oh, Viswanath, arXiv:1311.0776), solved for eps (-inf where neither excludes any)."""
    fpr, fnr = np.asarray(fpr_upper, np.float64), np.asarray(fnr_upper, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = np.log((1 - fnr) - delta) - np.log(fpr)
        tnr = np.log((1 - fpr) - delta) - np.log(fnr)
    return np.maximum(np.nan_to_num(tpr, nan=-np.inf), np.nan_to_num(tnr, nan=-np.inf))

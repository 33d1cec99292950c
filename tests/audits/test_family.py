"""HeuristicFamilyAudit: recovering the heuristic epsilon of the linear last-iterate process."""

import math
import warnings

import numpy as np
import pytest
import scipy.stats

import advsim.bounds as bounds
from advsim import Accounting, Scores
from advsim.audits import AssumptionRejectedWarning, GaussianDPAudit, HeuristicFamilyAudit

from ._helpers import every_step, family_scores

DELTA = 1e-5


def _acceptance(steps, q, sigma, seed=0):
    # Scores sampled exactly from P = Binomial(T, q) + N(0, T sigma^2) vs
    # Q = N(0, T sigma^2), 10^6 runs per world; the truth is advsim.bounds'
    # heuristic_epsilon (Theorem 1 of arXiv:2410.06186).
    # The family assumption holds, so its held-out check rejects with probability at most
    # assumption_level (0.05); seed 0 at T = 100 is such a false alarm (the binned test's
    # p = 0.0024): the warning is allowed here, and is not what this test pins.
    s = family_scores(steps, q, sigma, 10**6, seed=seed)
    acc = every_step(steps, q, sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        r = HeuristicFamilyAudit()(s, delta=DELTA, accounting=acc)
    truth = bounds.heuristic_epsilon(DELTA, steps, q, sigma, canary_steps=steps)
    return r, truth


@pytest.mark.parametrize(
    ("steps", "q", "truth"),
    # The heuristic epsilon at delta = 1e-5, sigma = 1 from the 32-digit mpmath oracle of
    # Appendix A of arXiv:2410.06186 (TheoremOneOracle in tests/advsim/test_bounds_heuristic.py,
    # log_tol = 80, Newton from 5.0 and 1.3): 5.35822349595 and 1.27775588779.
    [(100, 0.1, 5.35822349595), (1000, 0.01, 1.27775588779)],
)
def test_acceptance_recovers_heuristic_within_5_percent(steps, q, truth):
    # Project acceptance point: family auditing of the linear process at 10^6 runs per
    # world recovers the heuristic epsilon within 5% and never exceeds it.
    r, heuristic = _acceptance(steps, q, 1.0)
    assert heuristic == pytest.approx(truth, rel=1e-9)
    # An (eps, delta) bound under the family assumption, which holds here exactly.
    assert r.guarantee.assumption == "heuristic_family" and not r.rigorous
    assert r.extras["sigma_upper"] >= 1.0  # soundness in the family's own parameter
    assert 0.95 * heuristic <= r.eps_lower <= heuristic


@pytest.mark.slow
@pytest.mark.parametrize(("steps", "q"), [(100, 0.1), (1000, 0.01)])
# Seeds 302, 306, 307 are regressions: choosing the threshold with the reporting level
# (1 - c)/2 instead of the Bonferroni level on the choosing half gave 0.76, 0.80 and 0.59
# of the heuristic for (100, 0.1) (now 0.984-0.989).
@pytest.mark.parametrize("seed", [1, 2, 3, 302, 306, 307])
def test_acceptance_other_seeds(steps, q, seed):
    r, heuristic = _acceptance(steps, q, 1.0, seed=seed)
    assert 0.95 * heuristic <= r.eps_lower <= heuristic


def test_sound_with_fewer_runs_and_partial_canary_steps():
    # Canary can be sampled at only n_c = 20 of T = 50 steps: P = Binomial(20, q) +
    # N(0, T sigma^2). sigma_upper must cover the true sigma; eps must not exceed the
    # heuristic with canary_steps = 20.
    steps, n_c, q, sigma, n = 50, 20, 0.2, 0.8, 10**5
    rng = np.random.default_rng(4)
    scale = math.sqrt(steps) * sigma
    s = Scores(rng.binomial(n_c, q, n) + rng.normal(0, scale, n), rng.normal(0, scale, n))
    acc = Accounting(steps, q, sigma, canary_steps=tuple(range(1, n_c + 1)))
    r = HeuristicFamilyAudit()(s, delta=DELTA, accounting=acc)
    truth = bounds.heuristic_epsilon(DELTA, steps, q, sigma, canary_steps=n_c)
    assert r.extras["sigma_upper"] >= sigma
    assert 0.8 * truth <= r.eps_lower <= truth


def test_full_batch_family_is_gdp():
    # q = 1: P = T + N(0, T sigma^2) vs N(0, T sigma^2) is mu-GDP with mu = sqrt(T)/sigma
    # (Appendix B of arXiv:2410.06186), and f_sigma = G_mu. At the same threshold the two
    # audits must agree: sigma_upper = sqrt(T) / mu_lower, and both epsilons coincide.
    steps = 16
    s = family_scores(steps, 1.0, 4.0, 10**4, seed=6)  # mu = 1
    acc = every_step(steps, 1.0, 4.0)
    tau = 2.5
    fam = HeuristicFamilyAudit().at_threshold(s, tau, delta=DELTA, accounting=acc)
    gdp = GaussianDPAudit().at_threshold(s, tau, delta=DELTA)
    mu_lower = gdp.extras["mu_lower"]
    assert 0.8 < mu_lower < 1.0
    assert fam.extras["sigma_upper"] == pytest.approx(math.sqrt(steps) / mu_lower, rel=1e-8)
    assert fam.eps_lower == pytest.approx(gdp.eps_lower, rel=1e-6)


def test_only_ranks_matter():
    # The audit only uses the rates of threshold tests, so a strictly increasing map of
    # the scores (here x -> 8 x^3, not on the family's scale) changes nothing.
    s = family_scores(100, 0.1, 1.0, 20_000, seed=7)
    acc = every_step(100, 0.1, 1.0)
    t = Scores(8 * s.canary_in**3, 8 * s.canary_out**3)
    a = HeuristicFamilyAudit()(s, delta=DELTA, accounting=acc)
    b = HeuristicFamilyAudit()(t, delta=DELTA, accounting=acc)
    assert (a.eps_lower, a.eps_point, a.fpr, a.fnr) == (b.eps_lower, b.eps_point, b.fpr, b.fnr)


def test_no_sigma_excluded_gives_infinite_sigma_and_zero_eps():
    # FNR_ub >= 1 - FPR_ub at the threshold: f_sigma(a) < 1 - a for every finite sigma,
    # so no sigma is excluded.
    s = family_scores(100, 0.1, 1.0, 20_000, seed=8)
    acc = every_step(100, 0.1, 1.0)
    r = HeuristicFamilyAudit().at_threshold(s, 1e9, delta=DELTA, accounting=acc)
    assert r.fpr == 0.0 and r.fnr == 1.0
    assert r.extras["sigma_upper"] == math.inf and r.eps_lower == 0.0


def test_rates_incompatible_with_the_family_are_flagged():
    # Perfectly separated scores: FNR_ub ~ 3.7e-5 at n = 10^5, but with probability
    # (1 - q)^T = 2^-10 ~ 9.8e-4 the canary is never sampled, so every member of the
    # family has FNR >= 9.8e-4 (1 - FPR). The family does not fit: no number is returned
    # (not the floor's heuristic eps, > 10, which would be meaningless), and the reason
    # says so.
    n = 10**5
    s = Scores(np.full(n, 100.0), np.zeros(n))
    acc = every_step(10, 0.5, 1.0)
    with pytest.warns(AssumptionRejectedWarning):
        r = HeuristicFamilyAudit()(s, delta=DELTA, accounting=acc)
    assert r.extras["sigma_upper_at_floor"] is True
    # The floor is the least private member of the family: at sigma_upper, the law
    # P = Binomial(10, 1/2) + N(0, 10 sigma^2) against Q = N(0, 10 sigma^2) is the
    # noiseless one (tails below 1e-80, scipy): the test "score > 1/2" has FPR ~ 0 and
    # FNR ~ (1 - q)^T = 2^-10, the mass of the never-sampled canary, which the rates here
    # (FNR_ub ~ 4e-5) undercut.
    sigma_upper = r.extras["sigma_upper"]
    s_noise = math.sqrt(10) * sigma_upper
    assert 0 < sigma_upper
    fpr_half = scipy.stats.norm.sf(0.5 / s_noise)
    k = np.arange(11)
    fnr_half = np.sum(scipy.stats.binom.pmf(k, 10, 0.5) * scipy.stats.norm.cdf((0.5 - k) / s_noise))
    assert fpr_half < 1e-80 and fnr_half == pytest.approx(2.0**-10, rel=1e-12)
    assert r.fnr < 2.0**-10
    assert r.eps_lower is None and "family does not fit" in r.eps_lower_note
    assert r.eps_point is None and r.assumption_rejected

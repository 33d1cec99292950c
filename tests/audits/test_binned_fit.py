"""The binned likelihood-ratio test of the assumption checks (`advsim.audits._binned_fit`).

Expected values come from:

- an independent maximum-likelihood fit of the same model (scipy's SLSQP over the cell
  probabilities themselves, with the null's constraint written out), for G;
- Wilks' theorem: under the null G is asymptotically chi^2 with bins - 2 degrees of
  freedom, so over repeats the mean of G is near `df` and p-values are uniform;
- the exact T = 2 threshold-landscape law (`landscape_two_step`, module docstring of
  advsim.mechanisms.landscape), a local departure from every G_mu that the band of the
  checks does not resolve at 5 x 10^4 scores per world.
"""

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.special
import scipy.stats

from advsim.audits import check_gaussian_tradeoff, check_heuristic_family
from advsim.audits._assumption_families import _family_curve
from advsim.audits._binned_fit import (
    _MIN_PER_BIN,
    _bin_counts,
    _negative_log_likelihood,
    binned_mixture_test,
)

from ._helpers import every_step, family_scores
from .test_assumption import landscape_two_step

GDP = (np.ones(1), np.ones(1))


def _reference_g(n_in, n_out, shifts, weights) -> float:
    """G from an independent fit: the out-cell CDF values u_k and theta, by SLSQP on
    the log-likelihood written directly in u (not in probits), from several starts."""
    k = n_in.size

    def nll(x):
        u = np.concatenate([[0.0], np.sort(x[:-1]), [1.0]])
        z = scipy.special.ndtri(np.clip(u[1:-1], 1e-300, 1 - 1e-16))
        v = np.concatenate(
            [[0.0], scipy.special.ndtr(z[:, None] - shifts * x[-1]) @ weights, [1.0]]
        )
        du, dv = np.maximum(np.diff(u), 1e-300), np.maximum(np.diff(v), 1e-300)
        return -(np.sum(n_out * np.log(du)) + np.sum(n_in * np.log(dv)))

    u0 = np.cumsum(n_out)[:-1] / n_out.sum()
    best = math.inf
    for theta0 in (0.0, 0.5, 1.0, 2.0):
        res = scipy.optimize.minimize(
            nll, np.append(u0, theta0), method="Nelder-Mead",
            options={"maxiter": 40_000, "maxfev": 40_000, "xatol": 1e-10, "fatol": 1e-10},
        )  # fmt: skip
        best = min(best, res.fun)
    sat = sum(float(np.sum(n * np.log(n / n.sum()))) for n in (n_in, n_out))
    assert k >= 3
    return 2.0 * (sat + best)


@pytest.mark.parametrize("mu", [0.0, 0.7, 1.5])
def test_statistic_matches_an_independent_fit(mu):
    rng = np.random.default_rng(3)
    cin, cout = np.sort(rng.normal(mu, 1.0, 3000)), np.sort(rng.normal(0.0, 1.0, 3000))
    r = binned_mixture_test(cin, cout, *GDP, level=0.05, theta_guess=mu, bins=5)
    n_in, n_out, _ = _bin_counts(cin, cout, 5)
    ref = _reference_g(n_in, n_out, *GDP)
    assert r["df"] == 3 and r["bins"] == 5
    # The reference is a local optimiser too: it can only find a G at least the true one.
    assert r["statistic"] <= ref + 1e-6 and r["statistic"] == pytest.approx(ref, abs=1e-3)
    assert r["p_value"] == pytest.approx(scipy.stats.chi2.sf(r["statistic"], 3), rel=1e-12)


def test_gradient_matches_finite_differences_on_a_mixture():
    # The heuristic family at T = 10, q = 0.1 (every step a canary step): 11 atoms.
    _, _, (shifts, weights) = _family_curve(every_step(10, 0.1, 1.0))
    n_in = np.array([300, 500, 900, 1200, 700])
    n_out = np.array([600, 900, 1000, 800, 300])
    w = np.array([-1.0, -0.2, -0.4, 0.1, 1.3])
    value, grad = _negative_log_likelihood(w, n_in, n_out, shifts, weights)
    numeric = scipy.optimize.approx_fprime(
        w, lambda x: _negative_log_likelihood(x, n_in, n_out, shifts, weights)[0], 1e-7
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-3)
    assert math.isfinite(value)


def test_bins_are_merged_until_each_world_has_enough():
    rng = np.random.default_rng(4)
    cin, cout = np.sort(rng.normal(3.0, 1.0, 2000)), np.sort(rng.normal(0.0, 1.0, 2000))
    n_in, n_out, cuts = _bin_counts(cin, cout, 20)
    assert n_in.sum() == cin.size and n_out.sum() == cout.size
    assert n_in.min() >= _MIN_PER_BIN and n_out.min() >= _MIN_PER_BIN
    assert cuts.size == n_in.size - 1 and np.all(np.diff(cuts) > 0)
    # Worlds that never meet leave no bin with both: the test does not run.
    far = binned_mixture_test(cin + 50.0, cout, *GDP, level=0.05, theta_guess=50.0)
    assert far is None


def test_worlds_of_unequal_sizes_keep_their_bins():
    # The cuts are quantiles of the worlds' equal-weight mixture: with 1000 in-scores and
    # 10^5 out-scores (N(1, 1) vs N(0, 1)), 19 of the 20 bins hold >= 20 of each world
    # (pooled quantiles would give the in-world a few percent of its scores in the lower
    # bins); with equal sizes the cuts are the pooled scores of ranks floor(i N / K).
    rng = np.random.default_rng(7)
    cin, cout = np.sort(rng.normal(1.0, 1.0, 1000)), np.sort(rng.normal(0.0, 1.0, 100_000))
    n_in, n_out, _ = _bin_counts(cin, cout, 20)
    assert n_in.size >= 19 and n_in.min() >= _MIN_PER_BIN
    cin, cout = np.sort(rng.normal(1.0, 1.0, 5000)), np.sort(rng.normal(0.0, 1.0, 5000))
    pooled = np.sort(np.r_[cin, cout])
    _, _, cuts = _bin_counts(cin, cout, 20)
    np.testing.assert_array_equal(cuts, pooled[(np.arange(1, 20) * pooled.size) // 20])


def test_ties_give_cuts_at_distinct_values():
    rng = np.random.default_rng(5)
    cin = np.sort(rng.binomial(20, 0.6, 5000).astype(float))
    cout = np.sort(rng.binomial(20, 0.5, 5000).astype(float))
    n_in, n_out, cuts = _bin_counts(cin, cout, 20)
    assert np.all(np.diff(cuts) > 0) and set(cuts) <= set(np.unique(np.r_[cin, cout]))
    np.testing.assert_array_equal(n_in, np.diff(np.r_[0, np.searchsorted(cin, cuts), cin.size]))


@pytest.mark.slow
def test_mean_statistic_is_its_degrees_of_freedom_under_the_null():
    # Wilks: G ~ chi^2_{df} under the null, mean df, standard deviation sqrt(2 df); over
    # 120 repeats the mean's standard error is sqrt(2 df / 120) (0.55 at df = 18).
    rng = np.random.default_rng(6)
    stats, pvals = [], []
    for _ in range(120):
        cin, cout = np.sort(rng.normal(1.0, 1.0, 4000)), np.sort(rng.normal(0.0, 1.0, 4000))
        r = binned_mixture_test(cin, cout, *GDP, level=0.05, theta_guess=1.0)
        stats.append(r["statistic"])
        pvals.append(r["p_value"])
    df = r["df"]
    assert abs(np.mean(stats) - df) < 4 * math.sqrt(2 * df / 120), (np.mean(stats), df)
    assert scipy.stats.kstest(pvals, "uniform").pvalue > 1e-3


def test_local_departure_rejected_where_the_band_is_not():
    # The exact T = 2 landscape law at sigma = 1, B = 4: its ROC bends away from every
    # G_mu only locally (the jump at the threshold). At 5 x 10^4 per world the band
    # allows mu in an interval in 10 of 10 seeds measured; the binned test rejected all 10.
    for seed in range(4):
        rng = np.random.default_rng(seed)
        cin = landscape_two_step(50_000, 1.0, 4, True, rng)
        cout = landscape_two_step(50_000, 1.0, 4, False, rng)
        r = check_gaussian_tradeoff(cin, cout, level=0.05)
        assert not r.worst["limits_conflict"] and r.worst["atom"] is None
        assert r.binned["rejected"] and r.rejected and r.param_interval is None
        assert "binned likelihood-ratio test rejects" in r.describe()


@pytest.mark.slow
@pytest.mark.parametrize("check", ["gdp", "family"])
def test_false_alarms_of_the_whole_check_within_the_binomial_rule(check):
    # Level 0.2 (0.1 each for the band and the binned test), 150 repeats: rejections must
    # not exceed the 0.999-quantile of Binomial(150, 0.2) (the rule of
    # tests/properties/test_audit_calibration.py). GDP: N(1, 1) vs N(0, 1); the family:
    # its own pair at T = 10, q = 0.1, sigma = 1 (Theorem 1 of arXiv:2410.06186).
    level, repeats, rejected = 0.2, 150, 0
    acc = every_step(10, 0.1, 1.0)
    for seed in range(repeats):
        if check == "gdp":
            rng = np.random.default_rng(seed)
            r = check_gaussian_tradeoff(
                rng.normal(1.0, 1.0, 5000), rng.normal(0.0, 1.0, 5000), level=level
            )
        else:
            s = family_scores(10, 0.1, 1.0, 5000, seed=20_000 + seed)
            r = check_heuristic_family(s.canary_in, s.canary_out, acc, level=level)
        rejected += r.rejected
    allowed = int(scipy.stats.binom.ppf(0.999, repeats, level))
    assert rejected <= allowed, (rejected, allowed)

"""Bayesian estimate (joint-beta posterior, Jeffreys priors): the worked example, an
independent Monte Carlo oracle, and that it is labelled a credible interval."""

import numpy as np
import pytest

from advsim import Scores
from advsim.audits import BayesianEstimate, bayesian_audit, bayesian_estimate, posterior_eps_cdf

DELTA = 1e-5


def _mc_quantiles(tp, fn, fp, tn, delta, probs, draws=400_000, seed=0):
    """Oracle: draw (FPR, FNR) from the posterior and take eps's empirical quantiles.

    eps(a, b) is the smallest eps whose (eps, delta) region holds (FPR, FNR) = (a, b): the
    four inequalities of Kairouz, Oh & Viswanath (2015), written out here independently of
    the grid code.
    """
    rng = np.random.default_rng(seed)
    a = rng.beta(fp + 0.5, tn + 0.5, draws)
    b = rng.beta(fn + 0.5, tp + 0.5, draws)

    def log_ratio(num, den):
        out = np.full(num.shape, -np.inf)
        ok = num > 0
        with np.errstate(divide="ignore"):
            out[ok] = np.log(num[ok]) - np.log(den[ok])
        return out

    eps = np.maximum.reduce(
        [
            np.zeros(draws),
            log_ratio(1 - delta - a, b),
            log_ratio(1 - delta - b, a),
            log_ratio(a - delta, 1 - b),
            log_ratio(b - delta, 1 - a),
        ]
    )
    return np.quantile(eps, probs)


def test_worked_example_within_two_percent():
    # privacy_estimates' README (Zanella-Beguelin et al. 2023, arXiv:2206.05199):
    # TP = 487, TN = 1, FP = 512, FN = 0, delta = 1e-5, alpha = 0.1 -> about [0.145, 6.40].
    r = bayesian_estimate(tp=487, fn=0, fp=512, tn=1, delta=DELTA, alpha=0.1)
    low, high = r.credible_interval
    assert low == pytest.approx(0.145, rel=0.02)
    assert high == pytest.approx(6.40, rel=0.02)
    assert low < r.eps_median < high


@pytest.mark.parametrize(
    "counts",
    [
        dict(tp=487, fn=0, fp=512, tn=1),  # the worked example (near chance, FNR = 0)
        dict(tp=900, fn=100, fp=20, tn=980),  # a good test: eps about log(0.9 / 0.02)
        dict(tp=30, fn=70, fp=60, tn=40),  # worse than chance: the flipped inequalities
    ],
)
def test_grid_equals_monte_carlo_oracle(counts):
    # 4 x 10^5 posterior draws: the 5% / 50% / 95% quantiles have Monte Carlo error well
    # below 2% (measured at most 0.3%); the grid has no randomness at all.
    r = bayesian_estimate(**counts, delta=DELTA, alpha=0.1)
    mc = _mc_quantiles(**counts, delta=DELTA, probs=[0.05, 0.5, 0.95])
    got = [r.credible_interval[0], r.eps_median, r.credible_interval[1]]
    np.testing.assert_allclose(got, mc, rtol=0.02, atol=2e-3)


def test_cdf_is_a_cdf():
    cdf = posterior_eps_cdf([0.0, 0.5, 1.0, 3.0, 10.0], tp=900, fn=100, fp=20, tn=980, delta=DELTA)
    assert np.all(np.diff(cdf) >= 0) and 0 <= cdf[0] and cdf[-1] == pytest.approx(1.0, abs=1e-9)


def test_labelled_credible_interval_not_a_bound():
    r = bayesian_estimate(tp=900, fn=100, fp=20, tn=980, delta=DELTA)
    g = r.guarantee
    assert isinstance(r, BayesianEstimate) and not hasattr(r, "eps_lower")
    assert g.statement == "eps_credible_interval" and g.assumption == "jeffreys_prior"
    assert not r.rigorous and not g.rigorous and g.label == "credible interval"
    assert "not a confidence bound" in g.description
    d = r.to_dict()
    assert d["guarantee"]["statement"] == "eps_credible_interval" and d["rigorous"] is False


def test_from_scores_held_out_and_explicit():
    rng = np.random.default_rng(0)
    s = Scores(rng.normal(2.0, 1.0, 20_000), rng.normal(0.0, 1.0, 20_000))
    held = bayesian_audit(s, delta=DELTA)
    assert held.guarantee.held_out and held.tp + held.fn == 10_000
    fixed = bayesian_audit(s, delta=DELTA, threshold=3.0)
    assert not fixed.guarantee.held_out and fixed.tp + fixed.fn == 20_000
    # At tau = 3 the exact rates give eps = log((1 - Phi(-1) - delta) / Phi(-3)) = 4.767
    # (closed form); 20_000 runs per world put it inside the 90% interval.
    low, high = fixed.credible_interval
    assert low < 4.767 < high
    # The same interval as the counts' own (numpy's counts at tau, then bayesian_estimate,
    # checked against a Monte Carlo oracle above): the audit adds only the counting.
    cin, cout = np.asarray(s.canary_in), np.asarray(s.canary_out)
    fp, fn = int(np.sum(cout >= 3.0)), int(np.sum(cin < 3.0))
    direct = bayesian_estimate(tp=cin.size - fn, fn=fn, fp=fp, tn=cout.size - fp, delta=DELTA)
    assert fixed.credible_interval == direct.credible_interval
    assert fixed.eps_median == direct.eps_median


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(tp=-1, fn=0, fp=1, tn=1), "tp must be an integer >= 0, got -1"),
        (dict(tp=1.5, fn=0, fp=1, tn=1), "tp must be an integer >= 0"),
        (dict(tp=0, fn=0, fp=1, tn=1), "tp \\+ fn"),
        (dict(tp=1, fn=0, fp=1, tn=1, alpha=1.0), "alpha"),
        (dict(tp=1, fn=0, fp=1, tn=1, grid_size=4), "grid_size"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bayesian_estimate(delta=DELTA, **kwargs)

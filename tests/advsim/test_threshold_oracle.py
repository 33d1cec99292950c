"""The threshold figure's oracle (`advsim.figures._threshold_oracle`): the exact rates,
the rank tests' bounds against a direct count and scipy's Beta quantile, and their
soundness on the Laplace pair (exact eps known in closed form)."""

import math

import numpy as np
import pytest
import scipy.stats

from advsim import Scores
from advsim.audits import Explicit, audit
from advsim.figures._tables_threshold_strategies import family_exact, sample_scores
from advsim.figures._threshold_oracle import SHARES, exact_rates, oracle_eps, oracle_tests

DELTA, CONFIDENCE = 1e-5, 0.95


def test_exact_rates_are_the_laws():
    t, fpr, fnr = exact_rates("gaussian_strong")
    i = np.searchsorted(t, 1.0)
    assert fpr[i] == scipy.stats.norm.sf(t[i]) and fnr[i] == scipy.stats.norm.cdf(t[i] - 2.0)
    # the Binomial pair by direct sums: FPR(k) = P_out(X >= k), FNR(k) = P_in(X < k)
    k, fpr, fnr = exact_rates("binomial")
    for j in (0, 7, 12, 21):
        out = sum(math.comb(20, x) * 0.5**20 for x in range(j, 21))
        inn = sum(math.comb(20, x) * 0.6**x * 0.4 ** (20 - x) for x in range(j))
        assert math.isclose(fpr[j], out, rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(fnr[j], inn, rel_tol=1e-12, abs_tol=1e-15)


def _eps(fpr_ub: float, fnr_ub: float) -> float:
    """The two-sided eps_delta bound, written out (`audits.eps_delta_terms`)."""
    terms = [math.log(1 - fnr_ub - DELTA) - math.log(fpr_ub) if 1 - fnr_ub > DELTA else -1,
             math.log(1 - fpr_ub - DELTA) - math.log(fnr_ub) if 1 - fpr_ub > DELTA else -1]
    return max(0.0, *terms)  # fmt: skip


@pytest.mark.parametrize("share", [0.5, 0.9, 0.1])
def test_rank_and_value_tests_count_and_bound_as_written(share):
    rng = np.random.default_rng(0)
    scores = Scores(rng.normal(1.5, 1.0, 400), rng.normal(0.0, 1.0, 500))
    a_fp, a_fn = share * (1 - CONFIDENCE), (1 - share) * (1 - CONFIDENCE)
    x_in, x_out = np.asarray(scores.canary_in), np.asarray(scores.canary_out)
    for k in (0, 3, 40):
        v = np.sort(x_out)[::-1][k]  # "in" iff score > the (k+1)-th largest out-score
        fn = int(np.sum(x_in <= v))
        fpr_ub = scipy.stats.beta.ppf(1 - a_fp, k + 1, 500 - k)  # the order statistic's bound
        fnr_ub = scipy.stats.beta.ppf(1 - a_fn, fn + 1, 400 - fn)
        assert math.isclose(oracle_eps(("upper", k, share), scores, DELTA, CONFIDENCE),
                            _eps(fpr_ub, fnr_ub), rel_tol=1e-10)  # fmt: skip
        w = np.sort(x_in)[k]  # "in" iff score >= the (k+1)-th smallest in-score
        fp = int(np.sum(x_out >= w))
        fpr_ub = scipy.stats.beta.ppf(1 - a_fp, fp + 1, 500 - fp)
        fnr_ub = scipy.stats.beta.ppf(1 - a_fn, k + 1, 400 - k)
        assert math.isclose(oracle_eps(("lower", k, share), scores, DELTA, CONFIDENCE),
                            _eps(fpr_ub, fnr_ub), rel_tol=1e-10)  # fmt: skip
    for tau in (-0.5, 0.8, 2.5):  # "in" iff score >= tau: both counts binomial
        fp, fn = int(np.sum(x_out >= tau)), int(np.sum(x_in < tau))
        fpr_ub = scipy.stats.beta.ppf(1 - a_fp, fp + 1, 500 - fp)
        fnr_ub = scipy.stats.beta.ppf(1 - a_fn, fn + 1, 400 - fn)
        value = oracle_eps(("value", tau, share), scores, DELTA, CONFIDENCE)
        assert math.isclose(value, _eps(fpr_ub, fnr_ub), rel_tol=1e-10)
        if share == 0.5:  # the audit at a threshold declared in advance, level c/2 each
            r = audit(scores, "eps_delta", delta=DELTA, confidence=CONFIDENCE,
                      threshold_selection=Explicit(tau, chosen_in_advance=True),
                      check_orientation=False)  # fmt: skip
            assert math.isclose(value, r.eps_lower, rel_tol=1e-12)


def test_the_oracles_are_sound_on_the_laplace_pair():
    """Fixed in advance (on draws apart from the audited sets), each oracle is a valid
    bound: over 200 sets at confidence 0.95, above the exact eps in at most the
    0.999-quantile of Binomial(200, 0.05) = 21 of them."""
    exact = family_exact("laplace", DELTA)["exact_eps"]
    tests = oracle_tests("laplace", 1000, DELTA, CONFIDENCE, sample_scores, references=50)
    assert tests["rank"][0] in ("upper", "lower") and tests["value"][0] == "value"
    assert tests["rank"][2] in SHARES and tests["value"][2] in SHARES
    allowed = int(scipy.stats.binom.ppf(0.999, 200, 0.05))
    for test in tests.values():
        eps = [oracle_eps(test, sample_scores("laplace", 1000, 50_000 + r), DELTA, CONFIDENCE)
               for r in range(200)]  # fmt: skip
        assert sum(e > exact for e in eps) <= allowed, test
        assert np.median(eps) > 0.7 * exact, test  # and tight: the Laplace pair's eps is 1

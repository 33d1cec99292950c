"""EpsDeltaAudit: soundness, the analytic limit at a fixed test, jax_privacy cross-check."""

import dataclasses
import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import advsim.bounds as bounds
from advsim import Scores
from advsim.audits import EpsDeltaAudit

from ._helpers import (
    clopper_pearson_reference,
    eps_delta_reference,
    gaussian_scores,
    randomized_response_epsilon,
    randomized_response_scores,
)

DELTA = 1e-5


@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_sound_on_gaussian_scores(mu):
    s = gaussian_scores(mu, 10**6, seed=0)
    true_eps = bounds.gdp_epsilon(DELTA, mu)
    for sel in ("split", "same"):
        r = EpsDeltaAudit(threshold_selection=sel)(s, delta=DELTA)
        assert 0 < r.eps_lower <= true_eps
        assert r.eps_point is None or r.eps_point <= true_eps


def test_tight_at_a_fixed_test():
    # At tau = 3 with N(2, 1) vs N(0, 1) the exact rates are FPR = Phi(-3) = 0.00135,
    # FNR = Phi(3 - 2) = 0.841, and the (eps, delta) inequalities give
    # eps >= log((1 - delta - FNR) / FPR) = 4.7666. With 10^6 runs the Clopper-Pearson
    # bound sits within 3% below it (measured 4.698).
    s = gaussian_scores(2.0, 10**6, seed=1)
    r = EpsDeltaAudit().at_threshold(s, 3.0, delta=DELTA)
    fpr, fnr = scipy.stats.norm.sf(3.0), scipy.stats.norm.cdf(1.0)
    exact = math.log((1 - DELTA - fnr) / fpr)
    assert exact == pytest.approx(4.7666, abs=1e-4)
    assert 0.97 * exact <= r.eps_lower <= exact


def test_tight_on_randomized_response():
    # Randomized response with eps = 1 (pure DP): the threshold test at 1 is optimal, so
    # 10^5 runs per world certify eps within 5% of eps(delta) = log(e - delta (1 + e)).
    s = randomized_response_scores(1.0, 10**5, seed=0)
    r = EpsDeltaAudit()(s, delta=DELTA)
    truth = randomized_response_epsilon(1.0, DELTA)
    assert 0.95 * truth <= r.eps_lower <= truth
    assert r.threshold == 1.0  # the only informative test on binary scores


def _jax_privacy_explicit(auditing, s, tau, confidence, delta):
    auditor = auditing.CanaryScoreAuditor(s.canary_in, s.canary_out)
    return auditor.epsilon_clopper_pearson(
        significance=1 - confidence,
        delta=delta,
        one_sided=False,
        threshold_strategy=auditing.Explicit(tau),
    )


def test_equals_jax_privacy_at_explicit_thresholds():
    auditing = pytest.importorskip("jax_privacy.auditing")
    s = gaussian_scores(1.5, 5000, seed=3)
    taus = [-10.0, -1.0, 0.0, 0.75, 2.0, 3.5, float(np.max(s.canary_in)), 10.0]
    for tau in taus:
        for confidence in (0.95, 0.99, 0.6):
            for delta in (1e-5, 0.1):
                ours = EpsDeltaAudit(confidence=confidence).at_threshold(s, tau, delta=delta
                ).eps_lower
                theirs = _jax_privacy_explicit(auditing, s, tau, confidence, delta)
                assert ours == pytest.approx(float(theirs), rel=1e-12, abs=0.0)


@settings(derandomize=True, deadline=None, max_examples=40)
@given(
    st.lists(st.integers(-3, 6), min_size=2, max_size=40),
    st.lists(st.integers(-6, 3), min_size=2, max_size=40),
    st.floats(-7, 7, allow_nan=False),
    st.sampled_from([0.9, 0.95]),
)
def test_equals_jax_privacy_property(ins, outs, tau, confidence):
    # Integer scores (many ties) and arbitrary thresholds, including ones at a score.
    auditing = pytest.importorskip("jax_privacy.auditing")
    s = Scores(np.array(ins, float), np.array(outs, float))
    for t in (tau, float(round(tau))):
        ours = EpsDeltaAudit(confidence=confidence).at_threshold(s, t, delta=DELTA)
        theirs = _jax_privacy_explicit(auditing, s, t, confidence, DELTA)
        assert ours.eps_lower == pytest.approx(float(theirs), rel=1e-12, abs=0.0)


def test_split_audit_equals_a_naive_reimplementation():
    # The whole held-out audit redone by hand: halves as `split_halves` documents (one
    # default_rng(seed), canary_in then canary_out, the permutation's first n // 2 choose),
    # every candidate's Clopper-Pearson upper bounds (scipy's beta) at level (1 - c) / (2 K)
    # on the choosing half, the largest of the two (eps, delta) inequalities solved for eps
    # (Kairouz et al., arXiv:1311.0776), then the bounds at (1 - c) / 2 on the counting
    # half. Only the candidate set comes from the library (test_threshold.py checks it).
    from advsim.audits import candidate_thresholds

    s = gaussian_scores(1.5, 3000, seed=11)
    c = 0.9
    r = EpsDeltaAudit(confidence=c, seed=4)(s, delta=DELTA)
    rng = np.random.default_rng(4)
    cin, cout = np.asarray(s.canary_in, float), np.asarray(s.canary_out, float)
    p_in, p_out = rng.permutation(cin.size), rng.permutation(cout.size)
    sel_in, cnt_in = np.sort(cin[p_in[: cin.size // 2]]), cin[p_in[cin.size // 2 :]]
    sel_out, cnt_out = np.sort(cout[p_out[: cout.size // 2]]), cout[p_out[cout.size // 2 :]]

    upper = clopper_pearson_reference

    def eps_of(fpr, fnr):
        return eps_delta_reference(fpr, fnr, DELTA)

    cands = candidate_thresholds(sel_in, sel_out)
    fp = np.array([np.sum(sel_out >= t) for t in cands])
    fn = np.array([np.sum(sel_in < t) for t in cands])
    a = (1 - c) / 2 / cands.size
    tau = cands[int(np.argmax(eps_of(upper(fp, sel_out.size, a), upper(fn, sel_in.size, a))))]
    fp1, fn1 = np.sum(cnt_out >= tau), np.sum(cnt_in < tau)
    eps = eps_of(upper(fp1, cnt_out.size, (1 - c) / 2), upper(fn1, cnt_in.size, (1 - c) / 2))
    assert r.threshold == tau
    assert (r.fpr, r.fnr) == (fp1 / cnt_out.size, fn1 / cnt_in.size)
    assert r.eps_lower == pytest.approx(max(0.0, float(eps)), rel=1e-12)


def test_audit_function_has_the_class_defaults():
    # `audit(scores, "eps_delta", ...)` is `EpsDeltaAudit()` with the documented defaults
    # (confidence 0.95, seed 0, min_count 50) and the split selection: the same result, note
    # included, on scores so separated that the point estimate has too few errors.
    from advsim.audits import audit

    s = Scores(np.arange(1000.0) + 2000.0, np.arange(1000.0))
    a = audit(s, "eps_delta", delta=DELTA, threshold_selection="split")
    b = EpsDeltaAudit()(s, delta=DELTA)
    assert a.extras["strategy"] == "Split()"  # the one thing audit() adds: the strategy
    assert {**a.to_dict(), "extras": {**a.extras, "strategy": None}} == {
        **b.to_dict(), "extras": {**b.extras, "strategy": None}
    }
    assert a.eps_point is None and "min_count = 50" in a.eps_point_note
    # to_dict holds the same numbers as plain Python values, and the result is immutable.
    d = a.to_dict()
    for name in ("eps_lower", "threshold", "fpr", "fnr", "fpr_upper", "fnr_upper"):
        assert type(d[name]) is float and d[name] == getattr(a, name), name
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.eps_lower = 0.0


def test_point_estimate_is_the_raw_rate_epsilon_at_the_threshold():
    # eps_point is the (eps, delta) inequality of the chosen test with its raw rates: on
    # Gaussian scores (mu = 2) it is close to the same inequality with the exact rates
    # FPR = Phi(-tau), FNR = Phi(tau - mu) (scipy) at a fixed threshold tau.
    from advsim.audits import eps_delta_terms

    tau = 1.0  # FPR = FNR = 0.159: ~16000 errors of each kind
    r = EpsDeltaAudit().at_threshold(gaussian_scores(2.0, 100_000, seed=12), tau, delta=DELTA
    )
    fpr, fnr = scipy.stats.norm.sf(tau), scipy.stats.norm.cdf(tau - 2.0)
    exact = max(math.log((1 - fnr - DELTA) / fpr), math.log((1 - fpr - DELTA) / fnr))
    assert r.eps_point == pytest.approx(exact, rel=0.02)
    assert r.eps_point >= r.eps_lower > 0
    # A numerator of exactly 0 bounds nothing: -inf, with no warning (log of 0 is not taken).
    assert eps_delta_terms(0.5, 0.5, 0.5) == (-np.inf, -np.inf)


def test_no_signal_gives_a_point_estimate_of_zero():
    # Identical worlds: at tau = 500 the raw rates are exactly 1/2 each, so the (eps, delta)
    # inequalities give eps = log(1 - 2 delta) < 0: eps_point = 0 (an estimate, not None),
    # and eps_lower = 0.
    s = Scores(np.arange(1000.0), np.arange(1000.0))
    r = EpsDeltaAudit().at_threshold(s, 500.0, delta=DELTA)
    assert r.eps_lower == 0.0 and r.eps_point == 0.0

"""GaussianDPAudit: soundness, then tightness, on the Gaussian mechanism."""

import warnings

import pytest

import advsim.bounds as bounds
from advsim.audits import AssumptionRejectedWarning, GaussianDPAudit

from ._helpers import gaussian_scores, gdp_epsilon_oracle

DELTA = 1e-5


def test_truth_matches_closed_form_oracle():
    # The truth used below is advsim.bounds.gdp_epsilon; it must agree with an
    # independent inversion of Corollary 2.13 of arXiv:1905.02383.
    for mu in (0.5, 1.0, 2.0):
        assert bounds.gdp_epsilon(DELTA, mu) == pytest.approx(
            gdp_epsilon_oracle(DELTA, mu), rel=1e-8
        )


@pytest.mark.parametrize("mu", [1.0, 2.0])
@pytest.mark.parametrize("n", [10**5, 10**6])
def test_sound_then_tight_on_gaussian_scores(mu, n):
    s = gaussian_scores(mu, n, seed=0)
    r = GaussianDPAudit()(s, delta=DELTA)
    true_eps = bounds.gdp_epsilon(DELTA, mu)  # 4.3773 (mu = 1), 9.9970 (mu = 2)
    # Soundness: mu_lower <= mu and eps_lower <= eps(mu).
    assert r.extras["mu_lower"] <= mu
    assert r.eps_lower <= true_eps
    # Tightness: the Clopper-Pearson width at a well-chosen threshold shrinks as
    # 1/sqrt(n). Measured eps_lower / eps over seeds 0-4: 0.963-0.989 at 1e5 runs per
    # world and 0.987-0.997 at 1e6 (mu = 1 and 2).
    rtol = 0.08 if n == 10**5 else 0.02
    assert r.eps_lower >= (1 - rtol) * true_eps
    assert r.extras["mu_lower"] >= (1 - rtol) * mu
    # The point estimate (raw rates, best threshold with >= 50 FP and FN) is biased up
    # by the maximum over thresholds but lands within 10% of the truth here.
    assert r.eps_point == pytest.approx(true_eps, rel=0.10)
    assert r.extras["mu_point"] == pytest.approx(mu, rel=0.10)


def test_bound_at_fixed_threshold_matches_formula():
    # At a fixed threshold the audit is exactly Eq. (6) of arXiv:1905.02383 with the
    # Clopper-Pearson upper bounds plugged in.
    import scipy.stats

    s = gaussian_scores(1.0, 10**4, seed=5)
    r = GaussianDPAudit(confidence=0.9).at_threshold(s, 0.5, delta=DELTA)
    mu = scipy.stats.norm.ppf(1 - r.fpr_upper) - scipy.stats.norm.ppf(r.fnr_upper)
    assert r.extras["mu_lower"] == pytest.approx(mu, rel=1e-12)
    assert r.eps_lower == pytest.approx(bounds.gdp_epsilon(DELTA, mu), rel=1e-12)
    # A caller-given threshold is not known to be held out: not rigorous.
    assert (r.rigorous, r.guarantee.held_out) == (False, False)


def test_differs_from_jax_privacy_absolute_value():
    # jax_privacy 2.0's CanaryScoreAuditor.epsilon_from_gdp maximises |mu| over
    # thresholds ("If FPR + FNR is too large, the bound still holds in reverse ... Hence
    # we look for the maximum absolute value of mu"). With upper confidence bounds in
    # place of the rates, the reversed inequality is not implied: on scores with no
    # signal at all it reports eps > 0 (1.30 for this seed; 0.6-3.9 over seeds, n=1e4),
    # and on slightly wrong-way scores as well. This audit clamps mu at 0 instead.
    auditing = pytest.importorskip("jax_privacy.auditing")
    for shift in (0.0, -0.05):
        s = gaussian_scores(shift, 10**4, seed=0)
        theirs = auditing.CanaryScoreAuditor(s.canary_in, s.canary_out).epsilon_from_gdp(
            significance=0.05, delta=DELTA
        )
        assert theirs > 1.0
        for sel in ("split", "same"):
            with warnings.catch_warnings():
                # Wrong-way scores have the ROC of G_{-mu}: the Gaussian check may reject.
                warnings.simplefilter("ignore", AssumptionRejectedWarning)
                r = GaussianDPAudit(threshold_selection=sel)(s, delta=DELTA)
            assert r.eps_lower == 0.0 and r.extras["mu_lower"] == 0.0
    # Clearly wrong-way scores give 0 in both: jax_privacy because its ROC hull keeps no
    # threshold below the diagonal, this audit because mu_lower < 0 is clamped to 0.
    s = gaussian_scores(-2.0, 10**4, seed=0)
    theirs = auditing.CanaryScoreAuditor(s.canary_in, s.canary_out).epsilon_from_gdp(
        significance=0.05, delta=DELTA
    )
    assert theirs == 0.0
    with pytest.warns(AssumptionRejectedWarning):  # the ROC of wrong-way scores is G_{-2}
        assert GaussianDPAudit()(s, delta=DELTA).eps_lower == 0.0


def test_point_estimate_needs_at_least_min_count_errors():
    # `min_count` (50): eps_point needs *at least* this many false positives and false
    # negatives (AbstractThresholdAudit's docstring). At tau = 950, the out-scores 0..999
    # give exactly 50 false positives and the in-scores 900..1899 exactly 50 false
    # negatives: a point estimate; separated scores (no errors): None, with the reason.
    import numpy as np

    from advsim import Scores

    s = Scores(np.arange(1000.0) + 900.0, np.arange(1000.0))
    r = GaussianDPAudit().at_threshold(s, 950.0, delta=DELTA)
    assert (r.fpr, r.fnr) == (0.05, 0.05)
    assert r.eps_point is not None and r.eps_point > 0
    sep = Scores(np.arange(1000.0) + 2000.0, np.arange(1000.0))
    r = GaussianDPAudit().at_threshold(sep, 1500.0, delta=DELTA)
    assert r.eps_point is None and r.eps_point_note
    # No signal and no false positive (eps_lower = 0): still no estimate, not a 0.
    same = Scores(np.zeros(1000), np.zeros(1000))
    r = GaussianDPAudit().at_threshold(same, 1.0, delta=DELTA)
    assert r.eps_lower == 0.0 and r.eps_point is None and r.eps_point_note

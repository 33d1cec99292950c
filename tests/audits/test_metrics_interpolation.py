"""The score metrics' `interpolation`: "empirical" and "hull", each against its source.

Where the expected numbers come from:
- "empirical": scikit-learn, `roc_curve(..., drop_intermediate=False)` (TPR at FPR: the
  largest TPR among its points with FPR <= target) and `roc_auc_score` (AUROC);
- "hull": jax_privacy's own `CanaryScoreAuditor` on the same scores (`tpr_at_given_fpr`,
  `attack_auroc`, `max_accuracy(prevalence=0.5)`), which read the ROC convex hull;
- a four-and-four score set where the two differ, worked by hand in the comments.
Both libraries are test dependencies; the tests that need one skip without it.
"""

import json
import re

import numpy as np
import pytest

from advsim.audits import (
    auroc,
    balanced_accuracy,
    bootstrap_interval,
    eps_from_counts,
    tpr_at_fpr,
)

METRICS = {"tpr_at_fpr": tpr_at_fpr, "auroc": auroc, "balanced_accuracy": balanced_accuracy}
TARGETS = [0.0, 1e-3, 0.01, 0.05, 0.1, 0.3, 0.5, 0.9, 1.0]


@pytest.fixture(scope="module")
def sklearn_metrics():
    return pytest.importorskip("sklearn.metrics")


@pytest.fixture(scope="module")
def auditing():
    return pytest.importorskip("jax_privacy.auditing")


def _score_sets():
    """Sizes from 1 to a few hundred; no ties, ties within and across worlds, all tied."""
    rng = np.random.default_rng(7)
    return [
        (rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 200)),  # continuous
        (np.round(rng.normal(0.5, 1.0, 157), 1), np.round(rng.normal(0.0, 1.0, 211), 1)),
        (rng.integers(0, 5, 50).astype(float), rng.integers(0, 4, 80).astype(float)),
        (rng.normal(-1.0, 1.0, 30), rng.normal(0.0, 1.0, 40)),  # worse than chance
        (np.array([1.0]), np.array([0.0, 1.0, 2.0])),  # one in-run
        (np.array([2.0, 0.0]), np.array([1.0])),  # one out-run
        (np.array([1.0, 1.0]), np.array([1.0, 0.0])),
        (np.zeros(5), np.zeros(7)),  # every score tied
    ]


def _small_sets(count=80):
    """Random small sets (1-8 runs a world, scores in 0..3: many ties, collinear ROC
    points, vertical and horizontal hull edges)."""
    rng = np.random.default_rng(11)
    for _ in range(count):
        n_in, n_out = rng.integers(1, 9, size=2)
        yield rng.integers(0, 4, n_in).astype(float), rng.integers(0, 4, n_out).astype(float)


def _targets(cout):
    """`TARGETS`, every achievable FPR k / n_out, and the midpoints between them."""
    grid = np.arange(cout.size + 1) / cout.size
    return np.unique(np.concatenate([TARGETS, grid, (grid[1:] + grid[:-1]) / 2]))


# --- "empirical": scikit-learn's definitions, today's numbers ---------------------------


@pytest.mark.parametrize("case", range(len(_score_sets())))
def test_empirical_is_sklearns_and_the_default(case, sklearn_metrics):
    cin, cout = _score_sets()[case]
    y, s = np.r_[np.ones(cin.size), np.zeros(cout.size)], np.r_[cin, cout]
    fprs, tprs, _ = sklearn_metrics.roc_curve(y, s, drop_intermediate=False)
    targets = _targets(cout)
    got = tpr_at_fpr(cin, cout, targets, interpolation="empirical")
    assert got == tpr_at_fpr(cin, cout, targets)  # the default, details and label alike
    for target, m in zip(targets, got, strict=True):
        # sklearn: the largest TPR of its ROC points with FPR <= target, exactly.
        assert m.value == tprs[fprs <= target].max()
    m = auroc(cin, cout, interpolation="empirical")
    assert m == auroc(cin, cout)
    assert m.value == pytest.approx(sklearn_metrics.roc_auc_score(y, s), rel=1e-12, abs=1e-15)
    assert balanced_accuracy(cin, cout, interpolation="empirical") == balanced_accuracy(cin, cout)


# --- "hull": jax_privacy's definitions ------------------------------------------------


def _check_against_jax_privacy(cin, cout, auditing):
    """Every metric under "hull" against jax_privacy's method on the same scores, 1e-12
    (the same formulas, computed in another order: a few ulps at most)."""
    jp = auditing.CanaryScoreAuditor(cin, cout)
    targets = _targets(cout)
    hull = tpr_at_fpr(cin, cout, targets, interpolation="hull")
    expected = jp.tpr_at_given_fpr(targets)
    assert [m.value for m in hull] == pytest.approx(expected, rel=0, abs=1e-12)
    empirical = tpr_at_fpr(cin, cout, targets)
    assert all(h.value >= e.value - 1e-12 for h, e in zip(hull, empirical, strict=True))
    m = auroc(cin, cout, interpolation="hull")
    assert m.value == pytest.approx(jp.attack_auroc(), rel=0, abs=1e-12)
    assert m.value >= auroc(cin, cout).value - 1e-12
    b = balanced_accuracy(cin, cout, interpolation="hull")
    assert b.value == pytest.approx(jp.max_accuracy(prevalence=0.5), rel=0, abs=1e-12)
    # The best randomised test is a deterministic one (a vertex): the same value, test.
    e = balanced_accuracy(cin, cout)
    assert (b.value, b.details) == (e.value, e.details)


@pytest.mark.parametrize("case", range(len(_score_sets())))
def test_hull_is_jax_privacys(case, auditing):
    _check_against_jax_privacy(*_score_sets()[case], auditing)


def test_hull_is_jax_privacys_on_small_sets_with_ties(auditing):
    for cin, cout in _small_sets():
        _check_against_jax_privacy(cin, cout, auditing)


def test_hull_test_reaches_its_operating_point():
    # The randomised test of the details, counted here: "in" iff score >= threshold, or
    # with probability p_next if threshold_next <= score < threshold. Its expected
    # rates are the metric's TPR and FPR.
    rng = np.random.default_rng(5)
    cin, cout = np.round(rng.normal(1, 1, 90), 1), np.round(rng.normal(0, 1, 70), 1)
    for m in tpr_at_fpr(cin, cout, [0.0, 0.02, 0.1, 0.5, 1.0], interpolation="hull"):
        hi, lo, p = m.details["threshold"], m.details["threshold_next"], m.details["p_next"]
        assert lo < hi and 0.0 <= p <= 1.0

        def rate(x, hi=hi, lo=lo, p=p):
            return np.mean(x >= hi) + p * np.mean((x >= lo) & (x < hi))

        assert rate(cin) == pytest.approx(m.value, abs=1e-12)
        assert rate(cout) == pytest.approx(m.details["fpr"], abs=1e-12)
        assert m.details["fpr"] == m.details["fpr_target"]


# --- a case by hand where the definitions differ ----------------------------------------


def test_the_definitions_differ_by_hand():
    cin, cout = [3.0, 2.0, 1.5, 0.5], [2.0, 1.0, 0.0, -1.0]
    # ROC points (FP, TP) in counts of 4 by threshold: above all (0, 0); 3 (0, 1);
    # 2 (1, 2); 1.5 (1, 3); 1 (2, 3); 0.5 (2, 4); 0 (3, 4); -1 (4, 4). Upper convex hull:
    # (0, 0) - (0, 1) - (1, 3) - (2, 4) - (4, 4) (slopes inf, 2, 1, 0: concave), dropping
    # (1, 2), (2, 3), (3, 4), below it.
    #
    # TPR at FPR 0.1 (0.4 out-runs): empirical, the points with FP <= 0.4 are (0, 0) and
    # (0, 1): TPR 1/4. Hull: on (0, 1)-(1, 3), TP = 1 + 0.4 * 2 = 1.8: TPR 0.45, the test
    # at tau 3, or at tau 1.5 with probability 0.4. Difference 0.2.
    e = tpr_at_fpr(cin, cout, 0.1)
    h = tpr_at_fpr(cin, cout, 0.1, interpolation="hull")
    assert (e.value, e.details["threshold"] > 2.0) == (0.25, True)
    assert h.value == pytest.approx(0.45, abs=1e-15)
    assert (h.details["threshold"], h.details["threshold_next"]) == (3.0, 1.5)
    assert h.details["p_next"] == pytest.approx(0.4, abs=1e-15)
    # AUROC, empirical: Mann-Whitney U = 4 (3 beats all) + 3.5 (2 beats 1, 0, -1, ties 2)
    # + 3 (1.5) + 2 (0.5 beats 0, -1) = 12.5 of 16 = 0.78125. Hull: trapezoids under the
    # hull, in counts: (0, 1)-(1, 3): 2; (1, 3)-(2, 4): 3.5; (2, 4)-(4, 4): 8; total
    # 13.5 of 16 = 0.84375. Difference 1/16 = 0.0625 (both exact in binary).
    assert auroc(cin, cout).value == 0.78125
    assert auroc(cin, cout, interpolation="hull").value == 0.84375
    # Balanced accuracy: (TPR + TNR) / 2 is largest at (1, 3) (tau 1.5) and (2, 4) (tau
    # 0.5), 3/4, both hull vertices: 0.75 under both, at tau 1.5 (the larger).
    for interpolation in ("empirical", "hull"):
        b = balanced_accuracy(cin, cout, interpolation=interpolation)
        assert (b.value, b.details["threshold"]) == (0.75, 1.5)


def test_the_hand_case_is_jax_privacys_too(auditing):
    # The same numbers from jax_privacy (an independent computation of the hand values).
    jp = auditing.CanaryScoreAuditor([3.0, 2.0, 1.5, 0.5], [2.0, 1.0, 0.0, -1.0])
    assert jp.tpr_at_given_fpr(0.1) == pytest.approx(0.45, abs=1e-15)
    assert jp.attack_auroc() == pytest.approx(0.84375, abs=1e-15)
    assert jp.max_accuracy(prevalence=0.5) == pytest.approx(0.75, abs=1e-15)


# --- labels and validation -------------------------------------------------------------


def test_the_metric_records_its_definition():
    cin, cout = [3, 2, 2, 1], [2, 1, 0]
    for name, metric in METRICS.items():
        kwargs = {"fpr": 0.4} if name == "tpr_at_fpr" else {}
        for interpolation in ("empirical", "hull"):
            m = metric(cin, cout, interpolation=interpolation, **kwargs)
            assert m.name == name and m.definition.startswith(f"{interpolation}: ")
            d = json.loads(json.dumps(m.to_dict()))
            assert d == m.to_dict() and d["definition"] == m.definition
    assert eps_from_counts(3, 1, 2, 1, 1e-5).definition is None


@pytest.mark.parametrize("bad", ["Hull", "linear", "none", "", None, 1, ["hull"]])
def test_a_bad_interpolation_is_named(bad):
    message = re.escape(f"interpolation must be one of 'empirical', 'hull', got {bad!r}")
    for name, metric in METRICS.items():
        kwargs = {"fpr": 0.1} if name == "tpr_at_fpr" else {}
        with pytest.raises(ValueError, match=message):
            metric([1.0], [0.0], interpolation=bad, **kwargs)
        with pytest.raises(ValueError, match=message):
            bootstrap_interval(metric, [1.0], [0.0], interpolation=bad, **kwargs)


# --- the bootstrap -----------------------------------------------------------------------


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize(
    "metric, kwargs",
    [(auroc, {}), (balanced_accuracy, {}), (tpr_at_fpr, {"fpr": [0.0, 0.05, 0.3]})],
)
def test_bootstrap_passes_hull_through(metric, kwargs):
    # The vectorised path (all resamples' hulls at once, scores absent from a resample
    # left out) against one call per resample through a wrapper, on the same resamples.
    rng = np.random.default_rng(3)
    cin, cout = np.round(rng.normal(1, 1, 60), 1), np.round(rng.normal(0, 1, 45), 1)

    def looped(a, b, **kw):
        return metric(a, b, **kw)

    kw = {"num_resamples": 100, "seed": 4, "interpolation": "hull", **kwargs}
    fast = _as_tuple(bootstrap_interval(metric, cin, cout, **kw))
    slow = _as_tuple(bootstrap_interval(looped, cin, cout, **kw))
    observed = _as_tuple(metric(cin, cout, interpolation="hull", **kwargs))
    assert len(fast) == len(slow) == len(observed) == np.size(kwargs.get("fpr", 0))
    for f, s, m in zip(fast, slow, observed, strict=True):
        assert (f.low, f.high) == pytest.approx((s.low, s.high), rel=1e-12, abs=1e-15)
        assert f.value == s.value == m.value
        assert f.definition == m.definition and f.definition.startswith("hull: ")
        assert json.loads(json.dumps(f.to_dict()))["definition"] == m.definition

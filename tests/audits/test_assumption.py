"""The assumption checks: level, power on known departures, validation.

Every expected decision comes from a law whose ROC is known in closed form:

- N(mu, 1) vs N(0, 1): the ROC is exactly G_mu (Dong, Roth & Su, arXiv:1905.02383,
  Definition 2.7), so the GDP null holds and mu lies in `param_interval` whenever the
  band holds (probability >= 1 - level, the module's level argument);
- Binomial(T, q) + N(0, T sigma^2) vs N(0, T sigma^2): the family's own pair (Theorem 1 of
  arXiv:2410.06186), so the family null holds;
- departures whose distance from the null is computed in the comments (a two-point
  mixture, the exact T = 2 threshold-landscape law, Gaussians under a sampled family).
"""

import json
import math

import numpy as np
import pytest
import scipy.stats

from advsim.audits import AssumptionCheck, check_tradeoff_fit
from advsim.audits._assumption_families import (
    check_gaussian_tradeoff,
    check_heuristic_family,
    family_tradeoff,
    gaussian_tradeoff,
)
from advsim.bounds import binomial_mixture, mixture_tradeoff

from ._helpers import every_step, family_scores, gaussian_scores

N = 20_000


def landscape_two_step(n: int, sigma: float, batch: int, canary: bool, rng) -> np.ndarray:
    """theta_2 of the threshold landscape (C = 1, h = 1/2, reinforcing): theta_1 = b + Z_1,
    theta_2 = theta_1 + s(theta_1) + W, W ~ N(0, sigma^2 / B^2) (module docstring of
    advsim.mechanisms.landscape, "Exact law at T = 2")."""
    t1 = float(canary) + rng.normal(0.0, sigma, n)
    return t1 + np.where(t1 > 0.5, 1.0, -1.0) + rng.normal(0.0, sigma / batch, n)


# ----------------------------------------------------------------------------------------
# The curves against independent formulas


@pytest.mark.parametrize("steps,q", [(1, 1.0), (10, 0.1), (100, 0.01)])
def test_family_curve_is_the_mixture_tradeoff(steps, q):
    # Oracle: advsim.bounds.mixture_tradeoff at scale sqrt(T) sigma, the family audit's curve.
    acc = every_step(steps, q, 1.0)
    support, probs = binomial_mixture(steps, q)
    alpha = np.array([0.0, 1e-9, 1e-4, 0.01, 0.3, 0.9, 1.0])
    curve = family_tradeoff(acc)
    for sigma in (0.2, 1.0, 7.0):
        expected = mixture_tradeoff(alpha, support, probs, math.sqrt(steps) * sigma)
        got = curve(alpha, np.full(alpha.shape, 1.0 / sigma))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)


def test_gaussian_curve_is_g_mu():
    # Oracle: G_mu = mixture_tradeoff with one atom mu at scale 1 (its docstring says so).
    alpha = np.array([1e-8, 1e-3, 0.2, 0.7])
    for mu in (0.0, 0.5, 3.0):
        np.testing.assert_allclose(
            gaussian_tradeoff(alpha, np.full(4, mu)),
            mixture_tradeoff(alpha, [mu], [1.0], 1.0),
            rtol=1e-12,
        )


# ----------------------------------------------------------------------------------------
# The null holds: not rejected, and the interval covers the truth


@pytest.mark.parametrize("mu", [0.0, 1.0, 3.0])
def test_exact_gaussian_scores_not_rejected(mu):
    s = gaussian_scores(mu, N, seed=1)
    r = check_gaussian_tradeoff(s.canary_in, s.canary_out)
    assert not r.rejected, r.describe()
    lo, hi = r.param_interval
    assert lo <= mu <= hi  # the band holds with probability >= 0.95 (fixed seed)
    assert r.n_in == r.n_out == N and r.param_name == "mu" and r.level == 0.05


def test_heavy_ties_do_not_break_the_level():
    # Both worlds the same discrete law (scores rounded to 0.5): every threshold test has
    # beta = 1 - alpha, i.e. G_0, whatever the atoms. The band is valid for any CDF.
    rng = np.random.default_rng(3)
    cin = np.round(2 * rng.normal(0, 1, N)) / 2
    cout = np.round(2 * rng.normal(0, 1, N)) / 2
    r = check_gaussian_tradeoff(cin, cout)
    assert not r.rejected, r.describe()
    assert r.param_interval[0] == 0.0


@pytest.mark.parametrize("steps,q", [(10, 0.1), (1, 0.1)])
def test_family_scores_not_rejected(steps, q):
    s = family_scores(steps, q, 1.0, N, seed=2)
    r = check_heuristic_family(s.canary_in, s.canary_out, every_step(steps, q, 1.0))
    assert not r.rejected, r.describe()
    lo, hi = r.param_interval
    assert lo <= 1.0 <= hi and r.param_name == "sigma"


# ----------------------------------------------------------------------------------------
# The null fails: rejected, with the worst point


def test_two_point_mixture_rejected():
    # canary_in ~ N(0, 1)/2 + N(3, 1)/2: the ROC is (G_0 + G_3) / 2 (mixture_tradeoff with
    # atoms {0, 3}, scale 1). The mu that one test on it implies,
    # isf(FPR) - ppf(FNR), is 2.36 at FPR 1e-3, 0.67 at FPR 0.5 and 0.36 at FPR 0.9
    # (computed with mixture_tradeoff and scipy.stats.norm): no single G_mu fits.
    rng = np.random.default_rng(4)
    pick = rng.random(N) < 0.5
    cin = np.where(pick, rng.normal(0, 1, N), rng.normal(3, 1, N))
    r = check_gaussian_tradeoff(cin, rng.normal(0, 1, N))
    assert r.rejected and r.param_interval is None
    w = r.worst
    assert w["lower_limit"] > w["upper_limit"]
    # the worst box alone excludes the fitted mu
    assert w["allowed"] is None or not w["allowed"][0] <= w["param_fit"] <= w["allowed"][1]
    assert "rejected" in r.describe()


def test_two_step_landscape_rejected():
    # The exact T = 2 law at sigma = 1, B = 1: central tests behave like mu = 0.946, the tails
    # like a shift seen through noise sqrt(2) sigma (mu = 0.707), per
    # advsim.mechanisms.landscape's docstring; at 5e4 runs per world the band separates them.
    rng = np.random.default_rng(5)
    n = 50_000
    cin = landscape_two_step(n, 1.0, 1, True, rng)
    cout = landscape_two_step(n, 1.0, 1, False, rng)
    r = check_gaussian_tradeoff(cin, cout)
    assert r.rejected, r.describe()


def test_family_check_rejects_gaussian_scores_of_the_wrong_shape():
    # Family T = 1, q = 0.1: f_sigma(a) >= (1 - q)(1 - a) for every sigma (the k = 0 atom of
    # Binomial(1, 0.1)), = 0.45 at a = 1/2; N(1, 1) vs N(0, 1) has FNR G_1(1/2) = Phi(-1)
    # = 0.159 there. No sigma fits.
    s = gaussian_scores(1.0, N, seed=6)
    r = check_heuristic_family(s.canary_in, s.canary_out, every_step(1, 0.1, 1.0))
    assert r.rejected, r.describe()
    # ... while the same scores fit the family with q = 1, which is G_{1/sigma} at T = 1.
    r1 = check_heuristic_family(s.canary_in, s.canary_out, every_step(1, 1.0, 1.0))
    assert not r1.rejected and r1.param_interval[0] <= 1.0 <= r1.param_interval[1]


def test_family_floor_rejects_perfectly_separated_scores():
    # Family T = 10, q = 0.1, canary in every step: with probability 0.9^10 = 0.349 the
    # canary is never sampled, so f_sigma(a) >= 0.349 (1 - a) for every sigma (the k = 0
    # atom), while perfectly separated scores have FNR 0 at FPR ~ 0: no sigma at all fits
    # that box (its lower limit on 1/sigma is +inf), whatever the other boxes allow.
    cin, cout = np.arange(10_000.0) + 10_000.0, np.arange(10_000.0)
    r = check_heuristic_family(cin, cout, every_step(10, 0.1, 1.0))
    assert r.rejected and r.param_interval is None
    # G_mu (and the family with q = 1) reach FNR ~ 0 at FPR ~ 0 for a large enough mu.
    assert not check_gaussian_tradeoff(cin, cout).rejected


def test_binary_scores_rejected_on_the_segments():
    # 1 with probability 0.99 in and 0.01 out: the one threshold point (0.01, 0.01) lies on
    # G_4.65 (isf(0.01) - ppf(0.01) = 2 x 2.326), but the pair's randomised tests are the
    # segments from it to (1, 0) and to (0, 1): at FPR 0.505 the segment has FNR 0.005,
    # G_4.65 about 2e-6 (scipy.stats.norm). No G_mu follows both: rejected by step 4.
    rng = np.random.default_rng(11)
    cin = (rng.random(N) < 0.99).astype(float)
    cout = (rng.random(N) < 0.01).astype(float)
    r = check_gaussian_tradeoff(cin, cout)
    assert r.rejected and r.worst["atom"] is None, r.describe()
    assert r.worst["upper_limit_randomised_to"] is not None
    assert "randomised between thresholds" in r.describe()


def test_binomial_scores_rejected_for_their_atoms():
    # Binomial(20, 0.6) vs Binomial(20, 0.5): every threshold point implies mu in 0.87-0.92
    # (isf(alpha) - ppf(beta) of the two cdfs), so the boxes leave mu in an interval away
    # from 0 and inf; the value 12 holds pmf(12; 20, 0.6) = 18.0% of the in-runs and
    # pmf(12; 20, 0.5) = 12.0% of the out-runs: an atom, on which the randomised ROC is a
    # straight segment that no G_mu with 0 < mu < inf contains (step 5).
    rng = np.random.default_rng(12)
    cin = rng.binomial(20, 0.6, N).astype(float)
    cout = rng.binomial(20, 0.5, N).astype(float)
    r = check_gaussian_tradeoff(cin, cout)
    atom = r.worst["atom"]
    assert r.rejected and r.param_interval is None and atom["value"] == 12.0
    assert atom["share_in"] == pytest.approx(scipy.stats.binom.pmf(12, 20, 0.6), abs=0.01)
    assert atom["share_out"] == pytest.approx(scipy.stats.binom.pmf(12, 20, 0.5), abs=0.01)
    assert "an atom" in r.describe() and 0 < r.worst["lower_limit"] < r.worst["upper_limit"]
    assert math.isfinite(r.worst["upper_limit"])


def test_rounding_ties_and_linear_ends_are_not_atoms_that_reject():
    # float32 rounding of N(1, 1) vs N(0, 1) leaves ties of a few scores each (far below
    # 1% of 2 x 10^4); perfectly separated two-point scores fit G_inf (mu = inf allowed,
    # where the curve is the straight line FNR = 0); scores of one discrete law in both
    # worlds fit G_0 (the straight line 1 - FPR): neither end is excluded, so an atom
    # rejects nothing.
    s = gaussian_scores(1.0, N, seed=13)
    r = check_gaussian_tradeoff(
        np.float32(s.canary_in).astype(float), np.float32(s.canary_out).astype(float)
    )
    assert not r.rejected, r.describe()
    sep = check_gaussian_tradeoff(np.ones(1000), np.zeros(1000))
    assert not sep.rejected and math.isinf(sep.param_interval[1])
    rng = np.random.default_rng(14)
    same = check_gaussian_tradeoff(rng.binomial(20, 0.5, N), rng.binomial(20, 0.5, N))
    assert not same.rejected and same.param_interval[0] == 0.0


def test_family_check_sees_atoms_too():
    # The family at T = 1, q = 1 is G_{1/sigma}: the binomial scores above are rejected by
    # the family check for the same atom (its curves are strictly convex for 0 < sigma <
    # inf); the generic check, which knows nothing of its curve's shape, skips step 5.
    from advsim import Accounting

    rng = np.random.default_rng(12)
    cin = rng.binomial(20, 0.6, N).astype(float)
    cout = rng.binomial(20, 0.5, N).astype(float)
    fam = check_heuristic_family(cin, cout, Accounting(1, 1.0, 1.0, canary_steps=(1,)))
    assert fam.rejected and fam.worst["atom"]["value"] == 12.0
    generic = check_tradeoff_fit(
        np.sort(cin), np.sort(cout), gaussian_tradeoff, param_name="mu",
        param_range=(0.0, math.inf), assumption="gaussian_tradeoff",
    )  # fmt: skip
    assert generic.worst["atom"] is None


def test_chord_gap_matches_the_tangent_point():
    # The lowest point of G_mu minus a chord is where G_mu' = the chord's slope s:
    # G_mu'(a) = -exp(mu z - mu^2 / 2), z = isf(a), so z* = (log(-s) + mu^2 / 2) / mu
    # (differentiating Definition 2.7 of arXiv:1905.02383). The golden section finds it.
    from advsim.audits._assumption import _chord_gap

    seg = {"a_lo0": np.array([0.6, 0.3]), "b_lo0": np.array([0.05, 0.2]),
           "a_lo1": np.array([0.1, 0.01]), "b_lo1": np.array([0.5, 0.6])}  # fmt: skip
    mu = np.array([1.2, 0.8])
    gap, lam = _chord_gap(gaussian_tradeoff, seg, np.arange(2), mu)
    for i in range(2):
        a0, b0, a1, b1 = (seg[k][i] for k in ("a_lo0", "b_lo0", "a_lo1", "b_lo1"))
        slope = (b1 - b0) / (a1 - a0)
        z = (math.log(-slope) + mu[i] ** 2 / 2) / mu[i]
        a = float(np.clip(scipy.stats.norm.sf(z), a1, a0))
        exact = float(gaussian_tradeoff(a, mu[i])) - (b0 + slope * (a - a0))
        assert gap[i] >= exact - 1e-15 and gap[i] == pytest.approx(exact, abs=1e-12)
        assert a0 + lam[i] * (a1 - a0) == pytest.approx(a, abs=1e-6)


# ----------------------------------------------------------------------------------------
# The generic path agrees with the closed form; results serialise


def test_generic_bisection_matches_closed_form():
    s = gaussian_scores(1.5, N, seed=7)
    # The GDP check spends half its level on the band (the other half on the binned
    # test); the generic check, band only, at that half builds the same boxes.
    closed = check_gaussian_tradeoff(s.canary_in, s.canary_out, level=0.05)
    generic = check_tradeoff_fit(
        np.sort(s.canary_in),
        np.sort(s.canary_out),
        gaussian_tradeoff,
        param_name="mu",
        param_range=(0.0, math.inf),
        assumption="gaussian_tradeoff",
        level=0.025,
    )
    assert closed.binned is not None and generic.binned is None
    assert closed.rejected == generic.rejected is False
    np.testing.assert_allclose(generic.param_interval, closed.param_interval, rtol=1e-9)
    # bisection returns the conservative end of its bracket: never inside the closed form
    assert generic.param_interval[0] <= closed.param_interval[0]
    assert generic.param_interval[1] >= closed.param_interval[1]


def test_to_dict_is_json_and_complete():
    s = gaussian_scores(1.0, 2000, seed=8)
    r = check_gaussian_tradeoff(s.canary_in, s.canary_out)
    d = r.to_dict()
    assert set(d) == {f.name for f in AssumptionCheck.__dataclass_fields__.values()}
    json.dumps(d)
    assert isinstance(d["param_interval"], list) and isinstance(d["worst"]["threshold"], float)


# ----------------------------------------------------------------------------------------
# Validation: the parameter, its value, the valid range


@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 1.5])
def test_level_out_of_range(level):
    with pytest.raises(ValueError, match=rf"level must be in \(0, 1\), got {level!r}"):
        check_gaussian_tradeoff([1.0, 2.0], [0.0, 1.0], level=level)


def test_bad_scores_and_ranges():
    with pytest.raises(ValueError, match="canary_in must be finite, got nan"):
        check_gaussian_tradeoff([1.0, float("nan")], [0.0])
    with pytest.raises(ValueError, match=r"canary_out must be a non-empty 1-D array"):
        check_gaussian_tradeoff([1.0], [])
    with pytest.raises(ValueError, match="sorted_in must be sorted ascending"):
        check_tradeoff_fit(
            [2.0, 1.0],
            [0.0],
            gaussian_tradeoff,
            param_name="mu",
            param_range=(0, math.inf),
            assumption="gaussian_tradeoff",
        )
    with pytest.raises(ValueError, match=r"param_range must be \(lo, hi\) with finite lo < hi"):
        check_tradeoff_fit(
            [1.0],
            [0.0],
            gaussian_tradeoff,
            param_name="mu",
            param_range=(1.0, 0.0),
            assumption="gaussian_tradeoff",
        )
    with pytest.raises(ValueError, match="param_range must be a pair"):
        check_tradeoff_fit(
            [1.0],
            [0.0],
            gaussian_tradeoff,
            param_name="mu",
            param_range=3.0,
            assumption="gaussian_tradeoff",
        )
    with pytest.raises(TypeError, match="accounting must be an advsim.Accounting, got dict"):
        check_heuristic_family([1.0], [0.0], {"steps": 1})


def test_curve_returning_nan_is_an_error():
    with pytest.raises(ValueError, match="curve.*must return finite values"):
        check_tradeoff_fit(
            np.arange(50.0),
            np.arange(50.0),
            lambda a, t: np.full(a.shape, np.nan),
            param_name="t",
            param_range=(0, 1),
            assumption="custom",
        )


# ----------------------------------------------------------------------------------------
# False alarms where the null holds exactly (slow)


@pytest.mark.slow
def test_false_alarm_rate_within_the_binomial_rule():
    # The family null (T = 10, q = 0.1, sigma = 1; numpy-drawn pairs of Theorem 1 of
    # arXiv:2410.06186) at level 0.2, where a miscalibrated test is easier to catch than at
    # 0.05. Rejections, and intervals missing the true sigma (the same band event), must not
    # exceed the 0.999-quantile of Binomial(repeats, level): the rule of
    # tests/properties/test_audit_calibration.py.
    level, repeats = 0.2, 150
    acc = every_step(10, 0.1, 1.0)
    rejected = missed = 0
    for seed in range(repeats):
        s = family_scores(10, 0.1, 1.0, 5000, seed=10_000 + seed)
        r = check_heuristic_family(s.canary_in, s.canary_out, acc, level=level)
        rejected += r.rejected
        missed += r.rejected or not (r.param_interval[0] <= 1.0 <= r.param_interval[1])
    allowed = int(scipy.stats.binom.ppf(0.999, repeats, level))
    assert rejected <= allowed and missed <= allowed, (rejected, missed, allowed)


def test_describe_names_the_curve_value_or_the_edge_of_the_family():
    # The message a warning carries: a finite curve value where the fit is inside the
    # family; at its edge (sigma -> 0, no finite curve) the words "edge of the family",
    # never "nan". Perfectly separated scores at T = 10, q = 0.5: every member of the
    # family has FNR >= (1 - q)^T = 2^-10 (the canary never sampled), so they sit at the edge.
    from advsim import Accounting
    from advsim.audits import check_gaussian_tradeoff, check_heuristic_family

    rng = np.random.default_rng(0)
    inside = check_gaussian_tradeoff(rng.normal(1, 1, 20_000), rng.normal(0, 1, 20_000))
    text = inside.describe()
    assert "not rejected" in text and "nan" not in text
    acc = Accounting(10, 0.5, 1.0, tuple(range(1, 11)))
    edge = check_heuristic_family(np.full(50_000, 100.0), np.zeros(50_000), acc)
    assert edge.rejected
    assert "edge of the family" in edge.describe() and "nan" not in edge.describe()
    w = edge.worst
    assert w["curve_fnr"] is None or not np.isfinite(w["curve_fnr"])
    # A rejection inside the family prints the fitted curve's FNR as a number: a two-point
    # mixture, half the in-runs shifted by 3, is far from every G_mu at 5 x 10^4 runs.
    shifted = np.where(rng.random(50_000) < 0.5, 3.0, 0.0) + rng.normal(0, 1, 50_000)
    far = check_gaussian_tradeoff(shifted, rng.normal(0, 1, 50_000))
    assert far.rejected and np.isfinite(far.worst["curve_fnr"])
    assert f"gives FNR {far.worst['curve_fnr']:.3g}" in far.describe()


def test_segment_diagnostics_name_the_randomised_tests():
    # The `worst` entries of a segment: the mixed box at the chord's lowest point, between
    # the segment's two thresholds (here the binary scores' segment from threshold 1 to
    # every threshold above it, i.e. from (0.01, 0.01) towards (0, 1)).
    from advsim.audits._assumption import _segment_worst, _segments
    from advsim.audits._roc_band import _boxes

    rng = np.random.default_rng(15)
    cin = np.sort((rng.random(N) < 0.99).astype(float))
    cout = np.sort((rng.random(N) < 0.01).astype(float))
    boxes, _ = _boxes(cin, cout, 0.05)
    seg = _segments(boxes, cin, cout, 0.05)
    last = seg["tau0"].size - 1
    assert seg["tau0"][last] == 1.0 and math.isinf(seg["tau1"][last])
    w = _segment_worst(gaussian_tradeoff, seg, last, 4.6, lambda a, b: (a, b), 1.0, 0.0)
    assert w["threshold"] == 1.0 and math.isinf(w["randomised_to"]) and 0 <= w["weight"] <= 1
    assert 0.0 <= w["fpr"] <= seg["fpr0"][last] and seg["fnr0"][last] <= w["fnr"] <= 1.0
    assert w["fpr_interval"][0] <= w["fpr"] <= w["fpr_interval"][1]
    assert w["allowed"] == (0.0, 1.0)


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 54_321])
def test_top_box_is_the_bands_box_above_its_last_knot(n):
    # The segments' last box from the last rank's Beta quantiles alone equals what the
    # whole band gives above its last knot (`_band(...).below(inf)`).
    from advsim.audits._assumption import _top_box
    from advsim.audits._roc_band import _band

    x = np.sort(np.random.default_rng(n).normal(size=n))
    got = _top_box(x, 0.05)
    want = _band(x, 0.025).below(np.array([math.inf]))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)

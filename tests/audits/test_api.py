"""`audit`: its two spellings (a `Scores`, or two arrays), its assumption-free defaults
(eps_delta at delta = 0), pure DP per method, `sides`, and every option passed through."""

import math
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from advsim import Accounting, Scores
from advsim.audits import (
    DEFAULT_DELTA,
    DEFAULT_METHOD,
    AssumptionRejectedWarning,
    BySampleSize,
    audit,
    get_audit,
)

from ._helpers import every_step, gaussian_scores

DELTA = 1e-5


@pytest.fixture(scope="module")
def scores() -> Scores:
    return gaussian_scores(1.0, 4000, seed=3)


def test_defaults_assume_nothing(scores):
    assert (DEFAULT_METHOD, DEFAULT_DELTA) == ("eps_delta", 0.0)
    r = audit(scores.canary_in, scores.canary_out)
    assert r.method == "eps_delta" and r.delta == 0.0
    assert r.guarantee.assumption == "none" and r.rigorous
    assert r.extras["sides"] == "two" and r.extras["threshold_selection"] == "by_sample_size"
    assert r.extras["chosen_strategy"] == "RankSplit()" and r.guarantee.held_out
    # The same as the class with its defaults, at delta = 0, its threshold by the default
    # strategy.
    default = BySampleSize()(get_audit("eps_delta"), scores, delta=0.0)
    assert r.to_dict() == default.to_dict()


def test_two_arrays_of_any_kind_are_the_scores_record(scores):
    # float32 values, so that a jax array (float32 without x64) holds the same numbers.
    cin = scores.canary_in.astype(np.float32).astype(np.float64)
    cout = scores.canary_out.astype(np.float32).astype(np.float64)
    ref = audit(Scores(cin, cout), "eps_delta", delta=DELTA).to_dict()
    for a, b in [
        (cin, cout),
        (cin.tolist(), cout.tolist()),
        (jnp.asarray(cin, dtype=jnp.float32), jnp.asarray(cout, dtype=jnp.float32)),
        (tuple(cin), cout.astype(np.float32)),
    ]:
        assert audit(a, b, delta=DELTA).to_dict() == ref
        assert audit(a, b, "eps_delta", delta=DELTA).to_dict() == ref
        assert audit(a, b, method="eps_delta", delta=DELTA).to_dict() == ref
    # Integers and booleans are real numbers too.
    ints = audit(np.arange(10), np.arange(10) - 5, delta=DELTA)
    assert ints.n_in == 9 and ints.eps_lower >= 0  # RankSplit counts 9 of 10 runs


def test_a_string_second_is_the_method_as_before(scores):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        by_position = audit(scores, "gdp", delta=DELTA)
        by_keyword = audit(scores, method="gdp", delta=DELTA)
        arrays = audit(scores.canary_in, scores.canary_out, "gdp", delta=DELTA)
    assert by_position.method == "gdp"
    assert by_position.to_dict() == by_keyword.to_dict() == arrays.to_dict()


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("x", "eps_delta"), {"method": "gdp"}, TypeError, "method given twice"),
        (("s", np.zeros(3)), {}, TypeError, "scores is an advsim.Scores, which holds both"),
        (("in",), {}, TypeError, r"scores must be an advsim.Scores, or the canary-in"),
        (("pair",), {}, TypeError, r"pass the two worlds as two arguments"),
        (
            (np.zeros(3), ["a", "b"]),
            {},
            TypeError,
            r"out_scores \(the second argument\) must hold real numbers",
        ),
        (
            (np.zeros((3, 2)), np.zeros(3)),
            {},
            ValueError,
            r"in_scores \(the first argument\) must be a 1-D array of scores, got shape \(3, 2\)",
        ),
        ((np.zeros(3), []), {}, ValueError, r"out_scores .* at least one score, got 0"),
        ((np.zeros(3), {"a": 1}), {}, TypeError, r"out_scores .* must be an array of scores"),
        ((np.zeros(3), [[1.0], [2.0, 3.0]]), {}, TypeError, r"out_scores .* array of scores"),
    ],
)
def test_bad_scores_name_the_argument(scores, args, kwargs, error, match):
    stand_in = {"s": scores, "x": scores, "in": scores.canary_in}
    stand_in["pair"] = (scores.canary_in, scores.canary_out)
    args = tuple(stand_in.get(a, a) if isinstance(a, str) and a in stand_in else a for a in args)
    with pytest.raises(error, match=match):
        audit(*args, **kwargs)


def test_pure_dp_where_the_mathematics_allows(scores):
    # eps_delta at delta = 0 is the log of a ratio of bounded rates, at least its value at
    # any delta > 0 at the same threshold.
    at = dict(threshold_selection="explicit", threshold=1.0)
    pure = audit(scores, delta=0.0, **at)
    approx = audit(scores, delta=1e-3, **at)
    a = 0.025
    fp = np.count_nonzero(scores.canary_out >= 1.0)
    fn = np.count_nonzero(scores.canary_in < 1.0)
    fpr_ub = scipy.stats.beta.ppf(1 - a, fp + 1, scores.n_out - fp)
    fnr_ub = scipy.stats.beta.ppf(1 - a, fn + 1, scores.n_in - fn)
    expected = max(0.0, math.log((1 - fnr_ub) / fpr_ub), math.log((1 - fpr_ub) / fnr_ub))
    assert pure.eps_lower == pytest.approx(expected, abs=1e-12)
    assert pure.eps_lower > approx.eps_lower > 0
    # Every strategy takes it.
    for sel, options in [("same", {}), ("multi_split", {"num_splits": 3}), ("bonferroni", {}),
                         ("projected_split", {}), ("rank_split", {})]:  # fmt: skip
        assert audit(scores, threshold_selection=sel, **options).delta == 0.0


@pytest.mark.parametrize(
    ("method", "why"),
    [
        ("gdp", r"G_mu with mu > 0 is \(eps, 0\)-DP for no finite eps"),
        ("family", r"Gaussian noise and is \(eps, 0\)-DP for no finite eps"),
        ("tradeoff", r"infinite at delta = 0 for every noise multiplier"),
    ],
)
def test_pure_dp_is_refused_with_the_reason(scores, method, why):
    acc = every_step(10, 0.1, 1.0)
    with pytest.raises(ValueError, match=rf"delta must be in \(0, 1\) for the '{method}' audit"):
        audit(scores, method, accounting=acc)  # the default delta, 0
    with pytest.raises(ValueError, match=why):
        audit(scores, method, delta=0, accounting=acc)
    # Out of range is the usual message for every method, eps_delta's range closed at 0.
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\), got 1.0"):
        audit(scores, method, delta=1.0, accounting=acc)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\), got -1e-09"):
        audit(scores, delta=-1e-9)


def test_sides_one_reads_only_the_first_inequality():
    # canary_in ~ U(0, 1), canary_out ~ U(-1, 1): every tau in (0, 1) has TPR / FPR = 2,
    # while tau = 0 has FNR = 0, so the second inequality (TNR / FNR) is much larger.
    rng = np.random.default_rng(0)
    s = Scores(rng.uniform(0, 1, 4000), rng.uniform(-1, 1, 4000))
    at = dict(threshold_selection="explicit", threshold=0.0, delta=DELTA)
    two, one = audit(s, sides="two", **at), audit(s, sides="one", **at)
    assert (two.extras["sides"], one.extras["sides"]) == ("two", "one")
    assert one.eps_lower == pytest.approx(one.extras["eps_tpr_fpr"]) and one.eps_lower < math.log(2)
    assert one.extras["eps_tnr_fnr"] is None
    assert two.eps_lower == two.extras["eps_tnr_fnr"] > 2.0
    # Both read the same two bounds, at level (1 - c) / 2 each.
    assert (one.fpr_upper, one.fnr_upper) == (two.fpr_upper, two.fnr_upper)
    # Chosen thresholds: "one" never exceeds log 2 here, "two" does.
    assert audit(s, sides="one", delta=DELTA).eps_lower < math.log(2)
    assert audit(s, sides="two", delta=DELTA).eps_lower > 1.0


def test_sides_per_method(scores):
    acc = every_step(10, 0.1, 1.0)
    gauss = Accounting(1, 1.0, 1.0, (1,))  # q = 1: composition's curve is G_1, cheap
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        gdp = [audit(scores, "gdp", delta=DELTA, sides=s) for s in ("two", "one")]
        trade = [
            audit(scores, "tradeoff", delta=DELTA, accounting=gauss, sides=s)
            for s in ("two", "one")
        ]
    # G_mu is symmetric: the same numbers under both.
    assert gdp[0].eps_lower == gdp[1].eps_lower and gdp[1].extras["sides"] == "one"
    # The trade-off audit's eps_lower reads EpsDeltaAudit's inequalities: "one" <= "two".
    assert trade[1].extras["sides"] == "one"
    assert 0 < trade[1].eps_lower <= trade[0].eps_lower
    with pytest.raises(ValueError, match="sides='one' does not apply to the 'family' audit"):
        audit(scores, "family", delta=DELTA, accounting=acc, sides="one")
    with pytest.raises(ValueError, match=r"sides must be one of \('two', 'one'\), got 'both'"):
        audit(scores, delta=DELTA, sides="both")
    with pytest.raises(ValueError, match="sides must be one of"):
        audit(scores, "tradeoff", delta=DELTA, accounting=acc, sides="both")


def test_every_option_reaches_the_audit(scores):
    r = audit(scores, delta=DELTA, seed=5, min_count=7, confidence=0.8, sides="one")
    assert r.extras["seed"] == 5 and r.confidence == 0.8 and r.extras["sides"] == "one"
    auditor = get_audit("eps_delta", seed=5, min_count=7, confidence=0.8, sides="one")
    assert r.to_dict() == BySampleSize()(auditor, scores, delta=DELTA).to_dict()
    # The strategies keep sides and the confidence they were given.
    for sel, options in [("multi_split", {"num_splits": 3}), ("projected_split",
                         {"selection_fraction": 0.3}), ("bonferroni", {})]:  # fmt: skip
        r = audit(scores, delta=DELTA, threshold_selection=sel, sides="one", **options)
        assert r.extras["sides"] == "one" and r.confidence == 0.95

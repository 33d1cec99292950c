"""Threshold strategies as values (`advsim.audits.ThresholdStrategy`): each value is the
alias it replaces, the default's rule, `Explicit`'s declaration, `seed=None`, and the
jax_privacy adapter taking the values with the same statement."""

import warnings

import numpy as np
import pytest

import advsim.audits as A
from advsim import Scores
from advsim.audits import ScoreOrientationWarning, audit, get_audit, split_halves

DELTA = 1e-5


def _gaussian(mu: float, n: int, seed: int) -> Scores:
    rng = np.random.default_rng(seed)
    return Scores(rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n))


@pytest.mark.parametrize(
    "value, alias, options",
    [
        (A.Split(), "split", {}),
        (A.Same(), "same", {}),
        (A.Explicit(0.7), "explicit", {"threshold": 0.7}),
        (A.MultiSplit(3), "multi_split", {"num_splits": 3}),
        (A.ProjectedSplit(0.3), "projected_split", {"selection_fraction": 0.3}),
        (A.RankSplit(0.2), "rank_split", {"selection_fraction": 0.2}),
        (A.Bonferroni(), "bonferroni", {}),
        (A.BySampleSize(), "by_sample_size", {}),
    ],
)
def test_each_value_is_its_alias(value, alias, options):
    s = _gaussian(1.0, 2000, 1)
    by_value = audit(s, delta=DELTA, threshold_selection=value, seed=3)
    by_alias = audit(s, delta=DELTA, threshold_selection=alias, seed=3, **options)
    assert by_value.to_dict() == by_alias.to_dict()
    assert by_value.extras["threshold_selection"] == alias
    assert by_value.extras["strategy"] == repr(value)


def test_split_at_a_fraction_chooses_on_that_share():
    # The definition written out: the same permutations as the audit's, the first
    # int(0.3 n) of each world choose; the rates are counted on the other 70%.
    s = _gaussian(1.5, 5000, 2)
    r = audit(s, delta=DELTA, threshold_selection=A.Split(0.3), seed=7)
    rng = np.random.default_rng(7)
    _, cnt_in = split_halves(np.asarray(s.canary_in), rng, 0.3)
    _, cnt_out = split_halves(np.asarray(s.canary_out), rng, 0.3)
    assert (r.n_in, r.n_out) == (cnt_in.size, cnt_out.size) == (3500, 3500)
    assert r.fpr == np.mean(cnt_out >= r.threshold) and r.fnr == np.mean(cnt_in < r.threshold)
    assert r.extras["selection_fraction"] == 0.3 and r.rigorous
    # 0.5 is the engine's half split, number for number
    half = audit(s, delta=DELTA, threshold_selection=A.Split(0.5), seed=7)
    assert half.eps_lower == get_audit("eps_delta", seed=7)(s, delta=DELTA).eps_lower


def test_multi_split_takes_a_fraction():
    s = _gaussian(1.5, 4000, 3)
    r = audit(s, delta=DELTA, threshold_selection=A.MultiSplit(3, fraction=0.3), seed=1)
    assert r.n_in == 2800 and r.extras["selection_fraction"] == 0.3
    assert len(r.extras["split_eps_lower"]) == 3


def test_explicit_is_rigorous_only_when_declared_in_advance():
    s = _gaussian(1.0, 3000, 4)
    plain = audit(s, delta=DELTA, threshold_selection=A.Explicit(1.5))
    declared = audit(s, delta=DELTA, threshold_selection=A.Explicit(1.5, chosen_in_advance=True))
    assert plain.eps_lower == declared.eps_lower and plain.threshold == 1.5
    assert not plain.rigorous and plain.optimistic
    assert declared.rigorous and declared.extras["chosen_in_advance"] is True
    assert "declares" in declared.guarantee.multiplicity
    assert declared.guarantee.label == "rigorous"
    with pytest.raises(TypeError, match="chosen_in_advance must be True or False"):
        A.Explicit(1.5, chosen_in_advance="yes")
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        A.Explicit(float("nan"))


def test_the_default_rule():
    """`BySampleSize`: `RankSplit()` from 3 scores per world, `Split()` below."""
    rule = A.BySampleSize()
    assert rule.choose(_gaussian(1.0, 3, 0)) == A.RankSplit()
    assert rule.choose(Scores(np.arange(2.0), np.arange(5.0))) == A.Split()
    r = audit(np.arange(2.0) + 10, np.arange(2.0))
    assert r.extras["chosen_strategy"] == "Split()" and r.extras["threshold_selection"] == (
        "by_sample_size"
    )
    r = audit(_gaussian(1.0, 1000, 5), delta=DELTA)
    assert r.extras["chosen_strategy"] == "RankSplit()" and "rank_split from 3" in (
        r.extras["strategy_rule"]
    )


def test_rank_split_does_not_collapse_on_a_weak_tail_at_1000_per_world():
    """0.95 N(0, 1) + 0.05 N(3, 1) vs N(0, 1), 10^3 scores per world: when the plan kept
    one of two tests that both projected nothing, `rank_split` returned 0 in 16 of 40
    score sets (median 0.28; `"split"` 0.34); counting both then, 6 of 40 (median 0.66).
    Measured with `scripts/threshold_strategies_small.py`; here the first 20 sets (keeping
    one: 6 zeros, median 0.31; counting both: 4 zeros, median 0.41)."""
    values = []
    for seed in range(20):
        rng = np.random.default_rng([seed, 99, 1000])
        tail = rng.random(1000) < 0.05
        x_in = np.where(tail, rng.normal(3.0, 1.0, 1000), rng.normal(0.0, 1.0, 1000))
        x_out = rng.normal(0.0, 1.0, 1000)
        r = audit(x_in, x_out, delta=DELTA, threshold_selection="rank_split", seed=seed,
                  check_orientation=False)  # fmt: skip
        values.append(r.eps_lower or 0.0)
    values = np.array(values)
    assert np.sum(values == 0) <= 4 and np.median(values) > 0.4, values


def test_seed_none_is_drawn_and_recorded():
    s = _gaussian(1.0, 2000, 6)
    a = audit(s, delta=DELTA, seed=None, threshold_selection="split")
    b = audit(s, delta=DELTA, seed=None, threshold_selection="split")
    assert a.extras["seed_drawn"] and isinstance(a.extras["seed"], int)
    assert a.extras["seed"] != b.extras["seed"]  # 2^-63 to be equal
    # the recorded seed reproduces the result
    again = audit(s, delta=DELTA, seed=a.extras["seed"], threshold_selection="split")
    assert again.eps_lower == a.eps_lower
    assert get_audit("eps_delta", seed=None).seed >= 0


def test_reversed_scores_get_a_note_and_a_warning_naming_the_fix():
    s = _gaussian(-1.5, 3000, 7)
    with pytest.warns(ScoreOrientationWarning, match=r"negate them before auditing"):
        r = audit(s, delta=DELTA)
    assert r.eps_lower == 0.0 and r.extras["reversed_eps_lower"] > 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = audit(s, delta=DELTA, check_orientation=False)
    assert quiet.eps_lower == 0.0 and "orientation_note" not in quiet.extras
    # no signal either way: no note
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        null = audit(_gaussian(0.0, 3000, 8), delta=DELTA)
    assert "orientation_note" not in null.extras


def test_a_strategy_refuses_what_it_cannot_run():
    s = _gaussian(1.0, 100, 9)
    with pytest.raises(ValueError, match="needs a one-threshold audit"):
        audit(s, "tradeoff", delta=DELTA, threshold_selection=A.RankSplit(),
              accounting=None)  # fmt: skip
    with pytest.raises(ValueError, match="at least 3 scores per world"):
        A.RankSplit()(get_audit("eps_delta"), Scores(np.arange(2.0), np.arange(2.0)), delta=0.0)
    with pytest.raises(TypeError, match="needs a one-threshold audit"):
        A.Split()(get_audit("tradeoff"), s, delta=DELTA)
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        A.Split(1.0)
    with pytest.raises(ValueError, match="options"):
        audit(s, delta=DELTA, threshold_selection=A.RankSplit(), selection_fraction=0.2)
    assert issubclass(A.Split, A.ThresholdStrategy)


def test_the_jax_privacy_adapter_takes_the_values_with_the_same_statement():
    from advsim.audits.jax_privacy import CanaryScoreAuditor
    from advsim.audits.jax_privacy import Split as JaxSplit

    s = _gaussian(1.0, 2000, 10)
    auditor = CanaryScoreAuditor(np.asarray(s.canary_in), np.asarray(s.canary_out))
    from advsim.audits.jax_privacy import as_strategy

    assert as_strategy(A.Split(0.3)) == JaxSplit(0.3)
    at = auditor.epsilon_clopper_pearson(0.05, DELTA, threshold_strategy=A.Explicit(0.5))
    assert at > 0
    with pytest.raises(TypeError, match="jax_privacy has no strategy RankSplit"):
        auditor.epsilon_clopper_pearson(0.05, DELTA, threshold_strategy=A.RankSplit())

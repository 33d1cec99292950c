"""advsim.audits.jax_privacy against jax_privacy's own `CanaryScoreAuditor`.

On shared scores (several families, 10^3 and 10^4 per world, a few seeds) every adapter
call returns jax_privacy's number: exactly for the Clopper-Pearson bound under every
strategy and for `epsilon_from_gdp`, and to jax_privacy's root-finding tolerance (its
`xtol=1e-6`) for the one-run bounds. The rest: the guarantees of the `AuditResult`, the
strategies' validation, and how the adapter relates to advsim's own
`audit(..., threshold_selection=...)`. Tests needing jax_privacy skip without it.
"""

import numpy as np
import pytest

from advsim import Scores
from advsim.audits import audit, split_halves
from advsim.audits import jax_privacy as jp

DELTA = 1e-5
# jax_privacy finds the one-run epsilons with Brent's method at xtol=1e-6 (advsim's at
# 1e-10): agreement to that tolerance is agreement with its definition.
ONE_RUN_ATOL = 2e-6


@pytest.fixture(scope="module")
def auditing():
    return pytest.importorskip(
        "jax_privacy.auditing", reason="jax_privacy (a test dependency) is not installed"
    )


def _scores(family: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if family == "gauss1":  # N(1, 1) vs N(0, 1)
        return rng.normal(1.0, 1.0, n), rng.normal(0.0, 1.0, n)
    if family == "gauss3":  # well separated: the bound lives in the tails
        return rng.normal(3.0, 1.0, n), rng.normal(0.0, 1.0, n)
    if family == "null":  # no signal
        return rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
    if family == "ties":  # few distinct scores: many ties, vertical and horizontal hull edges
        return rng.integers(0, 20, n) + (rng.random(n) < 0.3), rng.integers(0, 20, n)
    if family == "laplace_unequal":  # unequal world sizes
        return rng.laplace(1.0, 1.0, n), rng.laplace(0.0, 1.0, n // 3)
    raise ValueError(family)


FAMILIES = ("gauss1", "gauss3", "null", "ties", "laplace_unequal")


def _strategies(mod, scores_in, seed):
    """The same strategies built from `mod` (jax_privacy.auditing or advsim's adapter)."""
    tau = float(np.quantile(scores_in, 0.7))
    return {
        "explicit": mod.Explicit(tau),
        "bonferroni": mod.Bonferroni(),
        "split": mod.Split(0.5, seed),
        "split_0.3": mod.Split(threshold_estimation_frac=0.3, seed=seed + 7),
        "multi_split_even": mod.MultiSplit(4, 0.5, seed),
        "multi_split_odd": mod.MultiSplit(num_samples=3, threshold_estimation_frac=0.4, seed=seed),
    }


def _check_clopper_pearson(auditing, family, n, seed, options):
    cin, cout = _scores(family, n, seed)
    theirs_auditor = auditing.CanaryScoreAuditor(cin, cout)
    ours_auditor = jp.CanaryScoreAuditor(cin, cout)
    theirs_s, ours_s = _strategies(auditing, cin, seed), _strategies(jp, cin, seed)
    worst = 0.0
    for name in ours_s:
        for one_sided, delta in options:
            kwargs = dict(significance=0.05, delta=delta, one_sided=one_sided)
            theirs = theirs_auditor.epsilon_clopper_pearson(
                **kwargs, threshold_strategy=theirs_s[name]
            )
            ours = ours_auditor.epsilon_clopper_pearson(**kwargs, threshold_strategy=ours_s[name])
            assert ours == theirs, (family, n, seed, name, one_sided, delta, ours, theirs)
            worst = max(worst, abs(ours - theirs))
    return worst


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("family", FAMILIES)
def test_clopper_pearson_equals_jax_privacy_at_1e3(auditing, family, seed):
    options = [(True, DELTA), (False, 0.0)]
    assert _check_clopper_pearson(auditing, family, 1000, seed, options) == 0.0


@pytest.mark.parametrize("family", ["gauss1", "gauss3", "ties"])
def test_clopper_pearson_equals_jax_privacy_at_1e4(auditing, family):
    assert _check_clopper_pearson(auditing, family, 10_000, 0, [(False, DELTA)]) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_clopper_pearson_equals_jax_privacy_every_option(auditing, family, seed):
    options = [(True, DELTA), (False, DELTA), (True, 0.0), (False, 0.0)]
    for n in (1000, 10_000):
        assert _check_clopper_pearson(auditing, family, n, seed + 1, options) == 0.0


@pytest.mark.parametrize("n", [1000, 10_000])
@pytest.mark.parametrize("family", FAMILIES)
def test_epsilon_from_gdp_equals_jax_privacy(auditing, family, n):
    for seed, (significance, delta, tol) in enumerate([(0.05, DELTA, 1e-6), (0.1, 1e-3, 1e-9)]):
        cin, cout = _scores(family, n, seed)
        theirs = auditing.CanaryScoreAuditor(cin, cout).epsilon_from_gdp(significance, delta, tol)
        ours = jp.CanaryScoreAuditor(cin, cout).epsilon_from_gdp(significance, delta, tol)
        assert ours == theirs, (family, n, seed, significance, ours, theirs)


def _check_one_run(auditing, method, family, n, seed, names):
    cin, cout = _scores(family, n, seed)
    theirs_auditor = auditing.CanaryScoreAuditor(cin, cout)
    ours_auditor = jp.CanaryScoreAuditor(cin, cout)
    theirs_s, ours_s = _strategies(auditing, cin, seed), _strategies(jp, cin, seed)
    for name in names:
        theirs = getattr(theirs_auditor, method)(0.05, DELTA, threshold_strategy=theirs_s[name])
        ours = getattr(ours_auditor, method)(0.05, DELTA, threshold_strategy=ours_s[name])
        assert ours == pytest.approx(theirs, abs=ONE_RUN_ATOL), (family, n, seed, name)


@pytest.mark.parametrize("family", ["gauss1", "gauss3", "ties"])
def test_epsilon_one_run_equals_jax_privacy_at_1e3(auditing, family):
    names = ("explicit", "bonferroni", "split", "multi_split_odd")
    _check_one_run(auditing, "epsilon_one_run", family, 1000, 0, names)


def test_epsilon_one_run_fdp_equals_jax_privacy_at_1e3(auditing):
    # jax_privacy's f-DP search takes about a second per threshold strategy here.
    _check_one_run(auditing, "epsilon_one_run_fdp", "gauss1", 1000, 0, ("bonferroni",))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gauss1", "gauss3", "laplace_unequal"])
def test_one_run_bounds_equal_jax_privacy_at_1e4(auditing, family):
    names = ("explicit", "bonferroni", "split", "multi_split_odd")
    _check_one_run(auditing, "epsilon_one_run", family, 10_000, 1, names)
    _check_one_run(auditing, "epsilon_one_run_fdp", family, 10_000, 1, ("split",))


@pytest.mark.slow
def test_epsilon_one_run_fdp_equals_jax_privacy_on_ties(auditing):
    names = ("explicit", "bonferroni", "split", "multi_split_odd")
    _check_one_run(auditing, "epsilon_one_run_fdp", "ties", 1000, 2, names)


def test_hull_is_jax_privacys_frontier(auditing):
    # The count Bonferroni() divides by, on tie-heavy and continuous scores of many sizes.
    rng = np.random.default_rng(0)
    for trial in range(60):
        n_in, n_out = (int(k) for k in rng.integers(1, 200, size=2))
        if trial % 2:
            cin, cout = rng.integers(0, 6, n_in), rng.integers(0, 5, n_out)
        else:
            cin, cout = rng.normal(1.0, 1.0, n_in), rng.normal(0.0, 1.0, n_out)
        theirs = auditing.CanaryScoreAuditor(cin, cout)
        ours = jp.CanaryScoreAuditor(cin, cout)
        assert ours.num_thresholds == len(theirs._fn_counts)


def test_jax_privacys_strategy_objects_are_accepted(auditing):
    cin, cout = _scores("gauss1", 1000, 3)
    ours = jp.CanaryScoreAuditor(cin, cout)
    for name, theirs_strategy in _strategies(auditing, cin, 3).items():
        assert jp.as_strategy(theirs_strategy) == _strategies(jp, cin, 3)[name]
        a = ours.epsilon_clopper_pearson(0.05, DELTA, threshold_strategy=theirs_strategy)
        b = ours.epsilon_clopper_pearson(
            0.05, DELTA, threshold_strategy=jp.as_strategy(theirs_strategy)
        )
        assert a == b
    with pytest.raises(TypeError, match="threshold_strategy must be"):
        ours.epsilon_clopper_pearson(0.05, DELTA, threshold_strategy="bonferroni")


def test_defaults_are_jax_privacys(auditing):
    assert jp.Split() == jp.as_strategy(auditing.Split())
    assert jp.MultiSplit() == jp.as_strategy(auditing.MultiSplit())
    assert (jp.MultiSplit().num_samples, jp.MultiSplit().threshold_estimation_frac) == (100, 0.5)
    cin, cout = _scores("gauss1", 1000, 4)
    # Default strategy Bonferroni(), default delta 0, default one-sided.
    assert jp.CanaryScoreAuditor(cin, cout).epsilon_clopper_pearson(
        0.05
    ) == auditing.CanaryScoreAuditor(cin, cout).epsilon_clopper_pearson(0.05)


@pytest.mark.parametrize(
    "strategy, held_out",
    [
        (jp.Split(seed=0), True),
        (jp.MultiSplit(4, seed=0), True),
        (jp.MultiSplit(3, seed=0), True),
        (jp.Explicit(1.5), False),
        (jp.Bonferroni(), False),
    ],
)
def test_result_is_the_float_with_a_truthful_guarantee(strategy, held_out):
    cin, cout = _scores("gauss1", 1000, 5)
    auditor = jp.CanaryScoreAuditor(cin, cout)
    for one_sided in (True, False):
        value = auditor.epsilon_clopper_pearson(0.05, DELTA, one_sided, threshold_strategy=strategy)
        r = auditor.epsilon_clopper_pearson_result(
            0.05, DELTA, one_sided, threshold_strategy=strategy
        )
        assert r.eps_lower == value and r.confidence == 0.95 and r.delta == DELTA
        assert r.guarantee.assumption == "none"
        assert r.guarantee.held_out is held_out and r.rigorous is held_out
        assert r.eps_point is None and r.eps_point_note
        assert r.extras["one_sided"] is one_sided
        assert r.to_dict()["guarantee"]["held_out"] is held_out


def test_result_fields_describe_the_test_behind_the_bound():
    cin, cout = _scores("gauss1", 2000, 6)
    auditor = jp.CanaryScoreAuditor(cin, cout)
    # Split: counted on the other int(n * (1 - frac)) scores of each world.
    r = auditor.epsilon_clopper_pearson_result(0.05, DELTA, threshold_strategy=jp.Split(0.3, 1))
    assert (r.n_in, r.n_out) == (2000 - 600, 2000 - 600)
    assert r.fpr_upper >= r.fpr and r.fnr_upper >= r.fnr
    # Explicit: all scores, at the given threshold; the same bound as an explicit audit.
    r = auditor.epsilon_clopper_pearson_result(0.05, DELTA, threshold_strategy=jp.Explicit(1.0))
    assert (r.threshold, r.n_in, r.n_out) == (1.0, 2000, 2000)
    assert r.fpr == np.mean(cout >= 1.0) and r.fnr == np.mean(cin < 1.0)
    # MultiSplit: eps_lower is np.median of the split bounds (the mean of the two middle
    # ones for an even count); the rates shown are those of the upper middle split.
    r = auditor.epsilon_clopper_pearson_result(
        0.05, DELTA, threshold_strategy=jp.MultiSplit(4, seed=2)
    )
    splits = r.extras["split_eps_lower"]
    assert len(splits) == 4 and splits == sorted(splits)
    assert r.eps_lower == np.median(splits) and len(r.extras["split_seeds"]) == 4
    # Bonferroni: K hull thresholds, each rate at level significance / (2 K).
    r = auditor.epsilon_clopper_pearson_result(0.05, DELTA)
    k = r.extras["num_thresholds"]
    assert k == auditor.num_thresholds and r.extras["rate_level"] == 0.05 / k / 2


def test_explicit_is_advsims_explicit_audit_two_sided():
    # The mapping of the docs page: Explicit(tau), one_sided=False is advsim's
    # threshold_selection="explicit" at confidence 1 - significance.
    cin, cout = _scores("gauss3", 3000, 7)
    auditor = jp.CanaryScoreAuditor(cin, cout)
    for tau in (1.0, 2.5, 4.0):
        ours = auditor.epsilon_clopper_pearson(
            0.05, DELTA, one_sided=False, threshold_strategy=jp.Explicit(tau)
        )
        theirs = audit(
            Scores(cin, cout),
            "eps_delta",
            delta=DELTA,
            threshold_selection="explicit",
            threshold=tau,
        )
        assert ours == pytest.approx(theirs.eps_lower, rel=1e-12, abs=1e-12)


def test_split_half_is_advsims_split_partition():
    # Split(0.5, seed) and advsim's "split" with the same seed count on the same scores
    # (they choose the threshold differently: the docs page's table).
    cin, cout = _scores("gauss1", 1001, 8)
    r = jp.CanaryScoreAuditor(cin, cout).epsilon_clopper_pearson_result(
        0.05, DELTA, threshold_strategy=jp.Split(0.5, 11)
    )
    rng = np.random.default_rng(11)
    _, count_in = split_halves(cin, rng)
    _, count_out = split_halves(cout, rng)
    assert (r.n_in, r.n_out) == (count_in.size, count_out.size) == (501, 501)
    assert r.fpr == np.mean(count_out >= r.threshold) and r.fnr == np.mean(count_in < r.threshold)


def test_bonferroni_divides_by_far_fewer_than_advsims():
    # jax_privacy's K is the hull's size; advsim's "bonferroni" divides by every distinct
    # threshold (n_in + n_out + 1 here) and so reports less.
    cin, cout = _scores("gauss1", 2000, 9)
    ours = jp.CanaryScoreAuditor(cin, cout)
    advsim_r = audit(Scores(cin, cout), "eps_delta", delta=DELTA, threshold_selection="bonferroni")
    assert ours.num_thresholds < advsim_r.extras["n_candidates"] == 4001
    assert ours.epsilon_clopper_pearson(0.05, DELTA, one_sided=False) > advsim_r.eps_lower


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda a: a.epsilon_clopper_pearson(0.5, DELTA), "significance must be in"),
        (lambda a: a.epsilon_clopper_pearson(0.05, -0.1), "delta must be in"),
        (lambda a: a.epsilon_one_run(0.05, 0.0), "delta must be in"),
        (lambda a: a.epsilon_one_run(0.05, DELTA, one_sided=False), "one_sided must be True"),
        (lambda a: a.epsilon_one_run_fdp(1.0, DELTA), "significance must be in"),
        (lambda a: a.epsilon_from_gdp(0.05, DELTA, eps_tol=0.0), "eps_tol must be positive"),
    ],
)
def test_bad_arguments_raise_as_jax_privacy(call, match):
    auditor = jp.CanaryScoreAuditor(*_scores("gauss1", 100, 0))
    with pytest.raises(ValueError, match=match):
        call(auditor)


def test_bad_scores_and_strategies_raise():
    with pytest.raises(ValueError, match="in_canary_scores must be non-empty"):
        jp.CanaryScoreAuditor([], [1.0])
    with pytest.raises(ValueError, match="1-dimensional"):
        jp.CanaryScoreAuditor([1.0], [[1.0]])
    with pytest.raises(ValueError, match="NaN"):
        jp.CanaryScoreAuditor([1.0, np.nan], [1.0])
    with pytest.raises(ValueError, match="threshold_estimation_frac"):
        jp.Split(1.0)
    with pytest.raises(ValueError, match="num_samples"):
        jp.MultiSplit(0)
    # A split part with no scores: jax_privacy refuses it too.
    with pytest.raises(ValueError, match="must be non-empty"):
        jp.CanaryScoreAuditor([1.0], [0.0, 2.0]).epsilon_clopper_pearson(
            0.05, threshold_strategy=jp.Split(0.5, 0)
        )


def test_from_scores():
    cin, cout = _scores("gauss1", 500, 10)
    a = jp.CanaryScoreAuditor.from_scores(Scores(cin, cout))
    assert (a.n_in, a.n_out) == (500, 500)
    assert a.epsilon_clopper_pearson(0.05) == jp.CanaryScoreAuditor(
        cin, cout
    ).epsilon_clopper_pearson(0.05)

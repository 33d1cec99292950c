"""One-run audit (Steinke, Nasr & Jagielski 2023, arXiv:2305.08846): the p-value against
the paper's Algorithm 3 written as a loop, equality with jax_privacy where both define the
same quantity, why they differ elsewhere, soundness and tightness on Gaussian scores."""

import math

import numpy as np
import pytest
import scipy.stats

import advsim.bounds as bounds
from advsim.audits import (
    OneRunResult,
    default_k_candidates,
    gdp_one_run_rejects,
    one_run_audit,
    one_run_epsilon,
    one_run_fdp_audit,
    one_run_gdp_mu,
    one_run_guesses,
    one_run_p_value,
)

DELTA = 1e-5


def _paper_p_value(m, r, v, eps, delta):
    """Algorithm 3 of arXiv:2305.08846 (Appendix D) line by line: pmf sums in a loop."""
    q = math.exp(eps) / (1 + math.exp(eps))
    beta = scipy.stats.binom.sf(v - 1, r, q)
    alpha, total = 0.0, 0.0
    for i in range(1, v + 1):
        total += scipy.stats.binom.pmf(v - i, r, q)
        if total > i * alpha:
            alpha = total / i
    return min(beta + alpha * delta * 2 * m, 1.0)


def _one_run_scores(m, mu, seed):
    """m canaries in with probability 1/2; score N(mu, 1) if in, N(0, 1) if out: a
    mu-GDP release per canary (each canary's score is a Gaussian mechanism)."""
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    return rng.normal(mu * included, 1.0), included


@pytest.mark.parametrize(
    "m, r, v, eps, delta",
    [(1000, 100, 90, 1.0, 0.0), (1000, 100, 90, 1.0, 1e-5), (10**4, 500, 480, 2.5, 1e-5),
     (50, 50, 30, 0.2, 1e-3), (1000, 0, 0, 1.0, 1e-5), (1000, 10, 10, 8.0, 1e-5)],
)  # fmt: skip
def test_p_value_equals_the_papers_loop(m, r, v, eps, delta):
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(
        _paper_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15
    )


def test_epsilon_is_where_p_crosses_the_level():
    m, r, v, level = 1000, 200, 190, 0.05
    eps = one_run_epsilon(m, r, v, delta=DELTA, level=level)
    assert one_run_p_value(m, r, v, eps - 1e-7, DELTA) < level
    assert one_run_p_value(m, r, v, eps + 1e-7, DELTA) >= level
    assert one_run_epsilon(m, r, r // 2, delta=DELTA, level=level) == 0.0  # chance


def test_guesses_count_both_signs():
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    included = np.array([1, 1, 0, 1, 0, 0], bool)
    # Top 2 guessed in (both right), bottom 2 guessed out (both right): 4 of 4.
    assert one_run_guesses(scores, included, 2, 2) == (4, 4)
    # Top 3 (one wrong) and bottom 3 (3 = 2.0 is in: one wrong): 4 of 6.
    assert one_run_guesses(scores, included, 3, 3) == (6, 4)


@pytest.mark.parametrize("m", [200, 2000])
def test_equals_jax_privacy_explicit_threshold(m):
    # jax_privacy 2.0 CanaryScoreAuditor.epsilon_one_run with Explicit(tau): guesses "in"
    # where score >= tau, none "out" (k- = 0), m = n_in + n_out; its Brent tolerance is
    # xtol = 1e-6, so the two roots of the same equation agree to 1e-6.
    auditing = pytest.importorskip("jax_privacy.auditing")
    scores, included = _one_run_scores(m, 3.0, seed=m)
    auditor = auditing.CanaryScoreAuditor(scores[included], scores[~included])
    for tau in (1.5, 2.5, 3.5, 4.5):
        k_plus = int(np.sum(scores >= tau))
        for confidence in (0.9, 0.95):
            theirs = auditor.epsilon_one_run(
                1 - confidence, DELTA, threshold_strategy=auditing.Explicit(tau)
            )
            ours = one_run_audit(
                scores, included, delta=DELTA, confidence=confidence,
                k_selection="fixed", k_plus=k_plus, k_minus=0,
            )  # fmt: skip
            assert ours.eps_lower == pytest.approx(theirs, abs=1e-6)


def test_differs_from_jax_privacy_by_design():
    auditing = pytest.importorskip("jax_privacy.auditing")
    m = 150
    scores, included = _one_run_scores(m, 3.0, seed=1)
    auditor = auditing.CanaryScoreAuditor(scores[included], scores[~included])
    # (1) jax_privacy supports only k- = 0 ("one_sided must be True").
    with pytest.raises(ValueError, match="one_sided"):
        auditor.epsilon_one_run(0.05, DELTA, one_sided=False)
    # (2) Its default, Bonferroni(), divides the level by the number K of thresholds on the
    # Pareto frontier of (FN, TN) counts (a handful here, of m + 1 = 151 distinct thresholds), a
    # number that depends on the scores, and takes the best threshold at that level: a
    # union bound over a data-chosen set of tests. Its number is exactly ours at level
    # alpha / K maximised over every k+ (k- = 0). Ours divides by the size of a grid fixed
    # before the run (default_k_candidates), so the union bound holds as stated.
    theirs = auditor.epsilon_one_run(0.05, DELTA)
    frontier = len(auditor._fn_counts)
    assert frontier < m + 1
    best = max(
        one_run_epsilon(
            m, *one_run_guesses(scores, included, k, 0), delta=DELTA, level=0.05 / frontier
        )
        for k in range(1, m + 1)
    )
    assert theirs == pytest.approx(best, abs=1e-6)
    ours = one_run_audit(scores, included, delta=DELTA, confidence=0.95)
    assert ours.extras["n_candidates"] == len(default_k_candidates(m))
    assert ours.extras["level"] == pytest.approx(0.05 / len(default_k_candidates(m)))


def test_k_minus_helps_when_low_scores_are_informative():
    # In canaries score N(0, 1); out canaries N(-6, 1) half the time and N(0, 1) otherwise.
    # The lowest scores are then surely out while the highest are in only about 2/3 of the
    # time: the evidence is in k-, which jax_privacy's one-sided audit cannot use.
    rng = np.random.default_rng(0)
    m = 2000
    included = rng.random(m) < 0.5
    visible = ~included & (rng.random(m) < 0.5)
    scores = np.where(visible, rng.normal(-6.0, 1.0, m), rng.normal(0.0, 1.0, m))
    only_plus = one_run_audit(
        scores, included, delta=DELTA, candidates=[(k, 0) for k in (100, 200, 500)]
    )
    with_minus = one_run_audit(
        scores, included, delta=DELTA, candidates=[(0, k) for k in (100, 200, 500)]
    )
    assert with_minus.k_minus > 0 and with_minus.eps_lower > only_plus.eps_lower + 1.0


@pytest.mark.parametrize("sel, held_out", [("bonferroni", True), ("split", True), ("same", False)])
def test_selection_is_stated(sel, held_out):
    scores, included = _one_run_scores(1000, 3.0, seed=2)
    r = one_run_audit(scores, included, delta=DELTA, k_selection=sel)
    assert isinstance(r, OneRunResult) and r.guarantee.held_out == held_out
    assert r.rigorous == held_out and r.guarantee.statement == "eps_delta_lower_bound"
    assert r.guarantee.assumption == "none" and r.guarantee.multiplicity
    assert r.num_canaries == (500 if sel == "split" else 1000)
    assert r.to_dict()["guarantee"]["held_out"] == held_out


def test_sound_and_tight_on_gaussian_scores():
    # Each canary's score is a Gaussian mechanism with mu = 3: exact eps at delta from
    # Corollary 2.13 of arXiv:1905.02383 (bounds.gdp_epsilon) = 16.7. The one-run bounds
    # stay far below it at m = 10^4 (the 2 m delta term dominates the p-value), but must
    # stay below, and the same-run maximum must be at least the Bonferroni one.
    true_eps = bounds.gdp_epsilon(DELTA, 3.0)
    scores, included = _one_run_scores(10_000, 3.0, seed=3)
    results = {
        sel: one_run_audit(scores, included, delta=DELTA, k_selection=sel)
        for sel in ("bonferroni", "split", "same")
    }
    assert all(0 < r.eps_lower <= true_eps for r in results.values())
    assert results["same"].eps_lower >= results["bonferroni"].eps_lower
    # Measured: bonferroni 3.43, split 5.67, same 6.22 (the 2 m delta term costs more at
    # level 0.05/36 than halving m).
    assert results["split"].eps_lower > 4.5


def _rr_calibration(m, eps, reps, confidence, k):
    """Randomized response, where the one-run bound is tight: each canary's score is its
    bit, flipped with probability 1 / (1 + e^eps). The release is (eps, 0)-DP per canary,
    so its exact eps at delta is log(e^eps - delta (1 + e^eps)) (its hockey-stick
    divergence (e^eps - e^eps') / (1 + e^eps) solved for eps'). Guessing on the k highest
    and k lowest of m = 1000 scores (about 500 ones) makes V ~ Binomial(2k, e^eps /
    (1 + e^eps)) exactly, so eps_lower exceeds the truth in about 1 - confidence of the
    repeats: a bound that ignored the 2 m delta term or used the wrong binomial tail
    would exceed it more often."""
    true_eps = math.log(math.exp(eps) - DELTA * (1 + math.exp(eps)))
    rng = np.random.default_rng(7)
    over = 0
    for _ in range(reps):
        included = rng.random(m) < 0.5
        flip = rng.random(m) < 1 / (1 + math.exp(eps))
        scores = (included ^ flip).astype(float)
        r = one_run_audit(
            scores, included, delta=DELTA, confidence=confidence,
            k_selection="fixed", k_plus=k, k_minus=k,
        )  # fmt: skip
        over += r.eps_lower > true_eps
    return over, int(scipy.stats.binom.ppf(0.999, reps, 1 - confidence))


@pytest.mark.parametrize("eps, confidence, exact", [(1.0, 0.8, 0.18316), (2.0, 0.95, 0.04405)])
def test_exact_coverage_on_randomized_response(eps, confidence, exact):
    # No simulation: with 2k = 500 guesses on randomized response, V ~ Binomial(500,
    # e^eps / (1 + e^eps)) exactly, so P[eps_lower > exact eps] is a sum of binomial pmfs
    # over the v where the p-value at the exact eps is below the level. It must be at most
    # 1 - confidence (soundness, Theorem 5.2 of arXiv:2305.08846) and is close to it here
    # (tightness): 0.183 <= 0.2 and 0.044 <= 0.05 (values computed by this sum).
    true_eps = math.log(math.exp(eps) - DELTA * (1 + math.exp(eps)))
    v = np.arange(501)
    pmf = scipy.stats.binom.pmf(v, 500, math.exp(eps) / (1 + math.exp(eps)))
    rejects = [one_run_p_value(1000, 500, int(x), true_eps, DELTA) < 1 - confidence for x in v]
    rate = float(pmf[np.array(rejects)].sum())
    assert rate <= 1 - confidence and rate == pytest.approx(exact, abs=1e-4)


def test_calibration_on_randomized_response():
    # 200 simulated repeats at confidence 0.8 through one_run_audit (guesses, ties and
    # all): the allowance is the 0.999 quantile of Binomial(200, 0.2) = 58; measured 43
    # over (the exact rate is 0.183, test above).
    over, allowed = _rr_calibration(m=1000, eps=1.0, reps=200, confidence=0.8, k=250)
    assert over <= allowed
    assert over > 0  # the bound is tight here: some repeats must come close and cross


@pytest.mark.slow
def test_calibration_many_repeats():
    # 2000 repeats at confidence 0.95 on randomized response with eps = 2, and 200 one-run
    # audits of Gaussian scores (mu = 1, exact eps 4.38 by Corollary 2.13 of
    # arXiv:1905.02383) with the default Bonferroni selection.
    over, allowed = _rr_calibration(m=1000, eps=2.0, reps=2000, confidence=0.95, k=250)
    assert over <= allowed
    true_eps = bounds.gdp_epsilon(DELTA, 1.0)
    over = 0
    for seed in range(200):
        scores, included = _one_run_scores(2000, 1.0, seed=10_000 + seed)
        over += one_run_audit(scores, included, delta=DELTA).eps_lower > true_eps
    assert over <= scipy.stats.binom.ppf(0.999, 200, 0.05)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(k_selection="nope"), "k_selection must be one of"),
        (dict(k_selection="fixed"), "k_plus and k_minus are given exactly"),
        (dict(k_plus=3), "k_plus and k_minus are given exactly"),
        (dict(k_selection="fixed", k_plus=60, k_minus=50), "k_plus \\+ k_minus must be in"),
        (dict(k_selection="fixed", k_plus=-1, k_minus=0), "k_plus"),
        (dict(confidence=0.3), "confidence"),
        (dict(delta=0.0), "delta"),
        (dict(candidates=[]), "at least one"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    scores, included = _one_run_scores(100, 1.0, seed=0)
    kwargs = {"delta": DELTA, **kwargs}
    with pytest.raises(ValueError, match=match):
        one_run_audit(scores, included, **kwargs)


def test_bad_arrays():
    with pytest.raises(ValueError, match="included must have the shape"):
        one_run_audit(np.zeros(10), np.zeros(9, bool), delta=DELTA)
    with pytest.raises(ValueError, match="0/1"):
        one_run_audit(np.zeros(10), np.full(10, 2), delta=DELTA)
    with pytest.raises(ValueError, match="finite"):
        one_run_audit(np.full(10, np.nan), np.zeros(10, bool), delta=DELTA)


def test_default_grid():
    assert default_k_candidates(10)[:3] == [(1, 0), (2, 0), (5, 0)]
    assert max(k for k, _ in default_k_candidates(1000)) == 500


# --- f-DP in one run (Mahloujifar, Melis & Chaudhuri 2024, arXiv:2410.22235) -------------


@pytest.mark.parametrize("m", [200, 1000])
def test_fdp_equals_jax_privacy_explicit_threshold(m):
    # jax_privacy 2.0 epsilon_one_run_fdp with Explicit(tau): the same recursion for G_mu,
    # parameterised by eps through dp_accounting.get_sigma_gaussian (tol 1e-12) and solved
    # by Brent to xtol 1e-6; ours bisects on mu and reads eps by Corollary 2.13.
    auditing = pytest.importorskip("jax_privacy.auditing")
    scores, included = _one_run_scores(m, 2.0, seed=m + 1)
    auditor = auditing.CanaryScoreAuditor(scores[included], scores[~included])
    for tau in (1.0, 2.0, 3.0):
        k = int(np.sum(scores >= tau))
        theirs = auditor.epsilon_one_run_fdp(0.05, DELTA, threshold_strategy=auditing.Explicit(tau))
        ours = one_run_fdp_audit(scores, included, delta=DELTA, k_plus=k)
        assert ours.eps_lower == pytest.approx(theirs, abs=1e-6)


def test_fdp_states_its_assumption_and_the_gdp_certificate():
    scores, included = _one_run_scores(2000, 2.0, seed=9)
    r = one_run_fdp_audit(scores, included, delta=DELTA)
    g = r.guarantee
    assert g.assumption == "gaussian_tradeoff" and not r.rigorous and g.held_out
    assert g.certified.startswith("not mu-GDP for any mu <")
    mu = r.extras["mu_lower"]
    # Scores N(2, 1) vs N(0, 1) are exactly G_2: sound in mu, and eps is G_mu's eps.
    assert 0 < mu <= 2.0 and r.eps_lower == pytest.approx(bounds.gdp_epsilon(DELTA, mu))
    # The margin decreases in mu: rejected just below mu_lower, not just above.
    m, k, v, level = 2000, r.num_guesses, r.num_correct, r.extras["level"]
    assert gdp_one_run_rejects(m, k, v, mu - 1e-6, level) > 0
    assert gdp_one_run_rejects(m, k, v, mu + 1e-6, level) <= 0
    assert one_run_gdp_mu(m, k, k // 2, level=level) == 0.0  # chance-level guesses


def test_fdp_uses_the_guesses_better_than_eps_delta():
    # The paper's point: on the same guesses the f-DP claim is rejected further out than
    # the (eps, delta) claim (measured 4.35 vs 2.70 here at k = 496, m = 2000, mu = 2).
    scores, included = _one_run_scores(2000, 2.0, seed=2001)
    k = int(np.sum(scores >= 2.0))
    fdp = one_run_fdp_audit(scores, included, delta=DELTA, k_plus=k)
    epsdelta = one_run_audit(
        scores, included, delta=DELTA, k_selection="fixed", k_plus=k, k_minus=0
    )
    assert fdp.eps_lower > epsdelta.eps_lower


def test_fdp_bad_input():
    scores, included = _one_run_scores(100, 1.0, seed=0)
    with pytest.raises(ValueError, match="k_plus"):
        one_run_fdp_audit(scores, included, delta=DELTA, k_plus=0)
    with pytest.raises(ValueError, match="not both"):
        one_run_fdp_audit(scores, included, delta=DELTA, k_plus=5, candidates=[5])


# --- the inclusion bits: an exact binomial test of their balance ----------------------


@pytest.mark.parametrize("audit", [one_run_audit, one_run_fdp_audit])
@pytest.mark.parametrize("share", [1.0, 0.9, 0.0])
def test_unbalanced_coins_are_refused(audit, share):
    # Pure noise with every bit 1 (or 90% ones, or none) made one_run_audit report a
    # "rigorous" eps_lower of 4.09 (1.80 at 90%): guessing "in" is then right by
    # construction. 900 ones of 1000 have two-sided binomial p-value 1.3e-161 < 1e-3.
    rng = np.random.default_rng(0)
    included = np.arange(1000) < round(share * 1000)
    with pytest.raises(ValueError, match="fair coins.*independently of everything else"):
        audit(rng.normal(size=1000), included, delta=DELTA)


@pytest.mark.parametrize("audit", [one_run_audit, one_run_fdp_audit])
def test_fair_coins_pass_and_the_p_value_is_reported(audit):
    # rng.random(m) < 0.5: 20 draws at m = 1000 all pass at level 1e-3 (each is refused
    # with probability 0.00089, the exact test's size at m = 1000).
    for seed in range(20):
        scores, included = _one_run_scores(1000, 1.0, seed=seed)
        r = audit(scores, included, delta=DELTA)
        p = scipy.stats.binomtest(int(included.sum()), 1000, 0.5).pvalue
        assert r.extras["coin_p_value"] == pytest.approx(p) and p >= 1e-3


def test_coin_test_edges():
    # 553 ones of 1000 is the smallest count refused at 1e-3 (two-sided p = 0.00090;
    # 552 gives 0.0011), symmetric at 447; coin_level=None skips the test; a stricter
    # level refuses less.
    scores = np.random.default_rng(1).normal(size=1000)
    with pytest.raises(ValueError, match="553 of 1000"):
        one_run_audit(scores, np.arange(1000) < 553, delta=DELTA)
    with pytest.raises(ValueError, match="447 of 1000"):
        one_run_audit(scores, np.arange(1000) < 447, delta=DELTA)
    one_run_audit(scores, np.arange(1000) < 552, delta=DELTA)
    one_run_audit(scores, np.arange(1000) < 553, delta=DELTA, coin_level=1e-4)
    r = one_run_audit(scores, np.ones(1000, bool), delta=DELTA, coin_level=None)
    assert r.extras["coin_p_value"] == 1.0
    with pytest.raises(ValueError, match="coin_level"):
        one_run_audit(scores, np.arange(1000) < 500, delta=DELTA, coin_level=1.5)

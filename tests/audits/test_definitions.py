"""Each threshold strategy's number against an independent computation of its definition.

For the eps-delta audit the definitions (`audits._base`, `audits._strategies`) are:

- `"explicit"`: at the caller's threshold, all runs counted, FPR and FNR each bounded by a
  one-sided Clopper-Pearson interval at level (1 - c) / 2;
- `"same"`: the best of the candidate thresholds (`candidate_thresholds`, K of them), all
  runs counted, every rate at level (1 - c) / 2 (optimistic: no correction);
- `"split"`: the generator `default_rng(seed)` permutes canary_in, then canary_out; the
  first n // 2 of each choose the threshold among the candidates of that half at level
  (1 - c) / (2 K), the rest count at level (1 - c) / 2;
- `"bonferroni"`: every distinct threshold (each distinct pooled score, plus one above
  all: K of them), each rate at level (1 - c) / (2 K), the best of them;

with eps = max(0, log((1 - FNR_ub - delta) / FPR_ub), log((1 - FPR_ub - delta) / FNR_ub))
under `sides="two"` and only the first log ratio under `sides="one"` (the same levels).
Here every Clopper-Pearson bound is recomputed with `scipy.stats.beta.ppf`, every count
with numpy comparisons, and the audit's `eps_lower` must agree to 1e-9.
"""

import math

import numpy as np
import pytest
import scipy.stats

from advsim import Scores
from advsim.audits import audit, candidate_thresholds

DELTA = 1e-5
CONFIDENCE = 0.9
N = 300


@pytest.fixture(scope="module")
def scores() -> Scores:
    rng = np.random.default_rng(2024)
    # Rounded to a grid so that ties occur: the distinct thresholds are fewer than 2 N + 1.
    return Scores(np.round(rng.normal(2.0, 1.0, N), 2), np.round(rng.normal(0.0, 1.0, N), 2))


def _cp_upper(k, n: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound at failure probability `level` (1 at k = n)."""
    k = np.asarray(k, dtype=np.int64)
    out = np.ones(k.shape)
    below = k < n
    out[below] = scipy.stats.beta.ppf(1.0 - level, k[below] + 1, n - k[below])
    return out


def _eps(cin, cout, taus, level: float, sides: str) -> np.ndarray:
    """The definition's eps at each threshold in `taus`, counted on (cin, cout)."""
    taus = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    fp = np.array([np.count_nonzero(cout >= t) for t in taus])
    fn = np.array([np.count_nonzero(cin < t) for t in taus])
    fpr_ub = _cp_upper(fp, cout.size, level)
    fnr_ub = _cp_upper(fn, cin.size, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(1 - fnr_ub - DELTA > 0, np.log((1 - fnr_ub - DELTA) / fpr_ub), -np.inf)
        second = np.where(1 - fpr_ub - DELTA > 0, np.log((1 - fpr_ub - DELTA) / fnr_ub), -np.inf)
    both = first if sides == "one" else np.maximum(first, second)
    return np.maximum(both, 0.0)


SIDES = ("two", "one")


@pytest.mark.parametrize("sides", SIDES)
def test_explicit_is_the_clopper_pearson_bound_at_the_given_threshold(scores, sides):
    tau = 1.5
    r = audit(
        scores,
        delta=DELTA,
        confidence=CONFIDENCE,
        threshold_selection="explicit",
        threshold=tau,
        sides=sides,
    )
    alpha = (1 - CONFIDENCE) / 2
    expected = _eps(scores.canary_in, scores.canary_out, tau, alpha, sides)[0]
    assert r.threshold == tau and r.extras["sides"] == sides
    assert abs(r.eps_lower - expected) <= 1e-9


@pytest.mark.parametrize("sides", SIDES)
def test_same_is_the_best_candidate_on_all_runs(scores, sides):
    r = audit(scores, delta=DELTA, confidence=CONFIDENCE, threshold_selection="same", sides=sides)
    cin, cout = np.sort(scores.canary_in), np.sort(scores.canary_out)
    cands = candidate_thresholds(cin, cout)
    assert r.extras["n_candidates"] == cands.size  # the stated K
    alpha = (1 - CONFIDENCE) / 2
    each = _eps(cin, cout, cands, alpha, sides)
    assert abs(r.eps_lower - each.max()) <= 1e-9
    assert abs(r.eps_lower - _eps(cin, cout, r.threshold, alpha, sides)[0]) <= 1e-9


@pytest.mark.parametrize("sides", SIDES)
def test_split_chooses_on_one_half_and_counts_on_the_other(scores, sides):
    seed = 7
    r = audit(
        scores, delta=DELTA, confidence=CONFIDENCE, threshold_selection="split", seed=seed,
        sides=sides,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    perm_in = rng.permutation(N)
    perm_out = rng.permutation(N)
    cut = N // 2
    sel_in, cnt_in = scores.canary_in[perm_in[:cut]], scores.canary_in[perm_in[cut:]]
    sel_out, cnt_out = scores.canary_out[perm_out[:cut]], scores.canary_out[perm_out[cut:]]
    alpha = (1 - CONFIDENCE) / 2
    # The choice: the best candidate of the choosing half at level alpha / K.
    cands = candidate_thresholds(np.sort(sel_in), np.sort(sel_out))
    assert r.extras["n_candidates"] == cands.size
    chosen = _eps(sel_in, sel_out, cands, alpha / cands.size, sides)
    at_tau = _eps(sel_in, sel_out, r.threshold, alpha / cands.size, sides)[0]
    assert r.threshold in cands and at_tau >= chosen.max() - 1e-12
    # The bound: counted on the other half at level alpha.
    expected = _eps(cnt_in, cnt_out, r.threshold, alpha, sides)[0]
    assert (r.n_in, r.n_out) == (cnt_in.size, cnt_out.size)
    assert abs(r.eps_lower - expected) <= 1e-9


@pytest.mark.parametrize("sides", SIDES)
def test_bonferroni_is_every_distinct_threshold_at_level_alpha_over_k(scores, sides):
    """Every distinct threshold (each distinct pooled score and one above all: K), each
    rate at level (1 - c) / (2 K), the best. This test FAILS if the audit's divisor were
    cut from K to K / 4 (checked by running it against `bonferroni_audit` with both of its
    divisors so edited: eps_lower rose from 1.880 to 1.998, far above the 1e-9
    tolerance)."""
    r = audit(
        scores, delta=DELTA, confidence=CONFIDENCE, threshold_selection="bonferroni", sides=sides
    )
    pooled = np.unique(np.concatenate([scores.canary_in, scores.canary_out]))
    taus = np.append(pooled, math.inf)  # "one above all": FP = 0, FN = n_in
    k = taus.size
    assert k < 2 * N + 1  # ties: the count is of distinct thresholds
    assert r.extras["n_candidates"] == k  # the stated K
    level = (1 - CONFIDENCE) / (2 * k)
    expected = _eps(scores.canary_in, scores.canary_out, taus, level, sides).max()
    assert abs(r.eps_lower - expected) <= 1e-9
    # The same maximum at K / 4 is clearly different: the check above has the power to
    # tell the two divisors apart.
    loose = _eps(scores.canary_in, scores.canary_out, taus, 4 * level, sides).max()
    assert loose - expected > 1e-3

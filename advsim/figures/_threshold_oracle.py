"""The oracle of the threshold figure: one test fixed in advance from the pair's exact laws.

A held-out strategy places its test from data and counts it on part of the runs; the
oracle places it where the pair's laws say it is best and counts it on all of them, at the
same confidence. Three kinds of test are fixed in advance, as the strategies place theirs:

- a *value* test, "in" iff score >= tau, tau a number: both counts binomial;
- an *upper rank* test, "in" iff score > the (k+1)-th largest out-score: its FPR is at
  most the (k+1)-th largest of n_out uniforms, bounded by `clopper_pearson_upper(k, n_out,
  a)` whatever the law (the argument of `advsim.audits.RankSplit`), its FN count binomial
  given the threshold;
- a *lower rank* test, "in" iff score >= the (j+1)-th smallest in-score: the mirror image.

A rank test moves with the sample's own extreme scores, which a fixed value cannot: on
the mixture 0.9 N(0, 1) + 0.1 N(4, 1) vs N(0, 1) at 10^4 per world a held-out rank test
beat the best value test fixed in advance (median 4.98 against 4.85). So there are two
oracles, each at its best place (`oracle_tests`: the value from the exact laws, the side
and rank on 200 score sets drawn from the laws apart from the audited ones), counted on
each score set (`oracle_eps`); the figure's limit is the larger of their medians.

Each oracle also fixes in advance how the level 1 - c is shared between its two rates
(`SHARES`, the FPR's share): `advsim.audits.RankSplit` gives its rank-placed rate 0.5,
0.7 or 0.9 of a test's level, and against an oracle with an equal share only,
rank_split's median was 0.6-1.1% higher in three rows of the figure.
"""

from __future__ import annotations

import numpy as np
import scipy.stats

from advsim import Scores
from advsim.audits import clopper_pearson_upper, eps_delta_terms

__all__ = ["exact_rates", "oracle_eps", "oracle_tests"]

#: The candidate thresholds on the continuous families: this many points on [-20, 20]
#: (spacing 2e-4), where both worlds' exact tail rates are read.
_ORACLE_POINTS = 200_001
#: The Laplace pair's shift (as the figure's `LAPLACE_SHIFT`).
_LAPLACE_SHIFT = 1.0
#: The FPR's share of the level 1 - c that an oracle may fix (the FNR gets the rest):
#: every split `rank_split` may plan (0.5, 0.7, 0.9 for its rank-placed rate, either side)
#: and two more.
SHARES = (0.1, 0.3, 0.5, 0.7, 0.9)


def exact_rates(family: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(taus, fpr, fnr)`: the test "in" iff score >= tau at candidate thresholds, with its
    exact rates from the pair's laws: FPR = P_out(score >= tau), FNR = P_in(score < tau)
    (scipy's CDFs; for the Binomial pair, the 22 thresholds 0, ..., 21)."""
    if family == "binomial":
        k = np.arange(22.0)
        return k, scipy.stats.binom.sf(k - 1, 20, 0.5), scipy.stats.binom.cdf(k - 1, 20, 0.6)
    t = np.linspace(-20.0, 20.0, _ORACLE_POINTS)
    norm, lap, st = scipy.stats.norm, scipy.stats.laplace, scipy.stats.t
    laws = {
        "gaussian_strong": (norm.cdf(t - 2.0), norm.sf(t)),
        "gaussian_weak": (norm.cdf(t - 0.5), norm.sf(t)),
        "laplace": (lap.cdf(t - _LAPLACE_SHIFT), lap.sf(t)),
        "mixture": (0.9 * norm.cdf(t) + 0.1 * norm.cdf(t - 4.0), norm.sf(t)),
        "student_t": (st.cdf(t - 2.0, 3), st.sf(t, 3)),
    }
    if family not in laws:
        raise ValueError(f"unknown family {family!r}")
    fnr, fpr = laws[family]
    return t, fpr, fnr


def _value_test(family: str, n: int, delta: float, confidence: float) -> tuple[float, float]:
    """`(tau, share)`: the threshold value and the FPR's share of the level (`SHARES`)
    whose eps_delta bound, at the pair's expected counts among n runs per world (its exact
    rates, `exact_rates`, times n), is largest."""
    taus, fpr, fnr = exact_rates(family)
    alpha = 1.0 - confidence
    fp_n = np.rint(fpr * n).astype(np.int64)
    fn_n = np.rint(fnr * n).astype(np.int64)
    best = (-np.inf, 0.0, 0.5)
    for share in SHARES:
        fpr_ub = clopper_pearson_upper(fp_n, n, share * alpha)
        fnr_ub = clopper_pearson_upper(fn_n, n, (1.0 - share) * alpha)
        bound = np.maximum(*eps_delta_terms(fpr_ub, fnr_ub, delta))
        i = int(np.argmax(bound))
        if bound[i] > best[0]:
            best = (float(bound[i]), float(taus[i]), share)
    return best[1], best[2]


def _ranks(n: int) -> np.ndarray:
    """Candidate ranks: every one up to 256, then 400 geometric steps to n - 1."""
    grid = np.concatenate([np.arange(min(n, 257)), np.geomspace(1, n, 400) - 1])
    return np.unique(np.clip(np.rint(grid).astype(np.int64), 0, n - 1))


def _rank_bounds(scores: Scores, ranks: np.ndarray, delta: float, alpha: float) -> np.ndarray:
    """The eps_delta bounds on one score set, indexed (side, share, rank): the upper rank
    tests at `ranks` (side 0) and the lower ones (side 1), with the FPR's share `SHARES`
    of the level `alpha`."""
    cin = np.sort(np.asarray(scores.canary_in, np.float64))
    cout = np.sort(np.asarray(scores.canary_out, np.float64))
    fn = np.searchsorted(cin, cout[cout.size - 1 - ranks], side="right")
    fp = cout.size - np.searchsorted(cout, cin[ranks], side="left")
    cp = clopper_pearson_upper
    out = np.empty((2, len(SHARES), ranks.size))
    for j, share in enumerate(SHARES):
        a_fp, a_fn = share * alpha, (1.0 - share) * alpha
        upper = eps_delta_terms(cp(ranks, cout.size, a_fp), cp(fn, cin.size, a_fn), delta)
        lower = eps_delta_terms(cp(fp, cout.size, a_fp), cp(ranks, cin.size, a_fn), delta)
        out[0, j], out[1, j] = np.maximum(*upper), np.maximum(*lower)
    return out


def oracle_tests(
    family: str, n: int, delta: float, confidence: float, sample, references: int = 200
) -> dict:
    """The two tests fixed in advance, each `(kind, where, share)` with the FPR's share
    of the level 1 - c: `{"value": ("value", tau, share), "rank": (side, k, share)}`, tau
    and its share where the eps_delta bound at the pair's expected counts, read off its
    exact laws, is largest (`_value_test`), and the side ("upper" or "lower"), share and
    rank with the largest median bound on `references` score sets `sample(family, n,
    seed)` drawn from the laws with seeds 10^6, 10^6 + 1, ... (none of them a set the
    figure audits)."""
    ranks = _ranks(n)
    bounds = np.median(
        np.stack([_rank_bounds(sample(family, n, 10**6 + r), ranks, delta, 1.0 - confidence)
                  for r in range(references)]),
        axis=0,
    )  # fmt: skip
    side, j, i = np.unravel_index(int(np.argmax(bounds)), bounds.shape)
    return {
        "value": ("value", *_value_test(family, n, delta, confidence)),
        "rank": (("upper", "lower")[side], float(ranks[i]), SHARES[j]),
    }


def oracle_eps(test: tuple, scores: Scores, delta: float, confidence: float) -> float:
    """The eps_delta bound of the oracle's `test` (`oracle_tests`: kind, where, the FPR's
    share of the level) on `scores`, counted on all runs: FPR at level share x (1 - c),
    FNR at the rest. At share 0.5 a value test is `audit(..., Explicit(tau,
    chosen_in_advance=True))`."""
    kind, where, share = test
    cin = np.sort(np.asarray(scores.canary_in, np.float64))
    cout = np.sort(np.asarray(scores.canary_out, np.float64))
    a_fp, a_fn = share * (1.0 - confidence), (1.0 - share) * (1.0 - confidence)
    if kind == "value":  # "in" iff score >= tau
        fp = int(cout.size - np.searchsorted(cout, where, side="left"))
        fn = int(np.searchsorted(cin, where, side="left"))
        fpr_ub = clopper_pearson_upper(fp, cout.size, a_fp)
        fnr_ub = clopper_pearson_upper(fn, cin.size, a_fn)
    elif kind == "upper":  # "in" iff score > the (k+1)-th largest out-score
        rank = int(where)
        fn = int(np.searchsorted(cin, cout[cout.size - 1 - rank], side="right"))
        fpr_ub = clopper_pearson_upper(rank, cout.size, a_fp)
        fnr_ub = clopper_pearson_upper(fn, cin.size, a_fn)
    else:  # "in" iff score >= the (j+1)-th smallest in-score
        rank = int(where)
        fp = int(cout.size - np.searchsorted(cout, cin[rank], side="left"))
        fpr_ub = clopper_pearson_upper(fp, cout.size, a_fp)
        fnr_ub = clopper_pearson_upper(rank, cin.size, a_fn)
    return max(0.0, float(np.max(eps_delta_terms(fpr_ub, fnr_ub, delta))))

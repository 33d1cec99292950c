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
"""

from __future__ import annotations

import numpy as np
import scipy.stats

from advsim import Scores
from advsim.audits import Explicit, audit, clopper_pearson_upper, eps_delta_terms

__all__ = ["exact_rates", "oracle_eps", "oracle_tests"]

#: The candidate thresholds on the continuous families: this many points on [-20, 20]
#: (spacing 2e-4), where both worlds' exact tail rates are read.
_ORACLE_POINTS = 200_001
#: The Laplace pair's shift (as the figure's `LAPLACE_SHIFT`).
_LAPLACE_SHIFT = 1.0


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


def _value_test(family: str, n: int, delta: float, confidence: float) -> float:
    """The threshold value whose eps_delta bound, at the pair's expected counts among n
    runs per world (its exact rates, `exact_rates`, times n) and level (1 - c) / 2 per
    rate, is largest."""
    taus, fpr, fnr = exact_rates(family)
    a = (1.0 - confidence) / 2.0
    fp_n = np.rint(fpr * n).astype(np.int64)
    fn_n = np.rint(fnr * n).astype(np.int64)
    terms = eps_delta_terms(clopper_pearson_upper(fp_n, n, a),
                            clopper_pearson_upper(fn_n, n, a), delta)  # fmt: skip
    return float(taus[int(np.argmax(np.maximum(*terms)))])


def _ranks(n: int) -> np.ndarray:
    """Candidate ranks: every one up to 256, then 400 geometric steps to n - 1."""
    grid = np.concatenate([np.arange(min(n, 257)), np.geomspace(1, n, 400) - 1])
    return np.unique(np.clip(np.rint(grid).astype(np.int64), 0, n - 1))


def _rank_bounds(scores: Scores, ranks: np.ndarray, delta: float, a: float) -> np.ndarray:
    """The eps_delta bounds of the upper rank tests at `ranks` (first row) and of the
    lower ones (second row) on one score set."""
    cin = np.sort(np.asarray(scores.canary_in, np.float64))
    cout = np.sort(np.asarray(scores.canary_out, np.float64))
    fn = np.searchsorted(cin, cout[cout.size - 1 - ranks], side="right")
    fp = cout.size - np.searchsorted(cout, cin[ranks], side="left")
    cp = clopper_pearson_upper
    upper = eps_delta_terms(cp(ranks, cout.size, a), cp(fn, cin.size, a), delta)
    lower = eps_delta_terms(cp(fp, cout.size, a), cp(ranks, cin.size, a), delta)
    return np.stack([np.maximum(*upper), np.maximum(*lower)])


def oracle_tests(
    family: str, n: int, delta: float, confidence: float, sample, references: int = 200
) -> dict:
    """The two tests fixed in advance: `{"value": ("value", tau), "rank": (side, k)}`,
    tau where the eps_delta bound at the pair's expected counts, read off its exact laws,
    is largest (`_value_test`), and the side ("upper" or "lower") and rank with the
    largest median bound on `references` score sets `sample(family, n, seed)` drawn from
    the laws with seeds 10^6, 10^6 + 1, ... (none of them a set the figure audits)."""
    a = (1.0 - confidence) / 2.0
    ranks = _ranks(n)
    bounds = np.median(
        np.stack([_rank_bounds(sample(family, n, 10**6 + r), ranks, delta, a)
                  for r in range(references)]),
        axis=0,
    )  # fmt: skip
    side, i = np.unravel_index(int(np.argmax(bounds)), bounds.shape)
    return {
        "value": ("value", _value_test(family, n, delta, confidence)),
        "rank": (("upper", "lower")[side], float(ranks[i])),
    }


def oracle_eps(test: tuple[str, float], scores: Scores, delta: float, confidence: float):
    """The eps_delta bound of the oracle's `test` (`oracle_test`) on `scores`, counted on
    all runs at level (1 - c) / 2 per rate."""
    kind, where = test
    if kind == "value":
        r = audit(scores, "eps_delta", delta=delta, confidence=confidence,
                  threshold_selection=Explicit(where, chosen_in_advance=True),
                  check_orientation=False)  # fmt: skip
        return float(r.eps_lower)
    cin = np.sort(np.asarray(scores.canary_in, np.float64))
    cout = np.sort(np.asarray(scores.canary_out, np.float64))
    a, rank = (1.0 - confidence) / 2.0, int(where)
    if kind == "upper":  # "in" iff score > the (k+1)-th largest out-score
        fn = int(np.searchsorted(cin, cout[cout.size - 1 - rank], side="right"))
        fpr_ub = clopper_pearson_upper(rank, cout.size, a)
        fnr_ub = clopper_pearson_upper(fn, cin.size, a)
    else:  # "in" iff score >= the (j+1)-th smallest in-score
        fp = int(cout.size - np.searchsorted(cout, cin[rank], side="left"))
        fpr_ub = clopper_pearson_upper(fp, cout.size, a)
        fnr_ub = clopper_pearson_upper(rank, cin.size, a)
    return max(0.0, float(np.max(eps_delta_terms(fpr_ub, fnr_ub, delta))))

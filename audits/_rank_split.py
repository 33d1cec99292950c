"""The rank split (`rank_split_audit`): thresholds planned on a share of each world by rank,
each test's epsilon read off the counts of the rest."""

from __future__ import annotations

import numpy as np

from advsim import Scores

from ._base import (
    AbstractThresholdAudit,
    _point_at,
    _result,
    _test_fields,
)
from ._result import AuditResult
from ._strategies import _planning_split
from ._threshold import candidate_thresholds, clopper_pearson_upper, counts_at

__all__ = ["RANK_SPLIT_FRACTION", "rank_split_audit"]


#: The exponential tail beyond the choosing part's extreme score is fitted to its top
#: max(_TAIL_MIN, _TAIL_SHARE * n) scores.
_TAIL_MIN, _TAIL_SHARE = 10, 0.02
#: Candidate ranks: every rank up to this one, then a grid (`_rank_grid`), up to this share
#: of the counting part (beyond it the test belongs to the other side).
_DENSE_RANKS, _RANK_CAP = 256, 0.6

#: `rank_split`'s default share of each world that chooses the tests.
RANK_SPLIT_FRACTION = 0.1


#: The shares of a test's level that `rank_split` may give its rank-placed rate (the rest
#: goes to the counted rate); each test takes the share its projection prefers.
_RANK_SHARES = (0.5, 0.7, 0.9)


#: The projection's caution: the choosing part's rate at a threshold is replaced by its
#: Clopper-Pearson upper bound at this level (an 80% bound).
_CAUTION = 0.2


#: A test whose projected bound is below this share of the other's is not counted (the
#: other then gets the whole level), when the other projects a positive bound. (When
#: neither does, both are counted: keeping one of two tests that project nothing left
#: eps_lower = 0 in 16 of 40 score sets of 0.95 N(0, 1) + 0.05 N(3, 1) vs N(0, 1) at 10^3
#: per world, against 6 of 40 with both counted.)
_DROP_SHARE = 0.1


#: Tests beyond the choosing part's extreme score of the rank world are planned only when at
#: least this many of the other world's choosing scores lie beyond it (the likelihood ratio
#: keeps rising there; where it does not, as for a Laplace or t pair, the extrapolated tail
#: misplaces the test).
_TAIL_EVIDENCE = 5


#: Above this share of tied scores in the choosing part, thresholds are placed at values.
_TIE_SHARE = 0.01


def _rank_grid(m: int) -> np.ndarray:
    """Candidate ranks 0..top, top = `_RANK_CAP` m (at least 0): all up to `_DENSE_RANKS`,
    then 384-point geometric and linear grids (the resolution of `candidate_thresholds`)."""
    top = max(0, min(m - 1, int(_RANK_CAP * m)))
    dense = np.arange(min(top, _DENSE_RANKS) + 1)
    k = np.concatenate([dense, np.geomspace(1, top + 1, 384) - 1, np.linspace(0, top, 384)])
    return np.unique(np.clip(np.rint(k).astype(np.int64), 0, top))


def _projected_other(rank_sel, other_sel, m_rank: int, m_other: int, ranks) -> np.ndarray:
    """The other world's count a rank-placed test is projected to have on the counting part.

    The test says "in" above the (k+1)-th largest of the rank world's `m_rank` counting
    scores. Its place is read off the rank world's choosing scores (`rank_sel`, sorted) at
    the same tail share (k + 1) / (m_rank + 1), interpolated in the log of the rank, and
    beyond the largest choosing score from an exponential tail fitted to the top ones (only
    with `_TAIL_EVIDENCE`; else those ranks are projected to count everything). The count
    is that of the other world's choosing scores (`other_sel`, sorted) below the place, as
    an 80% Clopper-Pearson upper bound on the rate (`_CAUTION`: few scores look no better
    than they are) scaled to `m_other`.
    """
    ns = rank_sel.size
    desc = rank_sel[::-1]
    p = (np.asarray(ranks, np.float64) + 1.0) / (m_rank + 1.0) * (ns + 1.0)
    place = np.interp(np.log(p), np.log(np.arange(1.0, ns + 1.0)), desc)
    below = p < 1.0
    beyond = other_sel.size - np.searchsorted(other_sel, desc[0], side="right")
    if ns >= 2 and beyond >= _TAIL_EVIDENCE:
        top = min(max(_TAIL_MIN, int(_TAIL_SHARE * ns)), ns - 1)
        scale = max(float(np.mean(desc[:top]) - desc[top]), 0.0)
        place[below] = desc[0] + scale * np.log(1.0 / p[below])
    else:
        place[below] = np.inf
    count = np.searchsorted(other_sel, place, side="left")
    rate = clopper_pearson_upper(count, other_sel.size, _CAUTION)
    return np.minimum(np.rint(rate * m_other), m_other).astype(np.int64)


def _value(audit, ctx, delta, fpr_ub, fnr_ub) -> float:
    eps, _ = audit.bound(float(fpr_ub), float(fnr_ub), delta, ctx)
    return -np.inf if eps is None else float(eps)


def _plan_side(audit, ctx, delta, budget, side, sel, counting, values):
    """The best test of one side at `budget` (its two rates' levels add up to it).

    `side` is "upper" (the test's FPR is the small, rank-placed rate: "in" above a high
    out-score) or "lower" (its FNR is: "in" from a low in-score on). Returns a dict with the
    side, the rank (or the value threshold, for tied scores), the levels of the FPR and the
    FNR, and the projected bound; None when the side has no candidate.
    """
    sel_in, sel_out = sel
    m_in, m_out = counting
    best = None
    if values is None:
        if side == "upper":
            ranks = _rank_grid(m_out)
            other = _projected_other(sel_out, sel_in, m_out, m_in, ranks)
        else:  # mirrored: the lowest in-scores are the highest of -in
            ranks = _rank_grid(m_in)
            other = _projected_other(-sel_in[::-1], -sel_out[::-1], m_in, m_out, ranks)
    else:
        fp, fn = values["fp"], values["fn"]
        fpr = (fp + 0.5) / (sel_out.size + 1.0)  # Jeffreys' rates: a zero count is no zero rate
        fnr = (fn + 0.5) / (sel_in.size + 1.0)
        keep = fpr <= fnr if side == "upper" else fpr > fnr
        if not np.any(keep):
            return None
        fp_cnt = np.minimum(np.rint(fpr[keep] * m_out), m_out).astype(np.int64)
        fn_cnt = np.minimum(np.rint(fnr[keep] * m_in), m_in).astype(np.int64)
        taus = values["cands"][keep]
    for share in _RANK_SHARES:
        small, rest = share * budget, (1.0 - share) * budget
        if values is None and side == "upper":
            fpr_ub = clopper_pearson_upper(ranks, m_out, small)
            fnr_ub = clopper_pearson_upper(other, m_in, rest)
        elif values is None:
            fpr_ub = clopper_pearson_upper(other, m_out, rest)
            fnr_ub = clopper_pearson_upper(ranks, m_in, small)
        elif side == "upper":
            fpr_ub = clopper_pearson_upper(fp_cnt, m_out, small)
            fnr_ub = clopper_pearson_upper(fn_cnt, m_in, rest)
        else:
            fpr_ub = clopper_pearson_upper(fp_cnt, m_out, rest)
            fnr_ub = clopper_pearson_upper(fn_cnt, m_in, small)
        i = audit.select(fpr_ub, fnr_ub, delta, ctx)
        value = _value(audit, ctx, delta, fpr_ub[i], fnr_ub[i])
        if best is None or value > best["projected"]:
            best = {
                "side": side,
                "rank": None if values is not None else int(ranks[i]),
                "value_threshold": None if values is None else float(taus[i]),
                "fpr_level": small if side == "upper" else rest,
                "fnr_level": rest if side == "upper" else small,
                "projected": value,
            }
    return best


def _count_test(audit, ctx, delta, test, cnt_in, cnt_out) -> dict:
    """One planned test on the (sorted) counting part: its threshold, counts and bounds.

    A rank-placed rate is bounded by the order statistic's Clopper-Pearson bound at the
    rank (valid with ties: the count at the threshold may be smaller, the bound is not);
    the other rate, and both rates of a value-placed test, by the count at the threshold.
    """
    m_in, m_out = cnt_in.size, cnt_out.size
    if test["side"] == "upper" and test["rank"] is not None:
        # "in" iff score >= the next float above the (k+1)-th largest counting out-score,
        # i.e. iff score > that out-score.
        tau = float(np.nextafter(cnt_out[m_out - 1 - test["rank"]], np.inf))
    elif test["rank"] is not None:  # "in" iff score >= the (k+1)-th smallest in-score
        tau = float(cnt_in[test["rank"]])
    else:
        tau = test["value_threshold"]
    fp, fn = (int(c[0]) for c in counts_at(cnt_in, cnt_out, [tau]))
    fp_bounded = test["rank"] if test["side"] == "upper" and test["rank"] is not None else fp
    fn_bounded = test["rank"] if test["side"] == "lower" and test["rank"] is not None else fn
    fpr_ub = float(clopper_pearson_upper(fp_bounded, m_out, test["fpr_level"]))
    fnr_ub = float(clopper_pearson_upper(fn_bounded, m_in, test["fnr_level"]))
    return _test_fields(audit, tau, (fp, fn), (m_in, m_out), (fpr_ub, fnr_ub), delta, ctx)


def rank_split_audit(
    audit: AbstractThresholdAudit,
    scores: Scores,
    *,
    delta,
    accounting=None,
    selection_fraction: float = RANK_SPLIT_FRACTION,
) -> AuditResult:
    """Up to two tests planned on a small random part, placed at ranks of the rest
    (module docstring, with the proof of validity).

    Args:
        audit: a threshold audit (its `confidence`, `seed`, `sides` and method are used).
        scores: both worlds' scores, at least 3 per world.
        delta: the DP delta.
        accounting: passed to the audit.
        selection_fraction: the share of each world that plans the tests, in (0, 1); at
            least one score plans and at least two are counted.

    Returns:
        The audit's result at the better of the counted tests (held out), with
        `extras["tests"]` (each test's side, rank or value threshold, levels, projected
        and counted bound) and `extras["placement"]` ("ranks" or "values").

    Raises:
        ValueError: bad `delta` or `selection_fraction`.
    """
    delta, ctx, in_parts, out_parts = _planning_split(
        audit, scores, delta, accounting, selection_fraction
    )
    (sel_in, cnt_in), (sel_out, cnt_out) = in_parts, out_parts
    pooled = np.concatenate([sel_in, sel_out])
    tied = 1.0 - np.unique(pooled).size / pooled.size > _TIE_SHARE
    values = None
    if tied:
        cands = candidate_thresholds(sel_in, sel_out)
        fp, fn = counts_at(sel_in, sel_out, cands)
        values = {"cands": cands, "fp": fp, "fn": fn}
    plan = dict(sel=(sel_in, sel_out), counting=(cnt_in.size, cnt_out.size), values=values)
    alpha = 1.0 - audit.confidence
    tests = [_plan_side(audit, ctx, delta, alpha / 2.0, s, **plan) for s in ("upper", "lower")]
    tests = [t for t in tests if t is not None]
    if len(tests) == 2:
        weak, strong = sorted(tests, key=lambda t: t["projected"])
        if strong["projected"] > 0.0 and weak["projected"] <= _DROP_SHARE * strong["projected"]:
            tests = [_plan_side(audit, ctx, delta, alpha, strong["side"], **plan)]
    counted = [_count_test(audit, ctx, delta, t, cnt_in, cnt_out) for t in tests]
    values_counted = [-1.0 if c["eps_lower"] is None else c["eps_lower"] for c in counted]
    best = int(np.argmax(values_counted))
    fields = counted[best]
    tau = fields["threshold"]
    point = _point_at(audit, cnt_in, cnt_out, tau, delta, ctx, fields["eps_lower"])
    check = audit.check_assumption(cnt_in, cnt_out, ctx)
    placement = "values" if tied else "ranks"
    multiplicity = (
        f"{len(tests)} test(s) planned on a random {selection_fraction:g} of the runs, "
        f"placed at {placement} of the other {cnt_in.size} + {cnt_out.size} runs and "
        "counted there, their levels adding up to 1 - confidence"
    )
    extras = {
        "threshold_selection": "rank_split",
        "sides": getattr(audit, "sides", "two"),
        "selection_fraction": selection_fraction,
        "seed": audit.seed,
        "placement": placement,
        "tests": [
            {
                **t,
                "projected": t["projected"] if np.isfinite(t["projected"]) else None,
                "threshold": c["threshold"],
                "eps_lower": c["eps_lower"],
            }
            for t, c in zip(tests, counted, strict=True)
        ],
        "n_in_total": int(sel_in.size + cnt_in.size),
        "n_out_total": int(sel_out.size + cnt_out.size),
    }
    return _result(audit, delta, fields, point, True, multiplicity, check, extras)

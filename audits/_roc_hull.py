"""The ROC convex hull: the operating points of randomised threshold tests.

A randomised test that says "in" iff `score >= tau_1`, and, for scores in `[tau_2,
tau_1)`, "in" with probability p, reaches every point of the segment between the ROC
points of `tau_1` and `tau_2`. The best of them lie on the upper convex hull of the
empirical ROC points (Provost & Fawcett 2001, "Robust classification for imprecise
environments"). This is the curve on which jax_privacy's `CanaryScoreAuditor` reads its
metrics (`tpr_at_given_fpr`, `attack_auroc`, `max_accuracy`): its `_pareto_frontier`
keeps the points not weakly dominated by a chord of their neighbours, in (FN, TN)
counts; the same vertices as here, in (FP, TP) counts.

Everything works on counts in int64, one row per resample, in the column order of
`audits._metrics._tp_fp`: column k < m is the test `score >= values[k]` (FP and TP fall
along the columns), column m the test above every score, (0, 0).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "INTERPOLATIONS",
    "check_interpolation",
    "definition",
    "hull_area2",
    "hull_tpr",
    "roc_hull",
]

# The two readings of the ROC curve (`interpolation`), and each metric's under each:
# `Metric.definition`, "<interpolation>: <sentence>".
INTERPOLATIONS = ("empirical", "hull")
_DEFINITIONS = {
    ("tpr_at_fpr", "empirical"): "the largest TPR among the empirical ROC points "
    "(deterministic threshold tests) with FPR <= the target, no interpolation "
    "(sklearn.metrics.roc_curve)",
    ("tpr_at_fpr", "hull"): "the ROC convex hull at the target FPR: the best randomised "
    "test, mixing two thresholds (jax_privacy CanaryScoreAuditor.tpr_at_given_fpr)",
    ("auroc", "empirical"): "the area under the empirical ROC curve, ties counted 1/2 "
    "(Mann-Whitney U; sklearn.metrics.roc_auc_score)",
    ("auroc", "hull"): "the area under the ROC convex hull "
    "(jax_privacy CanaryScoreAuditor.attack_auroc)",
    ("balanced_accuracy", "empirical"): "the best (TPR + TNR) / 2 over deterministic "
    "threshold tests",
    ("balanced_accuracy", "hull"): "the best (TPR + TNR) / 2 over randomised threshold "
    "tests (the ROC convex hull), equal to the best over deterministic ones "
    "(jax_privacy CanaryScoreAuditor.max_accuracy(prevalence=0.5))",
}


def check_interpolation(interpolation) -> str:
    """`interpolation` if it is one of `INTERPOLATIONS`, else a ValueError naming it."""
    if not isinstance(interpolation, str) or interpolation not in INTERPOLATIONS:
        raise ValueError(
            f"interpolation must be one of {', '.join(map(repr, INTERPOLATIONS))}, got "
            f"{interpolation!r}"
        )
    return str(interpolation)


def definition(name: str, interpolation: str) -> str:
    """`Metric.definition` of metric `name` under `interpolation`."""
    return f"{interpolation}: {_DEFINITIONS[name, interpolation]}"


def _neighbours(keep: np.ndarray) -> tuple:
    """For every column, the nearest kept column before it and after it (-1 and P when
    none), shape (B, P) each."""
    rows, cols = keep.shape
    col = np.arange(cols)
    last = np.maximum.accumulate(np.where(keep, col, -1), axis=1)
    first = np.minimum.accumulate(np.where(keep, col, cols)[:, ::-1], axis=1)[:, ::-1]
    prev = np.concatenate([np.full((rows, 1), -1), last[:, :-1]], axis=1)
    nxt = np.concatenate([first[:, 1:], np.full((rows, 1), cols)], axis=1)
    return prev, nxt


def roc_hull(tp: np.ndarray, fp: np.ndarray, present: np.ndarray) -> tuple:
    """The vertices of the upper convex hull of the ROC points, row by row.

    Args:
        tp, fp: counts of every test, shape (B, P), nonincreasing along the columns, the
            first present column at (n_in, n_out), the last column (0, 0).
        present: (B, P) bool, the columns that are points of their own; a column of a
            score absent from a resample repeats the next column's point and is left
            out (two copies of one point would each look dominated by the other).

    Returns:
        `(keep, prev)`: `keep[b, k]` whether column k is a hull vertex of row b (strictly:
        points on a hull edge are dropped), `prev[b, k]` the kept column before k (-1 for
        the first), the vertex of next larger FP.

    The points B whose chord test fails, `(B - C) x (A - B) >= 0` for the kept
    neighbours A (larger FP) and C (smaller FP), lie on or below the chord AC, and are
    dropped all at once; repeated until none is (as jax_privacy's `_pareto_frontier`).
    Each pass is vectorised over the rows; the endpoints are never dropped, and what
    remains is a strictly concave chain above every point, the hull.
    """
    keep = np.asarray(present, dtype=bool).copy()
    while True:
        prev, nxt = _neighbours(keep)
        inner = keep & (prev >= 0) & (nxt < keep.shape[1])
        a = np.where(inner, prev, 0)
        c = np.where(inner, nxt, 0)
        ax, ay = np.take_along_axis(fp, a, axis=1), np.take_along_axis(tp, a, axis=1)
        cx, cy = np.take_along_axis(fp, c, axis=1), np.take_along_axis(tp, c, axis=1)
        # Right turn C -> B -> A (FP increasing): B strictly above the chord AC.
        drop = inner & ((fp - cx) * (ay - tp) >= (tp - cy) * (ax - fp))
        if not drop.any():
            return keep, prev
        keep &= ~drop


def hull_tpr(tp, fp, keep, prev, n_in: int, n_out: int, targets: np.ndarray) -> tuple:
    """The hull's TPR at each target FPR, linear between its vertices.

    For a target t, with `x = n_out * t` in FP counts: L is the vertex of largest FP
    `<= x`, R the next vertex (larger FP), and the value `(TP_L + q (TP_R - TP_L)) /
    n_in` with `q = (x - FP_L) / (FP_R - FP_L)`, the probability of R's threshold in the
    randomised test. L is never the last vertex (n_in, n_out): at t = 1 it is the one
    before, q = 1 (jax_privacy's `_tpr_at_given_fpr` takes the same pair).

    Returns:
        `(values, left, right, q)`, each of shape (B, K): the TPRs, the columns of L and
        R, and q.
    """
    first = np.argmax(keep, axis=1)[:, None]
    col = np.arange(keep.shape[1])
    eligible = keep & (col[None, :] != first)
    values, left, right, weight = [], [], [], []
    for target in targets:
        x = n_out * float(target)
        # Columns run from large to small FP: the first eligible one with FP <= x.
        lo = np.argmax(eligible & (fp <= x), axis=1)[:, None]
        hi = np.take_along_axis(prev, lo, axis=1)
        tp_lo, tp_hi = np.take_along_axis(tp, lo, axis=1), np.take_along_axis(tp, hi, axis=1)
        fp_lo, fp_hi = np.take_along_axis(fp, lo, axis=1), np.take_along_axis(fp, hi, axis=1)
        q = (x - fp_lo) / (fp_hi - fp_lo)
        values.append((tp_lo + q * (tp_hi - tp_lo)) / n_in)
        left.append(lo)
        right.append(hi)
        weight.append(q)
    return tuple(np.concatenate(v, axis=1) for v in (values, left, right, weight))


def hull_area2(tp, fp, keep, prev) -> np.ndarray:
    """Twice the area under the hull, in counts (exact int64), shape (B,): the
    trapezoids between consecutive vertices, `(TP_a + TP_b) (FP_a - FP_b)`."""
    edge = keep & (prev >= 0)
    a = np.where(edge, prev, 0)
    width = np.take_along_axis(fp, a, axis=1) - fp
    height = np.take_along_axis(tp, a, axis=1) + tp
    return np.sum(np.where(edge, width * height, 0), axis=1)

"""Where an empirical ROC's confidence boxes come closest to breaking a trade-off curve: the
boxes at the top of each world's sorted scores, the segments between them, and the worst
chord of each segment against the curve (a golden-section search, screened first)."""

from __future__ import annotations

import math

import numpy as np
import scipy.special
import scipy.stats

from ._roc_band import (
    _THETA_TOP,
    _bisect_limits,
    _rank_grid,
)

# Golden-section steps for the lowest point of a curve minus a chord (step 4 of the test):
# the bracket shrinks by 0.618 a step, to 0.618^48 = 1e-10 of the segment. Any point it
# evaluates gives a value at least the minimum, so fewer steps only cost power.
_GOLDEN_STEPS = 48


# Steps for the first pass over every segment, which only sorts out those that cannot set
# the limit (`_segment_limits`): 0.618^16 = 5e-4 of the segment. A coarser pass can only
# miss a segment that would lower the limit, never add one: it costs power, not level.
_SCREEN_STEPS = 16


_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


# Slack in the chord test for rounding in the curve and the chord (absolute, in FNR).
_CHORD_TOL = 1e-12


def _top_box(sorted_x: np.ndarray, level: float) -> tuple:
    """`_band(sorted_x, level / 2).below([inf])`, the band's bounds above its last knot,
    from the last rank's quantiles alone: the band's ranks end at n (`_rank_grid`), where
    U_(n) ~ Beta(n, 1) and 1 - U_(n) ~ Beta(1, n), at its one-sided level gamma =
    (level / 2) / (2 K) for K ranks. `(F_lo, F_hi, S_lo, S_hi)` as 1-element arrays."""
    n = sorted_x.size
    gamma = (level / 2) / (2 * _rank_grid(n).size)
    f_lo = scipy.stats.beta.ppf(gamma, n, 1)
    s_hi = scipy.stats.beta.isf(gamma, 1, n)
    return np.array([f_lo]), np.ones(1), np.zeros(1), np.array([s_hi])


def _segments(boxes: dict, sorted_in, sorted_out, level: float) -> dict:
    """The mixed boxes between consecutive thresholds (step 4 of the test): segment s joins
    box s to box s + 1 (the box of every threshold above the last knot for the last one).
    Their lower-left corners `(a0, b0)`, `(a1, b1)` and upper-right corners `(c0, d0)`,
    `(c1, d1)`, and the thresholds and observed rates at both ends."""
    top_in, top_out = _top_box(sorted_in, level), _top_box(sorted_out, level)

    def ends(key, top):
        x = np.append(boxes[key], top)
        return x[:-1], x[1:]

    seg = {}
    for key, top in (
        ("a_lo", top_out[2][0]),
        ("a_hi", top_out[3][0]),
        ("b_lo", top_in[0][0]),
        ("b_hi", top_in[1][0]),
        ("tau", math.inf),
        ("fpr", 0.0),
        ("fnr", 1.0),
    ):
        seg[key + "0"], seg[key + "1"] = ends(key, top)
    return seg


def _chord_points(seg: dict, idx: np.ndarray, lam: np.ndarray) -> tuple:
    """The lower-left corner `(a, b)` of the mixed box at weight `lam` on segments `idx`."""
    a = seg["a_lo0"][idx] + lam * (seg["a_lo1"][idx] - seg["a_lo0"][idx])
    b = seg["b_lo0"][idx] + lam * (seg["b_lo1"][idx] - seg["b_lo0"][idx])
    return a, b


def _chord_gap(
    curve, seg: dict, idx: np.ndarray, theta: np.ndarray, steps: int = _GOLDEN_STEPS
) -> tuple:
    """`(gap, lam)`: an upper estimate of `min over lam in [0, 1] of curve(a(lam), theta) -
    b(lam)` on the chord of lower-left corners of segments `idx` (golden section; the gap
    is convex in lam for a convex curve), and the weight where it was found. Every value
    returned was evaluated, so it is never below the true minimum."""

    def gap(lam):
        a, b = _chord_points(seg, idx, lam)
        return np.asarray(curve(a, theta), np.float64) - b

    zeros, ones = np.zeros(idx.size), np.ones(idx.size)
    best, best_lam = gap(zeros), zeros
    g1 = gap(ones)
    best_lam = np.where(g1 < best, ones, best_lam)
    best = np.minimum(best, g1)
    left, right = zeros, ones
    x1, x2 = right - _GOLDEN * (right - left), left + _GOLDEN * (right - left)
    f1, f2 = gap(x1), gap(x2)
    for _ in range(steps):
        for x, fx in ((x1, f1), (x2, f2)):
            best_lam = np.where(fx < best, x, best_lam)
            best = np.minimum(best, fx)
        keep_left = f1 <= f2  # the minimum is in [left, x2]
        right = np.where(keep_left, x2, right)
        left = np.where(keep_left, left, x1)
        new_x = np.where(
            keep_left, right - _GOLDEN * (right - left), left + _GOLDEN * (right - left)
        )
        new_f = gap(new_x)
        x1, x2, f1, f2 = (
            np.where(keep_left, new_x, x2),
            np.where(keep_left, x1, new_x),
            np.where(keep_left, new_f, f2),
            np.where(keep_left, f1, new_f),
        )
    for x, fx in ((x1, f1), (x2, f2)):
        best_lam = np.where(fx < best, x, best_lam)
        best = np.minimum(best, fx)
    return best, best_lam


def _segment_limits(
    curve, seg: dict, lo: float, hi: float, cap: float, tol: float = 0.0
) -> np.ndarray:
    """Per segment, `sup{theta in [lo, hi] : the curve at theta is on or above the chord of
    lower-left corners}` (`-inf` when none), by `_bisect_limits` on the chord's lowest
    gap (non-increasing in theta since the curve is). `tol` loosens it as for the boxes.

    Only segments that can lower `cap` (the boxes' smallest upper limit) are bisected: a
    segment whose chord lies under the curve at `cap` has its limit at `cap` or above, so
    it changes neither the decision nor the smallest limit, and `inf` ("not binding")
    stands for it."""
    n = seg["a_lo0"].size
    out = np.full(n, math.inf)
    if n == 0:
        return out

    def lowest_gap(index, theta, steps=_GOLDEN_STEPS):
        return _chord_gap(curve, seg, np.asarray(index, np.int64), theta, steps)[0]

    at_cap = min(cap, hi, lo + _THETA_TOP)
    index = np.arange(n, dtype=np.float64)
    screen = lowest_gap(index, np.full(n, at_cap), _SCREEN_STEPS)
    binding = np.flatnonzero(screen < -(tol + _CHORD_TOL))
    if binding.size:
        out[binding] = _bisect_limits(
            lowest_gap,
            index[binding],
            np.zeros(binding.size),
            lo,
            hi,
            lower=False,
            tol=tol + _CHORD_TOL,
        )
    return out


def _segment_worst(curve, seg: dict, s: int, fit: float, show, seg_up: float, lo: float):
    """The `worst` entries of segment `s` at `fit`: the mixed box at the chord's lowest
    point."""
    idx = np.array([s])
    _, lam = _chord_gap(curve, seg, idx, np.array([fit]))
    lam = float(lam[0])

    def mix(key):
        return float(seg[key + "0"][s] + lam * (seg[key + "1"][s] - seg[key + "0"][s]))

    fpr, fnr = mix("fpr"), mix("fnr")
    a_lo, a_hi, b_lo, b_hi = mix("a_lo"), mix("a_hi"), mix("b_lo"), mix("b_hi")
    at = np.asarray(curve(np.array([fpr, a_lo, a_hi]), np.full(3, fit)), np.float64)
    return {
        "threshold": float(seg["tau0"][s]),
        "randomised_to": float(seg["tau1"][s]),
        "weight": lam,
        "fpr": fpr,
        "fnr": fnr,
        "fpr_interval": (a_lo, a_hi),
        "fnr_interval": (b_lo, b_hi),
        "curve_fnr": float(at[0]),
        "curve_fnr_interval": (float(at[2]), float(at[1])),
        "allowed": show(lo, seg_up) if lo <= seg_up else None,
    }


def _box_worst(curve, boxes: dict, k: int, fit: float, show, own: tuple) -> dict:
    """The report of box `k` (its threshold, rates, band and the fitted curve there),
    `own` its (low, up) limits in theta."""
    fpr, fnr = float(boxes["fpr"][k]), float(boxes["fnr"][k])
    curve_at = np.asarray(
        curve(np.array([fpr, boxes["a_lo"][k], boxes["a_hi"][k]]), np.full(3, fit)),
        dtype=np.float64,
    )
    return {
        "threshold": float(boxes["tau"][k]),
        "randomised_to": None,
        "weight": None,
        "fpr": fpr,
        "fnr": fnr,
        "fpr_interval": (float(boxes["a_lo"][k]), float(boxes["a_hi"][k])),
        "fnr_interval": (float(boxes["b_lo"][k]), float(boxes["b_hi"][k])),
        "curve_fnr": float(curve_at[0]),
        "curve_fnr_interval": (float(curve_at[2]), float(curve_at[1])),
        "allowed": show(*own) if own[0] <= own[1] else None,
    }

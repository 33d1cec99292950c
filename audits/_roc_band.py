r"""The simultaneous ROC band and the parameter limits of the assumption checks.

Steps 1 and 2 of the test in `advsim.audits._assumption` (see its docstring for the
derivation and the level): a simultaneous confidence band on both worlds' CDFs from order
statistics at fixed ranks, read as a box around the true ROC point at every threshold
(`_boxes`), and the limits each box puts on the parameter of a trade-off family: closed
form for $G_\mu$ (`_gdp_limits`), vectorised bisection otherwise (`_bisect_limits`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.stats

from ._threshold import counts_at

# Band ranks per sqrt(n): the step between knots is then about a quarter of a box's half
# width (in arcsin-sqrt units the band's half width is ~ z / (2 sqrt n), z ~ 4.5-5), so
# the boxes between knots are barely wider than at the knots; more ranks cost only
# log(K) in z.
_RANKS_PER_SQRT_N = 3.0
# Vectorised bisection on u = log1p(theta - lo) in [0, log1p(_THETA_TOP)] (width 27.6):
# every box to 27.6 / 2^20 = 3e-5 (diagnostics), the boxes that can set the decision
# to 27.6 / 2^56 = 4e-16.
_COARSE_STEPS = 20
_BISECTION_STEPS = 56
# Parameters above this count as infinite (G_mu and the family's curve stop changing).
_THETA_TOP = 1e12

# ----------------------------------------------------------------------------------------
# The band


def _rank_grid(n: int) -> np.ndarray:
    """Ranks in [1, n], uniform in arcsin(sqrt(j / n)): ~3 sqrt(n), every small rank kept."""
    k = max(2, math.ceil(_RANKS_PER_SQRT_N * math.sqrt(n)))
    j = np.rint(n * np.sin(np.linspace(0.0, math.pi / 2, k + 1)) ** 2).astype(np.int64)
    return np.unique(np.clip(j, 1, n))


@dataclasses.dataclass(frozen=True)
class _Band:
    """Knots X_(j) and, per knot, bounds on F and on 1 - F at it (each one-sided level
    gamma): `cdf_lo <= U_(j) <= cdf_hi` and `sf_lo <= 1 - U_(j) <= sf_hi`."""

    knots: np.ndarray
    cdf_lo: np.ndarray
    cdf_hi: np.ndarray
    sf_lo: np.ndarray
    sf_hi: np.ndarray
    gamma: float

    def below(self, tau: np.ndarray) -> tuple:
        """Bounds `(F_lo, F_hi, S_lo, S_hi)` on F(tau-) and on 1 - F(tau-), jointly over
        every tau on the band's event."""
        k = self.knots.size
        idx = np.searchsorted(self.knots, tau, side="left")  # knots < tau
        has_below, has_above = idx > 0, idx < k
        lo_i, hi_i = np.maximum(idx - 1, 0), np.minimum(idx, k - 1)
        f_lo = np.where(has_below, self.cdf_lo[lo_i], 0.0)
        s_hi = np.where(has_below, self.sf_hi[lo_i], 1.0)
        f_hi = np.where(has_above, self.cdf_hi[hi_i], 1.0)
        s_lo = np.where(has_above, self.sf_lo[hi_i], 0.0)
        return f_lo, f_hi, s_lo, s_hi


def _band(sorted_scores: np.ndarray, world_level: float) -> _Band:
    n = sorted_scores.size
    j = _rank_grid(n)
    gamma = world_level / (2 * j.size)
    a, b = j.astype(np.float64), (n + 1 - j).astype(np.float64)
    return _Band(
        knots=sorted_scores[j - 1],
        cdf_lo=scipy.stats.beta.ppf(gamma, a, b),
        cdf_hi=scipy.stats.beta.isf(gamma, a, b),
        sf_lo=scipy.stats.beta.ppf(gamma, b, a),  # 1 - U_(j) ~ Beta(n + 1 - j, j)
        sf_hi=scipy.stats.beta.isf(gamma, b, a),
        gamma=float(gamma),
    )


def _boxes(sorted_in: np.ndarray, sorted_out: np.ndarray, level: float) -> tuple:
    band_in, band_out = _band(sorted_in, level / 2), _band(sorted_out, level / 2)
    tau = np.unique(np.concatenate([band_in.knots, band_out.knots]))
    b_lo, b_hi, _, _ = band_in.below(tau)  # beta(tau) = F_in(tau-)
    _, _, a_lo, a_hi = band_out.below(tau)  # alpha(tau) = 1 - F_out(tau-)
    fp, fn = counts_at(sorted_in, sorted_out, tau)
    boxes = dict(
        tau=tau,
        a_lo=a_lo,
        a_hi=a_hi,
        b_lo=b_lo,
        b_hi=b_hi,
        fpr=fp / sorted_out.size,
        fnr=fn / sorted_in.size,
    )
    band = (
        "simultaneous band on both worlds' CDFs from order statistics at "
        f"{band_in.knots.size} (in) and {band_out.knots.size} (out) fixed ranks, "
        "Beta(j, n + 1 - j) quantiles (exact Clopper-Pearson-type intervals) at one-sided "
        f"levels {band_in.gamma:.3g} (in) and {band_out.gamma:.3g} (out), Bonferroni to "
        f"total {level:g}; boxes at {tau.size} thresholds (all knots)"
    )
    return boxes, band


# ----------------------------------------------------------------------------------------
# Limits on the parameter


def _bisect_limits(curve, a, b, lo: float, hi: float, *, lower: bool, tol: float = 0.0):
    """Per box, `inf{theta : curve(a, theta) <= b + tol}` (`lower=True`) or
    `sup{theta : curve(a, theta) >= b - tol}` (`lower=False`) over [lo, hi], for a curve
    non-increasing in theta; `inf` / `-inf` when empty. `tol` bounds the curve's own
    error, so the limits are loosened by it. Returns the conservative end of the final
    bracket (smaller for inf, larger for sup). All boxes are bisected `_COARSE_STEPS`
    times (enough for the diagnostics); then only those that can still set the extreme
    limit (whose bracket reaches past the best conservative end) are refined to
    `_BISECTION_STEPS`."""
    top = min(hi, lo + _THETA_TOP)

    def f(x_a, theta):
        out = np.asarray(curve(x_a, theta), dtype=np.float64)
        if out.shape != x_a.shape or not np.all(np.isfinite(out)):
            raise ValueError(
                "curve(alpha, theta) must return finite values of alpha's shape, got "
                f"shape {out.shape} with {np.count_nonzero(~np.isfinite(out))} non-finite"
            )
        return out

    def feasible(val, bb):
        return val <= bb + tol if lower else val >= bb - tol

    n = a.size
    ok_lo = feasible(f(a, np.full(n, lo)), b)
    ok_top = feasible(f(a, np.full(n, top)), b)
    if lower:  # the feasible set is [theta_low, hi]
        out = np.where(ok_lo, lo, math.inf)
        todo = np.flatnonzero(~ok_lo & ok_top)
    else:  # the feasible set is [lo, theta_up]
        out = np.where(ok_top, math.inf if math.isinf(hi) else hi, np.where(ok_lo, lo, -math.inf))
        todo = np.flatnonzero(ok_lo & ~ok_top)
    if todo.size == 0:
        return out
    aa, bb = a[todo], b[todo]
    # u = log1p(theta - lo); `good` end feasible, `bad` end infeasible
    good = np.full(todo.size, math.log1p(top - lo) if lower else 0.0)
    bad = np.full(todo.size, 0.0 if lower else math.log1p(top - lo))
    active = np.arange(todo.size)
    for step in range(_BISECTION_STEPS):
        if step == _COARSE_STEPS:
            # Reported limits are the `bad` ends. A box whose `good` end lies below the
            # largest `bad` (lower limits; above the smallest, upper) cannot set it.
            if lower:
                active = np.flatnonzero(good >= np.max(bad))
            else:
                active = np.flatnonzero(good <= np.min(bad))
        mid = 0.5 * (good[active] + bad[active])
        ok = feasible(f(aa[active], lo + np.expm1(mid)), bb[active])
        good[active] = np.where(ok, mid, good[active])
        bad[active] = np.where(ok, bad[active], mid)
    out[todo] = lo + np.expm1(bad)
    return out


def _gdp_limits(boxes: dict) -> tuple:
    """Closed form for G_mu, mu in [0, inf): Dong, Roth & Su (arXiv:1905.02383) Eq. (6),
    G_mu(a) = Phi(Phi^{-1}(1 - a) - mu), so G_mu(a) <= b iff mu >= isf(a) - ppf(b)."""
    norm = scipy.stats.norm
    low = norm.isf(boxes["a_hi"]) - norm.ppf(boxes["b_hi"])
    up = norm.isf(boxes["a_lo"]) - norm.ppf(boxes["b_lo"])
    # isf(1) = -inf and ppf(0) = -inf / ppf(1) = inf never meet with the opposite
    # infinity here: a_hi > 0, a_lo < 1, b_hi > 0 (band bounds), so no inf - inf.
    low = np.where(np.isnan(low), 0.0, np.maximum(low, 0.0))
    up = np.where(np.isnan(up), math.inf, up)  # a negative upper limit allows no mu >= 0
    return low, up


def _max_agreement(low: np.ndarray, up: np.ndarray, lo: float) -> float:
    """A parameter inside the most per-box intervals [low, up]: the middle of the first
    run of maximal coverage (its left end when the run is unbounded)."""
    ok = low <= up
    if not np.any(ok):
        return lo
    starts, ends = np.sort(low[ok]), np.sort(up[ok])
    # coverage at each start s: #{low <= s} - #{up < s}; constant until the next end >= s
    cover = np.searchsorted(starts, starts, side="right") - np.searchsorted(ends, starts)
    left = float(starts[int(np.argmax(cover))])
    right = float(ends[np.searchsorted(ends, left)])
    return left if math.isinf(right) else 0.5 * (left + right)

r"""Checks of the GDP and family audits' assumption on held-out scores.

The GDP audit converts a bound on $\mu$ to eps as if the run's trade-off curve *were*
$G_\mu$; the family audit reads eps off the heuristic's family as if the run's curve were
$f_\sigma$ for some $\sigma$. Neither assumption is visible in one threshold test. What the
scores can show is the receiver operating characteristic (ROC) of the threshold tests on
*this* score, $\tau \mapsto (\alpha(\tau), \beta(\tau))$ with
$\alpha(\tau) = \Pr_{out}[S \ge \tau]$ and $\beta(\tau) = \Pr_{in}[S < \tau]$, together
with the randomised tests between them: at an atom $x$ of the score (a value taken with
positive probability), the test that says "in" above $x$ and with probability $\lambda$ at
$x$ has the rates $\lambda (\alpha(x), \beta(x)) + (1 - \lambda)(\alpha(x+), \beta(x+))$, a
straight segment of the ROC. The null tested here is

$$H_0:\ \exists\, \theta \in \Theta:\ \text{every threshold test on this score, and every
  test randomised on one of its atoms, has } \beta = f_\theta(\alpha),$$

"the randomised ROC of this score is exactly the curve $f_\theta$ for one $\theta$"
($f_\theta = G_\mu$, Definition 2.7 of Dong, Roth & Su, arXiv:1905.02383; or the heuristic
family's curve, Theorem 1 of arXiv:2410.06186). This is what the audits' eps conversion
uses when the score is the optimal (likelihood-ratio) test: the optimal tests randomise on
the atoms of the likelihood ratio (Neyman-Pearson), so the trade-off curve of a pair is
the randomised ROC of its likelihood-ratio score, segments included. The threshold points
alone are not enough: binary scores, 1 with probability 0.99 in and 0.01 out, have one
threshold point (0.01, 0.01), through which $G_{4.65}$ passes, while the pair's curve is
the two segments through it (exact eps log 99 = 4.595 at any delta < 0.01) and a GDP
audit reads eps near 30 off $G_\mu$. A rejection says
the score's ROC is not such a curve: either the mechanism's trade-off curve is not in the
family, or the score is not its optimal test; either way the conversion has nothing to
stand on. A non-rejection never makes `eps_lower` assumption-free: the ROC of a
sub-optimal score can be Gaussian while the mechanism's curve is not, and a small
deviation escapes any finite sample.

The test (`check_tradeoff_fit`):

1. A simultaneous confidence band for each world's CDF $F$ from order statistics at
   fixed ranks $j_1 < \dots < j_K$ (a grid uniform in $\arcsin\sqrt{j/n}$, where the
   binomial standard deviation is constant, about $3\sqrt n$ ranks; `_rank_grid`). With
   $U_{(j)} \sim \mathrm{Beta}(j, n + 1 - j)$ the uniform order statistics and
   $l_j, u_j$ its $\gamma$ and $1 - \gamma$ quantiles, $\gamma = \mathrm{level}/(4K)$
   (two worlds, two sides, K ranks: Bonferroni), every $l_j \le U_{(j)} \le u_j$ holds
   jointly with probability $\ge 1 - \mathrm{level}/2$ per world. Through the quantile
   transform $X_{(j)} = F^{-1}(U_{(j)})$, $F(X_{(j)}) \ge U_{(j)} \ge F(X_{(j)}-)$ for
   *any* $F$ (atoms and ties included), so on that event, for every threshold $\tau$,

   $$\max\{l_j : X_{(j)} < \tau\} \le F(\tau-) \le \min\{u_j : X_{(j)} \ge \tau\}.$$

   Since $\alpha(\tau) = 1 - F_{out}(\tau-)$ and $\beta(\tau) = F_{in}(\tau-)$, this is a
   box $[a_{lo}, a_{hi}] \times [b_{lo}, b_{hi}]$ around the true ROC point at *every*
   threshold at once, data-dependent thresholds included: the level does not depend on
   which thresholds are examined, so all of them are (the distinct boxes are those at the
   pooled knot values $X_{(j_k)}$ of both worlds).
2. A continuous non-increasing $f_\theta$ passes through a box iff
   $f_\theta(a_{hi}) \le b_{hi}$ and $f_\theta(a_{lo}) \ge b_{lo}$. With $f_\theta(a)$
   non-increasing in $\theta$ the first is a lower limit on $\theta$, the second an upper
   limit (closed form for $G_\mu$: $\mu \ge \Phi^{-1}(1 - a_{hi}) - \Phi^{-1}(b_{hi})$
   and $\mu \le \Phi^{-1}(1 - a_{lo}) - \Phi^{-1}(b_{lo})$; vectorised bisection
   otherwise).
3. Reject iff the largest lower limit exceeds the smallest upper limit: no $\theta$ passes
   through every box.
4. The segments. For consecutive thresholds $x < x'$ of the boxes (and the last one with
   the box of every threshold above the last knot), the band's box at $x'$ holds the
   rates just above $x$, $(\alpha(x+), \beta(x+))$, because the band's bounds are the same
   for every threshold in $(x, x']$. So on the band's event the test randomised on $x$
   with weight $\lambda$ lies in the mixed box $\lambda B_x + (1 - \lambda) B_{x'}$ (the
   corners mixed), whether or not $x$ is an atom (if not, the segment is one point in
   both boxes). Under $H_0$ that test is on $f_\theta$, so $f_\theta$ passes through every
   mixed box. Its upper-right side ($f_\theta$ below the mixed upper-right corners) follows
   from the two boxes by the curve's convexity; the lower-left side does not: $f_\theta$
   must lie on or above the chord joining the two boxes' lower-left corners, an upper
   limit on $\theta$ (the largest $\theta$ whose curve stays above the chord; the lowest
   point of curve minus chord by golden section, 48 steps, which can only overstate it,
   then bisection in $\theta$). Only the segments whose chord rises above the curve at
   the boxes' smallest upper limit can lower it; a first pass (16 golden steps) finds
   them and the others count as no limit. This is where binary scores are rejected:
   $G_\mu$ through the box at (0.01, 0.01) falls far below the segments joining it to
   (1, 0) and (0, 1).
5. Atoms. $G_\mu$ is strictly convex for $0 < \mu < \infty$, and so is the family's
   curve for $0 < 1/\sigma < \infty$: no straight segment lies on them, so under $H_0$
   with such a parameter the score has no atom and two equal scores have probability 0.
   The check therefore also rejects (`check_gaussian_tradeoff`, `check_heuristic_family`)
   when a score value holds at least `_ATOM_SHARE` = 1% of a world's scores (a materially
   discrete score; ties from the rounding of continuous scores stay far below it) while
   the limits of steps 1-2 exclude both ends of the parameter range (0, where the curve
   is the straight line $1 - \alpha$, and $\infty$). Binomial(20, 0.6) vs
   Binomial(20, 0.5) scores are rejected so: their threshold points all imply
   $\mu \approx$ 0.87-0.92, their segments run up to 0.007 above $G_{0.9}$, which the
   band resolves only from about $10^6$ scores per world, and the GDP audit's eps
   (3.90 at $10^5$ per world, delta = 1e-5) exceeds the exact 3.636. `check_tradeoff_fit`
   knows nothing of its curve's shape and skips this step.
6. The binned likelihood-ratio test (`advsim.audits._binned_fit`; `check_gaussian_tradeoff`
   and `check_heuristic_family`, whose curves are probit-shift mixtures). The band
   bounds every ROC point at once, so a curve that departs from every $f_\theta$ only
   by a local change of slope stays inside it; the binned test compares how each
   world's scores fall into 20 bins (quantiles of the two worlds with equal weight: the
   pooled quantiles for worlds of one size) with the best fit of the null
   (maximum likelihood over the bins' probits and $\theta$) and rejects when the
   likelihood-ratio statistic G exceeds the $\chi^2$ quantile with bins - 2 degrees of
   freedom. The check spends half its level on the band (steps 1-5) and half here, and
   rejects when either does; `AssumptionCheck.binned` holds this test's statistic,
   p-value, fit and the bin that adds most to G.

Level: the band (steps 1-5) at level/2 and the binned test (step 6) at level/2, so
$\Pr[\text{reject} \mid H_0] \le \mathrm{level}$ up to the binned test's asymptotic
approximation (measured below). For the band: under $H_0$ with parameter $\theta^*$, on
the band's event (probability $\ge 1 -$ its level, Bonferroni over $4K$ one-sided
order-statistic intervals whose levels are exact for any continuous or discontinuous $F$) every
box and every mixed box contains a true point of the randomised ROC, which lies on
$f_{\theta^*}$, so $\theta^*$ satisfies every limit and steps 3-4 do not reject. Step 5
rejects under $H_0$ only with probability 0 (an atom, with $\theta^*$ strictly inside the
range) or off the band's event ($\theta^*$ at an end, excluded by the limits). Hence the
band rejects a true null with probability at most its level, for every sample size;
numerical error in the limits only moves them outwards (bisection returns the conservative
end of its bracket; the family's dropped atoms loosen them by their mass; the chord's
lowest point is overstated, never understated, and the chord test has 1e-12 of slack).
The band is conservative: the Bonferroni union over correlated order statistics, and a
composite null whose parameter adapts to the data. Measured on N(1, 1) vs N(0, 1),
5 x 10^4 per world, 400 repeats, the band alone: 0 rejections at level 0.05 and 0 at
level 0.5; the `param_interval` covered the true mu in all of them (on the band's event it is a
confidence interval for the parameter).

Why not a DKW band (Massart 1990, "The tight constant in the Dvoretzky-Kiefer-Wolfowitz
inequality", Ann. Probab. 18(3)): its half-width $\sqrt{\log(4/\mathrm{level})/(2n)}$
(0.0086 at $n = 5 \times 10^4$, level 0.05) is the same at every threshold, wider than
the whole FPR range of the tail tests, where non-Gaussian trade-off curves often differ
most; the order-statistic (Beta, Clopper-Pearson-type) intervals shrink with the rate
(relative width about $z/\sqrt{j}$ at rank j). Measured at level 0.05, 20 repeats:
N(1, 1) with 1% of in-runs shifted by +4 against N(0, 1), 5 x 10^4 per world: rejected
12/20 here, 0/20 with DKW boxes; the exact T = 2 landscape law (sigma = 1, B = 1),
10^4 per world: 4/20 here, 0/20 with DKW (both 20/20 at 2 x 10^4).

Measured power and false alarms (`advsim figure assumption_power`, 264 s on 2 cores;
level 0.05, 10^5 runs per world, the check on the held-out half of 5 x 10^4 per world as
the audits call it, and on all runs): the threshold landscape at sigma = 1, T = 25 is
rejected in 40/40 repeats at B = 1, 4 and 16, by the GDP and by the family check (95%
Clopper-Pearson interval on the power [0.912, 1]); binary scores (0.99 vs 0.01) in 20/20
(step 4) and Binomial(20, 0.6) vs Binomial(20, 0.5) in 20/20 (step 5; [0.832, 1] each).
At B = 16 the band alone rejected 0/40 (its limits left mu in about [0.947, 1.003]): the
landscape's ROC departs from a Gaussian one by a local change of slope (the mu one
threshold test implies is 0.955 +- 0.005 at FPR 1e-3 to 0.99 but 0.995 at FPR 0.3),
which the binned test sees (G about 80-110 on 18 df; the bin that adds most is the gap
between the landscape's two modes). False alarms where the null holds exactly, in 100
repeats each (allowed: 13, the 0.999-quantile of Binomial(100, 0.05)): 2 and 3 on
Gaussian scores at 10^5 and 10^6 runs per world; 5 (GDP and family) on the linear process
T = 1, q = 1 and 0 at T = 10, q = 1; 1 and 3 (family) at T = 1 and 10, q = 0.1. The
binned test alone, at level 0.025, on N(mu, 1) vs N(0, 1) with 5 x 10^4 per world:
2.3% (mu = 0, 600 repeats) and 2.4% (mu = 1, 1,000 repeats) rejected; on the family's own
pair (T = 100 and 10, q = 0.1, 150 repeats each) 1.3%.

Cost: a sort of each world, ~3 sqrt(n) Beta quantiles per world, for the family a
vectorised bisection over ~6 sqrt(n) boxes, and a golden-section pass over as many
segments; measured 3.0 s (GDP) and 12 s (family, T = 1000, q = 0.01) at 5 x 10^6 scores
per world, 0.16 s and 0.75 s at 5 x 10^4, on 2 CPU cores shared with other work. The
binned test adds a pooled sort and two L-BFGS fits of 20 parameters (about 20 iterations
each): 0.025 s at 5 x 10^4 and 0.3-0.4 s at 5 x 10^6 per world (mostly the sort; GDP, and
the family at T = 1000, q = 0.01 with 61 atoms), after the first call.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from advsim.validation import check_in_interval

from ._result import _plain
from ._roc_band import (
    _bisect_limits,
    _boxes,
    _max_agreement,
)
from ._roc_segments import (  # noqa: F401 (re-exported)
    _CHORD_TOL,
    _GOLDEN,
    _GOLDEN_STEPS,
    _SCREEN_STEPS,
    _box_worst,
    _chord_gap,
    _chord_points,
    _segment_limits,
    _segment_worst,
    _segments,
    _top_box,
)

__all__ = [
    "AssumptionCheck",
    "check_tradeoff_fit",
]

# Binomial atoms kept by the family's curve: log-probability within this of the largest
# (`binomial_mixture`'s log_tol); the dropped mass is < n_c e^{-60} (< 1e-22 for
# n_c <= 10^4) and loosens the limits by twice that (`_bisect_limits`' tol).
_ATOM_LOG_TOL = 60.0
# Relative slack before limits count as conflicting (rounding in the closed forms).
_REL_TOL = 1e-9
# An atom is reported (step 5) when one score value holds at least this share of a
# world's scores: a materially discrete score, not the rounding of a continuous one.
_ATOM_SHARE = 0.01


@dataclasses.dataclass(frozen=True)
class AssumptionCheck:
    """The outcome of a goodness-of-fit test of a trade-off family to held-out scores.

    Attributes:
        assumption: `"gaussian_tradeoff"` (the ROC is $G_\\mu$) or `"heuristic_family"`
            (the ROC is the family's $f_\\sigma$), or the name given to
            `check_tradeoff_fit`.
        rejected: True iff no parameter value fits inside every box of the band, or the
            binned test rejects.
        level: the check's level: under the null, `Pr[rejected] <= level` (the band's
            half exactly, the binned test's half asymptotically; module docstring).
        band: how the simultaneous band was built, in words.
        param_name: `"mu"`, `"sigma"`, or the curve parameter's name.
        param_interval: `(lo, hi)` of the parameters consistent with every box (for
            sigma, `hi` may be inf), or None when rejected.
        worst: the threshold where the fit fails most (or, when not rejected, comes
            closest to failing), measured at the parameter `param_fit` that the most boxes
            allow: `threshold`, observed `fpr` and `fnr`, the box (`fpr_interval`,
            `fnr_interval`), `param_fit`, `curve_fnr` (the curve at `param_fit` and the
            observed FPR), `curve_fnr_interval` (the curve at `param_fit` over the box's
            FPR interval), `allowed` (the parameter range this box alone allows; None
            when it allows none), and `lower_limit`/`upper_limit` with the thresholds
            that set them (the overall limits), `limits_conflict` (no parameter meets
            them all: the band rejects).
        n_in, n_out: scores per world that the check saw.
        binned: the binned likelihood-ratio test (`check_gaussian_tradeoff`,
            `check_heuristic_family`; None for `check_tradeoff_fit`, or where too few
            scores leave fewer than 3 bins): `rejected`, `level`, `statistic` (G), `df`,
            `p_value`, `bins`, `theta_fit` and `param_fit` (the null's maximum-likelihood
            parameter), and `worst` (the bin that adds most to G: its score range `low`,
            `high` and the observed and expected counts of each world).
    """

    assumption: str
    rejected: bool
    level: float
    band: str
    param_name: str
    param_interval: tuple | None
    worst: dict
    n_in: int
    n_out: int
    binned: dict | None = None

    def to_dict(self) -> dict:
        """Plain Python values (lists for tuples), ready for JSON (inf stays a float)."""
        return _plain(dataclasses.asdict(self))

    def describe(self) -> str:
        """One sentence for a warning or a table cell."""
        w = self.worst
        curve = w["curve_fnr"]
        at = (
            f"FNR {curve:.3g}"
            if curve is not None and math.isfinite(curve)
            else "no FNR (the edge of the family)"
        )
        at_tau = (
            f"at threshold {w['threshold']:.6g}"
            if w.get("randomised_to") is None
            else f"on the tests randomised between thresholds {w['threshold']:.6g} and "
            f"{w['randomised_to']:.6g} (weight {w['weight']:.3g})"
        )
        where = (
            f"{at_tau} (FPR {w['fpr']:.3g} in "
            f"[{w['fpr_interval'][0]:.3g}, {w['fpr_interval'][1]:.3g}], FNR {w['fnr']:.3g} "
            f"in [{w['fnr_interval'][0]:.3g}, {w['fnr_interval'][1]:.3g}]) the curve at "
            f"{self.param_name} = {w['param_fit']:.4g} gives {at}"
        )
        atom = w.get("atom")
        if self.rejected and atom is not None:
            return (
                f"{self.assumption} rejected at level {self.level:g}: the score "
                f"{atom['value']:.6g} holds {atom['share_in']:.2%} of the in-runs and "
                f"{atom['share_out']:.2%} of the out-runs, an atom; the randomised tests on "
                "an atom lie on a straight segment of the ROC, which no curve of the family "
                f"with {self.param_name} in [{w['lower_limit']:.4g}, {w['upper_limit']:.4g}] "
                "(the range every box allows) contains: the scores are too discrete for "
                "the curve"
            )
        upper_at = (
            f"threshold {w['upper_limit_threshold']:.6g}"
            if w.get("upper_limit_randomised_to") is None
            else f"the tests randomised between thresholds {w['upper_limit_threshold']:.6g} "
            f"and {w['upper_limit_randomised_to']:.6g}"
        )
        binned = self._describe_binned()
        if w["limits_conflict"]:
            return (
                f"{self.assumption} rejected at level {self.level:g}: no {self.param_name} "
                f"fits every box ({self.param_name} >= {w['lower_limit']:.4g} at threshold "
                f"{w['lower_limit_threshold']:.6g}, <= {w['upper_limit']:.4g} at "
                f"{upper_at}); worst {where}" + (f"; {binned}" if binned else "")
            )
        if self.rejected:
            return f"{self.assumption} rejected at level {self.level:g}: {binned}"
        lo, hi = self.param_interval
        return (
            f"{self.assumption} not rejected at level {self.level:g}: {self.param_name} in "
            f"[{lo:.4g}, {hi:.4g}] fits every box"
            + (f"; {binned}" if binned else "")
            + " (not a proof that the assumption holds)"
        )

    def _describe_binned(self) -> str:
        """The binned test's outcome, in words ("" where it did not run)."""
        b = self.binned
        if b is None:
            return ""
        w = b["worst"]
        low = "-inf" if w["low"] is None else f"{w['low']:.6g}"
        high = "inf" if w["high"] is None else f"{w['high']:.6g}"
        verdict = "rejects" if b["rejected"] else "does not reject"
        return (
            f"the binned likelihood-ratio test {verdict} (G = {b['statistic']:.4g} on "
            f"{b['df']} df over {b['bins']} bins, p = {b['p_value']:.3g}, its level "
            f"{b['level']:g}): at the best fit {self.param_name} = {b['param_fit']:.4g}, "
            f"scores in [{low}, {high}) were expected from {w['in_expected']:.1f} in-runs "
            f"and {w['out_expected']:.1f} out-runs, and came from {w['in_observed']} and "
            f"{w['out_observed']}"
        )


# ----------------------------------------------------------------------------------------
# The test


def _validate_scores(name: str, scores, *, must_be_sorted: bool) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 1 or x.size < 1:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        bad = float(x[~np.isfinite(x)][0])
        raise ValueError(f"{name} must be finite, got {bad!r} among {x.size} scores")
    if must_be_sorted and np.any(np.diff(x) < 0):
        raise ValueError(f"{name} must be sorted ascending (np.sort), got an unsorted array")
    return x


def _validate_range(param_range) -> tuple:
    try:
        lo, hi = (float(v) for v in param_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"param_range must be a pair (lo, hi) of numbers, got {param_range!r}"
        ) from None
    if not (math.isfinite(lo) and lo < hi and not math.isnan(hi)):
        raise ValueError(
            f"param_range must be (lo, hi) with finite lo < hi (hi may be inf), got {param_range!r}"
        )
    return lo, hi


def _heavy_atom(sorted_in: np.ndarray, sorted_out: np.ndarray) -> dict | None:
    """The score value held by the largest share of either world's scores, if that share
    is at least `_ATOM_SHARE` (and two scores): `value`, `share_in`, `share_out`."""
    best = None
    for x in (sorted_in, sorted_out):
        need = max(2, math.ceil(_ATOM_SHARE * x.size))
        # sorted: some value holds `need` scores iff x[i] == x[i + need - 1] for some i
        if x.size < need or not np.any(x[need - 1 :] == x[: x.size - need + 1]):
            continue
        starts = np.flatnonzero(np.concatenate([[True], x[1:] != x[:-1]]))
        runs = np.diff(np.append(starts, x.size))
        i = int(np.argmax(runs))
        share = runs[i] / x.size
        if runs[i] >= 2 and share >= _ATOM_SHARE and (best is None or share > best[1]):
            best = (float(x[starts[i]]), share)
    if best is None:
        return None
    value = best[0]

    def share_of(x):
        return float(
            (np.searchsorted(x, value, "right") - np.searchsorted(x, value, "left")) / x.size
        )

    return {"value": value, "share_in": share_of(sorted_in), "share_out": share_of(sorted_out)}


def _run(
    sorted_in,
    sorted_out,
    *,
    limits,
    segment_limits,
    strictly_convex,
    curve,
    lo,
    level,
    assumption,
    param_name,
    show,
    binned=None,
):
    """The shared test. `limits(boxes) -> (low, up)` in the curve's parameter theta;
    `show(theta_low, theta_up) -> (param_lo, param_hi)` maps a theta interval to the
    reported parameter's interval (identity for mu; 1/theta for sigma).
    `segment_limits(segments, cap) -> up` gives the segments' upper limits (step 4; those
    that cannot go below `cap`, the boxes' smallest, as inf);
    `strictly_convex`: the curves are strictly convex for every theta strictly inside
    (lo, inf), so a heavy atom rejects unless the limits allow lo or inf (step 5).
    `binned(sorted_in, sorted_out, level, theta_guess) -> dict | None`: the binned test
    (step 6), given half the level; None: the band alone, at the whole level."""
    band_level = level if binned is None else level / 2.0
    boxes, band = _boxes(sorted_in, sorted_out, band_level)
    n_boxes = boxes["tau"].size
    seg = _segments(boxes, sorted_in, sorted_out, level)
    box_low, box_up = limits(boxes)
    seg_up = segment_limits(seg, float(np.min(box_up)))
    # The segments limit theta from above only (their lower limits are implied by the
    # boxes' through the curve's convexity): lo stands for "no lower limit".
    low = np.concatenate([box_low, np.full(seg_up.size, lo)])
    up = np.concatenate([box_up, seg_up])
    band += (
        f"; the randomised tests between consecutive thresholds on {seg_up.size} segments "
        "(mixed boxes, step 4)"
    )
    i_low, i_up = int(np.argmax(low)), int(np.argmin(up))
    low_max, up_min = float(low[i_low]), float(up[i_up])
    slack = _REL_TOL * max(1.0, abs(low_max) if math.isfinite(low_max) else 1.0)
    # low = +inf: some box allows no parameter in the range at all (e.g. a family's floor
    # (1 - q)^{n_c} (1 - alpha) above the box), whatever the other limits say.
    limits_conflict = bool(math.isinf(low_max) or low_max > up_min + slack)
    # Step 5: an atom, when every parameter the limits allow gives a strictly convex curve.
    atom = None
    if strictly_convex and not limits_conflict and low_max > lo + slack:
        if not math.isinf(up_min):
            atom = _heavy_atom(sorted_in, sorted_out)
    if limits_conflict:
        fit = _max_agreement(low, up, lo)
    else:
        fit = low_max if math.isinf(up_min) else 0.5 * (low_max + up_min)
    binned_result = None
    if binned is not None:
        band += f"; the band at level {band_level:g}, the binned test at {level - band_level:g}"
        binned_result = binned(sorted_in, sorted_out, level - band_level, fit)
    rejected = limits_conflict or atom is not None
    rejected = rejected or (binned_result is not None and binned_result["rejected"])
    with np.errstate(invalid="ignore"):
        margin = np.maximum(low - fit, fit - up)
    margin = np.where(np.isnan(margin), -math.inf, margin)
    k = int(np.argmax(margin))

    def where(i):  # the threshold of box i, or the lower threshold of segment i - n_boxes
        return float(boxes["tau"][i] if i < n_boxes else seg["tau0"][i - n_boxes])

    def randomised_to(i):  # the upper threshold of segment i - n_boxes (None for a box)
        return None if i < n_boxes else float(seg["tau1"][i - n_boxes])

    if k < n_boxes:
        worst = _box_worst(curve, boxes, k, fit, show, (float(low[k]), float(up[k])))
    else:
        worst = _segment_worst(curve, seg, k - n_boxes, fit, show, float(up[k]), lo)
    worst.update(
        param_fit=show(fit, fit)[0],
        lower_limit=show(low_max, low_max)[0],
        lower_limit_threshold=where(i_low),
        upper_limit=show(up_min, up_min)[0],
        upper_limit_threshold=where(i_up),
        upper_limit_randomised_to=randomised_to(i_up),
        atom=atom,
        limits_conflict=limits_conflict,
    )
    if param_name == "sigma":  # theta = 1/sigma: the lower theta limit is sigma's upper
        worst["lower_limit"], worst["upper_limit"] = worst["upper_limit"], worst["lower_limit"]
        worst["lower_limit_threshold"], worst["upper_limit_threshold"] = (
            worst["upper_limit_threshold"],
            worst["lower_limit_threshold"],
        )
    return AssumptionCheck(
        assumption=assumption,
        rejected=rejected,
        level=level,
        band=band,
        param_name=param_name,
        param_interval=None if rejected else show(low_max, up_min),
        worst=worst,
        n_in=int(sorted_in.size),
        n_out=int(sorted_out.size),
        binned=binned_result,
    )


def check_tradeoff_fit(
    sorted_in,
    sorted_out,
    curve: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    param_name: str,
    param_range: tuple,
    level: float = 0.05,
    assumption: str,
) -> AssumptionCheck:
    r"""Tests "the ROC of the threshold tests on these scores is $f_\theta$ for one $\theta$".

    See the module docstring for the band, the limits and the level argument. The test
    says "canary in" iff `score >= tau` (the audits' convention). It is the band alone
    (steps 1-4), at the whole level: the binned test of `check_gaussian_tradeoff` and
    `check_heuristic_family` needs the curves as probit-shift mixtures, and the atoms
    rule needs them strictly convex, which a generic `curve` does not say.

    Args:
        sorted_in: canary-in scores, sorted ascending (the audit's held-out half).
        sorted_out: canary-out scores, sorted ascending.
        curve: `curve(alpha, theta) -> beta`, elementwise over arrays of one shape: a
            trade-off curve, continuous and non-increasing in alpha with
            `curve(0, theta) = 1`, and non-increasing in theta.
        param_name: the name of theta in the result.
        param_range: `(lo, hi)`, the null's parameter set $[lo, hi]$ (lo finite; hi may
            be inf; parameters above lo + 1e12 count as infinite).
        level: the test's level, in (0, 1): under the null, Pr[rejected] <= level.
        assumption: the name of the assumption in the result.

    Returns:
        An `AssumptionCheck` (`param_interval` in theta).

    Raises:
        ValueError: empty, non-finite or unsorted scores; `level` outside (0, 1); a bad
            `param_range`; a curve that returns non-finite values.

    Example:
        >>> import numpy as np, scipy.stats
        >>> rng = np.random.default_rng(0)
        >>> cin, cout = np.sort(rng.normal(1, 1, 10**4)), np.sort(rng.normal(0, 1, 10**4))
        >>> g = lambda a, mu: scipy.stats.norm.cdf(scipy.stats.norm.isf(a) - mu)
        >>> r = check_tradeoff_fit(cin, cout, g, param_name="mu", param_range=(0, np.inf),
        ...                        assumption="gaussian_tradeoff")
        >>> r.rejected, r.param_interval[0] < 1.0 < r.param_interval[1]
        (False, True)
    """
    level = check_in_interval("level", level, 0.0, 1.0)
    sorted_in = _validate_scores("sorted_in", sorted_in, must_be_sorted=True)
    sorted_out = _validate_scores("sorted_out", sorted_out, must_be_sorted=True)
    lo, hi = _validate_range(param_range)
    if not isinstance(param_name, str) or not param_name:
        raise ValueError(f"param_name must be a non-empty string, got {param_name!r}")
    if not isinstance(assumption, str) or not assumption:
        raise ValueError(f"assumption must be a non-empty string, got {assumption!r}")

    def limits(boxes):
        return (
            _bisect_limits(curve, boxes["a_hi"], boxes["b_hi"], lo, hi, lower=True),
            _bisect_limits(curve, boxes["a_lo"], boxes["b_lo"], lo, hi, lower=False),
        )

    return _run(
        sorted_in,
        sorted_out,
        limits=limits,
        segment_limits=lambda seg, cap: _segment_limits(curve, seg, lo, hi, cap),
        strictly_convex=False,
        curve=curve,
        lo=lo,
        level=level,
        assumption=assumption,
        param_name=param_name,
        show=lambda a, b: (float(a), float(b)),
    )

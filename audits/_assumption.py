r"""Checks of the GDP and family audits' assumption on held-out scores.

The GDP audit converts a bound on $\mu$ to eps as if the run's trade-off curve *were*
$G_\mu$; the family audit reads eps off the heuristic's family as if the run's curve were
$f_\sigma$ for some $\sigma$. Neither assumption is visible in one threshold test. What the
scores can show is the receiver operating characteristic (ROC) of the threshold tests on
*this* score, $\tau \mapsto (\alpha(\tau), \beta(\tau))$ with
$\alpha(\tau) = \Pr_{out}[S \ge \tau]$ and $\beta(\tau) = \Pr_{in}[S < \tau]$. The null
tested here is

$$H_0:\ \exists\, \theta \in \Theta \ \forall \tau:\ \beta(\tau) = f_\theta(\alpha(\tau)),$$

"every threshold test on this score lies exactly on the curve $f_\theta$ for one
$\theta$" ($f_\theta = G_\mu$, Definition 2.7 of Dong, Roth & Su, arXiv:1905.02383; or the
heuristic family's curve, Theorem 1 of arXiv:2410.06186). This is what the audits' eps
conversion uses when the score is the optimal (likelihood-ratio) test. A rejection says
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

Level: under $H_0$ with parameter $\theta^*$, on the band's event (probability
$\ge 1 - \mathrm{level}$, Bonferroni over $4K$ one-sided order-statistic intervals whose
levels are exact for any continuous or discontinuous $F$) every box contains the true
ROC point, which lies on $f_{\theta^*}$, so $\theta^*$ satisfies every limit and the null
is not rejected. Hence $\Pr[\text{reject} \mid H_0] \le \mathrm{level}$, for every sample
size; numerical error in the limits only moves them outwards (bisection returns the
conservative end of its bracket; the family's dropped atoms loosen them by their mass).
The test is conservative: the Bonferroni union over correlated order statistics, and a
composite null whose parameter adapts to the data. Measured on N(1, 1) vs N(0, 1),
5 x 10^4 per world, 400 repeats: 0 rejections at level 0.05 and 0 at level 0.5; the
`param_interval` covered the true mu in all of them (on the band's event it is a
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

Measured power and false alarms (`advsim figure assumption_power`, level 0.05, 10^5
runs per world, the check on the held-out half of 5 x 10^4 per world as the audits call
it; the table and wall times are in that script's docstring): the threshold landscape at
sigma = 1, T = 25 is rejected in 40/40 repeats at B = 1 and at B = 4 (95% Clopper-Pearson
interval on the power [0.912, 1]) and in 0/40 at B = 16, whose ROC departs from a
Gaussian one only by a local bump (the mu one test implies is 0.955 +- 0.005 at FPR
1e-3 to 0.99 but 0.995 at FPR 0.3), rejected in 10/10 repeats at 10^6 runs per world
(5 x 10^5 held out); the nulls
(GDP on Gaussian scores and on the linear process with q = 1; the family on the linear
process, T in {1, 10}, q in {0.1, 1}) gave 0 false alarms in 100 each (allowed 13).

Cost: a sort of each world, ~3 sqrt(n) Beta quantiles per world, and for the family a
vectorised bisection over ~6 sqrt(n) boxes; measured 3.9 s (GDP) and 7.6 s (family,
T = 1000, q = 0.01) at 5 x 10^6 scores per world on 2 shared CPU cores, well under 0.1 s
at 5 x 10^4.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import scipy.special
import scipy.stats

import advsim.bounds as _bounds
from advsim import Accounting
from advsim.validation import check_in_interval

from ._result import _plain
from ._roc_band import _bisect_limits, _boxes, _gdp_limits, _max_agreement

__all__ = [
    "AssumptionCheck",
    "check_gaussian_tradeoff",
    "check_heuristic_family",
    "check_tradeoff_fit",
]

# Binomial atoms kept by the family's curve: log-probability within this of the largest
# (`binomial_mixture`'s log_tol); the dropped mass is < n_c e^{-60} (< 1e-22 for
# n_c <= 10^4) and loosens the limits by twice that (`_bisect_limits`' tol).
_ATOM_LOG_TOL = 60.0
# Relative slack before limits count as conflicting (rounding in the closed forms).
_REL_TOL = 1e-9


@dataclasses.dataclass(frozen=True)
class AssumptionCheck:
    """The outcome of a goodness-of-fit test of a trade-off family to held-out scores.

    Attributes:
        assumption: `"gaussian_tradeoff"` (the ROC is $G_\\mu$) or `"heuristic_family"`
            (the ROC is the family's $f_\\sigma$), or the name given to
            `check_tradeoff_fit`.
        rejected: True iff no parameter value fits inside every box of the band.
        level: the test's level: under the null, `Pr[rejected] <= level`.
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
            that set them (the overall limits; rejected iff lower > upper).
        n_in, n_out: scores per world that the check saw.
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
        where = (
            f"at threshold {w['threshold']:.6g} (FPR {w['fpr']:.3g} in "
            f"[{w['fpr_interval'][0]:.3g}, {w['fpr_interval'][1]:.3g}], FNR {w['fnr']:.3g} "
            f"in [{w['fnr_interval'][0]:.3g}, {w['fnr_interval'][1]:.3g}]) the curve at "
            f"{self.param_name} = {w['param_fit']:.4g} gives {at}"
        )
        if self.rejected:
            return (
                f"{self.assumption} rejected at level {self.level:g}: no {self.param_name} "
                f"fits every box ({self.param_name} >= {w['lower_limit']:.4g} at threshold "
                f"{w['lower_limit_threshold']:.6g}, <= {w['upper_limit']:.4g} at threshold "
                f"{w['upper_limit_threshold']:.6g}); worst {where}"
            )
        lo, hi = self.param_interval
        return (
            f"{self.assumption} not rejected at level {self.level:g}: {self.param_name} in "
            f"[{lo:.4g}, {hi:.4g}] fits every box (not a proof that the assumption holds)"
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


def _run(sorted_in, sorted_out, *, limits, curve, lo, level, assumption, param_name, show):
    """The shared test. `limits(boxes) -> (low, up)` in the curve's parameter theta;
    `show(theta_low, theta_up) -> (param_lo, param_hi)` maps a theta interval to the
    reported parameter's interval (identity for mu; 1/theta for sigma)."""
    boxes, band = _boxes(sorted_in, sorted_out, level)
    low, up = limits(boxes)
    i_low, i_up = int(np.argmax(low)), int(np.argmin(up))
    low_max, up_min = float(low[i_low]), float(up[i_up])
    slack = _REL_TOL * max(1.0, abs(low_max) if math.isfinite(low_max) else 1.0)
    # low = +inf: some box allows no parameter in the range at all (e.g. a family's floor
    # (1 - q)^{n_c} (1 - alpha) above the box), whatever the other limits say.
    rejected = bool(math.isinf(low_max) or low_max > up_min + slack)

    if rejected:
        fit = _max_agreement(low, up, lo)
    else:
        fit = low_max if math.isinf(up_min) else 0.5 * (low_max + up_min)
    with np.errstate(invalid="ignore"):
        margin = np.maximum(low - fit, fit - up)
    margin = np.where(np.isnan(margin), -math.inf, margin)
    k = int(np.argmax(margin))
    fpr, fnr = float(boxes["fpr"][k]), float(boxes["fnr"][k])
    curve_at = np.asarray(
        curve(np.array([fpr, boxes["a_lo"][k], boxes["a_hi"][k]]), np.full(3, fit)),
        dtype=np.float64,
    )
    own = (float(low[k]), float(up[k]))
    worst = {
        "threshold": float(boxes["tau"][k]),
        "fpr": fpr,
        "fnr": fnr,
        "fpr_interval": (float(boxes["a_lo"][k]), float(boxes["a_hi"][k])),
        "fnr_interval": (float(boxes["b_lo"][k]), float(boxes["b_hi"][k])),
        "param_fit": show(fit, fit)[0],
        "curve_fnr": float(curve_at[0]),
        "curve_fnr_interval": (float(curve_at[2]), float(curve_at[1])),
        "allowed": show(*own) if own[0] <= own[1] else None,
        "lower_limit": show(low_max, low_max)[0],
        "lower_limit_threshold": float(boxes["tau"][i_low]),
        "upper_limit": show(up_min, up_min)[0],
        "upper_limit_threshold": float(boxes["tau"][i_up]),
    }
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
    says "canary in" iff `score >= tau` (the audits' convention).

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
        curve=curve,
        lo=lo,
        level=level,
        assumption=assumption,
        param_name=param_name,
        show=lambda a, b: (float(a), float(b)),
    )


def gaussian_tradeoff(alpha, mu) -> np.ndarray:
    r"""$G_\mu(\alpha) = \Phi(\Phi^{-1}(1 - \alpha) - \mu)$, elementwise (Dong, Roth & Su,
    arXiv:1905.02383, Definition 2.7)."""
    return scipy.special.ndtr(-scipy.special.ndtri(np.asarray(alpha, np.float64)) - mu)


def check_gaussian_tradeoff(canary_in, canary_out, *, level: float = 0.05) -> AssumptionCheck:
    r"""Tests "the ROC of these scores is $G_\mu$ for some $\mu \ge 0$" (the GDP audit's
    assumption, as far as the data can show it).

    $G_\mu$ is Definition 2.7 of Dong, Roth & Su (arXiv:1905.02383); the limits on $\mu$
    per box are in closed form. See the module docstring for the test and its level.

    Args:
        canary_in, canary_out: the scores of each world (any order): the held-out half
            the audit counted its rates on.
        level: the test's level, in (0, 1).

    Returns:
        An `AssumptionCheck` with `assumption="gaussian_tradeoff"`, `param_name="mu"`.

    Raises:
        ValueError: empty or non-finite scores; `level` outside (0, 1).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> r = check_gaussian_tradeoff(rng.normal(1, 1, 10**4), rng.normal(0, 1, 10**4))
        >>> r.rejected
        False
    """
    level = check_in_interval("level", level, 0.0, 1.0)
    cin = np.sort(_validate_scores("canary_in", canary_in, must_be_sorted=False))
    cout = np.sort(_validate_scores("canary_out", canary_out, must_be_sorted=False))
    return _run(
        cin,
        cout,
        limits=_gdp_limits,
        curve=gaussian_tradeoff,
        lo=0.0,
        level=level,
        assumption="gaussian_tradeoff",
        param_name="mu",
        show=lambda a, b: (float(a), float(b)),
    )


def _family_curve(accounting: Accounting) -> tuple:
    """`(curve, error)`: the family's curve from the atoms within `_ATOM_LOG_TOL` of the
    largest, and a bound on its distance to the exact one (twice the dropped mass)."""
    n_c = accounting.num_canary_steps
    support, probs = _bounds.binomial_mixture(n_c, accounting.sampling_prob, log_tol=_ATOM_LOG_TOL)
    z = np.asarray(support, np.float64) / math.sqrt(accounting.steps)
    probs = np.asarray(probs, np.float64)

    def curve(alpha, theta):
        c = -scipy.special.ndtri(np.asarray(alpha, np.float64))
        theta = np.asarray(theta, np.float64)
        with np.errstate(invalid="ignore"):  # c = +-inf minus a finite shift
            terms = scipy.special.ndtr(c[..., None] - z * theta[..., None])
        return np.clip(terms @ probs, 0.0, 1.0)

    return curve, 2.0 * (n_c + 1) * math.exp(-_ATOM_LOG_TOL)


def family_tradeoff(accounting: Accounting) -> Callable:
    r"""The heuristic family's curve as `curve(alpha, theta)` with $\theta = 1/\sigma$:
    $\sum_k p_k \Phi(\Phi^{-1}(1 - \alpha) - k\theta/\sqrt{T})$, $p_k$ the
    Binomial($n_c$, q) atoms of `advsim.bounds.binomial_mixture` (Theorem 1 of
    arXiv:2410.06186; `advsim.bounds.mixture_tradeoff` at scale $\sqrt{T}\sigma$),
    elementwise in (alpha, theta) and non-increasing in theta. Atoms more than
    `_ATOM_LOG_TOL` below the largest in log-probability are dropped (absolute error
    < 2 (n_c + 1) e^{-60})."""
    return _family_curve(accounting)[0]


def check_heuristic_family(
    canary_in, canary_out, accounting: Accounting, *, level: float = 0.05
) -> AssumptionCheck:
    r"""Tests "the ROC of these scores is the heuristic family's $f_\sigma$ for some sigma"
    (the family audit's assumption, as far as the data can show it).

    The family (Theorem 1 of arXiv:2410.06186) with the run's T, q and number of canary
    steps $n_c$ from `accounting`: $P = \mathrm{Binomial}(n_c, q) + N(0, T\sigma^2)$
    against $Q = N(0, T\sigma^2)$, $\sigma \in (0, \infty]$ ($\sigma = \infty$: no
    signal). Tested in $\theta = 1/\sigma \in [0, \infty)$ (the curve is non-increasing in
    theta) and reported in sigma. See the module docstring for the test and its level.

    Args:
        canary_in, canary_out: the scores of each world (any order): the held-out half
            the audit counted its rates on.
        accounting: the audited run's `Accounting` (its noise multiplier is not used).
        level: the test's level, in (0, 1).

    Returns:
        An `AssumptionCheck` with `assumption="heuristic_family"`, `param_name="sigma"`,
        `param_interval` as `(sigma_lo, sigma_hi)` (`sigma_hi` may be inf).

    Raises:
        TypeError: `accounting` is not an `advsim.Accounting`.
        ValueError: empty or non-finite scores; `level` outside (0, 1).

    Example:
        >>> import numpy as np
        >>> from advsim import Accounting
        >>> rng = np.random.default_rng(0)
        >>> acc = Accounting(1, 1.0, 1.0, canary_steps=(1,))
        >>> r = check_heuristic_family(rng.normal(1, 1, 10**4), rng.normal(0, 1, 10**4), acc)
        >>> r.rejected, r.param_interval[0] < 1.0 < r.param_interval[1]
        (False, True)
    """
    level = check_in_interval("level", level, 0.0, 1.0)
    if not isinstance(accounting, Accounting):
        raise TypeError(f"accounting must be an advsim.Accounting, got {type(accounting).__name__}")
    cin = np.sort(_validate_scores("canary_in", canary_in, must_be_sorted=False))
    cout = np.sort(_validate_scores("canary_out", canary_out, must_be_sorted=False))
    curve, err = _family_curve(accounting)

    def limits(boxes):
        return (
            _bisect_limits(curve, boxes["a_hi"], boxes["b_hi"], 0.0, math.inf, lower=True, tol=err),
            _bisect_limits(
                curve, boxes["a_lo"], boxes["b_lo"], 0.0, math.inf, lower=False, tol=err
            ),
        )

    def show(theta_lo, theta_hi):  # sigma = 1 / theta, so the ends swap
        def inv(t):
            return math.inf if t <= 0 else (0.0 if math.isinf(t) else 1.0 / t)

        return (inv(theta_hi), inv(theta_lo))

    return _run(
        cin,
        cout,
        limits=limits,
        curve=curve,
        lo=0.0,
        level=level,
        assumption="heuristic_family",
        param_name="sigma",
        show=show,
    )

r"""Bayesian estimate of epsilon from one threshold test (Zanella-Beguelin et al. 2023).

"Bayesian Estimation of Differential Privacy" (Zanella-Beguelin, Wutschitz, Tople, Salem,
Ruhle, Paverd, Naseri, Kopf, Jones; ICML 2023, arXiv:2206.05199), the `"joint-beta"`
model of their `privacy_estimates` package: the test's false-positive and false-negative
rates get independent Jeffreys priors, so with counts (TP, FN) on the runs with the
canary and (FP, TN) on the runs without it the posterior is

$$\mathrm{FPR} \sim \mathrm{Beta}(FP + \tfrac12, TN + \tfrac12), \qquad
  \mathrm{FNR} \sim \mathrm{Beta}(FN + \tfrac12, TP + \tfrac12),$$

independent. Each pair (FPR, FNR) has the smallest eps for which it lies in the
(eps, delta)-DP region (the four inequalities of Kairouz, Oh & Viswanath 2015, both sides
of the line FPR + FNR = 1):

$$\epsilon(\alpha, \beta) = \max\Big(0, \log\frac{1-\delta-\alpha}{\beta},
  \log\frac{1-\delta-\beta}{\alpha}, \log\frac{\alpha-\delta}{1-\beta},
  \log\frac{\beta-\delta}{1-\alpha}\Big),$$

and the credible interval is the equal-tailed one of the posterior of
$\epsilon(\mathrm{FPR}, \mathrm{FNR})$: its $\alpha/2$ and $1 - \alpha/2$ quantiles
(their `eps_lo(alpha/2)`, `eps_hi(alpha/2)`). privacy_estimates integrates the posterior
over the region with a double quadrature for every trial eps (seconds to minutes, absolute
error 5e-3); here the posterior CDF of eps is one sum over a quantile grid of FNR
(`grid_size` equal-probability cells, each at its median, times the exact Beta CDF of FPR
over the interval of FPR the region allows), deterministic and vectorised: about
0.05-0.4 s per interval.

**A credible interval is not a confidence bound.** It says where the posterior puts its
mass under the Jeffreys prior; it makes no claim about what happens over repeated runs,
and its lower end is not an `eps_lower`: nothing bounds how often it exceeds the true
epsilon over repeated runs. This is why the result is its own type,
`BayesianEstimate`, with a `credible_interval` and no `eps_lower` field: a table that
collects `eps_lower` from `AuditResult`s cannot pick it up by accident, and its
`guarantee` says `"eps_credible_interval"`, assumption `"jeffreys_prior"`, never
`rigorous`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from advsim import Scores
from advsim.validation import check_delta, check_in_interval, check_int

from ._guarantee import Guarantee
from ._one_run import guaranteed_dict
from ._threshold import candidate_thresholds, clopper_pearson_upper, counts_at, split_halves

__all__ = ["BayesianEstimate", "bayesian_audit", "bayesian_estimate", "posterior_eps_cdf"]

_MAX_EPS = 60.0  # e^60 ~ 1e26: no count of runs resolves rates beyond that


def _check_count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class BayesianEstimate:
    """A credible interval for epsilon from one threshold test's counts.

    Attributes:
        method: `"bayes"`.
        credible_interval: `(low, high)`, the `alpha / 2` and `1 - alpha / 2` quantiles of
            the posterior of eps. Not a confidence interval: see the module docstring.
        eps_median: the posterior median of eps (an estimate, not a bound).
        credibility: `1 - alpha`, the posterior mass of the interval.
        delta: the DP delta.
        tp, fn, fp, tn: the counts (canary in: TP + FN runs; canary out: FP + TN).
        threshold: the test's threshold when built from scores (else None).
        guarantee: `statement="eps_credible_interval"`, `assumption="jeffreys_prior"`;
            `held_out` says whether the threshold was chosen on other runs.
        extras: how it was computed (`grid_size`, the threshold selection).
    """

    method: str
    credible_interval: tuple[float, float]
    eps_median: float
    credibility: float
    delta: float
    tp: int
    fn: int
    fp: int
    tn: int
    guarantee: Guarantee
    threshold: float | None = None
    extras: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        low, high = (float(v) for v in self.credible_interval)
        if not (0 <= low <= high) or math.isnan(high):
            raise ValueError(f"credible_interval must be 0 <= low <= high, got {(low, high)}")
        object.__setattr__(self, "credible_interval", (low, high))
        if self.guarantee.statement != "eps_credible_interval":
            raise ValueError(
                "a BayesianEstimate's guarantee must state 'eps_credible_interval', got "
                f"{self.guarantee.statement!r}"
            )

    @property
    def rigorous(self) -> bool:
        """Always False: a credible interval is no frequentist bound."""
        return self.guarantee.rigorous

    def to_dict(self) -> dict:
        """All fields as plain Python values, JSON-ready."""
        return guaranteed_dict(self)


class _Posterior:
    """The joint-beta posterior of (FPR, FNR), with the CDF of eps on a FNR quantile grid."""

    def __init__(self, tp: int, fn: int, fp: int, tn: int, grid_size: int):
        self.a, self.b = fp + 0.5, tn + 0.5  # the posterior Beta(a, b) of FPR
        # FNR at the medians of `grid_size` equal-probability cells of its posterior: the
        # mean over the grid of P[FPR in the region | FNR] is the posterior CDF of eps.
        cells = (np.arange(grid_size) + 0.5) / grid_size
        self.fnr = scipy.stats.beta(fn + 0.5, tp + 0.5).ppf(cells)

    def cdf(self, eps: float, delta: float) -> float:
        """P[eps(FPR, FNR) <= eps] under the posterior."""
        x = self.fnr
        e = math.exp(min(eps, _MAX_EPS))
        # The (eps, delta) region at FNR = x is lo(x) <= FPR <= hi(x) (privacy_estimates'
        # privacy_boundary_lo / _hi, i.e. the four inequalities of the module docstring).
        lo = np.maximum(0.0, np.maximum(1.0 - delta - x * e, (1.0 - delta - x) / e))
        hi = np.minimum(1.0, np.minimum(1.0 + (delta - x) / e, delta + (1.0 - x) * e))
        hi = np.maximum(hi, lo)
        # Mass between lo and hi, from the side where it is not a difference of two
        # numbers close to 1 (the posterior of FPR can sit at 0.999).
        cdf_lo = scipy.special.betainc(self.a, self.b, lo)
        mass = scipy.special.betainc(self.a, self.b, hi) - cdf_lo
        upper = cdf_lo > 0.5
        if np.any(upper):
            mass[upper] = scipy.special.betaincc(self.a, self.b, lo[upper]) - (
                scipy.special.betaincc(self.a, self.b, hi[upper])
            )
        return float(np.clip(np.mean(mass), 0.0, 1.0))

    def quantile(self, p: float, delta: float) -> float:
        """The smallest eps with posterior CDF >= p (inf if beyond `_MAX_EPS`)."""
        if self.cdf(0.0, delta) >= p:
            return 0.0
        if self.cdf(_MAX_EPS, delta) < p:
            return math.inf
        hi = 1.0
        while self.cdf(hi, delta) < p:
            hi *= 2.0
        return float(
            scipy.optimize.brentq(
                lambda e: self.cdf(e, delta) - p, hi / 2 if hi > 1 else 0.0, hi, xtol=1e-9
            )
        )


def posterior_eps_cdf(
    eps, *, tp: int, fn: int, fp: int, tn: int, delta: float, grid_size: int = 1024
) -> np.ndarray:
    """The posterior CDF of eps (joint-beta model, Jeffreys priors) at each `eps`.

    Example:
        >>> float(posterior_eps_cdf(0.0, tp=487, fn=0, fp=512, tn=1, delta=1e-5)) < 0.05
        True
    """
    post = _Posterior(*_counts(tp, fn, fp, tn), check_int("grid_size", grid_size, minimum=16))
    delta = check_delta("delta", delta)
    return np.array([post.cdf(float(e), delta) for e in np.ravel(eps)]).reshape(np.shape(eps))


def _counts(tp, fn, fp, tn) -> tuple:
    tp, fn, fp, tn = (
        _check_count(n, v) for n, v in zip(("tp", "fn", "fp", "tn"), (tp, fn, fp, tn), strict=True)
    )
    if tp + fn == 0 or fp + tn == 0:
        raise ValueError(
            "both worlds need runs: tp + fn (canary in) and fp + tn (canary out) must be "
            f">= 1, got tp + fn = {tp + fn}, fp + tn = {fp + tn}"
        )
    return tp, fn, fp, tn


def bayesian_estimate(
    *,
    tp: int,
    fn: int,
    fp: int,
    tn: int,
    delta: float,
    alpha: float = 0.1,
    grid_size: int = 1024,
    threshold: float | None = None,
    held_out: bool = True,
    multiplicity: str = "counts at one test given by the caller",
) -> BayesianEstimate:
    """The equal-tailed credible interval for eps from one test's counts.

    Args:
        tp, fn: counts on the runs with the canary (said "in", said "out").
        fp, tn: counts on the runs without it (said "in", said "out").
        delta: the DP delta, in (0, 1).
        alpha: 1 - credibility, in (0, 1) (privacy_estimates' `alpha`: 0.1 gives the 5%
            and 95% posterior quantiles).
        grid_size: cells of the FNR quantile grid (>= 16); 1024 and 8192 cells give the
            same interval to 1e-4 relative on the worked example and on counts of
            10^6 runs (about 0.05-0.4 s per interval on one core).
        threshold, held_out, multiplicity: how the test was chosen, for the guarantee.

    Returns:
        A `BayesianEstimate` (a credible interval, not a confidence bound).

    Raises:
        ValueError: a count that is not an integer >= 0, an empty world, bad delta/alpha.

    References:
        Zanella-Beguelin et al., "Bayesian Estimation of Differential Privacy", ICML 2023
        (arXiv:2206.05199), Section 4 (joint posterior with Jeffreys priors).

    Example (the worked example of privacy_estimates' README):
        >>> r = bayesian_estimate(tp=487, fn=0, fp=512, tn=1, delta=1e-5, alpha=0.1)
        >>> [round(v, 2) for v in r.credible_interval], r.rigorous
        ([0.14, 6.42], False)
    """
    tp, fn, fp, tn = _counts(tp, fn, fp, tn)
    delta = check_delta("delta", delta)
    alpha = check_in_interval("alpha", alpha, 0.0, 1.0)
    grid_size = check_int("grid_size", grid_size, minimum=16)
    post = _Posterior(tp, fn, fp, tn, grid_size)
    low = post.quantile(alpha / 2, delta)
    high = post.quantile(1 - alpha / 2, delta)
    return BayesianEstimate(
        method="bayes",
        credible_interval=(low, high),
        eps_median=post.quantile(0.5, delta),
        credibility=1.0 - alpha,
        delta=delta,
        tp=tp,
        fn=fn,
        fp=fp,
        tn=tn,
        threshold=threshold,
        guarantee=Guarantee(
            statement="eps_credible_interval",
            assumption="jeffreys_prior",
            held_out=held_out,
            multiplicity=multiplicity,
        ),
        extras={"grid_size": grid_size, "alpha": alpha, "interval": "equal-tailed"},
    )


def bayesian_audit(
    scores: Scores,
    *,
    delta: float,
    alpha: float = 0.1,
    threshold: float | None = None,
    seed: int = 0,
    grid_size: int = 1024,
) -> BayesianEstimate:
    """The credible interval for eps of one threshold test on `scores`.

    With `threshold=None` the threshold is chosen on a random half of each world (the
    split of `EpsDeltaAudit`, by its Clopper-Pearson objective at the Bonferroni level
    over the candidates) and the counts are taken on the other half (held out). With a
    `threshold`, all runs are counted and the guarantee says the threshold came from the
    caller.

    Raises:
        ValueError: fewer than 2 scores per world, bad delta/alpha.
        NonFiniteScoresError: some score is NaN or inf.
    """
    from ._eps_delta import eps_delta_terms

    if not isinstance(scores, Scores):
        raise TypeError(f"scores must be an advsim.Scores, got {type(scores).__name__}")
    delta = check_delta("delta", delta)
    alpha = check_in_interval("alpha", alpha, 0.0, 1.0)
    if scores.n_in < 2 or scores.n_out < 2:
        raise ValueError(
            f"bayesian_audit needs at least 2 scores per world, got n_in={scores.n_in}, "
            f"n_out={scores.n_out}"
        )
    scores.check_finite()
    cin = np.asarray(scores.canary_in, np.float64)
    cout = np.asarray(scores.canary_out, np.float64)
    if threshold is None:
        rng = np.random.default_rng(check_int("seed", seed, minimum=0))
        sel_in, cin = split_halves(cin, rng)
        sel_out, cout = split_halves(cout, rng)
        sel_in, sel_out = np.sort(sel_in), np.sort(sel_out)
        cands = candidate_thresholds(sel_in, sel_out)
        fp_c, fn_c = counts_at(sel_in, sel_out, cands)
        level = alpha / (2 * cands.size)
        terms = eps_delta_terms(
            clopper_pearson_upper(fp_c, sel_out.size, level),
            clopper_pearson_upper(fn_c, sel_in.size, level),
            delta,
        )
        threshold = float(cands[int(np.argmax(np.maximum(*terms)))])
        held_out = True
        multiplicity = (
            f"one threshold chosen among {cands.size} candidates on the other half of the runs"
        )
    else:
        threshold = float(threshold)
        held_out = False
        multiplicity = "a threshold given by the caller, not known to be independent of the runs"
    fp = int(np.count_nonzero(cout >= threshold))
    fn = int(np.count_nonzero(cin < threshold))
    return bayesian_estimate(
        tp=cin.size - fn,
        fn=fn,
        fp=fp,
        tn=cout.size - fp,
        delta=delta,
        alpha=alpha,
        grid_size=grid_size,
        threshold=threshold,
        held_out=held_out,
        multiplicity=multiplicity,
    )

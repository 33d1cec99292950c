r"""The trade-off audit (Algorithm 2 of Annamalai 2024, "It's Our Loss"), with and without
confidence intervals.

The observed FPR-FNR curve of the threshold tests "canary in iff score >= tau" is compared
with the trade-off curves $f_{\hat\varepsilon}$ of DP-SGD with composition (every iterate
released; `advsim.bounds.composition_tradeoff_curve`, dp_accounting's PLD) for the
$(q, T)$ of the run and the noise multiplier that gives $(\hat\varepsilon, \delta)$, on
the grid $\hat\varepsilon \in \{0.5, 0.6, \ldots, 20\}$. An observation $(\alpha,
\beta)$ *violates* $f$ when $\beta < f(\alpha)$.

- `extras["eps_algorithm2"]` is Algorithm 2 itself (the paper's number, no intervals:
  optimistic): the FIRST, i.e. smallest, grid $\hat\varepsilon$ whose curve no
  observation violates, over the raw rates at every observed score as threshold (lines
  11-25). (Described as "the largest epsilon whose curve the observations do not violate",
  it is the same number, but misleadingly: every grid value above it is also not
  violated; what the loop returns is the smallest.) Thresholds with fewer than
  one false positive or false negative are left out: a raw rate of 0 violates
  every curve with $f > 0$ there, which would make the paper's loop run off the grid.
  This rule is biased upwards by the maximum over thousands of noisy thresholds
  (measured on exact Gaussian scores, 10^5 runs per world: +160% at eps = 1, +50% at
  eps = 4 with `min_count=1`; on the likelihood-encoding runs of the paper's Figure 2,
  +7% to +107%).
- `eps_point`, as in every advsim audit, is the estimate without that bias: the same rule
  on the raw held-out rates at the thresholds chosen on the other half (no maximum over
  thresholds). When none of those thresholds has `min_count` errors of each kind it is
  None, with the reason in `eps_point_note` (no fallback to Algorithm 2's number).
- `eps_lower` is a rigorous (eps, delta) lower bound, assuming nothing. Each world is
  split in two halves at random; on the first, the audit picks `num_thresholds`
  thresholds that certify the largest violation of composition's curves, plus the one
  with the best (eps, delta) objective (Clopper-Pearson at level $(1 - c) / (2K)$ over
  its $K$ candidates); on the held-out second half it counts their rates and bounds both,
  at level $(1 - c) / (2 m)$ each over the $m$ chosen thresholds, so that with
  probability $\ge c$ every $\alpha \le \bar\alpha$ and $\beta \le \bar\beta$.
  `eps_lower` is the largest eps these boxes exclude by the (eps, delta)-DP
  inequalities (`EpsDeltaAudit`'s formula): a statement about the release at `delta`.
- `extras["eps_composition_violated"]` is the largest grid $\hat\varepsilon$ whose
  composition curve the held-out boxes certifiably violate: since $f$ is decreasing,
  $\bar\beta < f(\bar\alpha)$ implies $\beta < f(\alpha)$, so the run is not DP-SGD
  with composition at that $\hat\varepsilon$'s noise (`guarantee.certified`). It is an
  index, the "composition-equivalent" epsilon, NOT a lower bound on the release's eps at
  `delta`: a violated curve shows the release fails $(\varepsilon', \delta(\varepsilon'))$-DP
  for some $\varepsilon'$ of that curve's profile, not at the reported delta. Reading it
  as one overshot the truth: 30 of 30 repeats on the threshold landscape (3.5x), and
  eps 2.2-2.9 against an exact 2.0 on the linear process (T = 10, q = 0.01,
  sigma = 0.3544, 5 x 10^5 runs per world). Until this version it was `eps_lower`.
- `eps_point` estimates the same index (the composition-equivalent epsilon) from raw
  held-out rates; it is an estimate of the release's eps only where the release's
  trade-off curve is composition's (as for the likelihood-encoding loss).

Search: the curves are nested in $\sigma$ (more noise is a post-processing of less), so
"violated" is monotone along the grid; rather than calibrating $\sigma$ for all 196 grid
values, the audit bisects on $\log\sigma$ for the boundary $\sigma^*$ where the
observations stop violating (each step: one cached PLD and curve) until no grid value
lies strictly between the two ends' composition epsilons (by the same PLD, so the answer
is the one the grid's calibrated curves give). The unrounded boundary epsilons are
reported in `extras` (`eps_point_boundary`, `eps_lower_boundary`).
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import numpy as np

from advsim import Accounting, Scores
from advsim.bounds import TRADEOFF_VDI, composition_epsilon_from_pld, composition_tradeoff_curve
from advsim.validation import check_in_interval, check_int, check_positive

from ._base import AbstractAudit, _prepare, _seed_or_draw, check_sides
from ._eps_delta import eps_delta_terms
from ._guarantee import Guarantee
from ._result import AuditResult
from ._threshold import candidate_thresholds, clopper_pearson_upper, counts_at, split_halves

__all__ = ["PAPER_EPS_GRID", "TradeoffAudit", "observed_tradeoff", "tradeoff_audit"]

PAPER_EPS_GRID = tuple(round(0.5 + 0.1 * i, 1) for i in range(196))
"""Algorithm 2's grid: 0.5, 0.6, ..., 20.0."""

_MAX_BISECTIONS = 40


def observed_tradeoff(canary_in, canary_out, thresholds=None) -> tuple:
    """The observed FPR-FNR curve (Algorithm 2, lines 10-15).

    Args:
        canary_in: scores of the runs on D' (with the canary), O'.
        canary_out: scores of the runs on D, O.
        thresholds: the thresholds tau (default: every distinct score of O and O').

    Returns:
        `(alpha, beta, thresholds)`: alpha = |{o in O: o >= tau}| / |O| (FPR), beta =
        |{o in O': o < tau}| / |O'| (FNR), at increasing tau.
    """
    cin = np.sort(np.asarray(canary_in, np.float64))
    cout = np.sort(np.asarray(canary_out, np.float64))
    if thresholds is None:
        thresholds = np.unique(np.concatenate([cin, cout]))
    thresholds = np.asarray(thresholds, np.float64)
    fp, fn = counts_at(cin, cout, thresholds)
    return fp / cout.size, fn / cin.size, thresholds


class _Search:
    """Bisection on log sigma for where the observations stop violating the curves."""

    def __init__(self, accounting: Accounting, delta: float, grid: np.ndarray, vdi: float):
        self.steps = accounting.steps
        self.q = accounting.sampling_prob
        self.n = accounting.num_canary_steps
        self.sigma0 = accounting.noise_multiplier
        self.delta = delta
        self.grid = grid
        self.vdi = vdi

    def curve(self, sigma):
        return composition_tradeoff_curve(
            self.steps, self.q, sigma, canary_steps=self.n, value_discretization_interval=self.vdi
        )

    def eps(self, sigma) -> float:
        return composition_epsilon_from_pld(
            self.delta,
            self.steps,
            self.q,
            sigma,
            canary_steps=self.n,
            value_discretization_interval=self.vdi,
        )

    def violated(self, sigma, alpha, beta) -> bool:
        return bool(np.any(beta < self.curve(sigma)(alpha))) if alpha.size else False

    def boundary(self, alpha, beta) -> dict:
        """Ends of the bisection: `sigma_bad` (violated) above `sigma_ok` (not).

        `sigma_bad` is None when nothing is violated down to eps < the grid's minimum,
        `sigma_ok` None when everything is violated up to eps > the grid's maximum.
        """
        lo_eps, hi_eps = float(self.grid[0]), float(self.grid[-1])
        ok = bad = None
        if self.violated(self.sigma0, alpha, beta):
            bad = self.sigma0
            for _ in range(_MAX_BISECTIONS):  # less noise until not violated
                if self.eps(bad) > hi_eps:
                    break
                if not self.violated(bad / 1.5, alpha, beta):
                    ok = bad / 1.5
                    break
                bad /= 1.5
        else:
            ok = self.sigma0
            for _ in range(_MAX_BISECTIONS):  # more noise until violated
                if self.eps(ok) < lo_eps:
                    break
                if self.violated(ok * 1.5, alpha, beta):
                    bad = ok * 1.5
                    break
                ok *= 1.5
        out = dict(sigma_ok=ok, sigma_bad=bad, iterations=0)
        if ok is None or bad is None:
            out["eps_ok"] = self.eps(ok) if ok is not None else math.inf
            out["eps_bad"] = self.eps(bad) if bad is not None else 0.0
            return out
        eps_ok, eps_bad = self.eps(ok), self.eps(bad)
        for it in range(_MAX_BISECTIONS):
            between = (self.grid > eps_bad) & (self.grid < eps_ok)
            if not np.any(between):
                break
            mid = math.sqrt(ok * bad)
            if self.violated(mid, alpha, beta):
                bad, eps_bad = mid, self.eps(mid)
            else:
                ok, eps_ok = mid, self.eps(mid)
            out["iterations"] = it + 1
        out.update(sigma_ok=ok, sigma_bad=bad, eps_ok=eps_ok, eps_bad=eps_bad)
        return out

    def smallest_not_violated(self, b: dict) -> float:
        """Algorithm 2's answer: the smallest grid eps >= eps(sigma_ok)."""
        if b["sigma_ok"] is None:
            return math.inf
        if b["sigma_bad"] is None:
            return float(self.grid[0])
        above = self.grid[self.grid >= b["eps_ok"]]
        return float(above[0]) if above.size else math.inf

    def largest_violated(self, b: dict) -> float:
        """The largest grid eps <= eps(sigma_bad) (0 if none)."""
        if b["sigma_bad"] is None:
            return 0.0
        if b["sigma_ok"] is None:
            return float(self.grid[-1])
        below = self.grid[self.grid <= b["eps_bad"]]
        return float(below[-1]) if below.size else 0.0


class TradeoffAudit(AbstractAudit):
    """Algorithm 2 of Annamalai (2024): observed FPR-FNR curve against composition's.

    See the module docstring. `eps_lower` is a rigorous (eps, delta) lower bound
    (held-out Clopper-Pearson, joint confidence c, no assumption);
    `extras["eps_composition_violated"]` the composition-equivalent epsilon whose curve
    the held-out rates certifiably violate (an index, not a bound on eps at delta);
    `eps_point` its raw-rate estimate at the held-out thresholds;
    `extras["eps_algorithm2"]` the paper's own estimate (every threshold, optimistic).

    Attributes:
        confidence: c in (0.5, 1).
        threshold_selection: only `"split"`: the thresholds are always chosen on one half
            and certified on the other.
        num_thresholds: m >= 1, the thresholds chosen on the first half by their
            violation of composition's curves and tested on the second (Bonferroni over
            them and the one threshold chosen for the (eps, delta) bound).
        seed: seed of `np.random.default_rng` for the split.
        min_count: the point estimate uses held-out thresholds with at least this many
            false positives and false negatives (Algorithm 2's own number uses every
            threshold with at least one of each, as the paper).
        eps_grid: the grid of epsilons (default `PAPER_EPS_GRID`), increasing.
        value_discretization_interval: PLD grid spacing of the composition curves.
        sides: `"two"` (default) or `"one"`: which (eps, delta) inequalities `eps_lower`
            reads (`EpsDeltaAudit`'s; both rates bounded at the same levels either way).
            The composition index is unchanged.

    Pure DP is refused (`delta=0` raises a ValueError): composition's curves are indexed
    by their eps at delta, which is infinite at delta = 0 for every noise multiplier
    (Gaussian noise); `"eps_delta"` gives the pure-DP bound.

    Example:
        >>> import numpy as np
        >>> from advsim import Accounting, Scores
        >>> rng = np.random.default_rng(0)
        >>> mu = 1.0  # scores from the exact worst pair of 100 Gaussian steps, sigma = 10
        >>> s = Scores(rng.normal(mu, 1.0, 10**5), rng.normal(0.0, 1.0, 10**5))
        >>> acc = Accounting(100, 1.0, 10.0, tuple(range(1, 101)))
        >>> r = TradeoffAudit()(s, delta=1e-5, accounting=acc)  # truth: eps = 4.38
        >>> bool(r.eps_lower <= 4.38), r.eps_point >= 3.5
        (True, True)
    """

    confidence: float = eqx.field(static=True, default=0.95)
    threshold_selection: str = eqx.field(static=True, default="split")
    num_thresholds: int = eqx.field(static=True, default=1)
    seed: int = eqx.field(static=True, default=0, converter=_seed_or_draw)
    min_count: int = eqx.field(static=True, default=50)
    eps_grid: tuple = eqx.field(static=True, default=PAPER_EPS_GRID)
    value_discretization_interval: float = eqx.field(static=True, default=TRADEOFF_VDI)
    sides: str = eqx.field(static=True, default="two")

    method: ClassVar[str] = "tradeoff"
    pure_dp_refusal: ClassVar[str | None] = (
        "composition's trade-off curves are indexed by their eps at delta, which is infinite "
        "at delta = 0 for every noise multiplier (Gaussian noise); pass a delta > 0 (e.g. "
        "delta=1e-5), or method='eps_delta' for a pure-DP bound"
    )
    threshold_selections: ClassVar[tuple[str, ...]] = ("split",)
    assumption: ClassVar[str] = (
        "none for eps_lower (the composition curve of the run's q and T is only the yardstick "
        "of eps_composition_violated)"
    )

    def __check_init__(self):
        check_in_interval("confidence", self.confidence, 0.5, 1.0)
        if self.threshold_selection != "split":
            raise ValueError(
                "threshold_selection must be 'split' for the tradeoff audit (its thresholds "
                f"are always certified on held-out runs), got {self.threshold_selection!r}"
            )
        check_int("num_thresholds", self.num_thresholds, minimum=1)
        check_int("seed", self.seed, minimum=0)
        check_int("min_count", self.min_count, minimum=1)
        check_sides(self)
        check_positive("value_discretization_interval", self.value_discretization_interval)
        grid = np.asarray(self.eps_grid, np.float64)
        if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
            raise ValueError(f"eps_grid must be a non-empty sequence of finite eps > 0, got {grid}")
        if np.any(np.diff(grid) <= 0):
            raise ValueError("eps_grid must be strictly increasing")

    def context(self, accounting) -> Accounting:
        if not isinstance(accounting, Accounting):
            raise ValueError(
                "the 'tradeoff' audit needs accounting=Accounting(...) of the audited run "
                f"(its q and T set the composition curves), got {accounting!r}"
            )
        return accounting

    def _witnesses(self, sel_in, sel_out, search, a: float, delta: float):
        """The thresholds to certify on the other half, chosen on this one (sorted scores
        of each world): the `num_thresholds` farthest below the composition curve at the
        search's sigma, and the one with the best (eps, delta) objective, for eps_lower.
        Returns `(candidates, witnesses)`."""
        cands = candidate_thresholds(sel_in, sel_out)
        fp, fn = counts_at(sel_in, sel_out, cands)
        a_sel = a / cands.size
        alpha_sel = clopper_pearson_upper(fp, sel_out.size, a_sel)
        beta_sel = clopper_pearson_upper(fn, sel_in.size, a_sel)
        chosen = search.boundary(alpha_sel, beta_sel)
        sigma_rank = chosen["sigma_bad"] if chosen["sigma_bad"] is not None else search.sigma0
        margin = search.curve(sigma_rank)(alpha_sel) - beta_sel
        m = min(self.num_thresholds, cands.size)
        by_margin = np.argsort(-margin, kind="stable")[:m]
        terms = eps_delta_terms(alpha_sel, beta_sel, delta, valid_tnr=self.sides == "two")
        by_eps = int(np.argmax(np.maximum(*terms)))
        return cands, np.unique(cands[np.append(by_margin, by_eps)])

    def __call__(
        self, scores: Scores, *, delta: float, accounting: Accounting | None = None
    ) -> AuditResult:
        """Audits `scores` (higher = canary in) against composition at `delta`.

        Args:
            scores: both worlds' scores.
            delta: the delta of the grid's epsilons, in (0, 1) (0 is refused: see the
                class docstring).
            accounting: the run's q, T and canary steps (its sigma starts the search).

        Returns:
            An `AuditResult` (method "tradeoff"; `rigorous` refers to `eps_lower`).

        Raises:
            ValueError: bad delta, fewer than 2 scores per world, no accounting.
        """
        delta, accounting, cin, cout = _prepare(self, scores, delta, accounting)
        grid = np.asarray(self.eps_grid, np.float64)
        search = _Search(accounting, delta, grid, float(self.value_discretization_interval))

        # -- Algorithm 2 (raw rates, every threshold): the point estimate -----------------
        alpha, beta, _ = observed_tradeoff(cin, cout)
        keep = (alpha * cout.size >= 1) & (beta * cin.size >= 1)  # the paper's rule
        point = search.boundary(alpha[keep], beta[keep])
        eps_algorithm2 = search.smallest_not_violated(point)

        # -- rigorous: choose on one half, certify on the other --------------------------
        a = (1.0 - self.confidence) / 2.0
        rng = np.random.default_rng(self.seed)
        sel_in, cnt_in = split_halves(cin, rng)
        sel_out, cnt_out = split_halves(cout, rng)
        sel_in, sel_out = np.sort(sel_in), np.sort(sel_out)
        cands, witnesses = self._witnesses(sel_in, sel_out, search, a, delta)
        m = witnesses.size
        c_in, c_out = np.sort(cnt_in), np.sort(cnt_out)
        fp_h, fn_h = counts_at(c_in, c_out, witnesses)
        alpha_up = clopper_pearson_upper(fp_h, c_out.size, a / m)
        beta_up = clopper_pearson_upper(fn_h, c_in.size, a / m)
        eps_tpr, eps_tnr = eps_delta_terms(alpha_up, beta_up, delta, valid_tnr=self.sides == "two")
        eps_each = np.maximum(np.maximum(eps_tpr, eps_tnr), 0.0)
        best = int(np.argmax(eps_each))
        eps_lower = float(eps_each[best])
        lower = search.boundary(alpha_up, beta_up)
        eps_violated = search.largest_violated(lower)
        # Raw rates at the same held-out thresholds: an estimate without the upward bias
        # of the maximum over every threshold that the paper's rule carries.
        # (Only thresholds with min_count errors of each kind: a raw rate of 0 is no rate.)
        ok = (fp_h >= self.min_count) & (fn_h >= self.min_count)
        held = search.boundary(fp_h[ok] / c_out.size, fn_h[ok] / c_in.size)
        eps_point = search.smallest_not_violated(held) if np.any(ok) else None
        point_note = (
            None
            if eps_point is not None
            else f"too few errors to estimate the rates: no held-out threshold has "
            f"min_count = {self.min_count} false positives and false negatives "
            f"({int(c_out.size)} and {int(c_in.size)} runs); more runs are needed"
        )
        guarantee = _guarantee(lower, accounting, delta, m)

        extras = {
            "assumption": self.assumption,
            "point_rule": "held_out_raw_rates_composition_equivalent",
            "eps_composition_violated": eps_violated,
            "eps_algorithm2": eps_algorithm2,
            "eps_algorithm2_optimistic": True,
            "eps_algorithm2_boundary": float(point["eps_ok"]),
            "eps_composition_violated_boundary": float(lower["eps_bad"]),
            "eps_point_boundary": float(held["eps_ok"]) if np.any(ok) else None,
            "sigma_boundary_point": point["sigma_ok"],
            "sigma_composition_violated": lower["sigma_bad"],
            "bisection_steps": int(point["iterations"] + lower["iterations"]),
            "num_thresholds": int(m),
            "witness_thresholds": witnesses.tolist(),
            "n_candidates": int(cands.size),
            "n_observations_point": int(np.count_nonzero(keep)),
            "min_count": int(self.min_count),
            "eps_grid": [float(grid[0]), float(grid[-1]), int(grid.size)],
            "value_discretization_interval": float(self.value_discretization_interval),
            "threshold_selection": "split",
            "sides": self.sides,
            "seed": int(self.seed),
            "n_in_total": int(cin.size),
            "n_out_total": int(cout.size),
        }
        return AuditResult(
            method=self.method,
            eps_lower=eps_lower,
            eps_point=eps_point,
            eps_point_note=point_note,
            delta=delta,
            confidence=self.confidence,
            guarantee=guarantee,
            threshold=float(witnesses[best]),
            fpr=float(fp_h[best] / c_out.size),
            fnr=float(fn_h[best] / c_in.size),
            fpr_upper=float(alpha_up[best]),
            fnr_upper=float(beta_up[best]),
            n_in=int(c_in.size),
            n_out=int(c_out.size),
            extras=extras,
        )


def _guarantee(lower, accounting, delta: float, m: int) -> Guarantee:
    """What a trade-off audit's eps_lower certifies (Bonferroni over its `m` held-out
    thresholds), with the composition curve it violates, if any (`certified`)."""
    certified = None
    if lower["sigma_bad"] is not None:
        certified = (
            "the trade-off curve lies below that of DP-SGD with composition at noise "
            f"multiplier {lower['sigma_bad']:.6g} (q = {accounting.sampling_prob:g}, "
            f"{accounting.num_canary_steps} canary steps; composition-equivalent eps "
            f"{lower['eps_bad']:.4g} at delta = {delta:g}): the release is not "
            "(eps', delta(eps'))-DP for some eps' of that curve's profile, which does "
            "not bound its eps at this delta"
        )
    return Guarantee(
        statement="eps_delta_lower_bound",
        assumption="none",
        held_out=True,
        multiplicity=f"Bonferroni over {m} thresholds chosen on the other half",
        certified=certified,
    )


def tradeoff_audit(
    scores: Scores,
    *,
    delta: float,
    accounting: Accounting,
    confidence: float = 0.95,
    **kwargs,
) -> AuditResult:
    """`TradeoffAudit(confidence=confidence, **kwargs)(scores, delta=, accounting=)`."""
    return TradeoffAudit(confidence=confidence, **kwargs)(
        scores, delta=delta, accounting=accounting
    )

"""Auditing within the last-iterate heuristic's family: estimate only the noise multiplier.

Section 3.1 of Steinke et al., "The Last Iterate Advantage" (arXiv:2410.06186): "we assume
the adversary knows the sampling rate and the number of iterations and is only estimating
the noise multiplier used in DP-SGD, from which the reported privacy parameters (eps and
delta) are derived."
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import scipy.optimize

import advsim.bounds as _bounds
from advsim import Accounting

from ._assumption_families import check_heuristic_family
from ._base import AbstractAssumedAudit

__all__ = ["HeuristicFamilyAudit"]

# Past this sigma no test is treated as excluding anything (sigma_upper = inf, eps 0).
_SIGMA_CAP = 1e8
# The trade-off curve stops changing once the smallest positive shift is this many
# noise standard deviations (Phi(z - 40) underflows for every z a test can reach).
_FLOOR_SHIFT = 40.0
# Width, in log(sigma), of the step that certifies the root is excluded.
_CERTIFY_STEP = 1e-9


@dataclasses.dataclass(frozen=True)
class _FamilyContext:
    accounting: Accounting
    support: np.ndarray
    probs: np.ndarray
    sqrt_steps: float
    sigma_floor: float

    def tradeoff(self, alpha: np.ndarray, sigma: float) -> np.ndarray:
        """f_sigma(alpha): the least FNR at FPR alpha for P vs Q at noise multiplier sigma."""
        return np.asarray(
            _bounds.mixture_tradeoff(alpha, self.support, self.probs, self.sqrt_steps * sigma),
            dtype=np.float64,
        )


def sigma_upper_bound(fpr: np.ndarray, fnr: np.ndarray, ctx: _FamilyContext) -> tuple:
    r"""The smallest over tests of $\sup\{\sigma : f_\sigma(\mathrm{FPR}_i) \le \mathrm{FNR}_i\}$.

    $f_\sigma$ increases with $\sigma$, so test i excludes exactly the sigmas above its
    root. $g(\sigma) = \max_i (f_\sigma(\mathrm{FPR}_i) - \mathrm{FNR}_i)$ is continuous and
    increasing; its root is the smallest of the per-test roots, found by Brent's method
    in $\log\sigma$ with every evaluation vectorised over the tests. The returned sigma is
    then certified: $g > 0$ there, so the true sigma lies strictly below it (up to the
    statistical error of the rates).

    Returns:
        `(sigma_upper, index, at_floor)`: `sigma_upper` is `inf` when no test excludes any
        sigma up to `_SIGMA_CAP` (some test needs `FNR < 1 - FPR` to exclude anything);
        `index` is the binding test (or the one closest to binding); `at_floor` says that
        even the smallest distinguishable sigma is excluded, i.e. the rates are
        incompatible with the family (then `sigma_upper` is that floor).
    """
    fpr = np.atleast_1d(np.asarray(fpr, float))
    fnr = np.atleast_1d(np.asarray(fnr, float))
    slack = (1.0 - fpr) - fnr  # f_inf(a) - b: > 0 iff the test can exclude some sigma
    active = np.flatnonzero(slack > 0)
    if active.size == 0:
        return math.inf, int(np.argmax(slack)), False
    a, b = fpr[active], fnr[active]

    def g(log_sigma: float) -> float:
        return float(np.max(ctx.tradeoff(a, math.exp(log_sigma)) - b))

    def binding(log_sigma: float) -> int:
        return int(active[np.argmax(ctx.tradeoff(a, math.exp(log_sigma)) - b)])

    lo = math.log(ctx.sigma_floor)
    if g(lo) > 0:
        return ctx.sigma_floor, binding(lo), True
    hi, step = max(lo + 1.0, 0.0), 1.0
    while g(hi) <= 0:
        lo, hi, step = hi, hi + step, 2 * step
        if hi > math.log(_SIGMA_CAP):
            return math.inf, int(active[np.argmax(slack[active])]), False
    root = scipy.optimize.brentq(g, lo, hi, xtol=1e-12, rtol=1e-14)
    certified = root + _CERTIFY_STEP
    while certified < hi and g(certified) <= 0:
        certified = min(hi, certified + 2 * (certified - root))
    certified = min(certified, hi)
    return math.exp(certified), binding(certified), False


def _heuristic_epsilon(delta: float, sigma: float, ctx: _FamilyContext) -> float:
    if math.isinf(sigma):
        return 0.0
    acc = ctx.accounting
    return float(
        _bounds.heuristic_epsilon(
            delta,
            acc.steps,
            acc.sampling_prob,
            sigma,
            canary_steps=acc.num_canary_steps,
        )
    )


class HeuristicFamilyAudit(AbstractAssumedAudit):
    r"""Upper-bounds the noise multiplier within the heuristic's family, reports its eps.

    The family (Theorem 1 of arXiv:2410.06186, linear losses, last iterate only): with T
    steps, sampling probability q, n_c steps that can carry the canary and noise
    multiplier sigma, the projected last model is

    $$P = \mathrm{Binomial}(n_c, q) + N(0, T\sigma^2) \text{ (canary in)}, \qquad
      Q = N(0, T\sigma^2) \text{ (canary out)},$$

    in units where the canary moves the projection by 1 per inclusion. The likelihood
    ratio of P to Q is increasing, so the best test at FPR alpha has FNR
    $f_\sigma(\alpha) = \sum_k p_k \Phi(\Phi^{-1}(1-\alpha) - k/(\sqrt{T}\sigma))$
    (`advsim.bounds.mixture_tradeoff` with `advsim.bounds.binomial_mixture(n_c, q)`), and
    $f_\sigma$ increases with sigma. Any test has $\mathrm{FNR} \ge f_\sigma(\mathrm{FPR})$
    at the true sigma; with Clopper-Pearson upper bounds on both rates (joint confidence
    c), the true sigma is at most

    $$\sigma_{upper} = \sup\{\sigma : f_\sigma(\overline{\mathrm{FPR}})
        \le \overline{\mathrm{FNR}}\}$$

    (`inf` when no sigma is excluded), and
    `eps_lower = heuristic_epsilon(delta, T, q, sigma_upper, canary_steps=n_c)`, which is
    0 at `sigma_upper = inf`. This is the auditing of Section 3.1 of arXiv:2410.06186
    (the adversary knows T and q and estimates only sigma), read off one threshold test
    with Clopper-Pearson intervals as in Nasr et al. 2023 (arXiv:2302.07956).

    Only the rates of a threshold test enter, so any score that is monotone in the
    adversary's evidence works; it need not be on the scale of the family (the projected
    model itself). T, q and n_c come from `accounting`, which must have one learning rate:
    an accounting with a schedule (`Accounting.step_sizes`) is refused with a ValueError
    naming it (the family, and the held-out check of it, are the constant-rate pair).

    Assumes: under `"split"`, `sigma_upper` is a rigorous upper bound (probability >= c)
    on the noise multiplier *of a run whose privacy is exactly that of the family*; eps
    follows. For any other mechanism (one that leaks more or less than the linear
    last-iterate process), `eps_lower` is the heuristic epsilon of the best-fitting
    family member, an estimate, not a bound on that mechanism's eps: a counterexample is
    exactly a mechanism outside the family, so `guarantee.assumption ==
    "heuristic_family"` and `rigorous` is False. If the bounded rates are incompatible
    with every sigma (`extras["sigma_upper_at_floor"]`), the family does not fit and
    `eps_lower` is None with the reason in `eps_lower_note` (it used to return the
    floor's heuristic eps: 29387 on Gaussian scores at T = 10, q = 0.1). The held-out
    runs test the assumption (`result.assumption_check`,
    `audits.check_heuristic_family` at level `assumption_level`, warning
    `AssumptionRejectedWarning` on rejection); a non-rejection does not make
    `eps_lower` assumption-free.

    `sides`: only `"two"`. The test's constraint $\mathrm{FNR} \ge f_\sigma(\mathrm{FPR})$
    is the same in both orders of the pair (the swapped pair's curve is the inverse), and
    the eps reported, `heuristic_epsilon`, is the larger over both orders; the family has
    no one-order eps here, so `sides="one"` is refused. Pure DP is refused too (`delta=0`
    raises a ValueError): every member of the family has Gaussian noise and is (eps, 0)-DP
    for no finite eps, so any `sigma_upper < inf` would give `eps_lower = inf` from the
    assumption, not from the runs; use `"eps_delta"` for a pure-DP bound.

    Attributes:
        confidence, threshold_selection, seed, min_count: those of every threshold audit
            (`AbstractThresholdAudit`).
        sides: `"two"` only (see above).
        assumption_level: level of the held-out test of the family assumption (default
            0.05: a true assumption is rejected with probability at most 5%; half of it
            exact (the band), half asymptotic (the binned test), `AssumptionCheck`).

    Example:
        >>> import numpy as np
        >>> from advsim import Accounting, Scores
        >>> from advsim.audits import HeuristicFamilyAudit
        >>> T, q, sigma = 100, 0.1, 1.0
        >>> rng = np.random.default_rng(0)
        >>> n = 10**5
        >>> s = Scores(rng.binomial(T, q, n) + rng.normal(0, np.sqrt(T) * sigma, n),
        ...            rng.normal(0, np.sqrt(T) * sigma, n))
        >>> acc = Accounting(T, q, sigma, canary_steps=tuple(range(1, T + 1)))
        >>> r = HeuristicFamilyAudit()(s, delta=1e-5, accounting=acc)
        >>> r.extras["sigma_upper"] >= sigma
        True
    """

    method: ClassVar[str] = "family"
    pure_dp_refusal: ClassVar[str | None] = (
        "every member of the heuristic's family has Gaussian noise and is (eps, 0)-DP for no "
        "finite eps, so any sigma_upper < inf would give eps_lower = inf, a statement of the "
        "family assumption rather than of the runs; pass a delta > 0 (e.g. delta=1e-5), or "
        "method='eps_delta' for a pure-DP bound"
    )
    one_sided_refusal: ClassVar[str | None] = (
        "its eps is the heuristic's over both orders of the neighbouring pair (the family has "
        "no one-order eps here); use sides='two', or method='eps_delta' for a one-sided bound"
    )
    assumption_kind: ClassVar[str] = "heuristic_family"
    assumption: ClassVar[str] = (
        "the run's privacy is exactly that of the last-iterate heuristic family "
        "Binomial(n_c, q) + N(0, T sigma^2) vs N(0, T sigma^2) with known T, q, n_c; "
        "sigma_upper bounds its noise multiplier"
    )

    def context(self, accounting) -> _FamilyContext:
        if accounting is None:
            raise ValueError(
                "the 'family' audit needs accounting=Accounting(steps, sampling_prob, "
                "noise_multiplier, canary_steps) of the audited run (it uses T, q and the "
                "number of canary steps; the noise multiplier is what it estimates)"
            )
        if not isinstance(accounting, Accounting):
            raise TypeError(
                f"accounting must be an advsim.Accounting, got {type(accounting).__name__}"
            )
        accounting.refuse_schedule(
            "the 'family' audit", "it assumes the constant-rate heuristic family "
            "Binomial(n_c, q) + N(0, T sigma^2) vs N(0, T sigma^2), but a schedule's last "
            "iterate is N(X, s^2) vs N(0, s^2) with X = sum_t eta_t b_t and s^2 = sigma^2 "
            "sum_t eta_t^2; use method='eps_delta' (assumption-free), or "
            "audits.certify_violation(scores, 'heuristic', accounting) for the heuristic at "
            "this schedule"
        )  # fmt: skip
        support, probs = _bounds.binomial_mixture(
            accounting.num_canary_steps, accounting.sampling_prob
        )
        support = np.asarray(support, dtype=np.float64)
        probs = np.asarray(probs, dtype=np.float64)
        sqrt_steps = math.sqrt(accounting.steps)
        smallest_shift = float(np.min(support[support > 0]))
        return _FamilyContext(
            accounting=accounting,
            support=support,
            probs=probs,
            sqrt_steps=sqrt_steps,
            sigma_floor=smallest_shift / (_FLOOR_SHIFT * sqrt_steps),
        )

    def select(self, fpr_ub, fnr_ub, delta, ctx) -> int:
        return sigma_upper_bound(fpr_ub, fnr_ub, ctx)[1]

    def bound(self, fpr_ub, fnr_ub, delta, ctx) -> tuple:
        sigma, _, at_floor = sigma_upper_bound(fpr_ub, fnr_ub, ctx)
        extras = {"sigma_upper": sigma, "sigma_upper_at_floor": at_floor}
        if at_floor:
            # Rates that even the least private member of the family cannot produce: the
            # family does not fit, and no member's epsilon is a bound on this run.
            extras["eps_lower_note"] = (
                "the family does not fit: the bounded rates "
                f"(FPR <= {fpr_ub:.3g}, FNR <= {fnr_ub:.3g}) lie below the trade-off curve "
                f"of every noise multiplier of the heuristic's family (T = "
                f"{ctx.accounting.steps}, q = {ctx.accounting.sampling_prob:g}, n_c = "
                f"{ctx.accounting.num_canary_steps}) down to sigma = {ctx.sigma_floor:.3g}; "
                "use an assumption-free audit (eps_delta) or certify_violation"
            )
            return None, extras
        return _heuristic_epsilon(delta, sigma, ctx), extras

    def check_assumption(self, sorted_in, sorted_out, ctx):
        return check_heuristic_family(
            sorted_in, sorted_out, ctx.accounting, level=self.assumption_level
        )

    def point(self, fp, fn, n_out, n_in, delta, ctx) -> tuple:
        ok = (fp >= self.min_count) & (fn >= self.min_count)
        # Raw rates that no sigma of the family can produce (FNR below the curve of the
        # smallest resolvable sigma: sampling noise, or scores not from the family) are no
        # estimate of sigma; keeping them sent the estimate to the floor (eps ~ 7000 on
        # 2000 low-signal runs).
        with np.errstate(divide="ignore", invalid="ignore"):
            reachable = ctx.tradeoff(fp / n_out, ctx.sigma_floor) <= fn / n_in
        ok = np.flatnonzero(ok & reachable)
        if ok.size == 0:
            note = (
                "the raw rates lie outside the family (below the trade-off curve of its "
                "least private member)"
            )
            return 0.0, -1, {"sigma_point": None, "note": note}
        sigma, idx, _ = sigma_upper_bound(fp[ok] / n_out, fn[ok] / n_in, ctx)
        return _heuristic_epsilon(delta, sigma, ctx), int(ok[idx]), {"sigma_point": sigma}

"""(eps, delta)-DP auditing of one threshold test with Clopper-Pearson intervals."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._base import AbstractThresholdAudit

__all__ = ["EpsDeltaAudit"]


def _log_ratio(num: np.ndarray, den: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """`log(num) - log(den)` where `valid & (num > 0) & (den > 0)`, else `-inf`; no NaN."""
    num, den = np.broadcast_arrays(np.asarray(num, float), np.asarray(den, float))
    ok = valid & (num > 0) & (den > 0)
    out = np.full(num.shape, -np.inf)
    out[ok] = np.log(num[ok]) - np.log(den[ok])
    return out


def eps_delta_terms(fpr, fnr, delta: float, valid_tpr=True, valid_tnr=True) -> tuple:
    r"""The two (eps, delta)-DP inequalities of one test, solved for eps.

    (eps, delta)-DP (both orders of the neighbouring pair) requires, for the test's
    rejection region S = {score >= tau},
    $P(S) \le e^\epsilon Q(S) + \delta$ and $Q(S^c) \le e^\epsilon P(S^c) + \delta$, i.e.

    $$e^\epsilon \ge \frac{1 - \mathrm{FNR} - \delta}{\mathrm{FPR}}, \qquad
      e^\epsilon \ge \frac{1 - \mathrm{FPR} - \delta}{\mathrm{FNR}}.$$

    The first is the pair in the order (canary in, canary out), the second in the other
    order; `sides="one"` keeps only the first (mask the second with `valid_tnr=False`).
    Both hold at delta = 0 (pure DP). Both right-hand sides only shrink when FPR and FNR
    are replaced by upper bounds. The
    first is computed as `log((1 - fnr) - delta) - log(fpr)`, the same floating-point
    operations as `jax_privacy.auditing.CanaryScoreAuditor._epsilon_clopper_pearson_all_
    thresholds`, and the second with the rates swapped. A term whose numerator is <= 0
    (or that is masked out) is `-inf`: it bounds nothing.

    Returns:
        `(eps_tpr, eps_tnr)`, arrays of the two log ratios.
    """
    fpr = np.asarray(fpr, float)
    fnr = np.asarray(fnr, float)
    eps_tpr = _log_ratio((1.0 - fnr) - delta, fpr, np.asarray(valid_tpr))
    eps_tnr = _log_ratio((1.0 - fpr) - delta, fnr, np.asarray(valid_tnr))
    return eps_tpr, eps_tnr


class EpsDeltaAudit(AbstractThresholdAudit):
    r"""Lower-bounds eps directly from the (eps, delta)-DP inequalities of one test.

    At the chosen threshold, with Clopper-Pearson upper bounds
    $\overline{\mathrm{FPR}}, \overline{\mathrm{FNR}}$ (joint confidence c),

    $$\epsilon_{lower} = \max\Big(0,
        \log\frac{1 - \delta - \overline{\mathrm{FNR}}}{\overline{\mathrm{FPR}}},
        \log\frac{1 - \delta - \overline{\mathrm{FPR}}}{\overline{\mathrm{FNR}}}\Big),$$

    the hypothesis-testing reading of (eps, delta)-DP (Kairouz, Oh & Viswanath 2015;
    used for auditing by Jagielski et al. 2020 and Nasr et al. 2021/2023,
    arXiv:2302.07956, Section 2). It is the same bound as jax_privacy's
    `CanaryScoreAuditor.epsilon_clopper_pearson(one_sided=False)` at a fixed threshold;
    with `sides="one"` only the first log ratio is kept (TPR against FPR: "score high
    means canary in"), jax_privacy's `one_sided=True`. Either way both rates are bounded
    at level (1 - c) / 2 each (the first ratio needs both), and no further split is made
    between the two ratios: they are read off the same jointly valid bounds.

    Pure DP: the inequalities hold at delta = 0, so `delta=0` gives a lower bound on the
    eps of (eps, 0)-DP (the log of a ratio of rates), the largest of all deltas; compare
    it with a claimed eps at delta = 0, not with one at delta > 0.

    Assumes nothing about the mechanism beyond (eps, delta)-DP: under `"split"`,
    `eps_lower` is a rigorous lower bound with probability >= `confidence`. It needs many
    runs to certify a large eps (the bound is at most about `log(n / log(1/alpha))`).

    Attributes:
        confidence, threshold_selection, seed, min_count: those of every threshold audit
            (`AbstractThresholdAudit`); `"split"` makes `eps_lower` rigorous, `"same"`
            optimistic.
        sides: `"two"` (default: the larger of the two log ratios) or `"one"` (the first
            only).

    Example:
        >>> import numpy as np
        >>> from advsim import Scores
        >>> from advsim.audits import EpsDeltaAudit
        >>> rng = np.random.default_rng(0)
        >>> s = Scores(rng.normal(2.0, 1.0, 10**5), rng.normal(0.0, 1.0, 10**5))
        >>> r = EpsDeltaAudit()(s, delta=1e-5)
        >>> r.rigorous and 0 < r.eps_lower
        True
    """

    method: ClassVar[str] = "eps_delta"
    assumption_kind: ClassVar[str] = "none"
    assumption: ClassVar[str] = "none beyond (eps, delta)-DP of the run"

    def context(self, accounting):
        return None

    def select(self, fpr_ub, fnr_ub, delta, ctx) -> int:
        terms = eps_delta_terms(fpr_ub, fnr_ub, delta, valid_tnr=self.sides == "two")
        return int(np.argmax(np.maximum(*terms)))

    def bound(self, fpr_ub, fnr_ub, delta, ctx) -> tuple:
        two = self.sides == "two"
        terms = eps_delta_terms(fpr_ub, fnr_ub, delta, valid_tnr=two)
        eps_tpr, eps_tnr = (float(t) for t in terms)
        eps = max(0.0, eps_tpr, eps_tnr)
        # With sides="one" the second ratio is not read: None, not a number.
        return eps, {"eps_tpr_fpr": eps_tpr, "eps_tnr_fnr": eps_tnr if two else None}

    def point(self, fp, fn, n_out, n_in, delta, ctx) -> tuple:
        eps_tpr, eps_tnr = eps_delta_terms(
            fp / n_out,
            fn / n_in,
            delta,
            valid_tpr=fp >= self.min_count,
            valid_tnr=(fn >= self.min_count) & (self.sides == "two"),
        )
        both = np.maximum(eps_tpr, eps_tnr)
        best = int(np.argmax(both))
        if not np.isfinite(both[best]):
            return 0.0, -1, {}
        return max(0.0, float(both[best])), best, {}

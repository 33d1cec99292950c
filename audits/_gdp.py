"""Gaussian-DP auditing of one threshold test (Nasr et al. 2023, arXiv:2302.07956)."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import numpy as np
import scipy.stats

import advsim.bounds as _bounds
from advsim._accounting import Accounting
from advsim._scores import Scores

from ._base import AbstractAudit, check_config, run_threshold_audit
from ._result import AuditResult

__all__ = ["GaussianDPAudit"]


def gdp_mu(fpr, fnr) -> np.ndarray:
    r"""$\Phi^{-1}(1 - \mathrm{FPR}) - \Phi^{-1}(\mathrm{FNR})$, elementwise, never NaN.

    For rates in (0, 1]: `isf(1) = -inf` and `ppf(1) = +inf`, so a rate of 1 gives
    `-inf` (no evidence), never `inf - inf`. Not clamped here; callers clamp at 0.
    """
    return scipy.stats.norm.isf(fpr) - scipy.stats.norm.ppf(fnr)


def _gdp_epsilon(delta: float, mu: float) -> float:
    return 0.0 if mu <= 0 else float(_bounds.gdp_epsilon(delta, mu))


class GaussianDPAudit(AbstractAudit):
    r"""Lower-bounds the Gaussian-DP parameter $\mu$ of the run, then converts it to eps.

    A mechanism is $\mu$-GDP iff every test has
    $\mathrm{FNR} \ge \Phi(\Phi^{-1}(1 - \mathrm{FPR}) - \mu)$ (Dong, Roth & Su,
    arXiv:1905.02383, Definition 2.6 and Eq. (6)). At the chosen threshold, with
    Clopper-Pearson upper bounds $\overline{\mathrm{FPR}}, \overline{\mathrm{FNR}}$ that
    hold jointly with probability $\ge c$,

    $$\mu \ge \mu_{lower} = \max(0, \Phi^{-1}(1 - \overline{\mathrm{FPR}})
        - \Phi^{-1}(\overline{\mathrm{FNR}})),$$

    and `eps_lower = gdp_epsilon(delta, mu_lower)` (Corollary 2.13 of arXiv:1905.02383),
    as in Nasr et al. 2023 (arXiv:2302.07956, Section 4).

    Assumes: `mu_lower` is a rigorous bound on the smallest $\mu$ for which the run is
    $\mu$-GDP (under `"split"`). The conversion to `eps_lower` further assumes that the
    run's trade-off curve *is* a Gaussian one, $G_\mu$ for some $\mu$ (true for the
    Gaussian mechanism and full-batch DP-SGD on linear losses, not for subsampled
    DP-SGD in general); without it, `eps_lower` is an estimate, not a bound.

    Only tests in the stated direction ("in" iff `score >= tau`) count: scores with no
    signal, or separated the wrong way, give `mu_lower = 0` and `eps_lower = 0` (unlike
    `jax_privacy`'s `epsilon_from_gdp`, which takes $|\mu|$). Negate scores that are
    lower for "canary in" before auditing.

    Attributes:
        confidence: c in (0.5, 1).
        threshold_selection: `"split"` (rigorous) or `"same"` (optimistic).
        seed: seed for the split.
        min_count: least number of false positives and of false negatives at a threshold
            used by the point estimate.

    Example:
        >>> import numpy as np
        >>> from advsim import Scores
        >>> from advsim.audits import GaussianDPAudit
        >>> rng = np.random.default_rng(0)
        >>> s = Scores(rng.normal(1.0, 1.0, 10**5), rng.normal(0.0, 1.0, 10**5))
        >>> r = GaussianDPAudit()(s, delta=1e-5)
        >>> 0.9 < r.extras["mu_lower"] <= 1.0
        True
    """

    confidence: float = eqx.field(default=0.95, static=True)
    threshold_selection: str = eqx.field(default="split", static=True)
    seed: int = eqx.field(default=0, static=True)
    min_count: int = eqx.field(default=50, static=True)

    method: ClassVar[str] = "gdp"
    assumption: ClassVar[str] = (
        "mu_lower bounds the GDP parameter; eps_lower = gdp_epsilon(delta, mu_lower) "
        "assumes the trade-off curve is exactly Gaussian (G_mu)"
    )

    def __check_init__(self):
        check_config(self)

    def __call__(
        self, scores: Scores, *, delta: float, accounting: Accounting | None = None
    ) -> AuditResult:
        """Audits `scores`; see the class docstring. `accounting` is not used."""
        return run_threshold_audit(self, scores, delta=delta, accounting=accounting)

    def _context(self, accounting):
        return None

    def _select(self, fpr_ub, fnr_ub, delta, ctx) -> int:
        return int(np.argmax(gdp_mu(fpr_ub, fnr_ub)))

    def _bound(self, fpr_ub, fnr_ub, delta, ctx) -> tuple:
        mu = max(0.0, float(gdp_mu(fpr_ub, fnr_ub)))
        return _gdp_epsilon(delta, mu), {"mu_lower": mu}

    def _point(self, fp, fn, n_out, n_in, delta, ctx) -> tuple:
        ok = np.flatnonzero((fp >= self.min_count) & (fn >= self.min_count))
        if ok.size == 0:
            return 0.0, -1, {"mu_point": 0.0}
        mu = gdp_mu(fp[ok] / n_out, fn[ok] / n_in)
        best = int(np.argmax(mu))
        mu_point = max(0.0, float(mu[best]))
        return _gdp_epsilon(delta, mu_point), int(ok[best]), {"mu_point": mu_point}

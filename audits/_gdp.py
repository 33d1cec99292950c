"""Gaussian-DP auditing of one threshold test (Nasr et al. 2023, arXiv:2302.07956)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import scipy.stats

import advsim.bounds as _bounds

from ._assumption_families import check_gaussian_tradeoff
from ._base import AbstractAssumedAudit

__all__ = ["GaussianDPAudit"]


def gdp_mu(fpr, fnr) -> np.ndarray:
    r"""$\Phi^{-1}(1 - \mathrm{FPR}) - \Phi^{-1}(\mathrm{FNR})$, elementwise, never NaN.

    For rates in (0, 1]: `isf(1) = -inf` and `ppf(1) = +inf`, so a rate of 1 gives
    `-inf` (no evidence), never `inf - inf`. Not clamped here; callers clamp at 0.
    """
    return scipy.stats.norm.isf(fpr) - scipy.stats.norm.ppf(fnr)


def _gdp_epsilon(delta: float, mu: float) -> float:
    return 0.0 if mu <= 0 else float(_bounds.gdp_epsilon(delta, mu))


class GaussianDPAudit(AbstractAssumedAudit):
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

    What is certified (`result.guarantee`): `mu_lower` is assumption-free (under
    `"split"`): the run is certifiably not $\mu'$-GDP for any $\mu' < \mu_{lower}$
    (`guarantee.certified`). The conversion to `eps_lower` assumes that the run's
    trade-off curve *is* a Gaussian one, $G_\mu$ for some $\mu$ (true for the Gaussian
    mechanism and full-batch DP-SGD on linear losses, not for subsampled DP-SGD in
    general), so `guarantee.assumption == "gaussian_tradeoff"` and `rigorous` is False.
    Where the curve is not Gaussian the number can exceed the true eps several times
    (threshold landscape, sigma = 1, B = 1, T = 25: 3.94 against an exact 1.09): the
    eps at delta = 1e-5 is set where $G_\mu$ meets the (eps, delta) boundary, at rates
    near 1e-6 that the runs do not reach. The held-out runs test the assumption
    (`result.assumption_check`, `audits.check_gaussian_tradeoff` at level
    `assumption_level`; a rejection also warns `AssumptionRejectedWarning`); a
    non-rejection does not make `eps_lower` assumption-free.

    Only tests in the stated direction ("in" iff `score >= tau`) count: scores with no
    signal, or separated the wrong way, give `mu_lower = 0` and `eps_lower = 0` (unlike
    `jax_privacy`'s `epsilon_from_gdp`, which takes $|\mu|$). Negate scores that are
    lower for "canary in" before auditing.

    `sides` changes nothing here: $G_\mu$ is symmetric (its inverse is itself), so the
    pair in either order gives the same constraint and the same `mu_lower`, and the eps of
    $G_\mu$ at delta is that of both orders; `"one"` and `"two"` give the same numbers.

    Pure DP is refused (`delta=0` raises a ValueError): $G_\mu$ with $\mu > 0$ is
    (eps, 0)-DP for no finite eps, so at delta = 0 every `mu_lower > 0` would give
    `eps_lower = inf` whatever the runs show; the statement would come from the
    assumption, not the runs. `mu_lower` needs no delta; for a pure-DP bound use
    `"eps_delta"`.

    Attributes:
        confidence, threshold_selection, seed, min_count, sides: those of every threshold
            audit (`AbstractThresholdAudit`).
        assumption_level: level of the held-out test of the Gaussian assumption (default
            0.05: a true assumption is rejected with probability at most 5%; half of it
            exact (the band), half asymptotic (the binned test), `AssumptionCheck`).

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

    method: ClassVar[str] = "gdp"
    pure_dp_refusal: ClassVar[str | None] = (
        "G_mu with mu > 0 is (eps, 0)-DP for no finite eps, so every mu_lower > 0 would "
        "give eps_lower = inf, a statement of the Gaussian assumption rather than of the "
        "runs; pass a delta > 0 (e.g. delta=1e-5), or method='eps_delta' for a pure-DP bound"
    )
    assumption_kind: ClassVar[str] = "gaussian_tradeoff"
    assumption: ClassVar[str] = (
        "mu_lower bounds the GDP parameter; eps_lower = gdp_epsilon(delta, mu_lower) "
        "assumes the trade-off curve is exactly Gaussian (G_mu)"
    )

    def context(self, accounting):
        return None

    def select(self, fpr_ub, fnr_ub, delta, ctx) -> int:
        return int(np.argmax(gdp_mu(fpr_ub, fnr_ub)))

    def bound(self, fpr_ub, fnr_ub, delta, ctx) -> tuple:
        mu = max(0.0, float(gdp_mu(fpr_ub, fnr_ub)))
        return _gdp_epsilon(delta, mu), {"mu_lower": mu}

    def certified(self, extras) -> str:
        return f"the run is not mu-GDP for any mu < mu_lower = {extras['mu_lower']:.6g}"

    def check_assumption(self, sorted_in, sorted_out, ctx):
        return check_gaussian_tradeoff(sorted_in, sorted_out, level=self.assumption_level)

    def point(self, fp, fn, n_out, n_in, delta, ctx) -> tuple:
        ok = np.flatnonzero((fp >= self.min_count) & (fn >= self.min_count))
        if ok.size == 0:
            return 0.0, -1, {"mu_point": None}
        mu = gdp_mu(fp[ok] / n_out, fn[ok] / n_in)
        best = int(np.argmax(mu))
        mu_point = max(0.0, float(mu[best]))
        return _gdp_epsilon(delta, mu_point), int(ok[best]), {"mu_point": mu_point}

r"""The loss-landscape adversary $A_S^h$ and the threshold search of Algorithm 5.

Section 6 and Appendix F of Cebere, Bellet & Papernot, "Tighter Privacy Auditing of
DP-SGD in the Hidden State Threat Model" (arXiv:2405.14457, ICLR 2025).

- `ThresholdAdversary` is $A_S^h$: it crafts the landscape of
  `advsim.mechanisms.ThresholdLandscape` with threshold h (default $h^* = C/2$) and
  scores the last model by its coordinate $\theta_T$ (higher means "canary in": the
  canary moved $\theta_1$ up by C and the landscape keeps the side).
- `ThresholdSearch` is Algorithm 5 (Appendix F; "Algorithm 6" is its caption in the arXiv
  version): a grid of Type I error rates $\alpha_i$, thresholds
  $h_i = F^{-1}(1 - \alpha_i)$ with F the CDF of the out-world law of $\theta_1$,
  $\mathcal{N}(0, \sigma^2 C^2)$ (the test "$\theta_1 > h_i$" then has Type I error
  $\alpha_i$), one landscape per $h_i$, each audited on the same runs' keys, and the
  best kept. The search gives the thresholds and their adversaries; the experiment loop
  (simulate, audit, keep the best) is a driver's job:
  `advsim.experiment.run_threshold_search(search, mechanism, trials, key)`, or
  `advsim.experiment.threshold_search(mechanism, trials, key, alphas=...)`. A plug-in
  never imports a driver.

A note on the maximum: each audit's `eps_lower` holds with its confidence c; the maximum
over d thresholds holds with confidence $1 - d(1 - c)$ only (union bound). Pass
`confidence` accordingly (e.g. $1 - 0.05/d$) when the maximum itself is the claim; the
paper reports the maximum of GDP estimates.
"""

from __future__ import annotations

import equinox as eqx
import numpy as np
import scipy.stats
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractMechanism, AbstractThresholdLandscape

__all__ = ["ThresholdAdversary", "ThresholdSearch"]


def _check_landscape(mechanism) -> None:
    if not isinstance(mechanism, AbstractThresholdLandscape):
        raise TypeError(
            "needs an advsim.mechanisms.ThresholdLandscape (an "
            f"advsim.AbstractThresholdLandscape), got {type(mechanism).__name__}"
        )


class ThresholdAdversary(AbstractAdversary):
    r"""$A_S^h$ (Section 6 of arXiv:2405.14457): the landscape's threshold h, score $\theta_T$.

    Args:
        threshold: h (default None: the mechanism's own, $h^* = C/2$ unless set).

    Example:
        >>> from advsim.mechanisms import ThresholdLandscape
        >>> mech = ThresholdAdversary(threshold=0.3).craft(ThresholdLandscape(2, 1.0, 4))
        >>> float(mech.threshold)
        0.3
    """

    # A traced 0-d array (not static), so a threshold grid reuses one compiled simulation.
    threshold: np.ndarray | None

    def __init__(self, threshold: float | None = None):
        if threshold is not None:
            value = float(threshold)
            if not np.isfinite(value):
                raise ValueError(f"threshold must be a finite number or None, got {threshold!r}")
            threshold = np.asarray(value, np.float64)
        self.threshold = threshold

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        _check_landscape(mechanism)
        if self.threshold is None:
            return mechanism
        return eqx.tree_at(lambda m: m.threshold, mechanism, self.threshold)

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        model = release if release.ndim == 1 else release[-1]
        return (model - mechanism.init_model())[0]

    @classmethod
    def contract_examples(cls) -> dict[str, ThresholdAdversary]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"ThresholdLandscape:batch-4": cls()}


class ThresholdSearch(eqx.Module):
    r"""Algorithm 5 of arXiv:2405.14457 (Appendix F) as an adversary variant.

    $h_i = \sigma C\, \Phi^{-1}(1 - \alpha_i)$ for each $\alpha_i$ in `alphas`; each
    $A_S^{h_i}$ (`ThresholdAdversary`) is audited by
    `advsim.experiment.run_threshold_search(search, ...)`, which returns the maximum.
    The paper's grid is `linspace(0, Phi(C / (2 sigma^2)), d)`; its first point,
    $\alpha = 0$, gives $h = +\infty$ (never "above"), so the default grid is d points
    evenly spaced strictly inside (0, 1).

    Args:
        alphas: Type I error rates in (0, 1) (default: 19 points 0.05, ..., 0.95).

    Example:
        >>> from advsim.mechanisms import ThresholdLandscape
        >>> search = ThresholdSearch(alphas=[0.5])
        >>> search.thresholds(ThresholdLandscape(2, 1.0, 4)).tolist()
        [0.0]
    """

    alphas: tuple = eqx.field(static=True)

    def __init__(self, alphas=None):
        if alphas is None:
            alphas = np.linspace(0.0, 1.0, 21)[1:-1]
        a = np.atleast_1d(np.asarray(alphas, np.float64))
        if a.ndim != 1 or a.size == 0 or not np.all((a > 0) & (a < 1)):
            raise ValueError(
                f"alphas must be a non-empty list of numbers in (0, 1), got {alphas!r}"
            )
        self.alphas = tuple(float(x) for x in a)

    def thresholds(self, mechanism: AbstractMechanism) -> np.ndarray:
        """$h_i$: the $(1 - \\alpha_i)$ quantiles of $\\theta_1$ out, $N(0, \\sigma^2 C^2)$."""
        _check_landscape(mechanism)
        scale = float(mechanism.noise_multiplier) * float(mechanism.clip_norm)
        return scipy.stats.norm.isf(np.asarray(self.alphas), scale=scale)

    def adversary(self, threshold: float) -> ThresholdAdversary:
        """$A_S^h$ for one threshold h of the grid."""
        return ThresholdAdversary(float(threshold))

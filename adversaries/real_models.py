r"""Adversaries for the real-model mechanisms that read only the last model.

- `CanaryLoss` scores an input-space canary (`advsim.mechanisms.RealModelInputCanary`, an
  `advsim.AbstractCanaryExample`) by its loss at the last model (`statistic="loss"`: minus the
  loss, so that higher means "canary in") or by its margin (`"margin"`: the signed logit of
  its label, or the label's logit over the largest other one), the black-box scores of
  Section 5 of arXiv:2410.06186.
- `CanaryGradientProjection` scores any mechanism by the displacement of the last model
  along the canary's descent direction at the initial model, $\langle \theta_T - \theta_0,
  -g / \lVert g \rVert \rangle$ with $g$ the canary's gradient at $\theta_0$ in its first
  step: for a crafted gradient canary $-C u$ it is $\langle \theta_T - \theta_0, u\rangle$
  (the biased coordinate's score of arXiv:2405.14457), for an input-space canary the
  white-box projection on its (initial) gradient.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractCanaryExample, AbstractMechanism

__all__ = ["CanaryGradientProjection", "CanaryLoss"]


def _last(release) -> Float[Array, " d"]:
    return release if release.ndim == 1 else release[-1]


class CanaryLoss(AbstractAdversary):
    """Minus the canary example's loss, or its margin, at the last model.

    Args:
        statistic: "loss" (default; the score is minus the loss) or "margin".

    Raises:
        ValueError: another statistic.
        TypeError (at scoring): a mechanism without an input-space canary.
    """

    statistic: str = eqx.field(static=True)

    def __init__(self, statistic: Literal["loss", "margin"] = "loss"):
        if statistic not in ("loss", "margin"):
            raise ValueError(f"statistic must be 'loss' or 'margin', got {statistic!r}")
        self.statistic = statistic

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        if not isinstance(mechanism, AbstractCanaryExample):
            raise TypeError(
                "CanaryLoss reads the loss of an input-space canary (an "
                f"advsim.AbstractCanaryExample), got {type(mechanism).__name__}"
            )
        return mechanism

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        model = _last(release)
        if self.statistic == "loss":
            return -mechanism.canary_loss(model)
        return mechanism.canary_margin(model)

    @classmethod
    def contract_examples(cls) -> dict[str, CanaryLoss]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"RealModelInputCanary:logistic": cls()}


class CanaryGradientProjection(AbstractAdversary):
    """The last model's displacement along the canary's descent direction at $\\theta_0$.

    The direction is $-g / \\lVert g \\rVert$, $g$ the canary's gradient at the initial
    model in its first scheduled step (public: the adversary knows $\\theta_0$ and the
    canary). A zero gradient gives the score 0.
    """

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        m0 = mechanism.init_model()
        disp = _last(release) - m0
        first = mechanism.canary_schedule.first
        g = mechanism.canary_gradient(m0, jnp.asarray(first, jnp.int32)).astype(disp.dtype)
        norm = jnp.linalg.norm(g)
        return jnp.where(norm > 0, -jnp.dot(disp, g) / jnp.where(norm > 0, norm, 1.0), 0.0)

    @classmethod
    def contract_examples(cls) -> dict[str, CanaryGradientProjection]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"RealModelInputCanary:logistic": cls()}

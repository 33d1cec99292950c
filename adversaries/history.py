r"""The optimal test on a last model whose coordinates are independent noisy canary bits.

For the history-encoding regularizer (`advsim.mechanisms.HistoryRegularizer`, Section 4.3
of arXiv:2410.06186) and the repeaters' amplifying encoding
(`advsim.mechanisms.MaliciousRepeaters`), coordinate i of the last model, divided by a
known unit $u_i$, is

$$y_i = b_i + \mathcal{N}(0, s_i^2), \quad b_i \sim \mathrm{Bernoulli}(p_i)
\text{ (in)}, \quad b_i = 0 \text{ (out)},$$

independently over i. The Neyman-Pearson optimal score is the exact log-likelihood ratio

$$\log \frac{p_{in}(y)}{p_{out}(y)} = \sum_i \log\Big(1 - p_i + p_i
\exp\Big(\frac{2 y_i - 1}{2 s_i^2}\Big)\Big).$$
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractCoordinateLaws, AbstractMechanism

__all__ = ["CoordinateLikelihoodRatio", "bernoulli_gaussian_llr"]


def bernoulli_gaussian_llr(y, prob, scale):
    r"""$\log(1 - p + p\, e^{(2y - 1)/(2s^2)})$: the privacy loss of one noisy bit.

    The log-likelihood ratio of $\mathrm{Bernoulli}(p) + \mathcal{N}(0, s^2)$ against
    $\mathcal{N}(0, s^2)$ at y, elementwise, as a `logaddexp` (exact for p = 0: 0, and
    p = 1: the Gaussian shift's linear ratio).
    """
    a = (2.0 * y - 1.0) / (2.0 * scale**2)
    log_p = jnp.where(prob > 0, jnp.log(jnp.where(prob > 0, prob, 1.0)), -jnp.inf)
    log_1mp = jnp.where(prob < 1, jnp.log1p(-jnp.where(prob < 1, prob, 0.0)), -jnp.inf)
    return jnp.where(prob > 0, jnp.logaddexp(log_1mp, log_p + a), 0.0)


class CoordinateLikelihoodRatio(AbstractAdversary):
    """The exact log-likelihood ratio of independent noisy canary bits, one per coordinate.

    Needs an `advsim.AbstractCoordinateLaws`: `coordinate_laws() -> (unit, scale, prob)`,
    arrays over the model's coordinates (see the module docstring); coordinates beyond
    their length (e.g. a step counter) are ignored. Optimal for `HistoryRegularizer` at every v.

    Example:
        >>> from advsim.mechanisms import HistoryRegularizer
        >>> mech = HistoryRegularizer(steps=3, sampling_prob=0.5, noise_multiplier=1.0, v=2.0)
        >>> float(CoordinateLikelihoodRatio().score(mech, jnp.zeros(3))) < 0
        True
    """

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        if not isinstance(mechanism, AbstractCoordinateLaws):
            raise TypeError(
                f"{type(mechanism).__name__} has no coordinate_laws(); "
                "CoordinateLikelihoodRatio needs the law of every coordinate (an "
                "advsim.AbstractCoordinateLaws)"
            )
        unit, scale, prob = mechanism.coordinate_laws()
        model = (release if release.ndim == 1 else release[-1]) - mechanism.init_model()
        y = model[: unit.shape[0]] / unit
        return jnp.sum(bernoulli_gaussian_llr(y, prob, scale))

    @classmethod
    def contract_examples(cls) -> dict[str, CoordinateLikelihoodRatio]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"HistoryRegularizer:v-3": cls()}

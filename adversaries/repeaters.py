r"""The adversary of the malicious dataset: decode every step from the last model.

For `advsim.mechanisms.MaliciousRepeaters` (Appendix C of arXiv:2410.06186) the last model
holds, per step, either a rewritten decision $\pm V$ (`encoding="threshold"`) or an
amplified copy of the step's noisy canary bit (`encoding="amplify"`), plus the raw last
step. The decisions, the copies and the steps' noise are independent, so the optimal
score is the sum of their log-likelihood ratios:

- a decision $D_j = [m_{T,j} > 0]$ contributes $\log(p_{in}/p_{out})$ if 1 and
  $\log((1 - p_{in})/(1 - p_{out}))$ if 0 (`MaliciousRepeaters.decision_probs`);
- the raw last step and every amplified copy contribute
  $\log(1 - p + p\, e^{(2y - 1)/(2s^2)})$ (`bernoulli_gaussian_llr`).

These laws ignore the ~1% extra noise from the sampled number of repeaters, so the score
is very nearly, not exactly, the Neyman-Pearson one; any score gives a sound audit.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractMechanism
from advsim.adversaries.history import bernoulli_gaussian_llr
from advsim.mechanisms.repeaters import MaliciousRepeaters

__all__ = ["RepeaterDecoder"]


class RepeaterDecoder(AbstractAdversary):
    """The log-likelihood ratio of the steps decoded from the repeaters' last model.

    Example:
        >>> from advsim.mechanisms import MaliciousRepeaters
        >>> mech = MaliciousRepeaters(steps=3, sampling_prob=0.1, noise_multiplier=0.5)
        >>> model = jnp.array([-1000.0, -1000.0, 0.0, 3000.0])  # no canary seen
        >>> float(RepeaterDecoder().score(mech, model)) < 0
        True
    """

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        # It decodes exactly this construction's encoding, so it asks for the class.
        if not isinstance(mechanism, MaliciousRepeaters):
            raise TypeError(
                f"RepeaterDecoder needs a MaliciousRepeaters mechanism, got "
                f"{type(mechanism).__name__}"
            )
        model = (release if release.ndim == 1 else release[-1]) - mechanism.init_model()
        steps = mechanism.steps
        m = model[:steps]
        if mechanism.encoding == "amplify":
            unit, scale, prob = mechanism.coordinate_laws()
            return jnp.sum(bernoulli_gaussian_llr(m / unit, prob, scale))
        dtype = m.dtype
        p_in, p_out = mechanism.decision_probs()
        decided = m[: steps - 1] > 0
        ones = jnp.log(p_in[: steps - 1]) - jnp.log(p_out[: steps - 1])
        zeros = jnp.log1p(-p_in[: steps - 1]) - jnp.log1p(-p_out[: steps - 1])
        bits = jnp.sum(jnp.where(decided, ones, zeros))
        unit = jnp.asarray(mechanism.learning_rate, dtype) * jnp.asarray(mechanism.clip_norm, dtype)
        prob = mechanism.canary_probs(dtype)[steps - 1]
        sigma = jnp.asarray(mechanism.noise_multiplier, dtype)
        return bits + bernoulli_gaussian_llr(m[steps - 1] / unit, prob, sigma)

    @classmethod
    def contract_examples(cls) -> dict[str, RepeaterDecoder]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"MaliciousRepeaters:default": cls()}

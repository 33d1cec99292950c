r"""The decoder of the likelihood-encoding loss: read the summed test from the last model.

Section 4.3 of Annamalai (2024), "It's Our Loss": the adversary runs the loss's gradient
once more on the released $\theta_T$ and extracts the full log-likelihood-ratio sum,
$o = (\theta_T + N\tilde g(0, \theta_T)) / 1000 \approx L_T$ (the paper's $1000 =
10^d s$ with $d = 2$, $s = 10$). With this package's descent sign ($g = -\tilde g$, see
`advsim.mechanisms.likelihood_encoding`) that is $o = (\theta_T - N g(0, \theta_T)) /
(10^d s)$ = $\sum_{k \le T} \mathrm{round}(L(v_k), d)$, up to the rare decoding wraps and
the batch-size fluctuations the mechanism's docstring describes. It is the statistic of
the Neyman-Pearson test between all iterates of the two worlds, rounded to d decimals
per step; higher means "canary in".
"""

from __future__ import annotations

from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractMechanism, AbstractSumEncoding

__all__ = ["LikelihoodSumDecoder"]


class LikelihoodSumDecoder(AbstractAdversary):
    """Scores a run by the log-likelihood-ratio sum decoded from its last model.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> jax.config.update("jax_enable_x64", True)
        >>> from advsim.mechanisms import LikelihoodEncodingLoss
        >>> mech = LikelihoodEncodingLoss(steps=3, sampling_prob=0.1, noise_multiplier=1.0)
        >>> model = jnp.array([-120.0 + 0.3])  # sum -0.12 so far, last raw value 0.3
        >>> round(float(LikelihoodSumDecoder().score(mech, model)), 2)  # -0.12 + L(0.3)
        -0.14
    """

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        if not isinstance(mechanism, AbstractSumEncoding):
            raise TypeError(
                "LikelihoodSumDecoder needs a LikelihoodEncodingLoss mechanism (an "
                f"advsim.AbstractSumEncoding), got {type(mechanism).__name__}"
            )
        model = release if release.ndim == 1 else release[-1]
        return mechanism.decoded_sum(model)

    @classmethod
    def contract_examples(cls) -> dict[str, LikelihoodSumDecoder]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"LikelihoodEncodingLoss:default": cls()}

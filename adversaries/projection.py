"""Scores that read the last model along the canary's direction."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractMechanism, AbstractProjectionLaw, clip_gradients

__all__ = ["LikelihoodRatioScore", "ProjectionScore"]


def _last(release: Float[Array, ...]) -> Float[Array, " d"]:
    return release if release.ndim == 1 else release[-1]


def _descent_direction(mechanism: AbstractMechanism) -> Float[Array, " d"]:
    m0 = mechanism.init_model()
    g = clip_gradients(mechanism.canary_gradient(m0, jnp.int32(1)), mechanism.clip_norm)
    return -g / jnp.linalg.norm(g)


class ProjectionScore(AbstractAdversary):
    """Score = <m_T - m_0, u>: the last model's displacement along a unit direction u.

    By default u is the canary's descent direction -clip(grad)/||clip(grad)|| at m_0 and
    step 1, the optimal statistic for linear losses (proof of Theorem 1 of
    arXiv:2410.06186); pass `direction` to project on another vector.

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> mech = LinearProcess(steps=5, sampling_prob=0.5, noise_multiplier=1.0)
        >>> float(ProjectionScore().score(mech, jnp.ones(1)))
        1.0
    """

    direction: np.ndarray | None = None

    def __init__(self, direction=None):
        if direction is not None:
            direction = np.asarray(direction, np.float64)
            if direction.ndim != 1 or not np.all(np.isfinite(direction)) or not np.any(direction):
                raise ValueError(f"direction must be a non-zero finite vector, got {direction!r}")
            # Normalise in float64 (scaled first, so huge or tiny entries neither overflow
            # nor underflow), then store float32 like the models it is dotted with.
            direction = direction / np.max(np.abs(direction))
            direction = (direction / np.linalg.norm(direction)).astype(np.float32)
        self.direction = direction

    def check_mechanism(self, mechanism: AbstractMechanism) -> str | None:
        """The default direction needs a canary gradient at m_0 and step 1: a zero (or
        non-finite) one gives the direction 0/0, and every score NaN."""
        model = jax.eval_shape(mechanism.init_model)
        if len(model.shape) != 1:
            return None  # not a model vector: the engine's shape check names it
        if self.direction is not None:
            if np.size(self.direction) != model.shape[0]:
                size = np.size(self.direction)
                return f"direction has {size} coordinates, the model {model.shape[0]}"
            return None
        m0 = mechanism.init_model()
        g = np.asarray(clip_gradients(mechanism.canary_gradient(m0, jnp.int32(1)),
                                      mechanism.clip_norm))  # fmt: skip
        if not np.all(np.isfinite(g)) or not np.any(g):
            return (
                "its default direction is the canary's clipped gradient at m_0 and step 1, "
                f"which is {'zero' if np.all(np.isfinite(g)) else 'not finite'} here, so "
                "every score would be NaN; pass ProjectionScore(direction=...) to project "
                "on a vector of your choice"
            )
        return None

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        u = _descent_direction(mechanism) if self.direction is None else self.direction
        return jnp.dot(_last(release) - mechanism.init_model(), u)

    @classmethod
    def contract_examples(cls) -> dict[str, ProjectionScore]:
        """Small instances on which the contract suite runs, keyed by their mechanism.

        Every built-in adversary defines this classmethod: the repository's contract tests
        run `advsim.testing.check_adversary` on each instance against the built-in mechanism
        named by its key, `"Class:name"` for `advsim.mechanisms.Class.contract_examples()[name]`
        (built with `jax_enable_x64` where the class has `requires_x64`).
        """
        return {"LinearProcess:1d": cls()}


class LikelihoodRatioScore(AbstractAdversary):
    """The exact log-likelihood ratio log p_in(y) / p_out(y) of the projected last model.

    Needs an `advsim.AbstractProjectionLaw`, a mechanism with a known law of the
    projection y (in units of eta * C): `mechanism.projection_law()` returning
    `(support, log_probs, scale)` of y ~ N(X, s^2) with X on `support` (in) and
    y ~ N(0, s^2) (out). Then
    log p_in/p_out(y) = logsumexp_k(log p_k + (2 x_k y - x_k^2) / (2 s^2)) (Appendix A.1
    of arXiv:2410.06186): the Neyman-Pearson optimal score.
    """

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        if not isinstance(mechanism, AbstractProjectionLaw):
            raise TypeError(
                f"{type(mechanism).__name__} has no projection_law(); LikelihoodRatioScore "
                "needs both worlds' output laws (an advsim.AbstractProjectionLaw)"
            )
        support, log_probs, scale = mechanism.projection_law()
        unit = jnp.asarray(mechanism.learning_rate, jnp.float32) * jnp.asarray(
            mechanism.clip_norm, jnp.float32
        )
        y = ProjectionScore().score(mechanism, release) / unit
        return logsumexp(log_probs + (2.0 * support * y - support**2) / (2.0 * scale**2))

    @classmethod
    def contract_examples(cls) -> dict[str, LikelihoodRatioScore]:
        """Instances for the contract suite, keyed by the mechanism example each is checked on."""
        return {"LinearProcess:1d": cls()}

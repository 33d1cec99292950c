r"""Projected full-batch DP-GD with a linear canary: a case of the hidden-state bounds.

The shifted-interpolation bound (`advsim.bounds.shifted_interpolation_bound`, Bok, Su and
Altschuler, arXiv:2403.00278) holds for projected noisy gradient descent on convex,
L-Lipschitz, M-smooth losses over a convex set K of diameter D. `ProjectedLinearCanary`
is the simplest run that meets every assumption and is still hard to hide: no other data,
the canary's loss $-C\langle e_0, m\rangle$ (convex, 0-smooth, C-Lipschitz, so clipping
never acts), the full batch at every step (q = 1, the canary always present), and the
projection onto the ball of radius R after every step (`advsim.AbstractProjected`):

$$m_t = \Pi_{B(0, R)}\big(m_{t-1} + \eta C b\, e_0 + \eta\sigma C\, \xi_t\big),\quad
  \xi_t \sim \mathcal N(0, I),\ b \in \{0, 1\}.$$

With d = 1 the last iterate is a one-dimensional Markov chain (an `advsim.AbstractScalarLaw`
projected onto $[-R, R]$), whose law the exact-law engine `advsim.exact` propagates, so its
hidden-state epsilon can be read beside the bound and beside an audit of simulated runs.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import AbstractProjected, AbstractScalarLaw, CanarySchedule, DPSGDParams
from advsim.bounds import ShiftedInterpolationBound, run_facts, shifted_interpolation_bound
from advsim.validation import as_traced_float, check_int, check_positive

__all__ = ["ProjectedLinearCanary"]


class ProjectedLinearCanary(AbstractProjected, AbstractScalarLaw):
    r"""Projected full-batch DP-GD whose only example is a linear canary.

    Args:
        steps: $T \ge 1$.
        noise_multiplier: $\sigma > 0$ (noise $\mathcal N(0, \sigma^2 C^2 I)$ per step).
        radius: $R > 0$: the model is projected onto the ball $B(0, R)$ (diameter 2R).
        dim: $d \ge 1$; the canary moves coordinate 0.
        clip_norm: $C > 0$, also the canary gradient's norm (so clipping never acts).
        learning_rate: $\eta > 0$.

    Raises:
        ValueError: a value outside its range (the message names it and the range).

    Example:
        >>> mech = ProjectedLinearCanary(200, 1.0, radius=0.5)
        >>> mech.diameter, round(mech.shifted_interpolation_bound(1e-5).epsilon, 2)
        (1.0, 10.0)
    """

    params: DPSGDParams
    dim: int = eqx.field(static=True)
    radius: np.ndarray

    def __init__(
        self,
        steps: int,
        noise_multiplier: float,
        *,
        radius: float,
        dim: int = 1,
        clip_norm: float = 1.0,
        learning_rate: float = 1.0,
    ):
        # The full batch at every step, the canary always in it (add/remove neighbours).
        self.params = DPSGDParams(
            steps, 1.0, noise_multiplier, clip_norm=clip_norm, learning_rate=learning_rate,
            canary_schedule=CanarySchedule.every(1, sampled=False), batching="fixed",
        )  # fmt: skip
        self.radius = as_traced_float("radius", radius, check_positive)
        self.dim = check_int("dim", dim, minimum=1)

    @property
    def diameter(self) -> float:
        return 2.0 * float(self.radius)

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((self.dim,), jnp.float32)  # the ball's centre: data-independent

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        return -jnp.asarray(self.clip_norm, model.dtype) * jnp.eye(1, self.dim, 0, model.dtype)[0]

    def project(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        radius = jnp.asarray(self.radius, model.dtype)
        norm = jnp.sqrt(jnp.sum(model * model))
        return jnp.where(norm > radius, model * (radius / jnp.maximum(norm, radius)), model)

    def facts(self):
        """What this run certifies for `advsim.bounds` (`ProcessFacts`): the canary's linear
        loss (gradient norm C, zero curvature), no other data, no regularizer, full batch,
        the ball of radius R."""
        return run_facts(
            self, num_examples=1, radius=float(self.radius), dimension=self.dim,
            linear=True, convex=True, strong_convexity=0.0, objective_smoothness=0.0,
            example_strong_convexity=0.0, smoothness=0.0, regularizer_smoothness=0.0,
            regularizer_lipschitz=0.0, regularizer_zero=True,
            lipschitz=float(self.clip_norm), holder=lambda beta: 0.0,
            source="ProjectedLinearCanary: a linear canary in a ball",
        )  # fmt: skip

    def shifted_interpolation_bound(self, delta=None) -> ShiftedInterpolationBound:
        """The shifted-interpolation bound of this run (its assumptions hold exactly: L = C,
        M = 0, n = 1, D = 2R)."""
        return shifted_interpolation_bound(
            self.steps, noise_multiplier=float(self.noise_multiplier),
            clip_norm=float(self.clip_norm), lipschitz=float(self.clip_norm), smoothness=0.0,
            learning_rate=float(self.learning_rate), num_examples=1, diameter=self.diameter,
            delta=delta,
        )  # fmt: skip

    @classmethod
    def contract_examples(cls) -> dict[str, ProjectedLinearCanary]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        # a ball of radius 0.5 in 3-D: the noise (sd 1) reaches it every step.
        return {"ball-3d": cls(6, 1.0, radius=0.5, dim=3)}

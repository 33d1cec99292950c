r"""m gradient canaries in one DP-SGD run, for one-run auditing (arXiv:2305.08846).

`OneRunGradientCanaries` is a $d$-dimensional model trained by the engine on a dataset of
m crafted gradient canaries, canary j with gradient $-C u_j$ and present in the run iff
its inclusion bit $S_j$ is 1 (`with_included`; `advsim.one_run.simulate_one_run` draws
$S_j \sim \mathrm{Bernoulli}(1/2)$ independently for every repetition of the run). The
canaries are the engine's data groups of count $S_j$, so the engine clips each of them
to $C$, samples it (Poisson with rate q, or always in a fixed batch) and adds the noise
$\mathcal{N}(0, \sigma^2 C^2 I)$ at each of the T steps. Canary j's score is the last
model along its direction in units of one step's displacement,
$\langle m_T, u_j \rangle / (\eta C)$.

Two layouts:

- `"separate"`: $u_j = e_j$ ($d \ge m$ coordinates), so the canaries do not interfere:
  canary j's score is $N_j + \mathcal{N}(0, T\sigma^2)$ with $N_j = T$ (fixed batch) or
  $\mathrm{Binomial}(T, q)$ (Poisson) if included, $\mathcal{N}(0, T\sigma^2)$ if not,
  independently of the other canaries. Its exact eps is that of this pair of
  distributions: $\mu$-GDP with $\mu = \sqrt{T}/\sigma$ for a fixed batch (Corollary 2.13
  of arXiv:1905.02383), the last-iterate heuristic's $\varepsilon_{T,q,\sigma}(\delta)$
  under Poisson sampling (Theorem 1 of arXiv:2410.06186, exact for this linear run).
- `"shared"`: $u_j$ uniform on the sphere of $\mathbb{R}^d$ (seeded), $d < m$ allowed, so
  every canary's score also carries $\sum_{i \ne j} N_i \langle u_i, u_j \rangle$: the
  interference this case exists to show. Per canary, with the others fixed, the release is
  the separate case's plus terms independent of canary j, so `epsilon(delta)` stays an
  upper bound (no longer attained): the audit must stay below it, and does worse.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from advsim import AbstractMultiCanary, DPSGDParams
from advsim.bounds import gdp_epsilon, heuristic_epsilon
from advsim.validation import check_delta, check_int

__all__ = ["OneRunGradientCanaries"]

_LAYOUTS = ("separate", "shared")


class OneRunGradientCanaries(AbstractMultiCanary):
    r"""m gradient canaries, each in the run by its own bit (see the module docstring).

    Args:
        steps: T >= 1.
        noise_multiplier: sigma > 0.
        num_canaries: m >= 1.
        dim: d (default m); `"separate"` needs d >= m.
        layout: `"separate"` (canary j on coordinate j) or `"shared"` (random unit
            directions, seeded by `direction_seed`).
        sampling_prob: q in (0, 1] (used with `batching="poisson"`).
        batching: `"fixed"` (default: every included canary in every step) or
            `"poisson"`.
        clip_norm: C > 0.
        learning_rate: eta > 0.
        direction_seed: numpy seed of the `"shared"` directions.

    Raises:
        ValueError: any argument outside its range (the message names it).

    Example:
        >>> mech = OneRunGradientCanaries(steps=4, noise_multiplier=1.0, num_canaries=100)
        >>> round(mech.epsilon(1e-5), 3)  # mu = sqrt(4) / 1 = 2
        9.997
    """

    params: DPSGDParams
    num_canaries: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    layout: str = eqx.field(static=True)
    directions: np.ndarray
    included: Array | np.ndarray

    def __init__(
        self,
        steps: int,
        noise_multiplier: float,
        *,
        num_canaries: int,
        dim: int | None = None,
        layout: Literal["separate", "shared"] = "separate",
        sampling_prob: float = 1.0,
        batching: Literal["poisson", "fixed"] = "fixed",
        clip_norm: float = 1.0,
        learning_rate: float = 1.0,
        direction_seed: int = 0,
    ):
        self.params = DPSGDParams(
            steps=steps,
            sampling_prob=sampling_prob,
            noise_multiplier=noise_multiplier,
            clip_norm=clip_norm,
            learning_rate=learning_rate,
            batching=batching,
        )
        self.num_canaries = check_int("num_canaries", num_canaries, minimum=1)
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
        self.layout = layout
        minimum = self.num_canaries if layout == "separate" else 1
        self.dim = check_int("dim", self.num_canaries if dim is None else dim, minimum=minimum)
        if layout == "shared":
            u = np.random.default_rng(check_int("direction_seed", direction_seed, minimum=0))
            u = u.normal(size=(self.num_canaries, self.dim))
            self.directions = (u / np.linalg.norm(u, axis=1, keepdims=True)).astype(np.float32)
        else:
            self.directions = np.zeros((0, self.dim), np.float32)  # e_j, never materialised
        self.included = np.zeros(self.num_canaries, np.int32)

    def with_included(self, included: Bool[Array, " m"]) -> OneRunGradientCanaries:
        """The same run with canary j present iff `included[j]` (a traced field)."""
        bits = jnp.asarray(included).astype(jnp.int32)
        if bits.shape != (self.num_canaries,):
            raise ValueError(f"included must have shape ({self.num_canaries},), got {bits.shape}")
        return eqx.tree_at(lambda m: m.included, self, bits)

    def _unit_directions(self, dtype) -> Float[Array, "m d"]:
        if self.layout == "separate":
            return jnp.eye(self.num_canaries, self.dim, dtype=dtype)
        return jnp.asarray(self.directions, dtype)

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((self.dim,), jnp.float32)

    def canary_gradient(self, model: Float[Array, " d"], t) -> Float[Array, " d"]:
        # The engine's single canary is never inserted (simulate_one_run passes
        # canary_in=False); the m canaries are the data groups below.
        return jnp.zeros_like(model)

    def data_gradients(self, model: Float[Array, " d"], t) -> Float[Array, "m d"]:
        return -jnp.asarray(self.clip_norm, model.dtype) * self._unit_directions(model.dtype)

    def data_counts(self) -> Int[Array, " m"]:
        return jnp.asarray(self.included, jnp.int32)

    def canary_scores(self, model: Float[Array, " d"]) -> Float[Array, " m"]:
        unit = jnp.asarray(self.learning_rate * self.clip_norm, model.dtype)
        if self.layout == "separate":
            return model[: self.num_canaries] / unit
        return jnp.sum(self._unit_directions(model.dtype) * model, axis=-1) / unit

    def epsilon(self, delta: float) -> float:
        """Each canary's exact eps at `delta` for `"separate"` (an upper bound, no longer
        attained, for `"shared"`): mu-GDP with mu = sqrt(T) / sigma for a fixed batch,
        the heuristic's eps(T, q, sigma) under Poisson sampling."""
        delta = check_delta("delta", delta)
        sigma = float(self.noise_multiplier)
        if self.batching == "fixed" or float(self.sampling_prob) == 1.0:
            return float(gdp_epsilon(delta, np.sqrt(self.steps) / sigma))
        return float(heuristic_epsilon(delta, self.steps, float(self.sampling_prob), sigma))

    @classmethod
    def contract_examples(cls) -> dict[str, OneRunGradientCanaries]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        return {
            "separate": cls(4, 1.0, num_canaries=3),
            # two coordinates for three canaries; each canary Poisson-sampled with rate 0.5.
            "shared-poisson": cls(
                4,
                1.0,
                num_canaries=3,
                dim=2,
                layout="shared",
                sampling_prob=0.5,
                batching="poisson",
            ),
        }

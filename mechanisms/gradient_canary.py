r"""Gradient canaries in $d$ dimensions, inserted every $k$-th step.

The gradient-crafting adversaries $\mathcal{A}_{GC}$ of Cebere, Bellet & Papernot,
"Tighter Privacy Auditing of DP-SGD in the Hidden State Threat Model" (arXiv:2405.14457,
ICLR 2025), do not insert a data point: they insert a crafted gradient $\nabla^*$ of norm
$C$ at every $k$-th step of DP-SGD (Algorithm 4 there: at steps with $t \bmod k = 0$, always,
not Poisson-sampled) and read the last model along it. `GradientCanary` is that run: a
$d$-dimensional model, the canary's gradient $-C u$ for a unit *canary direction* $u$
(the direction the canary moves the model; a coordinate $e_j$ for the biased-dimension
adversaries of Algorithms 2-3, a random point of the sphere for Algorithm 8), and the
other examples' gradients from one of three sources:

- `"zero"`: no other gradients (the adversarial-dataset setting, Theorem 1 of
  arXiv:2410.06186). The displacement along $u$ is then exactly
  $\eta\,(\sum_{t \in S} b_t\,C + \mathcal{N}(0, T \sigma^2 C^2))$, $S$ the canary's steps.
- `"gaussian"`: fixed per-example gradients $\mathcal{N}(0, \mathrm{scale}^2/d\, I)$, the same
  draws as `LinearProcess.with_data(distribution="gaussian")`, Poisson-sampled each step.
- `"logistic"`: per-example gradients of a logistic-regression loss on a dataset drawn
  from `data_seed`, evaluated at the current model, so they change as training proceeds.
  Each feature has its own scale (a permuted geometric range), so the data move some
  coordinates a lot and others hardly: the low-dimensional regime in which Section 5.2
  there finds that a random coordinate ($\mathcal{A}_{GC}$-R) is no longer tight and the
  simulated biased dimension ($\mathcal{A}_{GC}$-S, Algorithm 3) is.

The canary's schedule is a `CanarySchedule`: `CanarySchedule.every(k, first=k,
sampled=False)` is Algorithm 4 exactly; `sampled=True` Poisson-samples the crafted
gradient at those steps with probability $q$ (standard DP-SGD), and then the last model
along $u$ is the last-iterate heuristic's mixture (Theorem 1 of arXiv:2410.06186).
`accounting()` counts only the steps that can carry the canary.
"""

from __future__ import annotations

from typing import Literal, Unpack

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import AbstractDirectedCanary, CanarySchedule, DPSGDOptions, DPSGDParams
from advsim.mechanisms.linear import LinearProcess
from advsim.validation import check_int, check_positive

__all__ = ["GradientCanary", "logistic_dataset", "unit_direction"]

_DATA = ("zero", "gaussian", "logistic")


def unit_direction(direction, dim: int) -> np.ndarray:
    """A coordinate index or a vector, as a float32 unit vector of length `dim`.

    Raises:
        ValueError: an index outside `[0, dim - 1]`, or a vector of the wrong shape, not
            finite or zero.
    """
    if isinstance(direction, int | np.integer) and not isinstance(direction, bool):
        j = check_int("canary_direction", int(direction), minimum=0, maximum=dim - 1)
        u = np.zeros(dim, np.float64)
        u[j] = 1.0
        return u.astype(np.float32)
    u = np.asarray(direction, np.float64)
    if u.shape != (dim,) or not np.all(np.isfinite(u)) or not np.any(u):
        raise ValueError(
            f"canary_direction must be a coordinate in [0, {dim - 1}] or a non-zero finite "
            f"vector of shape ({dim},), got {direction!r}"
        )
    u = u / np.max(np.abs(u))  # scale first: huge or tiny entries neither overflow nor vanish
    return (u / np.linalg.norm(u)).astype(np.float32)


def logistic_dataset(
    num_examples: int, dim: int, *, data_seed: int = 0, scale: float = 1.0, spread: float = 100.0
) -> tuple[np.ndarray, np.ndarray]:
    r"""A synthetic binary-classification dataset for the `"logistic"` other examples.

    Features $x_{ij} \sim \mathcal{N}(0, s_j^2)$ with scales $s_j$ geometric from `scale`
    down to `scale / spread`, assigned to coordinates in an order permuted by the seed
    (so the quiet coordinates are not simply the last ones); labels
    $y_i \sim \mathrm{Bernoulli}(\mathrm{sigmoid}(x_i \cdot w^*))$ for a teacher
    $w^* \sim \mathcal{N}(0, I / \bar{s}^2)$, $\bar{s}$ the root mean square scale.

    Returns:
        `(features, labels)`: float32 arrays of shapes `(num_examples, dim)`, `(num_examples,)`.
    """
    num_examples = check_int("num_examples", num_examples, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    scale = check_positive("scale", scale)
    spread = check_positive("spread", spread)
    if spread < 1:
        raise ValueError(f"spread must be >= 1, got {spread}")
    rng = np.random.default_rng(data_seed)
    scales = scale * spread ** -np.linspace(0.0, 1.0, dim)
    scales = rng.permutation(scales)
    x = rng.normal(size=(num_examples, dim)) * scales
    teacher = rng.normal(size=dim) / np.sqrt(np.mean(scales**2))
    y = (rng.uniform(size=num_examples) < 1.0 / (1.0 + np.exp(-x @ teacher))).astype(np.float64)
    return x.astype(np.float32), y.astype(np.float32)


class GradientCanary(AbstractDirectedCanary):
    r"""DP-SGD in $d$ dimensions with a crafted canary gradient $-C u$ (arXiv:2405.14457).

    The update is the engine's (Algorithm 1 of arXiv:2410.06186): other examples'
    gradients clipped and Poisson-sampled (or a fixed batch), the canary's $-C u$ added at
    its scheduled steps, noise $\mathcal{N}(0, \sigma^2 C^2 I)$, all times
    `learning_rate` (use $\eta / B$ for the averaged update of Algorithm 4 there).

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1]: the other examples' sampling rate, and the canary's
            when its schedule is `sampled`.
        noise_multiplier: sigma > 0.
        dim: d >= 1.
        canary_direction: the unit direction u the canary moves the model: a coordinate
            index (a biased dimension, Algorithms 2-3) or a vector (normalised). An
            adversary's `craft` usually sets it (`with_direction`).
        data: "zero", "gaussian" or "logistic" (see the module docstring).
        num_examples: distinct other examples (ignored for "zero").
        copies: identical copies of each (a group of the engine), so a dataset of
            `num_examples * copies` costs `num_examples` per step.
        scale: norm scale of the "gaussian" gradients / largest feature scale ("logistic").
        spread: ratio of the largest to the smallest feature scale ("logistic").
        data_seed: seed of the dataset (numpy), fixed before training.
        **dpsgd: clip_norm (C > 0), learning_rate (eta > 0), canary_schedule (default
            `CanarySchedule.every(1, sampled=False)`: every step, always inserted), batching
            ("poisson" default, or "fixed"): `DPSGDOptions`.

    Raises:
        ValueError: any argument outside its range (the message names it).

    Example:
        >>> from advsim import CanarySchedule
        >>> mech = GradientCanary(steps=50, sampling_prob=0.1, noise_multiplier=1.0, dim=4,
        ...     canary_schedule=CanarySchedule.every(5, first=5, sampled=False))
        >>> mech.accounting().num_canary_steps
        10
    """

    params: DPSGDParams
    dim: int = eqx.field(static=True)
    data: str = eqx.field(static=True)
    canary_direction: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    counts: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        dim: int = 10,
        canary_direction=0,
        data: Literal["zero", "gaussian", "logistic"] = "zero",
        num_examples: int = 100,
        copies: int = 1,
        scale: float = 1.0,
        spread: float = 100.0,
        data_seed: int = 0,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        if dpsgd.get("canary_schedule") is None:
            dpsgd["canary_schedule"] = CanarySchedule.every(1, sampled=False)
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        self.dim = check_int("dim", dim, minimum=1)
        self.canary_direction = unit_direction(canary_direction, self.dim)
        if data not in _DATA:
            raise ValueError(f"data must be one of {_DATA}, got {data!r}")
        self.data = data
        num_examples = check_int("num_examples", num_examples, minimum=1)
        copies = check_int("copies", copies, minimum=1, maximum=np.iinfo(np.int32).max)
        if data == "zero":
            # Zero gradients contribute nothing: no groups, so a step costs O(d).
            self.features = np.zeros((0, self.dim), np.float32)
            self.labels = np.zeros((0,), np.float32)
        elif data == "gaussian":
            # The same draws as LinearProcess.with_data, so the two constructions agree.
            self.features = LinearProcess.with_data(
                1,
                1.0,
                1.0,
                dim=self.dim,
                num_examples=num_examples,
                distribution="gaussian",
                scale=scale,
                data_seed=data_seed,
            ).other_gradients
            self.labels = np.zeros((num_examples,), np.float32)
        else:
            self.features, self.labels = logistic_dataset(
                num_examples, self.dim, data_seed=data_seed, scale=scale, spread=spread
            )
        self.counts = np.full(self.features.shape[0], copies, np.int32)

    def with_direction(self, direction) -> GradientCanary:
        """The same run with canary direction `direction` (a coordinate or a vector).

        A traced field, so runs that differ only in the direction share one compilation.
        """
        return eqx.tree_at(lambda m: m.canary_direction, self, unit_direction(direction, self.dim))

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((self.dim,), jnp.float32)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        u = jnp.asarray(self.canary_direction, model.dtype)
        return -jnp.asarray(self.clip_norm, model.dtype) * u

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        x = jnp.asarray(self.features, model.dtype)
        if self.data != "logistic":
            return x
        # Gradient of the logistic loss log(1 + e^{z}) - y z at z = <x, m>: (sigmoid(z) - y) x.
        # An explicit reduction (not a matmul) keeps results independent of batching.
        z = jnp.sum(x * model, axis=-1)
        residual = jax.nn.sigmoid(z) - jnp.asarray(self.labels, model.dtype)
        return residual[:, None] * x

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.counts)

    @classmethod
    def contract_examples(cls) -> dict[str, GradientCanary]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        # scale 3: logistic gradients above C = 1 get clipped; the canary at steps 2 and 4;
        # a fixed batch (LinearProcess's examples cover Poisson batching of data groups).
        schedule = CanarySchedule.every(2, first=2)
        return {
            "logistic": cls(
                5,
                0.3,
                1.0,
                dim=5,
                data="logistic",
                num_examples=20,
                scale=3.0,
                canary_schedule=schedule,
                batching="fixed",
            ),
        }

r"""Real models: equinox networks trained with DP-SGD on scikit-learn's bundled datasets.

The last-iterate paper (arXiv:2410.06186, Section 5) and Cebere, Bellet & Papernot
(arXiv:2405.14457) test their claims on trained networks. These mechanisms train a small
equinox model (`model="logistic"`: a linear layer; `model="mlp"`: one tanh hidden layer,
30-32-1 on breast_cancer, 64-32-10 on digits) on `load_breast_cancer` or `load_digits`
(they ship inside scikit-learn: nothing downloads; install the `models` extra), and let the
engine do the privacy part as for every other mechanism.

**How the engine sees the data.** The mechanisms are `AbstractPerExampleData`: the engine
draws each training example's Poisson membership (rate $q$) at every step and computes
`vmap(grad(loss))` on the sampled examples only, gathered into blocks of a fixed maximum
batch `max_batch_size` $B$ (default `poisson_batch_bound(n, q)`: $qn$ plus 6 standard
deviations, a multiple of 8), clips every row to $C$ and sums them. A sampled batch larger
than $B$ is never cut: the engine computes as many blocks as it needs (a `lax.while_loop`),
so the update is exact for any batch and only its cost grows (about one more block of
work when it happens; `scripts/benchmark_models.py` measures it). With `max_batch_size` =
$n$ every step computes all $n$ rows weighted by the memberships (the same draws).

**The parts.** The datasets are in `advsim.mechanisms.datasets`, the networks on the
engine's flat model vector (`AbstractRealModel`) in `advsim.mechanisms.networks`, and the
test accuracy reported beside an audit in `advsim.mechanisms.accuracy`; this module holds
the two mechanisms.

**Canaries.** `RealModelGradientCanary` inserts a crafted gradient $-C u$ (a parameter
coordinate $u = e_j$ or a direction; Algorithm 4 of arXiv:2405.14457 with
`CanarySchedule.every(k, first=k, sampled=False)`) and is an `AbstractDirectedCanary`, so
`BiasedCoordinate`, `RandomDirection` and `SimulatedBiasedDimension` craft it.
`RealModelInputCanary` adds one input-space example (a held-out example with a wrong label,
or an out-of-range input), Poisson-sampled like the others; it is an
`advsim.AbstractCanaryExample`, which `advsim.adversaries.CanaryLoss` needs.

Use `learning_rate` = $\eta / (qn)$ for the averaged update of DP-SGD with expected batch
size $qn$.
"""

from __future__ import annotations

from typing import Literal, Unpack

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import AbstractCanaryExample, AbstractDirectedCanary, CanarySchedule
from advsim.mechanisms.datasets import Dataset
from advsim.mechanisms.gradient_canary import unit_direction
from advsim.mechanisms.networks import AbstractRealModel, RealModelOptions, example_margin
from advsim.validation import check_int, check_positive

__all__ = ["INPUT_CANARIES", "RealModelGradientCanary", "RealModelInputCanary"]

INPUT_CANARIES = ("mislabeled", "out_of_range")
"""The `canary` kinds of `RealModelInputCanary`."""


_ARGS_DOC = """
        steps: T >= 1.
        sampling_prob: q in (0, 1], each training example's Poisson rate.
        noise_multiplier: sigma > 0."""

_OPTIONS_DOC = """
        **options: `RealModelOptions`: the data and model (dataset, model, width,
            num_examples, max_batch_size, model_seed, split_seed) and DP-SGD's
            (clip_norm, learning_rate, canary_schedule, batching; see
            `advsim.DPSGDParams`); learning_rate defaults to 0.1 here (eta / (q n) for
            the averaged update)."""


class RealModelGradientCanary(AbstractRealModel, AbstractDirectedCanary):
    r"""A real model trained with DP-SGD plus a crafted gradient canary $-C u$.

    Algorithm 4 of arXiv:2405.14457 with `CanarySchedule.every(k, first=k, sampled=False)`
    (the default is every step, always inserted); a sampled schedule Poisson-samples it.
    The canary direction $u$ is a parameter coordinate or a vector, in the order of
    `ravel_pytree` of the equinox model (`coordinate_names()` says which is which).

    Args:{args}
        canary_direction: a coordinate index or a vector of length `dim`.{options}
            canary_schedule defaults to every step, not sampled.

    Raises:
        ValueError: any argument outside its range (the message names it).

    Example:
        >>> mech = RealModelGradientCanary(10, 0.1, 1.0, model="logistic")
        >>> mech.dim, mech.features.shape
        (31, (427, 30))
    """

    dim: int = eqx.field(static=True)
    canary_direction: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        canary_direction=0,
        **options: Unpack[RealModelOptions],
    ):
        if options.get("canary_schedule") is None:
            options["canary_schedule"] = CanarySchedule.every(1, sampled=False)
        self._init_shared(steps, sampling_prob, noise_multiplier, options)
        self.dim = int(self.initial_params.shape[0])
        self.canary_direction = unit_direction(canary_direction, self.dim)

    def with_direction(self, direction) -> RealModelGradientCanary:
        """The same run with the canary along `direction` (traced: no recompilation)."""
        return eqx.tree_at(lambda m: m.canary_direction, self, unit_direction(direction, self.dim))

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        u = jnp.asarray(self.canary_direction, model.dtype)
        return -jnp.asarray(self.clip_norm, model.dtype) * u

    def coordinate_names(self) -> list[str]:
        """A name per coordinate of the flat model, e.g. 'layers[0].weight[3,7]'."""
        names = []
        leaves = jax.tree_util.tree_leaves_with_path(eqx.filter(self.skeleton(), eqx.is_array))
        for path, leaf in leaves:
            stem = jax.tree_util.keystr(path).lstrip(".")
            names += [f"{stem}[{','.join(map(str, i))}]" for i in np.ndindex(leaf.shape)]
        return names

    @classmethod
    def contract_examples(cls) -> dict[str, RealModelGradientCanary]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        # breast_cancer, 8 examples each a group of count 1; lr 1: most per-example
        # gradients have norm > C = 1 at the shifted model. A fixed batch (the input canary's
        # examples cover the engine's Poisson sampling of real-model examples).
        schedule = CanarySchedule.every(2, first=2, sampled=False)
        return {
            "logistic": cls(
                4,
                0.3,
                1.0,
                num_examples=8,
                learning_rate=1.0,
                batching="fixed",
                canary_schedule=schedule,
            ),
        }


RealModelGradientCanary.__doc__ = RealModelGradientCanary.__doc__.format(
    args=_ARGS_DOC, options=_OPTIONS_DOC
)


def _input_canary(data: Dataset, kind: str, index: int, scale: float):
    """The canary example: a held-out test example with a wrong label, or an input at
    `scale` standard deviations in every feature with label 0."""
    if kind == "mislabeled":
        index = check_int("canary_index", index, minimum=0, maximum=data.x_test.shape[0] - 1)
        y = int(data.y_test[index])
        return data.x_test[index].copy(), np.int32((y + 1) % data.num_classes)
    x = np.full(data.x_train.shape[1], scale, np.float32)
    return x, np.int32(0)


class RealModelInputCanary(AbstractRealModel, AbstractCanaryExample):
    r"""A real model trained with DP-SGD with one input-space canary example.

    The canary is an example like the others (its gradient is the model's, clipped and,
    under the default schedule, Poisson-sampled with rate $q$ at every step):
    `canary="mislabeled"` is the held-out test example `canary_index` with the next label
    ($1 - y$ for binary), `"out_of_range"` the input with every standardised feature equal
    to `canary_scale` and label 0. Section 5 of arXiv:2410.06186 finds such canaries far
    below the last-iterate heuristic, unlike gradient canaries.

    Args:{args}
        canary: "mislabeled" (default) or "out_of_range".
        canary_index: which test example is mislabeled (default 0).
        canary_scale: the out-of-range canary's feature value (default 10).{options}
            canary_schedule defaults to every step, Poisson-sampled.

    Raises:
        ValueError: any argument outside its range (the message names it).
    """

    canary: str = eqx.field(static=True)
    canary_x: np.ndarray
    canary_y: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        canary: Literal["mislabeled", "out_of_range"] = "mislabeled",
        canary_index: int = 0,
        canary_scale: float = 10.0,
        **options: Unpack[RealModelOptions],
    ):
        data = self._init_shared(steps, sampling_prob, noise_multiplier, options)
        if canary not in INPUT_CANARIES:
            raise ValueError(f"canary must be one of {INPUT_CANARIES}, got {canary!r}")
        self.canary = canary
        scale = check_positive("canary_scale", canary_scale)
        self.canary_x, self.canary_y = _input_canary(data, canary, canary_index, scale)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        return jax.grad(self.loss)(model, jnp.asarray(self.canary_x, model.dtype), self.canary_y)

    def canary_loss(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        return self.loss(model, jnp.asarray(self.canary_x, model.dtype), self.canary_y)

    def canary_margin(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        x = jnp.asarray(self.canary_x, model.dtype)
        return example_margin(self.logits(model, x), jnp.asarray(self.canary_y))

    @classmethod
    def contract_examples(cls) -> dict[str, RealModelInputCanary]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        # a mislabeled canary, Poisson-sampled at every step; max_batch_size 1: a sampled
        # batch of 2 or more takes several blocks of the engine. The MLP is 30-2-1.
        return {
            "mlp": cls(2, 0.3, 1.0, model="mlp", width=2, num_examples=4, max_batch_size=1),
            "logistic": cls(2, 0.3, 1.0, num_examples=4, max_batch_size=1),
        }


RealModelInputCanary.__doc__ = RealModelInputCanary.__doc__.format(
    args=_ARGS_DOC, options=_OPTIONS_DOC
)

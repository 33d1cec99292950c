r"""The real-model mechanisms' networks: equinox models on a flat parameter vector.

`model="logistic"` is a linear layer, `model="mlp"` one tanh hidden layer (30-32-1 on
breast_cancer, 64-32-10 on digits). The engine's model is a flat float32 vector
(`ravel_pytree` of the equinox model's arrays); `AbstractRealModel.module(flat)` rebuilds
the equinox model from it (the skeleton is rebuilt from static sizes under the trace and
only its structure is used), so runs of many models are vmapped per compiled block by
`advsim.simulate` unchanged. `AbstractRealModel` also holds the fields both real-model
mechanisms share (dataset, network sizes, examples, initial parameters) and builds them
from their constructors' arguments.
"""

from __future__ import annotations

import functools
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int, PRNGKeyArray

from advsim import AbstractPerExampleData, DPSGDOptions, DPSGDParams, poisson_batch_bound
from advsim.mechanisms.datasets import DATASETS, Dataset, load_dataset
from advsim.validation import check_int, check_keywords

__all__ = [
    "MODELS",
    "AbstractRealModel",
    "RealModelOptions",
    "build_network",
    "example_loss",
    "example_margin",
]

MODELS = ("logistic", "mlp")
"""The `model` names of the real-model mechanisms (`build_network`)."""


def build_network(model: str, in_size: int, out_size: int, width: int, *, key: PRNGKeyArray):
    """The equinox network `model` ("logistic" or "mlp") with initial parameters from `key`."""
    if model == "logistic":
        return eqx.nn.Linear(in_size, out_size, key=key)
    return eqx.nn.MLP(in_size, out_size, width, depth=1, activation=jnp.tanh, key=key)


@functools.lru_cache(maxsize=32)
def _structure(model: str, in_size: int, out_size: int, width: int):
    """The model's array shapes and its non-array part, without building it (no init ops
    under the engine's trace)."""
    shaped = eqx.filter_eval_shape(
        lambda: build_network(model, in_size, out_size, width, key=jax.random.key(0))
    )
    is_shape = lambda x: isinstance(x, jax.ShapeDtypeStruct)  # noqa: E731
    return eqx.partition(shaped, is_shape, is_leaf=is_shape)


def example_loss(logits: Float[Array, " k"], label: Int[Array, ""]) -> Float[Array, ""]:
    """Binary cross-entropy on one logit (k = 1), softmax cross-entropy otherwise."""
    if logits.shape[-1] == 1:
        z, y = logits[0], label.astype(logits.dtype)
        return jax.nn.softplus(z) - y * z
    return -jax.nn.log_softmax(logits)[label]


def example_margin(logits: Float[Array, " k"], label: Int[Array, ""]) -> Float[Array, ""]:
    """How strongly the model predicts `label`: the signed logit (binary), else the
    label's logit minus the largest other logit."""
    if logits.shape[-1] == 1:
        return jnp.where(label == 1, logits[0], -logits[0])
    others = jnp.where(jnp.arange(logits.shape[-1]) == label, -jnp.inf, logits)
    return logits[label] - jnp.max(others)


class RealModelOptions(DPSGDOptions, total=False):
    """The keywords every real-model mechanism takes after its canary's: the model, the
    data and DP-SGD's own (`DPSGDOptions`), each optional.

    A constructor takes `**options: Unpack[RealModelOptions]` and hands them to
    `AbstractRealModel`, which sets the defaults and checks them in one place; sweep
    configs read the keys off the annotation.

    Keys:
        dataset: "breast_cancer" (default) or "digits" (`load_dataset`).
        model: "logistic" (default) or "mlp" (one tanh hidden layer of `width`).
        width: the MLP's hidden width (default 32; ignored for "logistic").
        num_examples: train on the first n examples of the training split (default all).
        max_batch_size: B in [1, n], the examples whose gradients one block computes
            (default `poisson_batch_bound(n, q)`; a larger sampled batch takes more blocks,
            never drops an example; n computes all n every step).
        model_seed: seed of the public initial parameters (default 0; identical in both
            worlds).
        split_seed: seed of the train/test split (default 0).
        learning_rate: as in `DPSGDOptions`, but 0.1 by default here (eta / (q n) for the
            averaged update).
    """

    dataset: Literal["breast_cancer", "digits"]
    model: Literal["logistic", "mlp"]
    width: int
    num_examples: int | None
    max_batch_size: int | None
    model_seed: int
    split_seed: int


class AbstractRealModel(AbstractPerExampleData):
    """Shared machinery: an equinox model on a bundled dataset, examples sampled one by one.

    Declares the fields every real-model mechanism holds (its constructor sets them;
    concrete classes add their canary's); this base supplies the model (`module`,
    `logits`, `loss`), the per-example gradients the engine samples (`example_gradients`),
    and `init_model`.
    """

    params: DPSGDParams
    dataset: str = eqx.field(static=True)
    model: str = eqx.field(static=True)
    width: int = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    out_size: int = eqx.field(static=True)
    split_seed: int = eqx.field(static=True)
    num_examples: int = eqx.field(static=True)
    max_batch_size: int = eqx.field(static=True)
    features: np.ndarray
    labels: np.ndarray
    initial_params: np.ndarray

    def _init_shared(self, steps, sampling_prob, noise_multiplier, options) -> Dataset:
        """Sets the fields above from a constructor's arguments and its `RealModelOptions`
        (defaulted and validated here) and returns the dataset."""
        check_keywords(type(self).__name__, options, RealModelOptions)
        options = dict(options)
        dataset = options.pop("dataset", "breast_cancer")
        model = options.pop("model", "logistic")
        width = options.pop("width", 32)
        num_examples = options.pop("num_examples", None)
        max_batch_size = options.pop("max_batch_size", None)
        model_seed = options.pop("model_seed", 0)
        split_seed = options.pop("split_seed", 0)
        options.setdefault("learning_rate", 0.1)
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **options)
        if dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")
        self.dataset, self.model, self.split_seed = dataset, model, split_seed
        self.width = check_int("width", width, minimum=1)
        data = load_dataset(dataset, split_seed=split_seed)
        n = data.x_train.shape[0]
        if num_examples is not None:
            n = check_int("num_examples", num_examples, maximum=n)
        if max_batch_size is None:
            max_batch_size = poisson_batch_bound(n, float(self.params.sampling_prob))
        self.max_batch_size = check_int("max_batch_size", max_batch_size, minimum=1, maximum=n)
        self.num_examples = n
        self.in_size = data.x_train.shape[1]
        self.out_size = 1 if data.num_classes == 2 else data.num_classes
        seed = check_int("model_seed", model_seed, minimum=0)
        skeleton = build_network(
            model, self.in_size, self.out_size, self.width, key=jax.random.key(seed)
        )
        flat, _ = ravel_pytree(eqx.filter(skeleton, eqx.is_array))
        self.features, self.labels = data.x_train[:n], data.y_train[:n]
        self.initial_params = np.asarray(flat, np.float32)
        return data

    def skeleton(self) -> eqx.Module:
        """An equinox model of the right structure (its values are not the run's)."""
        return build_network(
            self.model, self.in_size, self.out_size, self.width, key=jax.random.key(0)
        )

    def module(self, flat: Float[Array, " d"]) -> eqx.Module:
        """The equinox model whose arrays are `flat` (the engine's model vector), in the
        order of `ravel_pytree` (leaves in tree order, each row-major)."""
        shapes, static = _structure(self.model, self.in_size, self.out_size, self.width)
        leaves, treedef = jax.tree_util.tree_flatten(shapes)
        sizes = [int(np.prod(leaf.shape)) for leaf in leaves]
        parts = jnp.split(flat, np.cumsum(sizes)[:-1])
        arrays = [p.reshape(leaf.shape) for p, leaf in zip(parts, leaves, strict=True)]
        return eqx.combine(jax.tree_util.tree_unflatten(treedef, arrays), static)

    def logits(self, flat: Float[Array, " d"], x: Float[Array, " p"]) -> Float[Array, " k"]:
        """The model's logits on one input."""
        return self.module(flat)(x)

    def loss(self, flat, x, label) -> Float[Array, ""]:
        """One example's loss (binary or softmax cross-entropy)."""
        return example_loss(self.logits(flat, x), label)

    def predict(self, flat: Float[Array, " d"], x: Float[Array, "n p"]) -> Int[Array, " n"]:
        """Predicted classes of a batch of inputs."""
        logits = jax.vmap(self.module(flat))(x)
        if logits.shape[-1] == 1:
            return (logits[:, 0] > 0).astype(jnp.int32)
        return jnp.argmax(logits, -1).astype(jnp.int32)

    def init_model(self) -> Float[Array, " d"]:
        return jnp.asarray(self.initial_params)

    def example_gradients(
        self, model: Float[Array, " d"], indices: Int[Array, " k"], t: Int[Array, ""]
    ) -> Float[Array, "k d"]:
        x = jnp.asarray(self.features, model.dtype)[indices]
        y = jnp.asarray(self.labels)[indices]
        return jax.vmap(jax.grad(self.loss), in_axes=(None, 0, 0))(model, x, y)

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

**The flat model.** The engine's model is a flat float32 vector (`ravel_pytree` of the
equinox model's arrays); `module(flat)` rebuilds the equinox model from it (the skeleton is
rebuilt from static sizes under the trace and only its structure is used), so runs of many
models are vmapped per compiled block by `advsim.simulate` unchanged.

**Canaries.** `RealModelGradientCanary` inserts a crafted gradient $-C u$ (a parameter
coordinate $u = e_j$ or a direction; Algorithm 4 of arXiv:2405.14457 with
`CanarySchedule.every(k, first=k, sampled=False)`) and is an `AbstractDirectedCanary`, so
`BiasedCoordinate`, `RandomDirection` and `SimulatedBiasedDimension` craft it.
`RealModelInputCanary` adds one input-space example (a held-out example with a wrong label,
or an out-of-range input), Poisson-sampled like the others; it is an
`AbstractCanaryExample`, which `advsim.adversaries.CanaryLoss` needs.

Use `learning_rate` = $\eta / (qn)$ for the averaged update of DP-SGD with expected batch
size $qn$.
"""

from __future__ import annotations

import abc
import functools
from typing import Literal, NamedTuple, Unpack

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int, PRNGKeyArray

from advsim._dpsgd import bernoulli_from_bits, run_mechanism
from advsim._mechanism import (
    AbstractDirectedCanary,
    AbstractMechanism,
    AbstractPerExampleData,
    CanarySchedule,
    DPSGDOptions,
    DPSGDParams,
    poisson_batch_bound,
)
from advsim._validation import check_in_interval, check_int, check_positive
from advsim.mechanisms.gradient_canary import unit_direction

__all__ = [
    "AbstractCanaryExample",
    "AbstractRealModel",
    "Dataset",
    "RealModelGradientCanary",
    "RealModelInputCanary",
    "load_dataset",
    "heldout_accuracy",
    "accuracy_report",
]

DATASETS = ("breast_cancer", "digits")
MODELS = ("logistic", "mlp")
INPUT_CANARIES = ("mislabeled", "out_of_range")


class Dataset(NamedTuple):
    """A fixed train/test split, features standardised with the training set's statistics."""

    x_train: np.ndarray  # (n, p) float32
    y_train: np.ndarray  # (n,) int32
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int


@functools.lru_cache(maxsize=8)
def load_dataset(name: str, *, test_fraction: float = 0.25, split_seed: int = 0) -> Dataset:
    """One of scikit-learn's bundled datasets, split and standardised (nothing downloads).

    The split is a numpy permutation drawn from `split_seed` (`test_fraction` of the
    examples held out); every feature is centred and scaled by the training set's mean and
    standard deviation (constant features, such as digits' blank pixels, are only centred).

    Args:
        name: "breast_cancer" (569 x 30, 2 classes) or "digits" (1797 x 64, 10 classes).
        test_fraction: in (0, 1).
        split_seed: seed of the split.

    Returns:
        A `Dataset` of read-only arrays.

    Raises:
        ValueError: an unknown name or a test_fraction outside (0, 1).
        ImportError: scikit-learn is missing (install the `models` extra).
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    test_fraction = check_in_interval("test_fraction", test_fraction, 0.0, 1.0)
    split_seed = check_int("split_seed", split_seed, minimum=0)
    try:
        from sklearn import datasets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the real-model mechanisms need scikit-learn's bundled datasets: "
            "pip install 'advsim[models]' (or pip install 'scikit-learn>=1.3')"
        ) from err
    loader = datasets.load_breast_cancer if name == "breast_cancer" else datasets.load_digits
    bunch = loader()
    x, y = np.asarray(bunch.data, np.float64), np.asarray(bunch.target, np.int32)
    order = np.random.default_rng(split_seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(0), x[train].std(0)
    std = np.where(std > 0, std, 1.0)
    arrays = [((x[i] - mean) / std).astype(np.float32) for i in (train, test)]
    out = Dataset(arrays[0], y[train], arrays[1], y[test], int(y.max()) + 1)
    for a in out[:4]:
        a.setflags(write=False)
    return out


def _build(model: str, in_size: int, out_size: int, width: int, *, key: PRNGKeyArray):
    if model == "logistic":
        return eqx.nn.Linear(in_size, out_size, key=key)
    return eqx.nn.MLP(in_size, out_size, width, depth=1, activation=jnp.tanh, key=key)


@functools.lru_cache(maxsize=32)
def _structure(model: str, in_size: int, out_size: int, width: int):
    """The model's array shapes and its non-array part, without building it (no init ops
    under the engine's trace)."""
    shaped = eqx.filter_eval_shape(
        lambda: _build(model, in_size, out_size, width, key=jax.random.key(0))
    )
    is_shape = lambda x: isinstance(x, jax.ShapeDtypeStruct)  # noqa: E731
    return eqx.partition(shaped, is_shape, is_leaf=is_shape)


def _example_loss(logits: Float[Array, " k"], label: Int[Array, ""]) -> Float[Array, ""]:
    """Binary cross-entropy on one logit (k = 1), softmax cross-entropy otherwise."""
    if logits.shape[-1] == 1:
        z, y = logits[0], label.astype(logits.dtype)
        return jax.nn.softplus(z) - y * z
    return -jax.nn.log_softmax(logits)[label]


def _margin(logits: Float[Array, " k"], label: Int[Array, ""]) -> Float[Array, ""]:
    """How strongly the model predicts `label`: the signed logit (binary), else the
    label's logit minus the largest other logit."""
    if logits.shape[-1] == 1:
        return jnp.where(label == 1, logits[0], -logits[0])
    others = jnp.where(jnp.arange(logits.shape[-1]) == label, -jnp.inf, logits)
    return logits[label] - jnp.max(others)


class AbstractRealModel(AbstractPerExampleData):
    """Shared machinery: an equinox model on a bundled dataset, examples sampled one by one.

    Concrete classes declare the fields below and their canary; this base supplies the
    model (`module`, `logits`, `loss`), the per-example gradients the engine samples
    (`example_gradients`), and `init_model`.
    """

    dataset: eqx.AbstractVar[str]
    model: eqx.AbstractVar[str]
    width: eqx.AbstractVar[int]
    in_size: eqx.AbstractVar[int]
    out_size: eqx.AbstractVar[int]
    split_seed: eqx.AbstractVar[int]
    features: eqx.AbstractVar[np.ndarray]
    labels: eqx.AbstractVar[np.ndarray]
    initial_params: eqx.AbstractVar[np.ndarray]

    def skeleton(self) -> eqx.Module:
        """An equinox model of the right structure (its values are not the run's)."""
        return _build(self.model, self.in_size, self.out_size, self.width, key=jax.random.key(0))

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
        return _example_loss(self.logits(flat, x), label)

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


class AbstractCanaryExample(AbstractMechanism):
    """A mechanism whose canary is an input-space example (`canary_x`, `canary_y`).

    `canary_loss(model)` and `canary_margin(model)` read the canary's loss and margin off a
    released model. Needed by `advsim.adversaries.CanaryLoss`.
    """

    @abc.abstractmethod
    def canary_loss(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        """The canary's loss at `model`."""

    @abc.abstractmethod
    def canary_margin(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        """The canary's margin at `model` (its label's logit over the others')."""


def _fields(steps, sampling_prob, noise_multiplier, shared, dpsgd) -> tuple[dict, Dataset]:
    """The fields both real-model mechanisms share (validated), and the dataset; `shared` is
    (dataset, model, width, num_examples, max_batch_size, model_seed, split_seed)."""
    dataset, model, width, num_examples, max_batch_size, model_seed, split_seed = shared
    params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    width = check_int("width", width, minimum=1)
    data = load_dataset(dataset, split_seed=split_seed)
    n_all = data.x_train.shape[0]
    n = n_all if num_examples is None else check_int("num_examples", num_examples, maximum=n_all)
    if max_batch_size is None:
        max_batch_size = poisson_batch_bound(n, float(params.sampling_prob))
    max_batch_size = check_int("max_batch_size", max_batch_size, minimum=1, maximum=n)
    in_size = data.x_train.shape[1]
    out_size = 1 if data.num_classes == 2 else data.num_classes
    seed = check_int("model_seed", model_seed, minimum=0)
    skeleton = _build(model, in_size, out_size, width, key=jax.random.key(seed))
    flat, _ = ravel_pytree(eqx.filter(skeleton, eqx.is_array))
    fields = dict(
        params=params, dataset=dataset, model=model, width=width, in_size=in_size,
        out_size=out_size, split_seed=split_seed, num_examples=n,
        max_batch_size=max_batch_size, features=data.x_train[:n], labels=data.y_train[:n],
        initial_params=np.asarray(flat, np.float32),
    )  # fmt: skip
    return fields, data


_ARGS_DOC = """
        steps: T >= 1.
        sampling_prob: q in (0, 1], each training example's Poisson rate.
        noise_multiplier: sigma > 0.
        dataset: "breast_cancer" or "digits" (`load_dataset`).
        model: "logistic" or "mlp" (one tanh hidden layer of `width`).
        width: the MLP's hidden width (default 32; ignored for "logistic").
        num_examples: train on the first n examples of the training split (default all).
        max_batch_size: B in [1, n], the examples whose gradients one block computes
            (default `poisson_batch_bound(n, q)`; a larger sampled batch takes more blocks,
            never drops an example; n computes all n every step).
        model_seed: seed of the public initial parameters (identical in both worlds).
        split_seed: seed of the train/test split."""

_DPSGD_DOC = """
        **dpsgd: clip_norm, learning_rate, canary_schedule, batching (see
            `advsim.DPSGDParams`); learning_rate defaults to 0.1 here (eta / (q n) for
            the averaged update)."""


class RealModelGradientCanary(AbstractRealModel, AbstractDirectedCanary):
    r"""A real model trained with DP-SGD plus a crafted gradient canary $-C u$.

    Algorithm 4 of arXiv:2405.14457 with `CanarySchedule.every(k, first=k, sampled=False)`
    (the default is every step, always inserted); a sampled schedule Poisson-samples it.
    The canary direction $u$ is a parameter coordinate or a vector, in the order of
    `ravel_pytree` of the equinox model (`coordinate_names()` says which is which).

    Args:{args}
        canary_direction: a coordinate index or a vector of length `dim`.{dpsgd}
            canary_schedule defaults to every step, not sampled.

    Raises:
        ValueError: any argument outside its range (the message names it).

    Example:
        >>> mech = RealModelGradientCanary(10, 0.1, 1.0, model="logistic")
        >>> mech.dim, mech.features.shape
        (31, (427, 30))
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
    dim: int = eqx.field(static=True)
    features: np.ndarray
    labels: np.ndarray
    initial_params: np.ndarray
    canary_direction: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        dataset: Literal["breast_cancer", "digits"] = "breast_cancer",
        model: Literal["logistic", "mlp"] = "logistic",
        width: int = 32,
        num_examples: int | None = None,
        max_batch_size: int | None = None,
        model_seed: int = 0,
        split_seed: int = 0,
        canary_direction=0,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        if dpsgd.get("canary_schedule") is None:
            dpsgd["canary_schedule"] = CanarySchedule.every(1, sampled=False)
        dpsgd.setdefault("learning_rate", 0.1)
        shared = (dataset, model, width, num_examples, max_batch_size, model_seed, split_seed)
        fields, _ = _fields(steps, sampling_prob, noise_multiplier, shared, dpsgd)
        for name, value in fields.items():
            setattr(self, name, value)
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
        skeleton = _build(
            self.model, self.in_size, self.out_size, self.width, key=jax.random.key(0)
        )
        names = []
        leaves = jax.tree_util.tree_leaves_with_path(eqx.filter(skeleton, eqx.is_array))
        for path, leaf in leaves:
            stem = jax.tree_util.keystr(path).lstrip(".")
            names += [f"{stem}[{','.join(map(str, i))}]" for i in np.ndindex(leaf.shape)]
        return names


RealModelGradientCanary.__doc__ = RealModelGradientCanary.__doc__.format(
    args=_ARGS_DOC, dpsgd=_DPSGD_DOC
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
        canary_scale: the out-of-range canary's feature value (default 10).{dpsgd}
            canary_schedule defaults to every step, Poisson-sampled.

    Raises:
        ValueError: any argument outside its range (the message names it).
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
    canary: str = eqx.field(static=True)
    features: np.ndarray
    labels: np.ndarray
    initial_params: np.ndarray
    canary_x: np.ndarray
    canary_y: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        dataset: Literal["breast_cancer", "digits"] = "breast_cancer",
        model: Literal["logistic", "mlp"] = "logistic",
        width: int = 32,
        num_examples: int | None = None,
        max_batch_size: int | None = None,
        model_seed: int = 0,
        split_seed: int = 0,
        canary: Literal["mislabeled", "out_of_range"] = "mislabeled",
        canary_index: int = 0,
        canary_scale: float = 10.0,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        dpsgd.setdefault("learning_rate", 0.1)
        shared = (dataset, model, width, num_examples, max_batch_size, model_seed, split_seed)
        fields, data = _fields(steps, sampling_prob, noise_multiplier, shared, dpsgd)
        for name, value in fields.items():
            setattr(self, name, value)
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
        return _margin(self.logits(model, x), jnp.asarray(self.canary_y))


RealModelInputCanary.__doc__ = RealModelInputCanary.__doc__.format(args=_ARGS_DOC, dpsgd=_DPSGD_DOC)


# --- training is real: test accuracy beside the audit -------------------------------------


def heldout_accuracy(mechanism: AbstractRealModel, models: Float[Array, "... d"]) -> np.ndarray:
    """Accuracy on the held-out split of the mechanism's dataset, per model (host float64)."""
    if not isinstance(mechanism, AbstractRealModel):
        raise TypeError(f"mechanism must be an AbstractRealModel, got {type(mechanism).__name__}")
    data = load_dataset(mechanism.dataset, split_seed=mechanism.split_seed)
    x, y = jnp.asarray(data.x_test), jnp.asarray(data.y_test)
    flat = jnp.reshape(jnp.asarray(models), (-1, mechanism.initial_params.shape[0]))
    acc = jax.vmap(lambda m: jnp.mean(mechanism.predict(m, x) == y))(flat)
    return np.asarray(acc, np.float64).reshape(np.shape(models)[:-1])


@eqx.filter_jit
def _nonprivate_runs(mechanism, keys):
    """Poisson-sampled SGD with the same rate and step sizes, no clipping and no noise."""

    def run(key):
        t = jnp.arange(1, mechanism.steps + 1, dtype=jnp.int32)
        n = mechanism.features.shape[0]
        masks = bernoulli_from_bits(key, mechanism.sampling_prob, (mechanism.steps, n))
        if mechanism.batching == "fixed":
            masks = jnp.ones_like(masks)

        def body(m, xs):
            t_, mask = xs
            grads = mechanism.data_gradients(m, t_)
            total = jnp.sum(mask.astype(m.dtype)[:, None] * grads, 0)
            return m - jnp.asarray(mechanism.step_size(t_), m.dtype) * total, None

        final, _ = jax.lax.scan(body, mechanism.init_model(), (t, masks))
        return final

    return jax.vmap(run)(keys)


@eqx.filter_jit
def _private_runs(mechanism, keys):
    return jax.vmap(lambda k: run_mechanism(mechanism, False, key=k))(keys)


def accuracy_report(mechanism: AbstractRealModel, *, runs: int = 8, seed: int = 0) -> dict:
    """Test accuracy of models trained without the canary: private (the engine's DP-SGD)
    and non-private (the same Poisson batches' rate and step sizes, no clipping, no noise).

    Args:
        mechanism: the run (its canary is left out: the world without it).
        runs: models trained of each kind (>= 1).
        seed: their keys are `fold_in(key(seed), i)` (private) and `fold_in(key(seed + 1), i)`.

    Returns:
        `{"private_mean", "private_min", "private_max", "nonprivate_mean", "nonprivate_min",
        "nonprivate_max", "initial", "runs", "num_train", "num_test"}`.
    """
    runs = check_int("runs", runs, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    keys = [jax.vmap(lambda i, s=s: jax.random.fold_in(jax.random.key(s), i))(jnp.arange(runs))
            for s in (seed, seed + 1)]  # fmt: skip
    private = heldout_accuracy(mechanism, _private_runs(mechanism, keys[0]))
    plain = heldout_accuracy(mechanism, _nonprivate_runs(mechanism, keys[1]))
    data = load_dataset(mechanism.dataset, split_seed=mechanism.split_seed)
    return dict(
        private_mean=float(private.mean()), private_min=float(private.min()),
        private_max=float(private.max()), nonprivate_mean=float(plain.mean()),
        nonprivate_min=float(plain.min()), nonprivate_max=float(plain.max()),
        initial=float(heldout_accuracy(mechanism, mechanism.init_model())), runs=runs,
        num_train=int(mechanism.features.shape[0]), num_test=int(data.x_test.shape[0]),
    )  # fmt: skip

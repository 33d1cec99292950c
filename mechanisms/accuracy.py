"""Training is real: the held-out accuracy of the real models beside the audit.

`heldout_accuracy` scores released models on the held-out split of their dataset, and
`accuracy_report` compares models trained privately (the engine's DP-SGD) and without
privacy (the same Poisson rate and step sizes, no clipping, no noise).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from advsim import bernoulli_from_bits, run_mechanism
from advsim.mechanisms.datasets import load_dataset
from advsim.mechanisms.networks import AbstractRealModel
from advsim.validation import check_int

__all__ = ["accuracy_report", "heldout_accuracy"]


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

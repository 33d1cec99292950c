"""The DP-SGD step and one simulated run: clipping, sampling, noise, regularizer.

Everything here is pure and jittable. A run's randomness comes from one key: its noise
(shape `(T, d)`), its canary coins (`(T,)`) and its sampled group counts (`(T, g)`) are drawn
up front from sub-keys of that key, so one run gives the same numbers whether it is
simulated alone or in a batch of any size, on one device or many.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from advsim._binomial import AbstractBinomialSampler
from advsim._mechanism import AbstractMechanism

__all__ = ["bernoulli_from_bits", "clip_gradients", "dpsgd_update", "run_mechanism"]


def clip_gradients(grads: Float[Array, "... d"], clip_norm) -> Float[Array, "... d"]:
    """Per-example clipping to L2 norm `clip_norm` (row-wise): g / max(1, ||g|| / C)."""
    sq = jnp.sum(jnp.square(grads), axis=-1, keepdims=True)
    # The double `where` keeps the derivative finite at g = 0 (sqrt'(0) is inf), for
    # adversaries that differentiate through a run; a zero gradient stays exactly zero.
    positive = sq > 0
    norms = jnp.sqrt(jnp.where(positive, sq, 1.0))
    scale = jnp.where(positive, jnp.minimum(1.0, clip_norm / norms), 1.0)
    return grads * scale


def bernoulli_from_bits(key: PRNGKeyArray, prob, shape) -> Bool[Array, ...]:
    """Bernoulli(prob) draws from 32 random bits each.

    `jax.random.uniform(...) < prob` in float32 has a granularity of 2^-23, which would
    turn q = 1e-6 into 9.5e-7; comparing the raw bits with prob * 2^32 does not: below
    prob = 2^-8 the comparison is exact (integers < 2^24 are exact in float32), so the
    probability is prob up to 2^-32; above, the float32 rounding of prob and of the bits
    leaves a relative error of at most about 2^-24.
    """
    bits = jax.random.bits(key, shape, jnp.uint32)
    prob = jnp.asarray(prob, jnp.float32)
    # Integers below 2^24 are exact in float32, so small probabilities compare exactly.
    return (bits.astype(jnp.float32) < prob * 4294967296.0) | (prob >= 1.0)


def dpsgd_update(
    mechanism: AbstractMechanism,
    model: Float[Array, " d"],
    t: Int[Array, ""],
    canary_present: Bool[Array, ""],
    counts: Int[Array, " g"],
    std_noise: Float[Array, " d"],
) -> Float[Array, " d"]:
    """One step of Algorithm 1 of arXiv:2410.06186, given the step's randomness.

    Args:
        mechanism: supplies the gradients and hyperparameters.
        model: m_{t-1}.
        t: the 1-indexed step.
        canary_present: whether the canary is in this step's batch.
        counts: sampled number of examples of each group in the batch.
        std_noise: standard normal draws, scaled here by sigma * C.

    Returns:
        m_t.
    """
    dtype = model.dtype
    c = jnp.asarray(mechanism.clip_norm, dtype)
    sigma = jnp.asarray(mechanism.noise_multiplier, dtype)
    lr = jnp.asarray(mechanism.step_size(t), dtype)
    grad_sum = jnp.zeros_like(model)
    data = mechanism.data_gradients(model, t)
    if data.shape[0] > 0:
        # An explicit reduction, not a matmul: its summation order does not depend on how
        # many runs are batched together, so results are identical for any chunk size.
        grad_sum = grad_sum + jnp.sum(counts.astype(dtype)[:, None] * clip_gradients(data, c), 0)
    canary = clip_gradients(mechanism.canary_gradient(model, t), c)
    grad_sum = grad_sum + jnp.where(canary_present, canary, jnp.zeros_like(canary))
    reg = mechanism.regularizer_gradient(model, t)
    return model - lr * (grad_sum + reg + sigma * c * std_noise)


def _group_counts(sampler, key, count, q, steps: int, dtype) -> Int[Array, " T"]:
    """One group's T sampled counts: its sampler's draws, or jax.random.binomial's."""
    if sampler is None:
        return jax.random.binomial(key, count.astype(dtype), q, (steps,), dtype)
    return sampler.sample((steps,), key=key)


def run_mechanism(
    mechanism: AbstractMechanism,
    canary_in: Bool[Array, ""] | bool,
    *,
    key: PRNGKeyArray,
    release: str = "last",
    count_samplers: tuple[AbstractBinomialSampler | None, ...] | None = None,
) -> Float[Array, ...]:
    """Simulates one DP-SGD run and returns its release.

    Args:
        mechanism: the run to simulate.
        canary_in: whether this is the world with the canary.
        key: the run's key; it alone determines the run.
        release: "last" returns m_T, shape (d,); "all" returns m_0..m_T, shape (T+1, d).
        count_samplers: how the Poisson-sampled group counts are drawn. None (the
            default): all groups at once by `jax.random.binomial(k_count, counts, q,
            (T, g))`. Otherwise one entry per group, drawn from `fold_in(k_count, j)`:
            a sampler built for that group's (count, q) (`advsim._binomial`, e.g. the
            exact `BinomialTable`), or None for `jax.random.binomial` of that group
            alone. `advsim.simulate` passes tables for huge groups (see its `binomial`).

    Returns:
        The released output.
    """
    steps = mechanism.steps
    model = mechanism.init_model()
    dtype = model.dtype
    k_noise, k_coin, k_count = jax.random.split(key, 3)
    # The (T, d) normals drawn flat (the same numbers as normal(k_noise, (T, d)): jax draws
    # the bits flat) and sliced per step in the scan: under vmap on CPU, a (T, d) array with
    # d not a multiple of 8 (d = 10, 12, 30) cost 3-5x more per normal to draw and to scan
    # over (measured: 26-55 ns per normal at d = 10 against 8 ns flat).
    dim = model.shape[-1]
    noise = jax.random.normal(k_noise, (steps * dim,), dtype)
    t = jnp.arange(1, steps + 1, dtype=jnp.int32)

    schedule = mechanism.canary_schedule
    present = schedule.mask(t) & jnp.asarray(canary_in)
    if schedule.sampled and mechanism.batching == "poisson":
        present = present & bernoulli_from_bits(k_coin, mechanism.sampling_prob, (steps,))

    group_counts = jnp.asarray(mechanism.data_counts())
    if group_counts.shape[0] > 0 and mechanism.batching == "poisson":
        q = jnp.asarray(mechanism.sampling_prob, dtype)
        # int64 under x64 (jax's default integer then), so groups of ~10^10 examples fit;
        # int32 otherwise, where counts above 2^24 would not be exact in float32 anyway.
        count_dtype = jnp.int64 if dtype == jnp.float64 else jnp.int32
        if count_samplers is None:
            counts = jax.random.binomial(
                k_count, group_counts.astype(dtype), q, (steps, group_counts.shape[0]), dtype
            ).astype(count_dtype)
        else:
            counts = jnp.stack(
                [
                    _group_counts(sampler, jax.random.fold_in(k_count, j), n, q, steps, dtype)
                    for j, (sampler, n) in enumerate(zip(count_samplers, group_counts, strict=True))
                ],
                axis=1,
            ).astype(count_dtype)
    else:
        counts = jnp.broadcast_to(group_counts, (steps, group_counts.shape[0]))

    def body(m, xs):
        t_, present_, counts_ = xs
        noise_ = jax.lax.dynamic_slice(noise, ((t_ - 1) * dim,), (dim,))
        m_next = dpsgd_update(mechanism, m, t_, present_, counts_, noise_)
        return m_next, (m_next if release == "all" else None)

    final, trajectory = jax.lax.scan(body, model, (t, present, counts))
    if release == "all":
        return jnp.concatenate([model[None], trajectory], axis=0)
    return final

"""The DP-SGD step and one simulated run: clipping, sampling, noise, regularizer.

Everything here is pure and jittable. A run's randomness comes from one key: its noise
(shape `(T, d)`), its canary coins (`(T,)`) and its sampled group counts (`(T, g)`) or, for
an `AbstractPerExampleData` mechanism, its examples' memberships (`(T, n)`) are drawn from
sub-keys of that key, so one run gives the same numbers whether it is simulated alone or
in a batch of any size, on one device or many. The counts are drawn up front; so are the
noise and coins of a run of at most 2 x `SEGMENT_STEPS` steps, while a longer run draws
them `SEGMENT_STEPS` steps at a time inside its scan (`advsim._streams`: the very same
random numbers, without holding the whole (T, d) block). The two paths are two compiled
programs, whose float32 rounding of the updates can differ by a few ulps (more where a
nonlinear model amplifies them; tests/advsim/test_streams.py); which one runs depends on T
alone, never on the chunk size or the devices.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from advsim._binomial import AbstractBinomialSampler
from advsim._mechanism import AbstractMechanism, AbstractPerExampleData, AbstractProjected
from advsim._streams import (
    SEGMENT_STEPS,
    bits_range,
    in_segments,
    normal_range,
    range_supported,
)

__all__ = [
    "bernoulli_from_bits",
    "clip_gradients",
    "dpsgd_update",
    "gathers_sampled_examples",
    "ANY_STEPS_TIERS",
    "any_steps_draws",
    "run_any_steps",
    "run_any_steps_lanes",
    "run_mechanism",
    "sampled_gradient_sum",
]


def clip_gradients(grads: Float[Array, "... d"], clip_norm) -> Float[Array, "... d"]:
    """Per-example clipping to L2 norm `clip_norm` (row-wise): g / max(1, ||g|| / C).

    The clipping the engine applies to every example's gradient; an adversary that
    predicts a clipped gradient (a projection on the canary's update) calls it too.

    Args:
        grads: gradients, one per row of the last axis.
        clip_norm: C > 0, a scalar.

    Returns:
        `grads` with every row of norm above C scaled down to norm C (a zero row stays
        zero, with a finite derivative).
    """
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
    leaves a relative error of at most about 2^-24. The engine draws Poisson memberships
    this way.

    Args:
        key: a jax PRNG key.
        prob: the success probability in [0, 1], a scalar (traced or not).
        shape: the shape of the draws.

    Returns:
        A boolean array of `shape`.
    """
    return _bernoulli(jax.random.bits(key, shape, jnp.uint32), prob)


def _bernoulli(bits, prob) -> Bool[Array, ...]:
    """`bernoulli_from_bits`'s comparison of 32-bit `bits` with prob * 2^32."""
    prob = jnp.asarray(prob, jnp.float32)
    # Integers below 2^24 are exact in float32, so small probabilities compare exactly.
    return (bits.astype(jnp.float32) < prob * 4294967296.0) | (prob >= 1.0)


def gathers_sampled_examples(mechanism: AbstractMechanism) -> bool:
    """Whether the engine computes only the sampled examples' gradients, in blocks of
    `max_batch_size` (Poisson-sampled `AbstractPerExampleData` with B < n)."""
    return (
        isinstance(mechanism, AbstractPerExampleData)
        and mechanism.batching == "poisson"
        and mechanism.max_batch_size < mechanism.num_examples
    )


def sampled_gradient_sum(
    mechanism: AbstractPerExampleData,
    model: Float[Array, " d"],
    t: Int[Array, ""],
    members: Int[Array, " n"],
    clip_norm,
) -> Float[Array, " d"]:
    """The sum of the clipped gradients of the sampled examples (`members` > 0), computed
    on the sampled examples only, `max_batch_size` B at a time.

    The k sampled indices, in index order, are gathered into blocks of B (the last one
    padded and masked); a `lax.while_loop` adds block after block until all k are in, so
    the sum is exact for any k (ceil(k / B) blocks, at least one). Under `vmap` the loop
    runs the lanes' largest number of blocks; a lane's own sum is unchanged by the others'
    (its extra iterations are discarded), so results do not depend on the batch of runs.
    """
    size = mechanism.max_batch_size
    n = members.shape[0]
    member = members > 0
    rank = jnp.cumsum(member.astype(jnp.int32)) - 1  # position among the sampled examples
    total = rank[-1] + 1
    positions = jnp.arange(n, dtype=jnp.int32)
    lanes = jnp.arange(size, dtype=jnp.int32)

    def block(b):
        start = b * size
        slot = jnp.where(member & (rank >= start) & (rank < start + size), rank - start, size)
        index = jnp.zeros((size,), jnp.int32).at[slot].set(positions, mode="drop")
        grads = clip_gradients(mechanism.example_gradients(model, index, t), clip_norm)
        valid = lanes < total - start
        # An explicit reduction (see dpsgd_update); padded rows are exact zeros.
        return jnp.sum(jnp.where(valid[:, None], grads, jnp.zeros_like(grads)), 0)

    def more(carry):
        return carry[0] * size < total

    def next_block(carry):
        b, acc = carry
        return b + 1, acc + block(b)

    _, acc = jax.lax.while_loop(more, next_block, (jnp.int32(1), block(jnp.int32(0))))
    return acc


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
        counts: sampled number of examples of each group in the batch (for an
            `AbstractPerExampleData` mechanism: each example's 0/1 membership).
        std_noise: standard normal draws, scaled here by sigma * C.

    Returns:
        m_t (projected by `mechanism.project` for an `AbstractProjected` mechanism).
    """
    dtype = model.dtype
    c = jnp.asarray(mechanism.clip_norm, dtype)
    sigma = jnp.asarray(mechanism.noise_multiplier, dtype)
    lr = jnp.asarray(mechanism.step_size(t), dtype)
    grad_sum = jnp.zeros_like(model)
    if gathers_sampled_examples(mechanism):
        grad_sum = grad_sum + sampled_gradient_sum(mechanism, model, t, counts, c)
    elif (data := mechanism.data_gradients(model, t)).shape[0] > 0:
        # An explicit reduction, not a matmul: its summation order does not depend on how
        # many runs are batched together, so results are identical for any chunk size.
        grad_sum = grad_sum + jnp.sum(counts.astype(dtype)[:, None] * clip_gradients(data, c), 0)
    canary = clip_gradients(mechanism.canary_gradient(model, t), c)
    grad_sum = grad_sum + jnp.where(canary_present, canary, jnp.zeros_like(canary))
    reg = mechanism.regularizer_gradient(model, t)
    stepped = model - lr * (grad_sum + reg + sigma * c * std_noise)
    if isinstance(mechanism, AbstractProjected):
        return mechanism.project(stepped)
    return stepped


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
            a sampler built for that group's (count, q) (e.g. an exact binomial
            table), or None for `jax.random.binomial` of that group
            alone. `advsim.simulate` passes tables for huge groups (see its `binomial`).
            Not used for an `AbstractPerExampleData` mechanism: its examples' Poisson
            memberships are `bernoulli_from_bits(k_count, q, (T, n))`, and the engine
            computes the sampled examples' gradients only (`sampled_gradient_sum`) when
            its `max_batch_size` is below n.

    Returns:
        The released output.
    """
    steps = mechanism.steps
    model = mechanism.init_model()
    dtype = model.dtype
    k_noise, k_coin, k_count = jax.random.split(key, 3)
    dim = model.shape[-1]
    t = jnp.arange(1, steps + 1, dtype=jnp.int32)
    schedule = mechanism.canary_schedule
    coins = schedule.sampled and mechanism.batching == "poisson"
    q = jnp.asarray(mechanism.sampling_prob)
    group_counts = jnp.asarray(mechanism.data_counts())
    if isinstance(mechanism, AbstractPerExampleData) and mechanism.batching == "poisson":
        # Each example's Poisson membership, 32 random bits each (cheaper than a
        # Binomial(1, q) draw; the same draws whether or not the engine gathers).
        members = bernoulli_from_bits(
            k_count, mechanism.sampling_prob, (steps, mechanism.num_examples)
        )
        counts = members.astype(jnp.int32)
    elif group_counts.shape[0] > 0 and mechanism.batching == "poisson":
        q_groups = jnp.asarray(mechanism.sampling_prob, dtype)
        # int64 under x64 (jax's default integer then), so groups of ~10^10 examples fit;
        # int32 otherwise, where counts above 2^24 would not be exact in float32 anyway.
        count_dtype = jnp.int64 if dtype == jnp.float64 else jnp.int32
        if count_samplers is None:
            counts = jax.random.binomial(
                k_count, group_counts.astype(dtype), q_groups, (steps, group_counts.shape[0]), dtype
            ).astype(count_dtype)
        else:
            counts = jnp.stack(
                [
                    _group_counts(
                        sampler, jax.random.fold_in(k_count, j), n, q_groups, steps, dtype
                    )
                    for j, (sampler, n) in enumerate(zip(count_samplers, group_counts, strict=True))
                ],
                axis=1,
            ).astype(count_dtype)
    else:
        counts = jnp.broadcast_to(group_counts, (steps, group_counts.shape[0]))

    if in_segments(steps, SEGMENT_STEPS) and range_supported(dtype) and _threefry(key):
        return _run_in_segments(
            mechanism, canary_in, k_noise, k_coin, counts, release, coins, q, model
        )
    # The (T, d) normals drawn flat (the same numbers as normal(k_noise, (T, d)): jax draws
    # the bits flat) and sliced per step in the scan: under vmap on CPU, a (T, d) array with
    # d not a multiple of 8 (d = 10, 12, 30) cost 3-5x more per normal to draw and to scan
    # over (measured: 26-55 ns per normal at d = 10 against 8 ns flat).
    # Where the generator allows, the same numbers through `advsim._streams`' written-out
    # hash, which XLA fuses (JAX's own is a rolled loop on the CPU).
    streamed = range_supported(dtype) and _threefry(key)
    if streamed:
        noise = normal_range(k_noise, 0, steps * dim, dtype)
    else:
        noise = jax.random.normal(k_noise, (steps * dim,), dtype)
    present = schedule.mask(t) & jnp.asarray(canary_in)
    if coins:
        # At q = 1 every coin is heads: the bits are not drawn (a third of a run's random
        # bits at d = 1). q is the same in every run of a batch, so under vmap this stays a
        # branch, and the numbers are the ones the draw would give.
        def draw():
            if streamed:
                return _bernoulli(bits_range(k_coin, 0, steps), q)
            return bernoulli_from_bits(k_coin, q, (steps,))

        present = jax.lax.cond(q >= 1.0, lambda: present, lambda: present & draw())

    def body(m, xs):
        t_, present_, counts_ = xs
        noise_ = jax.lax.dynamic_slice(noise, ((t_ - 1) * dim,), (dim,))
        m_next = dpsgd_update(mechanism, m, t_, present_, counts_, noise_)
        return m_next, (m_next if release == "all" else None)

    final, trajectory = jax.lax.scan(body, model, (t, present, counts))
    if release == "all":
        return jnp.concatenate([model[None], trajectory], axis=0)
    return final


def _threefry(key) -> bool:
    """Whether `key` is a typed threefry key (`advsim.simulate` passes such keys)."""
    return jnp.issubdtype(key.dtype, jax.dtypes.prng_key) and (
        str(jax.random.key_impl(key)) == "threefry2x32"
    )


def _segment_draws(
    k_noise, k_coin, schedule, present_all, coins, q, first, size: int, dim, dtype
):
    """Steps first + 1 .. first + size of a run: their noise (flat, size * d), their indices
    t and the canary's presence (its schedule, its world and, where sampled, its coins,
    not drawn at q = 1), each stretch drawn alone from the counter-based stream."""
    noise = normal_range(k_noise, first * dim, size * dim, dtype)
    t = first + jnp.arange(1, size + 1, dtype=jnp.int32)
    present = schedule.mask(t) & present_all
    if coins:
        present = jax.lax.cond(
            q >= 1.0,
            lambda: present,
            lambda: present & _bernoulli(bits_range(k_coin, first, size), q),
        )
    return noise, t, present


def _run_in_segments(mechanism, canary_in, k_noise, k_coin, counts, release, coins, q, model):
    """`run_mechanism`'s scan, `SEGMENT_STEPS` steps at a time: each segment draws its own
    stretch of the noise and coins (`advsim._streams`: the same numbers as the up-front
    draws), so a run never holds its whole (T, d) block; the updates are the same."""
    steps, dim, dtype = mechanism.steps, model.shape[-1], model.dtype
    schedule, present_all = mechanism.canary_schedule, jnp.asarray(canary_in)

    def advance(m, first, size: int):  # steps first + 1 .. first + size
        noise, t, present = _segment_draws(
            k_noise, k_coin, schedule, present_all, coins, q, first, size, dim, dtype
        )
        seg_counts = jax.lax.dynamic_slice_in_dim(counts, first, size, axis=0)

        def body(m, xs):
            j, t_, present_, counts_ = xs
            noise_ = jax.lax.dynamic_slice(noise, (j * dim,), (dim,))
            m_next = dpsgd_update(mechanism, m, t_, present_, counts_, noise_)
            return m_next, (m_next if release == "all" else None)

        return jax.lax.scan(body, m, (jnp.arange(size), t, present, seg_counts))

    full, tail = divmod(steps, SEGMENT_STEPS)
    m, trajectory = jax.lax.scan(
        lambda m, k: advance(m, k * SEGMENT_STEPS, SEGMENT_STEPS),
        model,
        jnp.arange(full, dtype=jnp.int32),
    )
    parts = [model[None], trajectory.reshape(full * SEGMENT_STEPS, dim)] if release == "all" else []
    if tail:
        m, last = advance(m, full * SEGMENT_STEPS, tail)
        parts.append(last)
    return jnp.concatenate(parts, axis=0) if release == "all" else m


#: The segment sizes of `run_any_steps`, longest first: a run of T steps takes T // 128
#: segments of 128 steps, then the rest 8 at a time, the last segment of 8 leaving its
#: steps past T unapplied: at most 7 steps computed in vain, and the longest segments
#: draw their noise as efficiently as `_run_in_segments`. Two sizes, not three: each is
#: a loop traced and lowered once per program (128, 8 traced in 0.35-0.42 s where
#: 128, 16, 4 took 0.44-0.61 s, and ran as fast: 1.2 against 1.14-1.16 s at T = 100,
#: 0.68 against 1.08 s at T = 5, 10^6 runs per world on 2 CPU cores). A segment of one
#: step compiles to other float roundings than a longer scan; segments of 8 and 128
#: give the numbers of `run_mechanism` bit for bit on the CPU
#: (tests/advsim/test_any_steps.py).
ANY_STEPS_TIERS = (SEGMENT_STEPS, 8)


def any_steps_draws(mechanism: AbstractMechanism) -> bool:
    """Whether `run_any_steps` can draw `mechanism`'s randomness step range by step range:
    its counts need no draw (no groups, or fixed batching) or are Poisson memberships of
    single examples (`AbstractPerExampleData`, 32 random bits each). Poisson-sampled groups
    (binomial counts, drawn for all T steps at once) are not: they take the run of
    `run_mechanism`, compiled for its T."""
    if mechanism.batching != "poisson" or isinstance(mechanism, AbstractPerExampleData):
        return True
    return jax.eval_shape(mechanism.data_counts).shape[0] == 0


def run_any_steps(
    mechanism: AbstractMechanism,
    canary_in: Bool[Array, ""] | bool,
    steps: Int[Array, ""],
    *,
    key: PRNGKeyArray,
) -> Float[Array, " d"]:
    """`run_mechanism(mechanism, canary_in, key=key)` with T a traced value: one compiled
    program serves runs of any number of steps.

    The run is the very one of `run_mechanism` at `steps` steps: the same keys, the same
    noise, coins and memberships (drawn range by range from the counter-based generator,
    `advsim._streams`: element i of a run's stream is the same whatever T) and the same
    update at every step (`dpsgd_update`). The steps are taken in segments of the sizes in
    `ANY_STEPS_TIERS`, each size a loop whose trip count is traced (the last one masked
    past T). The engine uses it only
    where the mechanism's methods and the adversary's score do not read T
    (`advsim._simulate.any_steps_supported`), and passes a mechanism whose `steps` field
    is a placeholder: nothing here reads `mechanism.steps`.

    Requires `any_steps_draws(mechanism)`, a threefry key and `range_supported` for the
    model's dtype (the engine checks all three). `run_any_steps_lanes` runs many at once.

    Args:
        mechanism: the run's mechanism (its `steps` is not read).
        canary_in: whether this is the world with the canary.
        steps: T >= 1, an int32 scalar (traced or not).
        key: the run's key.

    Returns:
        m_T, shape (d,).
    """
    return run_any_steps_lanes(mechanism, canary_in, steps, keys=key[None])[0]


def run_any_steps_lanes(
    mechanism: AbstractMechanism,
    canary_in: Bool[Array, ""] | bool,
    steps: Int[Array, ""],
    *,
    keys: PRNGKeyArray,
) -> Float[Array, "lanes d"]:
    """`run_any_steps` of each of `keys` (shape (lanes,)): the runs side by side, each the
    very run `run_any_steps` gives for its key.

    The loops over the steps hold the batch of runs, and only each step's draws and update
    are mapped over them (`jax.vmap`): the same elementwise program as `jax.vmap` of
    `run_any_steps`, but its loops are traced once, not traced and then batched (tracing
    the engine's chunk program took 0.36 s against 0.45 s, medians of 4 fresh closures
    on 2 CPU cores).

    Returns:
        m_T of each run, shape (lanes, d).
    """
    model = mechanism.init_model()
    dtype, dim = model.dtype, model.shape[-1]
    lanes = keys.shape[0]
    run_keys = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
    k_noise, k_coin, k_count = run_keys[:, 0], run_keys[:, 1], run_keys[:, 2]
    schedule, present_all = mechanism.canary_schedule, jnp.asarray(canary_in)
    coins = schedule.sampled and mechanism.batching == "poisson"
    q = jnp.asarray(mechanism.sampling_prob)
    members = isinstance(mechanism, AbstractPerExampleData) and mechanism.batching == "poisson"
    group_counts = jnp.asarray(mechanism.data_counts())
    width = group_counts.shape[0]
    steps = jnp.asarray(steps, jnp.int32)
    update = jax.vmap(dpsgd_update, in_axes=(None, 0, None, 0, 0 if members else None, 0))

    def advance(ms, first, size: int, masked: bool = False):  # steps first + 1 .. first + size
        def draws(kn, kc):
            return _segment_draws(kn, kc, schedule, present_all, coins, q, first, size, dim, dtype)

        noise, t, present = jax.vmap(draws, out_axes=(0, None, 0))(k_noise, k_coin)
        if members:  # rows of bernoulli_from_bits(k_count, q, (T, n)): bits t*n .. t*n + n-1
            bits = jax.vmap(lambda k: bits_range(k, first * width, size * width))(k_count)
            counts = _bernoulli(bits.reshape(lanes, size, width), mechanism.sampling_prob)
            counts = jnp.swapaxes(counts.astype(jnp.int32), 0, 1)  # (size, lanes, width)
        else:
            counts = jnp.broadcast_to(group_counts, (size, width))

        def body(ms, xs):
            j, t_, present_, counts_ = xs
            noise_ = jax.lax.dynamic_slice_in_dim(noise, j * dim, dim, axis=1)
            m_next = update(mechanism, ms, t_, present_, counts_, noise_)
            return (jnp.where(t_ <= steps, m_next, ms) if masked else m_next), None

        return jax.lax.scan(body, ms, (jnp.arange(size), t, present.T, counts))[0]

    models = jnp.broadcast_to(model, (lanes, *model.shape))
    done = jnp.int32(0)
    for size in ANY_STEPS_TIERS:
        # The shortest segments also take the last T mod 8 steps, their steps past T left
        # unapplied (one program fewer to trace than a separate last segment).
        last = size == ANY_STEPS_TIERS[-1]
        count = (steps - done + (size - 1 if last else 0)) // size

        def segment(k, ms, done=done, size=size, last=last):
            return advance(ms, done + k * size, size, masked=last)

        models = jax.lax.fori_loop(0, count, segment, models)
        done = done + count * size
    return models

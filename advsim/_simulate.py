"""The batched runner: millions of simulated DP-SGD runs of both worlds, as compiled chunks.

Run `i` of a world uses the key `fold_in(world_key, i)` and nothing else, so the scores do
not depend on the chunk size or on the number of devices: chunking and sharding only
decide which runs are computed together.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from advsim._adversary import AbstractAdversary
from advsim._dpsgd import (
    run_any_steps_lanes,
    run_mechanism,
)
from advsim._engine_checks import (  # noqa: F401 (re-exported)
    _CHECKED,
    _check_shapes_once,
    _check_x64,
    _dims,
    _structure,
    check_shapes,
)
from advsim._engine_programs import (  # noqa: F401 (re-exported)
    STEPS_PLACEHOLDER,
    _jaxpr_text,
    _placeholder,
    _probe,
    _probe_args,
    any_steps_supported,
    engine_programs,
    steps_readers,
)
from advsim._keys import as_key
from advsim._layout import (  # noqa: F401 (re-exported)
    ACCELERATOR_CHUNK_BYTES,
    ACCELERATOR_MAX_RUNS,
    BINOMIAL_METHODS,
    BLOCK_MEMORY_BYTES,
    PARALLEL_LANES_ENV,
    SHARD_BLOCK_BYTES,
    TABLE_MIN_MEAN,
    VECTOR_COORDINATES,
    _accelerator_chunk_bytes,
    _blocks_per_device,
    _bytes_per_run,
    _lane_width,
    _Layout,
    _layout,
    _on_accelerator,
    _parallel_lanes,
    block_size,
    count_samplers,
    default_chunk_size,
    simulation_devices,
    vector_width,
)
from advsim._limits import check_chunk_size, check_trials
from advsim._mechanism import AbstractMechanism
from advsim._scores import NonFiniteScoresError, Scores

__all__ = [
    "BINOMIAL_METHODS",
    "any_steps_supported",
    "as_key",
    "block_size",
    "check_shapes",
    "vector_width",
    "count_samplers",
    "crafted_run",
    "default_chunk_size",
    "engine_programs",
    "simulate",
    "simulate_world",
    "simulation_devices",
    "steps_readers",
]


@eqx.filter_jit
def _chunk_scores(
    mechanism,
    adversary,
    world_key,
    start,
    canary_in,
    steps,
    release,
    width,
    samplers,
    mesh,
    parallel_lanes,
    chunk,
):
    """The scores of runs `start` .. `start + chunk - 1`, sharded over `mesh`'s devices
    along "trials"; `steps`: T as a traced int32 for the one program for every T
    (`run_any_steps`, `mechanism` the placeholder), None for the program of `mechanism`'s
    own T (`run_mechanism`).

    The run indices are made on the devices (each device its own contiguous share), so a
    chunk costs the host one call and one copy of its scores. Each device maps over its
    own lanes (`shard_map`): left to the partitioner, the `lax.map` over a sharded axis
    was all-gathered and every device ran every lane (two host devices ran 0.63x as fast
    as one, measured). With `parallel_lanes` (an accelerator) a device computes all its
    lanes side by side, `vmap` for `lax.map`: each run's arithmetic is the same
    elementwise program either way.
    """
    share = chunk // mesh.size
    # Every array the runs read enters the per-device program as a replicated input
    # (closed over, an array placed on the mesh clashes with the program's manual mesh).
    inputs = (mechanism, adversary, world_key, canary_in, steps, samplers)
    dynamic, static = eqx.partition(inputs, eqx.is_array)

    def local(first, dynamic):
        mech, adv, key, canary, steps_, samplers_ = eqx.combine(dynamic, static)

        def one(i):
            run_key = jax.random.fold_in(key, i)
            out = run_mechanism(
                mech, canary, key=run_key, release=release, count_samplers=samplers_
            )
            return adv.score(mech, out)

        def lanes(idx):  # the runs of `idx`, side by side
            if steps_ is None:
                return jax.vmap(one)(idx)
            keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(idx)
            models = run_any_steps_lanes(mech, canary, steps_, keys=keys)
            return jax.vmap(adv.score, in_axes=(None, 0))(mech, models)

        offset = (jax.lax.axis_index("trials") * share).astype(jnp.uint32)
        idx = first + offset + jnp.arange(share, dtype=jnp.uint32)
        if parallel_lanes:  # all of the device's runs side by side
            return lanes(idx)
        return jax.lax.map(lanes, idx.reshape(-1, width)).reshape(-1)

    # check_vma=False: a mechanism's scan need not mark its carries as device-varying.
    shard = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(PartitionSpec(), PartitionSpec()),
        out_specs=PartitionSpec("trials"),
        check_vma=False,
    )
    return shard(jnp.asarray(start, jnp.uint32), dynamic)


def replicated(tree, mesh: Mesh):
    """`tree` with its array leaves placed on every device of `mesh` (the rest unchanged):
    a chunk program's inputs put there once per simulation, not copied from the host at
    every chunk's call (a dozen small numpy leaves cost the host about 0.6 ms each per
    call on 2 CPU cores, measured)."""
    arrays, rest = eqx.partition(tree, eqx.is_array)
    placed = jax.device_put(arrays, NamedSharding(mesh, PartitionSpec()))
    return eqx.combine(placed, rest)


def chunk_program_args(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    layout: _Layout,
    release: str = "last",
) -> tuple[tuple, Mesh]:
    """`((mechanism, adversary, the arguments of `_chunk_scores` after `world_key, start,
    canary_in`), the mesh)`: one place that turns a layout into the chunk program's inputs,
    placed on the devices once (`simulate` and `advsim.simulate_counts` share it)."""
    mesh = Mesh(np.array(layout.devices), ("trials",))
    program_mechanism, steps = layout.program_inputs(mechanism)
    program_mechanism, adversary, steps, samplers = replicated(
        (program_mechanism, adversary, steps, layout.samplers), mesh
    )
    rest = (steps, release, layout.width, samplers, mesh, layout.parallel_lanes, layout.chunk)
    return (program_mechanism, adversary, rest), mesh


def simulate_world(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    trials: int,
    world_key,
    *,
    canary_in: bool,
    chunk_size: int | None = None,
    release: str = "last",
    progress: tqdm | None = None,
    binomial: str = "table",
    layout: _Layout | None = None,
) -> np.ndarray:
    """Scores of `trials` runs of one world (no crafting: pass the crafted mechanism).

    `layout` (`simulate` passes the one it computed for both worlds) is computed from the
    mechanism, adversary, `release`, `chunk_size` and `binomial` where not given.
    """
    if layout is None:
        layout = _layout(mechanism, release, chunk_size, binomial, trials, adversary)
    chunk = layout.chunk
    (program_mechanism, program_adversary, rest), mesh = chunk_program_args(
        mechanism, adversary, layout, release
    )
    world_key, canary = replicated((world_key, jnp.asarray(canary_in)), mesh)
    out = np.empty(trials, dtype=np.float64)

    def collect(start, scores):
        n = min(chunk, trials - start)
        out[start : start + n] = np.asarray(scores)[:n]
        if progress is not None:
            progress.update(n)

    # One chunk in flight while the next is dispatched (JAX dispatches asynchronously):
    # the host's work between chunks (the call, the copy of the scores, the bar) overlaps
    # the devices' instead of leaving them idle.
    pending = None
    for start in range(0, trials, chunk):
        # Fixed-shape chunks (one compilation); the tail computes a few extra runs and
        # drops them, which changes nothing since run i depends only on i.
        scores = _chunk_scores(
            program_mechanism, program_adversary, world_key, np.uint32(start), canary, *rest
        )
        if pending is not None:
            collect(*pending)
        pending = (start, scores)
    collect(*pending)
    return out


def crafted_run(mechanism, adversary, key, release: str, binomial: str) -> tuple:
    """`(key, crafted mechanism)` of a simulation, everything checked before any run: the
    binomial method, the two plug-ins' types, the key, float64 where the crafted mechanism
    needs it and every method's shape (`check_shapes`). Shared by `simulate` and
    `advsim.simulate_counts`."""
    if binomial not in BINOMIAL_METHODS:
        raise ValueError(f"binomial must be one of {list(BINOMIAL_METHODS)}, got {binomial!r}")
    if not isinstance(mechanism, AbstractMechanism):
        raise TypeError(f"mechanism must be an AbstractMechanism, got {type(mechanism).__name__}")
    if not isinstance(adversary, AbstractAdversary):
        raise TypeError(f"adversary must be an AbstractAdversary, got {type(adversary).__name__}")
    key = as_key(key)
    crafted = adversary.craft(mechanism)
    _check_x64(crafted)
    reason = adversary.check_mechanism(crafted)
    if reason is not None:
        raise ValueError(
            f"{type(adversary).__name__} cannot score runs of {type(crafted).__name__}: {reason}"
        )
    # Where one program serves every T, so do its shapes: they are checked once for all T
    # of a sweep, on the placeholder (a method that fails to trace leaves it to the
    # T-specific check, which names it).
    try:
        one_program = any_steps_supported(crafted, adversary, release)
    except Exception:  # noqa: BLE001
        one_program = False
    check_shapes(_placeholder(crafted) if one_program else crafted, adversary, release)
    return key, crafted


def simulate(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    trials: int,
    key,
    *,
    chunk_size: int | None = None,
    release: str = "last",
    progress: bool | None = None,
    check_finite: bool = True,
    binomial: str = "table",
) -> Scores:
    """Simulates `trials` runs of each world and returns the adversary's scores.

    The adversary first crafts the mechanism (`adversary.craft`); then each world is run
    `trials` times through the DP-SGD engine (jit + vmap, in chunks of `chunk_size` runs,
    each chunk sharded over `simulation_devices`: every device in `jax.devices()`, on
    CPU while a block fits `SHARD_BLOCK_BYTES`), and every release is scored.

    Args:
        mechanism: the DP-SGD run.
        adversary: crafts the run and scores its release.
        trials: runs per world, in [2, 2**32 - 1].
        key: a `jax.random.key` or an integer seed in [0, 2**64) (see `as_key`: seeds
            below 2**32 give `jax.random.key(seed)`). The in-world uses `fold_in(key, 1)`,
            the out-world `fold_in(key, 0)`, run i of a world `fold_in(world_key, i)`: the
            same key gives the same scores for any chunk size and device count.
        chunk_size: runs per compiled chunk, rounded up to whole blocks on every device
            (default: 16 blocks per device; see `block_size`), and at most the smallest
            power of two of blocks per device that holds `trials`; one whose indices and
            scores would not fit in the memory available is refused.
        release: "last" (only m_T is released, the default) or "all" (m_0, ..., m_T).
        progress: show a tqdm bar; default: when the job has more than 5e7 run-steps.
        check_finite: raise `NonFiniteScoresError` if any score is NaN or inf (default).
        binomial: how Poisson-sampled group counts are drawn (see `count_samplers`):
            "table" (default: exact inverse-CDF tables for huge groups under x64,
            `jax.random.binomial` otherwise), "jax" (`jax.random.binomial` only: the
            numbers of earlier versions) or "normal_approx" (approximate; opt-in).

    Returns:
        `Scores(canary_in, canary_out)`, float64 numpy arrays of length `trials`.

    Raises:
        ValueError: `trials` out of range, a bad `chunk_size`, `release` or `binomial`, an
            integer `key` outside [0, 2**64); a method of the crafted mechanism or the
            adversary's `score` whose shape is not the one the engine expects (see
            `check_shapes`: checked before any run, naming the method and both shapes).
        NonFiniteScoresError: a score is NaN or inf (unless `check_finite=False`).

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> from advsim.adversaries import ProjectionScore
        >>> mech = LinearProcess(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
        >>> scores = simulate(mech, ProjectionScore(), 1000, key=0)
        >>> scores.canary_in.shape
        (1000,)
    """
    trials = check_trials("trials", trials)
    if chunk_size is not None:
        chunk_size = check_chunk_size("chunk_size", chunk_size)
    if release not in ("last", "all"):
        raise ValueError(f"release must be 'last' or 'all', got {release!r}")
    key, crafted = crafted_run(mechanism, adversary, key, release, binomial)
    layout = _layout(crafted, release, chunk_size, binomial, trials, adversary)
    if progress is None:
        progress = 2 * trials * crafted.steps > 5e7
    bar = tqdm(total=2 * trials, unit="run", desc="simulate", disable=not progress, leave=False)
    with bar:
        # The in-world first, then the out-world (run i of world w: fold_in(fold_in(key, w), i)).
        worlds = {
            name: simulate_world(
                crafted,
                adversary,
                trials,
                jax.random.fold_in(key, world),
                canary_in=world == 1,
                release=release,
                progress=bar,
                layout=layout,
            )
            for name, world in (("canary_in", 1), ("canary_out", 0))
        }
    scores = Scores(**worlds)
    if check_finite:
        try:
            scores.check_finite()
        except NonFiniteScoresError as err:
            raise NonFiniteScoresError(
                f"{type(crafted).__name__} scored by {type(adversary).__name__} gave "
                f"non-finite scores: {err}"
            ) from None
    return scores

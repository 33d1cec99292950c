"""The batched runner: millions of simulated DP-SGD runs of both worlds, as compiled chunks.

Run `i` of a world uses the key `fold_in(world_key, i)` and nothing else, so the scores do
not depend on the chunk size or on the number of devices: chunking and sharding only
decide which runs are computed together.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from advsim._adversary import AbstractAdversary
from advsim._binomial import (
    MAX_TABLE_SIZE,
    AbstractBinomialSampler,
    RoundedNormalBinomial,
    binomial_table,
    binomial_window,
)
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
from advsim._limits import check_chunk_size, check_trials
from advsim._mechanism import AbstractMechanism
from advsim._scores import NonFiniteScoresError, Scores
from advsim._streams import SEGMENT_STEPS, in_segments

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

#: Upper bound on the memory one block of runs may take.
BLOCK_MEMORY_BYTES = 64 * 2**20
#: Runs vectorised side by side hold at most this many model coordinates: at d = 30 and
#: 100, lanes of a whole block (1024 or 256 runs) ran at 0.8 and 1.2 of the raw sampler's
#: normals per CPU second, lanes of 128-256 and 32-64 runs at 1.7-2.3 (2 CPU cores,
#: `scripts/benchmark_sampling.py`). Models with d <= 8 keep lanes of 1024 runs, and
#: with them the exact numbers of earlier versions (a lane's float rounding can depend on
#: the width: the gradient canary's scores did).
VECTOR_COORDINATES = 8192

#: How `simulate` draws the Poisson-sampled group counts (its `binomial` argument).
BINOMIAL_METHODS = ("table", "jax", "normal_approx")
#: A group is drawn from an exact table when n min(q, 1 - q) >= this: where
#: `jax.random.binomial` leaves inversion for its slower rejection sampler.
TABLE_MIN_MEAN = 10.0


def _bytes_per_run(
    mechanism: AbstractMechanism, release: str, drawn: int | None = None, any_steps: bool = False
) -> int:
    """Memory one run needs: noise (T, d), coins and counts (T, g + 1), the trajectory when
    all iterates are released, times 4 for XLA's temporaries (float32). With `drawn`, the
    noise and coins of only that many steps are held at once (`advsim._streams`); with
    `any_steps` (the one program for every T, `run_any_steps`) those of one segment,
    whatever T."""
    d, g = _dims(mechanism)
    if any_steps:
        return 4 * 4 * SEGMENT_STEPS * (d + 1 + g)
    steps = mechanism.steps
    held = steps if drawn is None else min(steps, drawn)
    per_run = held * (d + 1) + steps * (g + 1 if drawn is None else g)
    per_run += (steps + 1) * d * (release == "all")
    return 4 * 4 * per_run


def block_size(
    mechanism: AbstractMechanism, release: str = "last", any_steps: bool | None = None
) -> int:
    """Runs in one block, the unit chunks are made of: a power of two <= 1024 whose runs
    fit in `BLOCK_MEMORY_BYTES` (they are computed `vector_width` at a time).

    It depends only on the mechanism's shapes and on whether it runs in the one program
    for every T (`any_steps`; default: `any_steps_supported(mechanism, None, release)`,
    where a run holds one segment's draws), never on the chunk size or the devices, so run
    i always sits in the same lane of the same compiled block and its floating-point
    result is bit-identical whatever the chunking or sharding.
    """
    if any_steps is None:
        any_steps = any_steps_supported(mechanism, None, release)
    per_run = _bytes_per_run(mechanism, release, any_steps=any_steps)
    fit = max(1, BLOCK_MEMORY_BYTES // per_run)
    return int(min(1024, 2 ** int(math.floor(math.log2(fit)))))


def vector_width(mechanism: AbstractMechanism, release: str = "last") -> int:
    """Runs computed side by side in one vmapped call: a power of two that divides
    `block_size`, at most `VECTOR_COORDINATES` / d runs of a d-dimensional model.

    A block is computed as `block_size / vector_width` such calls in sequence. Like the
    block, the width depends only on the mechanism's shapes, so run i always sits in the
    same lane of the same compiled call whatever the chunk size or the devices.
    """
    return _lane_width(mechanism, block_size(mechanism, release))


def _lane_width(mechanism: AbstractMechanism, block: int) -> int:
    """`vector_width` for a mechanism whose `block_size` is `block`."""
    d = _dims(mechanism)[0]
    width = 2 ** int(math.floor(math.log2(max(1, VECTOR_COORDINATES // max(d, 1)))))
    return int(min(block, width))


#: On CPU, runs are sharded over the host devices only while one block's working set
#: (`block_size` x `_bytes_per_run`) is at most this: two host devices each streaming a
#: larger block ran slower than one device whose block XLA's threads share (linear
#: process, 10^6 runs per world, 2 cores, 32 MiB L3: T = 100, 4.7 MiB a block, 0.85x the
#: one-device wall time; T = 1000, 47 MiB, 1.2x).
SHARD_BLOCK_BYTES = 16 * 2**20

#: On an accelerator (GPU, TPU), one compiled chunk computes every run of a device's share
#: at once (`vmap` over its lanes, where the CPU maps over them one lane width after
#: another), and the default chunk gives each device as many runs as fit an eighth of its
#: memory (`ACCELERATOR_CHUNK_BYTES` where the device does not say), at most
#: `ACCELERATOR_MAX_RUNS`: on one H200, 10^6 runs per world of the linear process at
#: T = 1000 ran 5.4x faster in chunks of 262144 runs than of 32768 (2 GiB), and the scores
#: were the same for every chunk size.
ACCELERATOR_CHUNK_BYTES = 2 * 2**30
ACCELERATOR_MAX_RUNS = 2**20


def _accelerator_chunk_bytes(device) -> int:
    """The working set a default chunk may take on `device`: an eighth of its memory."""
    try:
        limit = (device.memory_stats() or {}).get("bytes_limit")
    except (NotImplementedError, RuntimeError):  # a backend without memory statistics
        limit = None
    return int(limit) // 8 if limit else ACCELERATOR_CHUNK_BYTES


def _on_accelerator(devices) -> bool:
    return devices[0].platform != "cpu"


#: Set to "1" to give the CPU the accelerator's layout (every run of a device's share of
#: a chunk side by side, chunks sized as on an accelerator): the same program structure as
#: on a GPU, to profile it where none is at hand (`scripts/benchmark_engine.py --layout
#: accelerator`). The scores are the same either way.
PARALLEL_LANES_ENV = "ADVSIM_PARALLEL_LANES"


def _parallel_lanes(devices) -> bool:
    """Whether a device computes all its runs of a chunk side by side (`vmap`)."""
    return _on_accelerator(devices) or os.environ.get(PARALLEL_LANES_ENV) == "1"


def simulation_devices(
    mechanism: AbstractMechanism,
    release: str = "last",
    block: int | None = None,
    any_steps: bool | None = None,
) -> list:
    """The devices `simulate` shards `mechanism`'s runs over: every device in
    `jax.devices()`, but on CPU only the first where one block's working set exceeds
    `SHARD_BLOCK_BYTES`. The scores are the same either way. `block`: the mechanism's
    `block_size`, where the caller has it already; `any_steps` as in `block_size`."""
    devices = jax.devices()
    if _on_accelerator(devices) or len(devices) == 1:
        return devices
    if any_steps is None:
        any_steps = any_steps_supported(mechanism, None, release)
    drawn = SEGMENT_STEPS if in_segments(mechanism.steps) else None
    block = block_size(mechanism, release, any_steps) if block is None else block
    working_set = block * _bytes_per_run(mechanism, release, drawn, any_steps)
    return devices if working_set <= SHARD_BLOCK_BYTES else devices[:1]


def _blocks_per_device(
    mechanism: AbstractMechanism, release: str, devices, block: int, any_steps: bool
) -> int:
    """Blocks per device in a default chunk: 16 on CPU; on an accelerator as many blocks of
    `block` runs as fit an eighth of its memory (a power of two, at least one)."""
    if not _parallel_lanes(devices):
        return 16
    per_run = _bytes_per_run(mechanism, release, any_steps=any_steps)
    runs = min(ACCELERATOR_MAX_RUNS, _accelerator_chunk_bytes(devices[0]) // per_run)
    return max(1, 2 ** int(math.floor(math.log2(max(1, runs // block)))))


def default_chunk_size(mechanism: AbstractMechanism, release: str = "last") -> int:
    """Runs per host round trip (one compiled chunk, one bar update): 16 blocks per device
    of `simulation_devices` on CPU; on an accelerator, as many runs per device as fit an
    eighth of its memory (at most `ACCELERATOR_MAX_RUNS`)."""
    any_steps = any_steps_supported(mechanism, None, release)
    block = block_size(mechanism, release, any_steps)
    devices = simulation_devices(mechanism, release, block, any_steps)
    return _blocks_per_device(mechanism, release, devices, block, any_steps) * block * len(devices)


class _Layout(NamedTuple):
    """How `simulate_world` lays out a world's runs (the same for both worlds of a call):
    the count samplers, `block_size`, `vector_width`, the chunk (whole blocks on every
    device), the devices (`simulation_devices`), whether a device computes its lanes side
    by side (`vmap`, on an accelerator) or one lane width after another (CPU), and the
    run's T where the one program for every T runs it (`any_steps_supported`; None
    where the program is compiled for its T)."""

    samplers: tuple | None
    block: int
    width: int
    chunk: int
    devices: tuple
    parallel_lanes: bool = False
    steps: int | None = None

    def program_inputs(self, mechanism: AbstractMechanism) -> tuple:
        """`(mechanism, steps)` as the chunk program takes them: the placeholder
        mechanism and T as a traced int32 for the one program, else the mechanism and
        None."""
        if self.steps is None:
            return mechanism, None
        return _placeholder(mechanism), jnp.asarray(self.steps, jnp.int32)


def _layout(
    mechanism: AbstractMechanism,
    release: str,
    chunk_size: int | None,
    binomial: str,
    trials: int | None = None,
    adversary: AbstractAdversary | None = None,
) -> _Layout:
    """The layout of `mechanism`'s runs scored by `adversary`, `block_size` computed once.

    The chunk is `chunk_size` rounded up to whole blocks on every device, but never more
    blocks per device than the smallest power of two that holds `trials` runs: a
    simulation smaller than one chunk computes at most twice its runs, not 16 blocks per
    device, in one of five chunk shapes (1, 2, 4, 8 or 16 blocks per device by default).
    """
    samplers = count_samplers(mechanism, binomial)
    any_steps = samplers is None and any_steps_supported(mechanism, adversary, release)
    block = block_size(mechanism, release, any_steps)
    devices = tuple(simulation_devices(mechanism, release, block, any_steps))
    unit = block * len(devices)
    if chunk_size is None:  # default_chunk_size
        chunk_size = _blocks_per_device(mechanism, release, devices, block, any_steps) * unit
    units = math.ceil(chunk_size / unit)  # round up to whole blocks on every device
    if trials is not None:
        units = min(units, 2 ** math.ceil(math.log2(math.ceil(trials / unit))))
    return _Layout(
        samplers=samplers,
        block=block,
        width=_lane_width(mechanism, block),
        chunk=int(units * unit),
        devices=devices,
        parallel_lanes=_parallel_lanes(devices),
        steps=mechanism.steps if any_steps else None,
    )


def count_samplers(
    mechanism: AbstractMechanism, binomial: str = "table"
) -> tuple[AbstractBinomialSampler | None, ...] | None:
    """How the engine draws each Poisson-sampled group's count (`run_mechanism`'s
    `count_samplers`), from the mechanism's host values of its counts and q.

    - `"table"` (default): an exact `BinomialTable` (`advsim._binomial`) for each group
      with n min(q, 1 - q) >= `TABLE_MIN_MEAN` whose table fits `MAX_TABLE_SIZE`,
      under `jax_enable_x64` with a float64 model; `jax.random.binomial` for the others.
      Both are exact; the table draws a group of 10^10 6-8x faster (measured).
    - `"jax"`: `jax.random.binomial` for every group, all groups in one call: the engine
      before tables, kept to reproduce earlier numbers and to measure the speed-up.
    - `"normal_approx"`: APPROXIMATE rounded-normal draws (`RoundedNormalBinomial`, total
      variation ~1e-5 at n = 10^10) for the groups a table would serve. Opt-in only.

    Returns None (the single-call `jax.random.binomial` path, unchanged numbers) when no
    group gets a sampler: fixed batching, no groups, float32, or only small groups.
    """
    if binomial not in BINOMIAL_METHODS:
        raise ValueError(f"binomial must be one of {list(BINOMIAL_METHODS)}, got {binomial!r}")
    if binomial == "jax" or mechanism.batching != "poisson" or not jax.config.jax_enable_x64:
        return None
    if jax.eval_shape(mechanism.init_model).dtype != jnp.float64:
        return None
    counts, q = mechanism.data_counts(), mechanism.sampling_prob
    if isinstance(counts, jax.core.Tracer) or isinstance(q, jax.core.Tracer):
        return None  # no host values: a table cannot be sized
    counts, q = np.asarray(counts).reshape(-1), float(np.asarray(q))
    samplers: list[AbstractBinomialSampler | None] = []
    for n in (int(c) for c in counts):
        if not (0.0 < q < 1.0) or n * min(q, 1.0 - q) < TABLE_MIN_MEAN:
            samplers.append(None)
        elif binomial == "normal_approx":
            samplers.append(RoundedNormalBinomial(n, q))
        else:
            lo, hi = binomial_window(n, q)
            samplers.append(binomial_table(n, q) if hi - lo < MAX_TABLE_SIZE else None)
    return None if all(x is None for x in samplers) else tuple(samplers)


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

"""How a simulation's runs are laid out: blocks, lane widths, chunks, devices, count samplers.

The layout depends only on the mechanism's shapes, the release, the devices and the chunk
size asked for, never on the scores: run i always sits in the same lane of the same
compiled block, so its result is bit-identical whatever the chunking or sharding.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from advsim._adversary import AbstractAdversary
from advsim._binomial import (
    MAX_TABLE_SIZE,
    AbstractBinomialSampler,
    RoundedNormalBinomial,
    binomial_table,
    binomial_window,
)
from advsim._engine_checks import _dims
from advsim._engine_programs import _placeholder, any_steps_supported
from advsim._mechanism import AbstractMechanism
from advsim._streams import SEGMENT_STEPS, in_segments

__all__ = [
    "BINOMIAL_METHODS",
    "block_size",
    "count_samplers",
    "default_chunk_size",
    "simulation_devices",
    "vector_width",
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

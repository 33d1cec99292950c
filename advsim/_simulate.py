"""The batched runner: millions of simulated DP-SGD runs of both worlds, as compiled chunks.

Run `i` of a world uses the key `fold_in(world_key, i)` and nothing else, so the scores do
not depend on the chunk size or on the number of devices: chunking and sharding only
decide which runs are computed together.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from advsim._adversary import AbstractAdversary
from advsim._dpsgd import run_mechanism
from advsim._mechanism import AbstractMechanism
from advsim._scores import Scores
from advsim._validation import check_int

__all__ = ["block_size", "default_chunk_size", "simulate", "simulate_world"]

#: Upper bound on the memory one vectorised block of runs may take.
BLOCK_MEMORY_BYTES = 64 * 2**20
_MAX_TRIALS = 2**32 - 1  # run indices are folded into the key as uint32


def _as_key(key):
    if isinstance(key, bool) or key is None or isinstance(key, str):
        raise TypeError(f"key must be a jax PRNG key or an integer seed, got {key!r}")
    if isinstance(key, int | np.integer):
        return jax.random.key(int(key))
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    if key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    raise TypeError(f"key must be a jax PRNG key or an integer seed, got {key!r}")


def _check_x64(mechanism: AbstractMechanism) -> None:
    if type(mechanism).requires_x64 and not jax.config.jax_enable_x64:
        raise RuntimeError(
            f"{type(mechanism).__name__} needs float64: enable it with "
            "jax.config.update('jax_enable_x64', True) before building the mechanism"
        )


def _bytes_per_run(mechanism: AbstractMechanism, release: str) -> int:
    """Memory one run needs: noise (T, d), coins and counts (T, g + 1), the trajectory when
    all iterates are released, times 4 for XLA's temporaries (float32)."""
    d = int(np.prod(jax.eval_shape(mechanism.init_model).shape))
    g = int(jax.eval_shape(mechanism.data_counts).shape[0])
    per_run = mechanism.steps * (d + g + 2) + (mechanism.steps + 1) * d * (release == "all")
    return 4 * 4 * per_run


def block_size(mechanism: AbstractMechanism, release: str = "last") -> int:
    """Runs computed side by side in one vectorised block: a power of two <= 1024.

    It depends only on the mechanism's shapes, never on the chunk size or the devices, so
    run i always sits in the same lane of the same compiled block and its floating-point
    result is bit-identical whatever the chunking or sharding.
    """
    fit = max(1, BLOCK_MEMORY_BYTES // _bytes_per_run(mechanism, release))
    return int(min(1024, 2 ** int(math.floor(math.log2(fit)))))


def default_chunk_size(mechanism: AbstractMechanism, release: str = "last") -> int:
    """Runs per host round trip: 16 blocks per device (one compiled chunk, one bar update)."""
    return 16 * block_size(mechanism, release) * len(jax.devices())


@eqx.filter_jit
def _chunk_scores(mechanism, adversary, world_key, indices, canary_in, release, block):
    def one(i):
        key = jax.random.fold_in(world_key, i)
        out = run_mechanism(mechanism, canary_in, key=key, release=release)
        return adversary.score(mechanism, out)

    blocks = indices.reshape(-1, block)
    return jax.lax.map(jax.vmap(one), blocks).reshape(-1)


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
) -> np.ndarray:
    """Scores of `trials` runs of one world (no crafting: pass the crafted mechanism)."""
    devices = jax.devices()
    n_dev = len(devices)
    block = block_size(mechanism, release)
    if chunk_size is None:
        chunk_size = default_chunk_size(mechanism, release)
    # A chunk is whole blocks, split evenly over the devices: round up to a multiple.
    unit = block * n_dev
    chunk = int(math.ceil(chunk_size / unit) * unit)
    mesh = Mesh(np.array(devices), ("trials",))
    sharding = NamedSharding(mesh, PartitionSpec("trials"))
    out = np.empty(trials, dtype=np.float64)
    canary = jnp.asarray(canary_in)
    for start in range(0, trials, chunk):
        # Fixed-shape chunks (one compilation); the tail computes a few extra runs and
        # drops them, which changes nothing since run i depends only on i.
        idx = np.arange(start, start + chunk, dtype=np.uint32)
        idx = jax.device_put(idx, sharding)
        scores = _chunk_scores(mechanism, adversary, world_key, idx, canary, release, block)
        n = min(chunk, trials - start)
        out[start : start + n] = np.asarray(scores)[:n]
        if progress is not None:
            progress.update(n)
    return out


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
) -> Scores:
    """Simulates `trials` runs of each world and returns the adversary's scores.

    The adversary first crafts the mechanism (`adversary.craft`); then each world is run
    `trials` times through the DP-SGD engine (jit + vmap, in chunks of `chunk_size` runs,
    each chunk sharded over every device in `jax.devices()`), and every release is scored.

    Args:
        mechanism: the DP-SGD run.
        adversary: crafts the run and scores its release.
        trials: runs per world (>= 2).
        key: a `jax.random.key` or an integer seed. The in-world uses `fold_in(key, 1)`,
            the out-world `fold_in(key, 0)`, run i of a world `fold_in(world_key, i)`: the
            same key gives the same scores for any chunk size and device count.
        chunk_size: runs per compiled chunk, rounded up to whole blocks on every device
            (default: 16 blocks per device; see `block_size`).
        release: "last" (only m_T is released, the default) or "all" (m_0, ..., m_T).
        progress: show a tqdm bar; default: when the job has more than 5e7 run-steps.
        check_finite: raise `NonFiniteScoresError` if any score is NaN or inf (default).

    Returns:
        `Scores(canary_in, canary_out)`, float64 numpy arrays of length `trials`.

    Raises:
        ValueError: `trials` < 2, a bad `chunk_size` or `release`.
        NonFiniteScoresError: a score is NaN or inf (unless `check_finite=False`).

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> from advsim.adversaries import ProjectionScore
        >>> mech = LinearProcess(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
        >>> scores = simulate(mech, ProjectionScore(), 1000, key=0)
        >>> scores.canary_in.shape
        (1000,)
    """
    trials = check_int("trials", trials, minimum=2, maximum=_MAX_TRIALS)
    if chunk_size is not None:
        chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    if release not in ("last", "all"):
        raise ValueError(f"release must be 'last' or 'all', got {release!r}")
    if not isinstance(mechanism, AbstractMechanism):
        raise TypeError(f"mechanism must be an AbstractMechanism, got {type(mechanism).__name__}")
    if not isinstance(adversary, AbstractAdversary):
        raise TypeError(f"adversary must be an AbstractAdversary, got {type(adversary).__name__}")
    key = _as_key(key)
    crafted = adversary.craft(mechanism)
    _check_x64(crafted)
    if progress is None:
        progress = 2 * trials * crafted.steps > 5e7
    bar = tqdm(total=2 * trials, unit="run", desc="simulate", disable=not progress, leave=False)
    with bar:
        canary_in = simulate_world(
            crafted, adversary, trials, jax.random.fold_in(key, 1), canary_in=True,
            chunk_size=chunk_size, release=release, progress=bar,
        )
        canary_out = simulate_world(
            crafted, adversary, trials, jax.random.fold_in(key, 0), canary_in=False,
            chunk_size=chunk_size, release=release, progress=bar,
        )
    scores = Scores(canary_in=canary_in, canary_out=canary_out)
    if check_finite:
        scores.check_finite()
    return scores

"""Any stretch of a run's random stream, drawn alone with the very numbers of the whole.

JAX's default generator (threefry 2x32, "partitionable" since JAX 0.5) is counter-based:
element i of `jax.random.bits(key, (n,), uint32)` is the two words of
threefry2x32(key, (0, i)) XOR-ed together, whatever n. So elements `start .. start + size
- 1` of a run's noise can be drawn on their own, in the middle of its scan over the steps,
and the engine never holds a run's whole `(T, d)` block (at T = 1000 on 2 CPU cores, two
host devices each streaming 1024 runs' blocks ran slower than one device; drawn 128 steps
at a time they run 1.4x faster than one device, with the same numbers).

`range_supported` says whether the generator in use is that one; `normal_range` and
`bits_range` are tested equal, bit for bit, to slices of `jax.random.normal` and
`jax.random.bits` (tests/advsim/test_streams.py), and the first call in a process checks
it again, so a JAX whose stream differs gets the up-front draws instead.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

try:  # the hash itself, public in jax.extend; a JAX without it draws up front
    from jax.extend.random import threefry_2x32
except ImportError:  # pragma: no cover (every JAX advsim supports has it)
    threefry_2x32 = None

__all__ = ["SEGMENT_STEPS", "bits_range", "in_segments", "normal_range", "range_supported"]

#: Steps whose noise, coins and updates the engine draws and runs together when a run is
#: longer than twice this (`advsim._dpsgd.run_mechanism`).
SEGMENT_STEPS = 128


def in_segments(steps: int, segment: int = SEGMENT_STEPS) -> bool:
    """Whether a run of `steps` steps draws in segments of `segment` (where the generator
    allows, `range_supported`): when it is longer than two of them."""
    return steps > 2 * segment


#: Threefry-2x32's rotations, as in Salmon et al. (SC 2011) and `jax.random`'s own.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(x, bits: int):
    return (x << np.uint32(bits)) | (x >> np.uint32(32 - bits))


def _threefry2x32(k0, k1, x0, x1) -> tuple:
    """Threefry-2x32 with 20 rounds of the counters (x0, x1) under the key (k0, k1): the
    hash `jax.random` draws with (Salmon et al., SC 2011), written out round by round.

    The same words as `jax.extend.random.threefry_2x32` (tested bit for bit,
    tests/advsim/test_streams.py, and checked again by `range_supported`), but XLA fuses
    the 20 rounds into the elementwise program around them, where JAX lowers its own
    hash on the CPU as a rolled loop of 5 passes over memory (4.5x slower for a segment
    of 128 steps of 1024 runs, measured on 2 CPU cores).
    """
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def _words(key, start, size: int):
    """The two threefry words of elements start .. start + size - 1 of `key`'s stream."""
    data = jax.random.key_data(key)
    idx = jnp.asarray(start, jnp.uint32) + jnp.arange(size, dtype=jnp.uint32)
    return _threefry2x32(data[0], data[1], jnp.zeros_like(idx), idx)


def bits_range(key, start, size: int) -> jax.Array:
    """`jax.random.bits(key, (n,), jnp.uint32)[start : start + size]` for any n >= start
    + size (`range_supported` must hold); `start` may be traced, `size` is static."""
    hi, lo = _words(key, start, size)
    return hi ^ lo


def normal_range(key, start, size: int, dtype) -> jax.Array:
    """`jax.random.normal(key, (n,), dtype)[start : start + size]` for any n >= start +
    size (`range_supported(dtype)` must hold): the same bits, the same map to (-1, 1)
    and the same sqrt(2) erfinv."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float64:
        hi, lo = _words(key, start, size)
        bits = (hi.astype(jnp.uint64) << np.uint64(32)) | lo.astype(jnp.uint64)
        uint, shift, one = jnp.uint64, 64 - 52, np.array(1.0, np.float64).view(np.uint64)
    else:
        bits = bits_range(key, start, size)
        uint, shift, one = jnp.uint32, 32 - 23, np.array(1.0, np.float32).view(np.uint32)
    mantissa = jax.lax.shift_right_logical(bits, uint(shift)) | uint(one)
    floats = jax.lax.bitcast_convert_type(mantissa, dtype) - jnp.array(1.0, dtype)
    lo_ = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = jax.lax.max(jnp.array(lo_, dtype), floats * (np.array(1.0, dtype) - lo_) + lo_)
    return jnp.array(np.sqrt(2), dtype) * jax.lax.erf_inv(u)


def _compare(dtype) -> bool:
    with jax.enable_x64(dtype == jnp.float64 or jax.config.jax_enable_x64):
        return _compare_draws(dtype)


def _compare_draws(dtype) -> bool:
    @jax.jit
    def same(key):  # one compiled program: the check costs one compilation, not dozens
        whole = jax.random.normal(key, (300,), dtype)
        bits = jax.random.bits(key, (300,), jnp.uint32)
        normals = jnp.all(normal_range(key, 37, 200, dtype) == whole[37:237])
        return normals & jnp.all(bits_range(key, 5, 290) == bits[5:295])

    return bool(same(jax.random.key(20_241_004)))


@functools.cache
def _checked(dtype_name: str) -> bool:
    """Slices of this JAX's own draws equal `normal_range` and `bits_range` (once per
    process and dtype, on concrete values: in a thread of its own, since the engine asks
    while tracing and JAX's tracing state is per thread, as is `jax.enable_x64`).

    Where a persistent compilation cache is on (`jax_compilation_cache_dir`, which
    `advsim`'s commands set), a check passed is remembered there, for this JAX, jaxlib,
    backend and dtype (`_memo`): a later process reads it instead of tracing and
    compiling the check again (0.13 s of a command's compilation, measured)."""
    memo = _memo(dtype_name)
    if memo is not None and memo.is_file():
        return True
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        same = pool.submit(_compare, jnp.dtype(dtype_name)).result()
    if same and memo is not None:
        with contextlib.suppress(OSError):  # a folder not writable: checked again next time
            partial = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
            partial.write_text("normal_range and bits_range equal this JAX's draws\n")
            os.replace(partial, memo)
    return same


def _memo(dtype_name: str) -> Path | None:
    """Where a passed check of `dtype_name` is remembered, or None (no cache folder)."""
    folder = getattr(jax.config, "jax_compilation_cache_dir", None)
    if not folder:
        return None
    try:
        import jaxlib

        versions = f"{jax.__version__}-{jaxlib.__version__}-{jax.default_backend()}"
    except Exception:  # noqa: BLE001 (no backend: no memo)
        return None
    return Path(folder) / f"advsim-streams-{versions}-{dtype_name}.ok"


def range_supported(dtype=jnp.float32) -> bool:
    """Whether `normal_range` and `bits_range` reproduce this JAX's stream: the default
    threefry generator, partitionable, and checked equal on a test key."""
    # Flags a later JAX may drop (its default then stands); the check below decides.
    if threefry_2x32 is None or not getattr(jax.config, "jax_threefry_partitionable", True):
        return False
    if getattr(jax.config, "jax_default_prng_impl", "threefry2x32") != "threefry2x32":
        return False
    return _checked(jnp.dtype(dtype).name)

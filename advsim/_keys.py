"""Typed PRNG keys from what a user passes: a key, raw key data or an integer seed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from advsim._limits import MAX_SEED

__all__ = ["as_key"]


def as_key(key) -> jax.Array:
    """A typed PRNG key from a `jax.random.key`, raw uint32 key data of shape (2,), or an
    integer seed in [0, 2**64).

    Seed s becomes the threefry2x32 key (jax's default implementation) with data
    `[s >> 32, s & 0xFFFFFFFF]`: the key `jax.random.key(s)` gives for s < 2**32 (in any
    mode) and for s < 2**63 with `jax_enable_x64`; without x64, `jax.random.key` keeps
    only the low 32 bits (seed 2**32 would collide with seed 0), and from 2**63 on it
    overflows, while here the same seed gives the same key in either mode up to
    2**64 - 1. Distinct seeds give distinct keys; negative seeds and seeds >= 2**64 are
    refused (a ValueError naming `key` and the range), not folded silently.

    Raises:
        TypeError: not a key or an integer.
        ValueError: an integer seed outside [0, 2**64).

    Example:
        >>> import jax
        >>> bool((jax.random.key_data(as_key(2**40 + 7)) == jax.numpy.array([256, 7])).all())
        True
    """
    if isinstance(key, bool) or key is None or isinstance(key, str):
        raise TypeError(f"key must be a jax PRNG key or an integer seed, got {key!r}")
    if isinstance(key, int | np.integer):
        seed = int(key)
        if not 0 <= seed <= MAX_SEED:
            raise ValueError(
                f"key must be a jax PRNG key or an integer seed in [0, 2**64 - 1], got {seed}"
            )
        if seed < 2**32:  # exactly jax.random.key(seed), in either mode
            return jax.random.key(seed)
        data = np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)
        return jax.random.wrap_key_data(jnp.asarray(data), impl="threefry2x32")
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    if key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    raise TypeError(f"key must be a jax PRNG key or an integer seed, got {key!r}")

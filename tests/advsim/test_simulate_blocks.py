"""`advsim.simulate`: the vmapped width chosen by dimension, its invisibility in the
results, the flat noise draw, and integer keys of any size (`key=2**70`)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import advsim
import advsim._layout as layout_module
from advsim._keys import as_key
from advsim._layout import VECTOR_COORDINATES, vector_width
from advsim.adversaries import ProjectionScore
from advsim.mechanisms import LinearProcess

# --- the width ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dim", "width"), [(1, 1024), (8, 1024), (10, 512), (30, 256), (100, 64), (9000, 1)]
)
def test_width_by_dimension(dim, width):
    mech = LinearProcess(20, 0.1, 1.0, dim=dim)
    assert vector_width(mech) == min(width, advsim.block_size(mech))
    w = vector_width(mech)
    assert w & (w - 1) == 0 and advsim.block_size(mech) % w == 0
    assert w == 1 or w * dim <= VECTOR_COORDINATES


def test_width_depends_on_shapes_only():
    a = LinearProcess(20, 0.1, 1.0, dim=10)
    b = LinearProcess(20, 0.7, 3.0, dim=10, clip_norm=2.0, batching="fixed")
    assert vector_width(a) == vector_width(b) == 512
    # A larger model in memory (Poisson-sampled groups are drawn for all T steps at once):
    # the block shrinks and bounds the width.
    big = LinearProcess(50_000, 0.1, 1.0, dim=10, data_gradients=np.zeros((1, 10)))
    assert vector_width(big) == advsim.block_size(big) < 512
    # Run by the one program for every T, a run holds one segment's draws at any T.
    assert vector_width(LinearProcess(50_000, 0.1, 1.0, dim=10)) == 512


@pytest.mark.slow
def test_scores_do_not_depend_on_the_width(monkeypatch):
    # The same runs computed 512 and 16 at a time (one block of 1024 per chunk): for this
    # process (no reduction over the runs' data) the lanes' arithmetic is the same. Other
    # mechanisms' rounding can depend on the width; it is fixed by their shapes, so their
    # runs too do not depend on the chunk size (the contract tests).
    mech = LinearProcess(6, 0.3, 1.0, dim=10)
    results = []
    for coords, width in ((VECTOR_COORDINATES, 512), (160, 16)):
        monkeypatch.setattr(layout_module, "VECTOR_COORDINATES", coords)
        assert vector_width(mech) == width
        results.append(advsim.simulate(mech, ProjectionScore(), 300, key=11, chunk_size=1))
    np.testing.assert_array_equal(results[1].canary_in, results[0].canary_in)
    np.testing.assert_array_equal(results[1].canary_out, results[0].canary_out)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_flat_noise_draw_is_the_2d_draw(dtype, request):
    # run_mechanism draws its (T, d) normals flat and slices them per step: the same
    # numbers as normal(key, (T, d)).
    if dtype == "float64":
        request.getfixturevalue("x64")
    key = jax.random.key(4)
    for shape in [(7, 10)]:
        flat = jax.random.normal(key, (shape[0] * shape[1],), dtype).reshape(shape)
        np.testing.assert_array_equal(flat, jax.random.normal(key, shape, dtype))


def test_release_all_uses_each_steps_own_noise():
    # Step t of a run without the canary (and no data) moves the model by -sigma C xi_t:
    # the trajectory's increments are the (T, d) normals of split(key, 3)[0], in order.
    mech = LinearProcess(5, 0.1, 2.0, dim=3)
    key = jax.random.key(8)
    traj = advsim.run_mechanism(mech, False, key=key, release="all")
    noise = jax.random.normal(jax.random.split(key, 3)[0], (5, 3))
    np.testing.assert_allclose(
        -np.diff(np.asarray(traj), axis=0), 2.0 * np.asarray(noise), rtol=1e-6
    )


# --- keys -----------------------------------------------------------------------------------


def test_small_seeds_are_jax_random_key():
    for seed in (0, 1, 12345, 2**32 - 1):
        np.testing.assert_array_equal(
            jax.random.key_data(as_key(seed)), jax.random.key_data(jax.random.key(seed))
        )


def _data(seed) -> tuple:
    return tuple(np.asarray(jax.random.key_data(as_key(seed))).tolist())


def test_large_seeds_are_distinct_in_float32_mode():
    # jax.random.key keeps the low 32 bits without x64 (2**32 would be seed 0): not here.
    seeds = [0, 2**32, 2**32 + 1, 2**40 + 7, 2**63 - 1, 2**63, 2**64 - 1]
    assert len({_data(s) for s in seeds}) == len(seeds)
    assert _data(2**40 + 7) == (256, 7)
    assert _data(np.uint64(2**63)) == _data(2**63)


def test_large_seeds_match_jax_random_key_under_x64(x64):
    for seed in (2**32, 2**40 + 7, 2**63 - 1):
        assert _data(seed) == tuple(np.asarray(jax.random.key_data(jax.random.key(seed))).tolist())
    assert _data(2**63) == (2**31, 0)  # where jax.random.key overflows


@pytest.mark.parametrize("seed", [2**64, 2**70, -1, -(2**70)])
def test_seeds_outside_the_range_are_refused_naming_key(seed):
    with pytest.raises(ValueError, match=r"key must be .* integer seed in \[0, 2\*\*64 - 1\]"):
        as_key(seed)
    with pytest.raises(ValueError, match="key"):
        advsim.simulate(LinearProcess(3, 0.1, 1.0), ProjectionScore(), 10, key=seed)


def test_big_seed_gives_a_result():
    mech = LinearProcess(6, 0.3, 1.0, dim=10)
    a = advsim.simulate(mech, ProjectionScore(), 300, key=2**64 - 1, chunk_size=1)
    b = advsim.simulate(mech, ProjectionScore(), 300, key=as_key(2**64 - 1), chunk_size=1)
    np.testing.assert_array_equal(a.canary_in, b.canary_in)
    assert np.all(np.isfinite(a.canary_out))

"""`advsim._streams` and the engine's segmented scan: the same numbers as the up-front draws.

Where the expected values come from: `jax.random.normal` and `jax.random.bits` themselves
(a stretch drawn alone must equal the slice of the whole draw, bit for bit), and the
engine's own up-front path (`range_supported` forced False), which draws each run's whole
(T, d) noise block at once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import advsim
import advsim._dpsgd as dpsgd_module
import advsim._streams as streams
import advsim.mechanisms
import advsim.testing
from advsim import AbstractMechanism
from advsim.adversaries import ProjectionScore
from advsim.mechanisms import LinearProcess

from .._plugins import exported_classes


@pytest.mark.parametrize(("start", "size"), [(0, 1), (0, 257), (5, 3), (1000, 128), (77, 64)])
def test_a_stretch_of_the_bits_is_the_slice_of_the_whole(start, size):
    key = jax.random.key(7)
    whole = jax.random.bits(key, (start + size + 5,), jnp.uint32)
    np.testing.assert_array_equal(streams.bits_range(key, start, size), whole[start:][:size])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("start", "size"), [(0, 10), (3, 200), (999, 7)])
def test_a_stretch_of_the_normals_is_the_slice_of_the_whole(dtype, start, size, request):
    if dtype == "float64":
        request.getfixturevalue("x64")
    key = jax.random.fold_in(jax.random.key(11), 3)
    whole = jax.random.normal(key, (start + size + 1,), dtype)
    got = streams.normal_range(key, start, size, dtype)
    assert got.dtype == jnp.dtype(dtype)
    np.testing.assert_array_equal(got, whole[start : start + size])


def test_the_written_out_hash_is_jaxs_threefry():
    # advsim._streams writes threefry-2x32's 20 rounds out (XLA fuses them); the reference
    # is JAX's own hash, on random keys and counters (both words, high counters included).
    from jax.extend.random import threefry_2x32

    rng = np.random.default_rng(3)
    for _ in range(5):
        k0, k1 = (np.uint32(v) for v in rng.integers(0, 2**32, 2))
        x = jnp.asarray(rng.integers(0, 2**32, 2 * 257), jnp.uint32)
        ours = streams._threefry2x32(jnp.uint32(k0), jnp.uint32(k1), x[:257], x[257:])
        theirs = threefry_2x32((jnp.uint32(k0), jnp.uint32(k1)), x)
        np.testing.assert_array_equal(np.concatenate([np.asarray(w) for w in ours]), theirs)


def test_the_generator_in_use_is_supported_and_others_are_not():
    assert streams.range_supported(jnp.float32)
    jax.config.update("jax_threefry_partitionable", False)
    try:
        assert not streams.range_supported(jnp.float32)
    finally:
        jax.config.update("jax_threefry_partitionable", True)


def test_a_passed_check_is_remembered_where_a_compilation_cache_is_on(tmp_path, monkeypatch):
    memo = tmp_path / "advsim-streams.ok"
    monkeypatch.setattr(streams, "_memo", lambda dtype_name: memo)
    streams._checked.cache_clear()
    try:
        assert streams._checked("float32") and memo.is_file()  # compared, then remembered
        streams._checked.cache_clear()
        monkeypatch.setattr(streams, "_compare", lambda dtype: pytest.fail("compared again"))
        assert streams._checked("float32")  # read from the memo
        memo.unlink()
        streams._checked.cache_clear()
        monkeypatch.setattr(streams, "_compare", lambda dtype: False)  # a JAX that differs
        assert not streams._checked("float32") and not memo.exists()  # never remembered
    finally:
        streams._checked.cache_clear()


def test_the_memo_is_named_by_jax_jaxlib_backend_and_dtype(tmp_path):
    import jaxlib

    # The tests run without a persistent cache (tests/conftest.py), but CI turns one on
    # for the whole run (.ci/run): both states are set here, and the one found restored.
    before = jax.config.jax_compilation_cache_dir
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        assert streams._memo("float32") is None  # no cache, no memo
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        path = streams._memo("float64")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert path.parent == tmp_path
    for part in (jax.__version__, jaxlib.__version__, jax.default_backend(), "float64"):
        assert part in path.name


def _runs(mech, release: str, keys) -> list:
    run = jax.jit(
        jax.vmap(
            lambda k, c: dpsgd_module.run_mechanism(mech, c, key=k, release=release),
            in_axes=(0, None),
        )
    )
    return [np.asarray(run(keys, world)) for world in (True, False)]


MECHANISMS = exported_classes(advsim.mechanisms, AbstractMechanism)


def _segmented(monkeypatch, mech, up_front: bool = False) -> None:
    """Segments short enough that `mech`'s runs have several, most a shorter last one;
    or, with `up_front`, the engine's whole-block draws."""
    segment = max(1, (mech.steps - 1) // 3)
    assert mech.steps > 2 * segment, "too short to run in segments (T < 3)"
    monkeypatch.setattr(dpsgd_module, "SEGMENT_STEPS", segment)
    supported = (lambda dtype: False) if up_front else streams.range_supported
    monkeypatch.setattr(dpsgd_module, "range_supported", supported)


@pytest.mark.slow  # two compilations per example
@pytest.mark.parametrize("cls", MECHANISMS, ids=lambda cls: cls.__name__)
def test_segmented_runs_equal_the_up_front_runs_to_rounding(cls, monkeypatch):
    # Every built-in contract example, both worlds, the last model and the trajectory. The
    # random numbers are the same bit for bit (above); the updates are compiled into
    # another program (a scan of scans) whose float32 rounding can differ (XLA fuses the
    # draws and the updates differently), by a few ulps for the linear processes and more
    # where a nonlinear model's steps amplify it: 4.1e-5 absolute (2.1e-5 relative) on the
    # gradient canary's logistic model after 4 steps. A stretch of noise misplaced by even
    # one step moves a value by about sigma * C, far outside these tolerances.
    keys = jax.random.split(jax.random.key(3), 8)
    with jax.enable_x64(cls.requires_x64 or jax.config.jax_enable_x64):
        for name, mech in cls.contract_examples().items():
            if mech.steps < 3:  # one segment at most: the up-front path
                continue
            # The trajectory (its last row is the last model; the "last" path is checked
            # by the simulations below).
            for release in ("all",):
                _segmented(monkeypatch, mech, up_front=True)
                want = _runs(mech, release, keys)
                _segmented(monkeypatch, mech)
                got = _runs(mech, release, keys)
                for g, w in zip(got, want, strict=True):
                    assert g.shape == w.shape and g.dtype == w.dtype, f"{name} {release}"
                    tol = 1e-12 if g.dtype == np.float64 else 1e-4
                    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{name}")


@pytest.mark.slow  # 9 s; the README's command keeps the 1-D simulation below
def test_a_segmented_run_with_data_equals_the_up_front_run_to_rounding(monkeypatch):
    # A 5-d model with Gaussian data, both worlds, the whole trajectory.
    mech = LinearProcess.with_data(
        10, 0.3, 1.0, dim=5, num_examples=20, distribution="gaussian", scale=3.0
    )
    keys = jax.random.split(jax.random.key(3), 8)
    _segmented(monkeypatch, mech, up_front=True)
    want = _runs(mech, "all", keys)
    _segmented(monkeypatch, mech)
    for g, w in zip(_runs(mech, "all", keys), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


#: The classes whose updates differ most in kind: data groups and a d-dimensional model, a
#: nonlinear loss, Poisson-sampled groups (float64), a projection.
_CHUNKED = {"LinearProcess", "GradientCanary", "PiecewiseConstruction", "ProjectedLinearCanary"}


@pytest.mark.slow  # one more compilation per example
@pytest.mark.parametrize(
    "cls", [c for c in MECHANISMS if c.__name__ in _CHUNKED], ids=lambda cls: cls.__name__
)
def test_segmented_runs_do_not_depend_on_the_chunk_size(cls, monkeypatch):
    with jax.enable_x64(cls.requires_x64 or jax.config.jax_enable_x64):
        for mech in cls.contract_examples().values():
            if mech.steps < 3:
                continue
            _segmented(monkeypatch, mech)
            adversary = None
            if isinstance(mech, advsim.AbstractMultiCanary):
                adversary = ProjectionScore(np.eye(mech.init_model().shape[0])[0])
            advsim.testing.check_mechanism(mech, adversary, checks=("chunking",))


def test_simulate_in_segments_matches_the_up_front_scores(monkeypatch):
    # T = 300 > 2 x 128: the default path draws in segments (two of 128 and one of 44);
    # its scores do not depend on the chunk size, and are the up-front path's to rounding.
    mech = LinearProcess(steps=300, sampling_prob=0.1, noise_multiplier=1.0)
    segmented = advsim.simulate(mech, ProjectionScore(), 3000, key=4)
    one = advsim.simulate(mech, ProjectionScore(), 3000, key=4, chunk_size=1)
    np.testing.assert_array_equal(segmented.canary_in, one.canary_in)
    np.testing.assert_array_equal(segmented.canary_out, one.canary_out)
    monkeypatch.setattr(dpsgd_module, "range_supported", lambda dtype: False)
    up_front = advsim.simulate(mech, ProjectionScore(), 3000, key=4)
    np.testing.assert_allclose(segmented.canary_in, up_front.canary_in, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(segmented.canary_out, up_front.canary_out, rtol=1e-5, atol=1e-5)

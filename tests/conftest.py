import os

import jax
import numpy as np
import pytest

# `advsim.cli.main` (called in-process by many tests) turns on JAX's persistent compilation
# cache in the user's folder; off here, so that no test reads programs an earlier run left
# there. CI turns JAX's cache on for the whole run instead (JAX_COMPILATION_CACHE_DIR).
os.environ.setdefault("ADVSIM_NO_COMPILE_CACHE", "1")
# `import advsim` asks JAX for one host device per core (advsim._cores); the workers of
# `pytest -n auto` already use every core, one each, so each keeps one device (set before
# jax starts: no test module has run yet). tests/advsim/test_cores.py checks the default.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("ADVSIM_CPU_DEVICES", "1")


@pytest.fixture
def key():
    return jax.random.key(0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def x64():
    """float64 in jax for the test (mechanisms with `requires_x64`), restored after."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)

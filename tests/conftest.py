import jax
import numpy as np
import pytest


@pytest.fixture
def key():
    return jax.random.key(0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)

"""The search on a construction class of the user's own (not the built-in piecewise
family): the class names the arrays it varies and their box (`advsim.search`'s protocol),
the search moves them, and the best member is reloaded from the folder as that class with
the same arrays and the same exact epsilon."""

import math

import jax
import numpy as np
import pytest

from advsim.exact import last_iterate_epsilon
from advsim.search import config_from_mapping, load_best, search

# DP-SGD on -C m plus a regularizer a tanh(m) + b m: two searched scalars in a box where the
# map m -> m - eta (a tanh m + b m) stays monotone (|a| + |b| < 1 at eta = 1).
MODULE = '''
import jax.numpy as jnp
import numpy as np

import advsim


class Tilted(advsim.AbstractScalarLaw):
    params: advsim.DPSGDParams
    a: np.ndarray
    b: np.ndarray

    def __init__(self, steps, sampling_prob, noise_multiplier, a=0.0, b=0.0):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier)
        self.a = np.asarray([a], np.float64)
        self.b = np.asarray([b], np.float64)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        return self.a * jnp.tanh(model) + self.b * model

    def search_parameters(self):
        return (self.a, self.b)

    def search_box(self):
        return ((-0.6, 0.6), (-0.3, 0.3))
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_tilted.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_tilted"


@pytest.mark.slow  # 17 s on 2 cores: the search grid, then every start on 3 grids
def test_a_class_of_the_users_is_searched_and_reloaded(tmp_path, user_module):
    cfg = config_from_mapping(
        {
            "steps": 3, "sampling_prob": 1.0, "noise_multiplier": 1.0, "delta": 1e-5,
            "construction": f"{user_module}:Tilted", "construction_args": {"a": 0.1},
            "iterations": 3, "random_starts": 1, "random_candidates": 4, "cells_per_sd": 3.0,
        }
    )  # fmt: skip
    result = search(cfg, tmp_path / "run", progress=False)
    start = result.starts["given"]
    assert math.isfinite(result.exact_epsilon) and result.exact_epsilon >= start["before"] - (
        result.exact_error + start["before_error"]
    )
    best = load_best(tmp_path / "run")
    assert type(best).__name__ == "Tilted" and type(best).__module__ == user_module
    np.testing.assert_array_equal(best.a, result.best.a)
    np.testing.assert_array_equal(best.b, result.best.b)
    with jax.enable_x64(True):
        again = last_iterate_epsilon(best, cfg.delta)
    assert again.epsilon == pytest.approx(result.exact_epsilon, rel=1e-9)


def test_a_class_outside_the_protocol_is_refused_by_name(user_module):
    from advsim.search import build_family

    cfg = config_from_mapping(
        {"steps": 2, "noise_multiplier": 1.0, "construction": "advsim.mechanisms:LinearProcess"}
    )
    with pytest.raises(ValueError, match="LinearProcess has no search_parameters or search_box"):
        build_family(cfg)

"""The search on a construction class of the user's own (not the built-in piecewise
family): the class names the arrays it varies and their box (`advsim.search`'s protocol,
`SearchableConstruction`), the search moves them, records the class in `search.json` and
the best member is reloaded from the folder as that class with the same arrays and the
same exact epsilon. The built-in `PiecewiseConstruction` follows the same protocol."""

import json
import math

import equinox as eqx
import jax
import numpy as np
import pytest

from advsim.exact import last_iterate_epsilon
from advsim.mechanisms import PiecewiseConstruction, PiecewiseField
from advsim.search import (
    SearchableConstruction,
    build_family,
    config_from_mapping,
    load_best,
    search,
)

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


@pytest.mark.slow  # 16 s on 2 cores: the search grid, then every start on 3 grids
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
    recorded = json.loads((tmp_path / "run" / "search.json").read_text())
    assert recorded["construction_class"] == f"{user_module}:Tilted"
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


def test_load_best_refuses_a_config_that_builds_another_class(tmp_path, user_module):
    # A folder whose search.json records another class than its config now builds.
    cfg = config_from_mapping(
        {"steps": 2, "noise_multiplier": 1.0, "construction": f"{user_module}:Tilted",
         "span": [-1.0, 1.0]}  # a given span: no grid reach to compute
    )  # fmt: skip
    family = build_family(cfg)
    eqx.tree_serialise_leaves(tmp_path / "best.eqx", family.template)
    summary = {"config": cfg.to_dict(), "construction_class": "elsewhere:Other"}
    (tmp_path / "search.json").write_text(json.dumps(summary))
    wanted = f"found a elsewhere:Other;.*builds a {user_module}:Tilted"
    with pytest.raises(ValueError, match=wanted):
        load_best(tmp_path)


def test_the_built_in_family_follows_the_protocol():
    # PiecewiseConstruction named by path like any class: its searched arrays are its
    # fields' values and jumps, in the box SearchConfig documents (values in [-C, C], jumps
    # in [-2C, 2C] for the clipped fields; [-R, R] and [-2R, 2R] for the regularizer, R =
    # regularizer_bound = 4 by default), and a member rebuilt from the flat vector is the
    # construction itself.
    groups = {"knots": [-1.0, 0.5], "values": [0.25, 1.0], "jumps": [0.0, -2.0]}
    cfg = config_from_mapping(
        {
            "steps": 2, "noise_multiplier": 1.0, "clip_norm": 1.5, "span": [-1.0, 1.0],
            "construction": "advsim.mechanisms:PiecewiseConstruction",
            "construction_args": {"canary": {"knots": [0.0], "values": [-1.5]},
                                  "groups": [groups], "counts": [3], "clip_norm": 1.5,
                                  "batching": "fixed"},
        }
    )  # fmt: skip
    family = build_family(cfg)
    mech = family.template
    assert isinstance(mech, PiecewiseConstruction) and isinstance(mech, SearchableConstruction)
    c, r = 1.5, 4.0
    #            canary values, group values, group jumps, regularizer value
    expected_hi = [c, c, c, 2 * c, 2 * c, r]
    np.testing.assert_array_equal(family.upper, expected_hi)
    np.testing.assert_array_equal(family.lower, -np.asarray(expected_hi))
    theta = family.starts["given"]
    np.testing.assert_array_equal(theta, [-1.5, 0.25, 1.0, 0.0, -2.0, 0.0])
    again = family.member(theta)
    np.testing.assert_array_equal(again.groups[0].jumps, mech.groups[0].jumps)
    np.testing.assert_array_equal(np.asarray(again.field_breakpoints()), [-1.0, 0.5])


def test_a_field_declares_its_jumps_to_the_construction():
    # field_breakpoints is read off the fields: a PiecewiseField with jumps declares its
    # knots, one without none; the construction lists them in field order.
    jumpy = PiecewiseField([0.25, 0.75], [1.0, 1.0], [0.0, -2.0])
    smooth = PiecewiseField([-3.0, 3.0], [-1.0, 1.0])
    mech = PiecewiseConstruction(2, 1.0, 1.0, canary=smooth, groups=[jumpy, smooth],
                                 regularizer=PiecewiseField([2.0], [0.0], [0.5]))  # fmt: skip
    assert jumpy.breakpoints().tolist() == [0.25, 0.75] and smooth.breakpoints().size == 0
    np.testing.assert_array_equal(np.asarray(mech.field_breakpoints()), [0.25, 0.75, 2.0])

"""The piecewise-linear family holds the papers' 1-D constructions.

Expected values: each paper construction's own mechanism (`ThresholdLandscape`,
`ZeroingRegularizer`, `LinearProcess`) on the same grids, so the member must give the same
exact epsilon to 1e-6 (the fields are equal on the grid: float64 rounding only); and the
closed forms its docstrings cite (one step's epsilon for the zeroing regularizer, Section
4.1 of arXiv:2410.06186).
"""

import os

import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim.adversaries import ProjectionScore
from advsim.exact import last_iterate_epsilon
from advsim.mechanisms import (
    LinearProcess,
    PiecewiseConstruction,
    PiecewiseField,
    ThresholdLandscape,
    ZeroingRegularizer,
)

# One grid (refinements=1): both mechanisms are propagated on the same nodes.
ONE_GRID = {"refinements": 1, "cells_per_sd": 4.0}


@pytest.mark.parametrize(
    ("sigma", "batch"),
    [
        pytest.param(2.0, 4, marks=pytest.mark.slow),
        pytest.param(1.0, 1, marks=pytest.mark.slow),
        pytest.param(4.0, 16, marks=pytest.mark.slow),
    ],
)
def test_threshold_landscape_is_a_member(sigma, batch):
    ours = PiecewiseConstruction.threshold_landscape(8, sigma, batch)
    theirs = ThresholdLandscape(8, sigma, batch)
    a = last_iterate_epsilon(ours, 1e-5, **ONE_GRID).epsilon
    b = last_iterate_epsilon(theirs, 1e-5, **ONE_GRID).epsilon
    assert a == pytest.approx(b, abs=1e-6)


@pytest.mark.parametrize(
    ("steps", "q", "sigma"),
    # Both slow (~15-25 s each on 2 cores): the README's test command stays under 5 minutes.
    [pytest.param(10, 0.01, 0.5, marks=pytest.mark.slow),
     pytest.param(25, 0.1, 1.0, marks=pytest.mark.slow)],
)  # fmt: skip
def test_zeroing_regularizer_and_linear_loss_are_members(steps, q, sigma):
    family = PiecewiseConstruction
    pairs = [
        (family.zeroing_regularizer(steps, q, sigma), ZeroingRegularizer(steps, q, sigma)),
        (family.linear_loss(steps, q, sigma), LinearProcess(steps, q, sigma)),
    ]
    for ours, theirs in pairs:
        a = last_iterate_epsilon(ours, 1e-5, **ONE_GRID).epsilon
        b = last_iterate_epsilon(theirs, 1e-5, **ONE_GRID).epsilon
        assert a == pytest.approx(b, abs=1e-6)


def test_field_values_jumps_and_rows():
    # g = 1 up to 0.5 (left-continuous), -1 beyond; row 2 (step 2) halves it.
    g = PiecewiseField([0.5], [[1.0], [0.5]], [[-2.0], [-1.0]])
    m = jnp.array([0.0, 0.5, 0.50001, 3.0])
    assert np.asarray(g(m, 1)).tolist() == [1.0, 1.0, -1.0, -1.0]
    assert np.asarray(g(m, 2)).tolist() == [0.5, 0.5, -0.5, -0.5]
    assert np.asarray(g(m, 9)).tolist() == [0.5, 0.5, -0.5, -0.5]  # last row beyond
    # Interpolation between knots, constant beyond the ends.
    h = PiecewiseField([-1.0, 1.0], [-2.0, 2.0])
    assert np.asarray(h(jnp.array([-5.0, 0.25, 5.0]), 1)).tolist() == [-2.0, 0.5, 2.0]


def test_save_and_load_reproduce_the_exact_epsilon(tmp_path):
    mech = PiecewiseConstruction.threshold_landscape(6, 2.0, 4)
    path = mech.save(tmp_path / "found.json", metadata={"found_by": "test"})
    again = PiecewiseConstruction.load(path)
    a = last_iterate_epsilon(mech, 1e-5, **ONE_GRID).epsilon
    b = last_iterate_epsilon(again, 1e-5, **ONE_GRID).epsilon
    assert a == b
    # Overrides: sigma may change; T may not for a field with one row per step.
    assert float(PiecewiseConstruction.load(path, noise_multiplier=3.0).noise_multiplier) == 3.0
    with pytest.raises(ValueError, match="one step size per step for T = 6"):
        PiecewiseConstruction.load(path, steps=7)
    with pytest.raises(ValueError, match="can override"):
        PiecewiseConstruction.load(path, knots=3)


def test_file_follows_the_umask(tmp_path):
    mech = PiecewiseConstruction.linear_loss(3, 0.5, 1.0)
    path = mech.save(tmp_path / "c.json")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"knots": [1.0, 0.0], "values": [0.0, 0.0]}, "strictly increasing"),
        ({"knots": [0.0], "values": [[0.0, 1.0]]}, r"shape \(1,\) or \(rows, 1\)"),
        ({"knots": [0.0], "values": [np.nan]}, "finite"),
        ({"knots": [0.0, 1.0], "values": [0.0, 1.0], "jumps": [0.0]}, "jumps must have shape"),
    ],
)
def test_bad_fields_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PiecewiseField(**kwargs)


def test_bad_constructions_are_refused():
    c = PiecewiseField.constant(-1.0)
    with pytest.raises(ValueError, match="counts must have one entry per group"):
        PiecewiseConstruction(3, 0.5, 1.0, canary=c, groups=[c], counts=[1, 2])
    with pytest.raises(ValueError, match="step_sizes must be 3 finite values"):
        PiecewiseConstruction(3, 0.5, 1.0, canary=c, step_sizes=[1.0, 1.0])
    with pytest.raises(ValueError, match="not both"):
        PiecewiseConstruction(3, 0.5, 1.0, canary=c, step_sizes=[1.0] * 3, learning_rate=0.5)
    rows = PiecewiseField([0.0], np.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"4 rows of values: 1 \(every step\) or steps = 3"):
        PiecewiseConstruction(3, 0.5, 1.0, canary=rows)


def test_simulation_runs_a_member():
    # The engine runs it like any mechanism: T = 1 of the linear loss moves the model by
    # C with probability q, plus N(0, sigma^2) noise (Algorithm 1 of arXiv:2410.06186).
    mech = PiecewiseConstruction.linear_loss(1, 1.0, 1.0)
    scores = advsim.simulate(mech, ProjectionScore(), 20_000, key=0)
    assert np.mean(scores.canary_in) == pytest.approx(1.0, abs=0.05)
    assert np.mean(scores.canary_out) == pytest.approx(0.0, abs=0.05)

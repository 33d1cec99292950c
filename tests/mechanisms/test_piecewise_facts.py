"""`PiecewiseConstruction.facts()`: what a piecewise construction certifies for
`advsim.bounds`, checked against the fields' values on a fine grid (every row), and the
bounds it then accepts or refuses.

Expected values: the heuristic of the linear loss is Theorem 1's (`heuristic_epsilon`);
slopes, |g| and jumps are read off `PiecewiseField` values at 20001 points per row."""

from __future__ import annotations

import math

import numpy as np
import pytest

import advsim.bounds as bounds
from advsim.bounds import AssumptionError
from advsim.mechanisms import PiecewiseConstruction, PiecewiseField

DELTA = 1e-5


def _values(field: PiecewiseField, x: np.ndarray) -> np.ndarray:
    """g(x, t) for every row t (host, float64)."""
    rows = []
    for r in range(field.rows):
        v = np.interp(x, field.knots, field.values[r])
        if field.jumps is not None:
            v = v + np.sum(field.jumps[r] * (x[:, None] > field.knots), axis=1)
        rows.append(v)
    return np.stack(rows)


FIELDS = [
    PiecewiseField([-1.0, 0.5, 2.0], [0.3, -0.4, 1.2]),
    PiecewiseField([0.0, 1.0], [[0.0, 2.0], [1.0, -1.0]], steps=2),
    PiecewiseField([0.5], [1.0], jumps=[-2.0]),
    PiecewiseField([-1.0, 1.0], [-0.5, 0.5], jumps=[0.25, 0.5]),
]


@pytest.mark.parametrize("field", FIELDS, ids=range(len(FIELDS)))
def test_slope_bounds_and_sup_hold_on_a_fine_grid(field):
    x = np.linspace(-5.0, 5.0, 20001)
    g = _values(field, x)
    lo, hi = field.slope_bounds()
    quotient = np.diff(g, axis=1) / np.diff(x)
    jumpy = field.jumps is not None and np.any(field.jumps)
    if not jumpy:
        assert quotient.min() >= lo - 1e-9 and quotient.max() <= hi + 1e-9
    assert np.abs(g).max() <= field.sup_abs() * (1 + 1e-12)
    assert np.abs(g).max() >= field.sup_abs() * (1 - 1e-3)  # reached (within the grid)
    if jumpy:
        assert (lo == -math.inf) == bool(np.any(field.jumps < 0))
        assert (hi == math.inf) == bool(np.any(field.jumps > 0))


def test_the_bounds_a_piecewise_construction_meets_and_refuses():
    lin = PiecewiseConstruction.linear_loss(10, 0.1, 1.0)
    assert bounds.LastIterateHeuristic().epsilon(lin, DELTA) == bounds.heuristic_epsilon(
        DELTA, lin.accounting()
    )
    land = PiecewiseConstruction.threshold_landscape(4, 1.0, 8)
    with pytest.raises(AssumptionError, match="some gradient is not constant"):
        bounds.LastIterateHeuristic().epsilon(land, DELTA)
    assert math.isfinite(bounds.Composition().epsilon(land, DELTA))
    quad = PiecewiseConstruction.quadratic_regularizer(5, 1.0, 1.0, alpha=0.5, radius=10.0)
    # Flat beyond its knots, the regularizer is not strongly convex on the whole line.
    with pytest.raises(AssumptionError, match=r"m = 0 is not > 0"):
        bounds.StronglyConvexGDP().epsilon(quad, DELTA)

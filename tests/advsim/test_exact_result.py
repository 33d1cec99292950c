"""`ladder_fields`: the value, differences, observed order and error estimates of
`ExactEpsilon`, on hand-worked numbers (the definitions in `ExactEpsilon`'s docstring and
`docs/guide/exact.md`, "The three grids").

Three grids give eps 1.0, 1.1, 1.125: differences 0.1 and 0.025, observed order
log2(0.1 / 0.025) = 2. The bracket (1.12, 1.135) puts the lost mass's term at
max(1.135 - 1.125, 1.125 - 1.12) = 0.01, so the error is 0.025 + 0.01 = 0.035. Per step,
the error is the change from the coarser grid plus the same term, inf where the finest
value is above the resolution limit or not finite.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from advsim.exact._result import ladder_fields


def _fields(**overrides):
    kw = dict(
        eps_bracket=(1.12, 1.135), resolved=True, limit=20.0,
        per_step=np.array([0.5, 0.9, 1.125]), coarser_step=np.array([0.4, 0.95, 1.1]),
    )  # fmt: skip
    return ladder_fields([1.0, 1.1, 1.125], [0.4, 0.2, 0.1], **(kw | overrides))


def test_value_differences_order_and_error_by_hand():
    f = _fields()
    assert f["epsilon"] == 1.125
    assert f["epsilons"] == (1.0, 1.1, 1.125)
    assert f["spacings"] == (0.4, 0.2, 0.1)
    np.testing.assert_allclose(f["differences"], (0.1, 0.025), rtol=1e-12)
    assert f["observed_order"] == pytest.approx(2.0, rel=1e-12)
    assert f["error"] == pytest.approx(0.035, rel=1e-12)
    assert f["resolved"] is True and f["eps_bracket"] == (1.12, 1.135)
    # per step: |change| + 0.01 = 0.11, 0.06, 0.035
    np.testing.assert_allclose(f["error_per_step"], [0.11, 0.06, 0.035], rtol=1e-12)


def test_unresolved_one_grid_and_beyond_the_limit():
    assert _fields(resolved=False)["error"] == math.inf
    one = ladder_fields([1.0], [0.4], eps_bracket=(1.0, 1.0), resolved=True, limit=20.0,
                        per_step=np.array([1.0]), coarser_step=None)  # fmt: skip
    assert one["differences"] == () and math.isnan(one["observed_order"])
    assert math.isnan(one["error"]) and np.isnan(one["error_per_step"]).all()
    beyond = _fields(limit=1.0, per_step=np.array([0.5, np.inf, 1.125]))
    np.testing.assert_array_equal(np.isinf(beyond["error_per_step"]), [False, True, True])

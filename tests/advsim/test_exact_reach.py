"""`advsim.exact.grid_reach`: the interval a mechanism's grid spans, which its
`field_breakpoints()` must cover.

Expected values: the linear process at q = 1 drifts from m_0 = 0 to T eta C in the
in-world, and its last model's noise sd is sqrt(T) sigma eta C, so the grid spans the drift
plus `NOISE_SDS` = 12 of those sds on each side, to within the two cells (spacing
sigma eta C / cells_per_sd) that round it outward."""

import math

import pytest

from advsim.exact import grid_reach
from advsim.mechanisms import LinearProcess


@pytest.mark.parametrize("steps", [1, 4, 16])
@pytest.mark.parametrize("cells_per_sd", [6.0, 24.0])
def test_the_reach_is_the_drift_plus_twelve_noise_sds(steps, cells_per_sd):
    sigma, eta, clip = 0.5, 2.0, 1.5
    mech = LinearProcess(steps, 1.0, sigma, learning_rate=eta, clip_norm=clip)
    lo, hi = grid_reach(mech, cells_per_sd)
    sd = math.sqrt(steps) * sigma * eta * clip
    cell = sigma * eta * clip / cells_per_sd
    assert -12 * sd - 2 * cell <= lo <= -12 * sd
    assert steps * eta * clip + 12 * sd <= hi <= steps * eta * clip + 12 * sd + 2 * cell

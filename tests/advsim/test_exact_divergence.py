"""`grid_epsilon`, `grid_delta` and `subsampled_gaussians_epsilon` against closed forms.

Two Gaussians N(mu, 1) and N(0, 1) are mu-GDP, whose eps(delta) is
`advsim.bounds.gdp_epsilon` (Corollary 2.13 of arXiv:1905.02383, a closed form in Phi);
Gaussian mechanisms with noise multipliers s_i (sensitivity 1, no subsampling) compose to
mu-GDP with mu^2 = sum 1/s_i^2 (Corollary 3.3 there). A 2% error in either function fails
these (`scripts/planted_errors.py`).
"""

import math

import numpy as np
import pytest
from scipy.stats import norm

from advsim.bounds import gdp_delta, gdp_epsilon
from advsim.exact import grid_delta, grid_epsilon
from advsim.mechanisms import subsampled_gaussians_epsilon

DELTA = 1e-5


def _gaussians_on_a_grid(mu: float, per_sd: int = 50):
    h = 1.0 / per_sd
    x = np.arange(-14.0, mu + 14.0, h)
    return norm.pdf(x, mu) * h, norm.pdf(x) * h  # node masses: density x spacing


def test_grid_epsilon_and_delta_of_two_gaussians_are_the_gdp_closed_form():
    # Measured: eps within 4e-5 relative, delta within 2.1e-4 (the quadrature is of the
    # second order in the spacing, 1/50 of an sd here).
    p, q = _gaussians_on_a_grid(1.0)
    assert float(grid_epsilon(p, q, DELTA)) == pytest.approx(gdp_epsilon(DELTA, 1.0), rel=1e-3)
    assert float(grid_delta(p, q, 2.0)) == pytest.approx(gdp_delta(2.0, 1.0), rel=1e-3)


def test_subsampled_gaussians_at_q1_compose_to_the_gdp_closed_form():
    # Measured within 4e-9 relative (the PLD rounds pessimistically: never below).
    scales = [1.5, 2.0, 3.0]
    mu = math.sqrt(sum(s**-2 for s in scales))
    eps = subsampled_gaussians_epsilon(DELTA, 1.0, scales)
    assert gdp_epsilon(DELTA, mu) <= eps <= gdp_epsilon(DELTA, mu) * (1 + 1e-3)

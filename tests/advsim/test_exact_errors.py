"""The error beside each exact epsilon a figure writes, against independent references.

- `trapezoid_exact` (threshold_search's `exact_gdp`, `exact_eps`): the change from the
  grid twice as coarse, checked against both grids' values computed here, and, slow,
  against `two_step_epsilon` by adaptive quadrature (scipy.integrate.quad of the closed-form
  density, eps by brentq to 1e-12): the estimate covers the trapezoid value's error.
- `family_exact` (threshold_vs_jax_privacy, threshold_calibration): 0 for the closed forms
  (`gdp_epsilon`; the Laplace pair's shift + 2 log(1 - delta)), brentq's tolerance for the
  Binomial's exact sums, the change from the grid twice as coarse for the mixture and the
  t pair (checked on a coarser grid, against the value on a 10x finer one).
- `ExactEpsilon.error_per_step` (figure4_heatmap's `exact_t1`, `exact_t25`), slow: at
  T = 1 the landscape's theta_1 is the Gaussian mechanism (eps = `gdp_epsilon(delta,
  1 / sigma)`), at T = 2 its law is `two_step_epsilon`'s closed form (on 400,001 points).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

import advsim.figures._tables_threshold_strategies as strategies
from advsim.bounds import gdp_epsilon, two_step_density, two_step_epsilon
from advsim.figures import CLOSED_FORM, TRAPEZOID_REFINEMENT, trapezoid_exact

DELTA = 1e-5


def test_trapezoid_error_is_the_change_from_the_coarser_grid():
    # 20,001 points against 10,001 (the same nodes, every other one), at sigma = 2, B = 4.
    value, error = trapezoid_exact(two_step_epsilon, DELTA, 2.0, 4, threshold=-1.0,
                                   points=20_001)  # fmt: skip
    fine = two_step_epsilon(DELTA, 2.0, 4, threshold=-1.0, points=20_001)
    coarse = two_step_epsilon(DELTA, 2.0, 4, threshold=-1.0, points=10_001)
    assert float(value) == fine
    assert float(error) == pytest.approx(abs(fine - coarse), rel=1e-9)
    assert 0 < float(error) < 1e-5
    assert "trapezoid" in TRAPEZOID_REFINEMENT and "refinement estimate" in TRAPEZOID_REFINEMENT


def _quad_epsilon(threshold, sigma, b):
    """two_step_epsilon by adaptive quadrature of the closed-form density (12 sds wide)."""
    lo = -12 * sigma - 2 - abs(threshold)
    edges = np.linspace(lo, 1 - lo, 41)

    def hockey(eps, first, second):
        def f(y):
            p = two_step_density(y, first, sigma, b, threshold=threshold)
            q = two_step_density(y, second, sigma, b, threshold=threshold)
            return max(float(p) - math.exp(eps) * float(q), 0.0)

        return sum(scipy.integrate.quad(f, a, c, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
                   for a, c in zip(edges, edges[1:], strict=False))  # fmt: skip

    def excess(eps):
        return max(hockey(eps, True, False), hockey(eps, False, True)) - DELTA

    return scipy.optimize.brentq(excess, 0.0, 10.0, xtol=1e-12)


@pytest.mark.slow  # 22 s: 40 adaptive quadratures per bisection step
def test_trapezoid_error_covers_the_quadrature_reference():
    # sigma = 1, B = 1, h* = C/2: eps 2.9432611 (quad), trapezoid off by 1.8e-7, estimate
    # 8.0e-7 (measured: 4.4x; at sigma = 2, B = 4, h = -1: 1.3x).
    reference = _quad_epsilon(0.5, 1.0, 1)
    value, error = trapezoid_exact(two_step_epsilon, DELTA, 1.0, 1, threshold=0.5, points=20_001)
    assert abs(float(value) - reference) <= float(error) <= 10 * abs(float(value) - reference)


def test_family_closed_forms_and_exact_sums():
    for family, value in [("gaussian_strong", gdp_epsilon(DELTA, 2.0)),
                          ("gaussian_weak", gdp_epsilon(DELTA, 0.5)),
                          ("laplace", 1.0 + 2.0 * math.log1p(-DELTA))]:  # fmt: skip
        got = strategies.family_exact(family, DELTA)
        assert got == {"exact_eps": value, "exact_error": 0.0, "exact_error_kind": CLOSED_FORM}
    binomial = strategies.family_exact("binomial", DELTA)
    assert binomial["exact_error"] == pytest.approx(1e-10, rel=1e-4)  # brentq's xtol
    assert "exact sum" in binomial["exact_error_kind"]


@pytest.mark.parametrize("family", ["mixture", "student_t"])
def test_family_grid_error_is_the_change_from_the_coarser_grid(monkeypatch, family):
    # On 12,001 points (spacing 0.01): the estimate is the change from 6,001 points and
    # covers the value's distance to the 120,001-point value (10x finer).
    monkeypatch.setattr(strategies, "GRID_POINTS", 12_001)
    strategies._family_exact.cache_clear()
    try:
        got = strategies.family_exact(family, DELTA)
    finally:
        strategies._family_exact.cache_clear()
    fine = strategies.exact_epsilon(family, DELTA, 12_001)
    coarse = strategies.exact_epsilon(family, DELTA, 6_001)
    finer = strategies.exact_epsilon(family, DELTA, 120_001)
    assert got["exact_eps"] == fine
    assert got["exact_error"] == pytest.approx(abs(fine - coarse), rel=1e-9)
    assert abs(fine - finer) <= got["exact_error"]
    assert got["exact_error_kind"].startswith("refinement estimate")


@pytest.mark.slow  # ~8 s: one exact-law propagation on three grids (compilation included)
def test_landscape_error_per_step_covers_the_closed_forms():
    from advsim.mechanisms import landscape_law

    law = landscape_law(DELTA, 5, 2.0, 4, every_step=True)
    curve, error = law.epsilon_per_step, law.error_per_step
    assert error.shape == curve.shape and error[-1] == pytest.approx(law.error, rel=1e-12)
    t1 = gdp_epsilon(DELTA, 1.0 / 2.0)
    t2 = two_step_epsilon(DELTA, 2.0, 4, points=400_001)
    assert abs(curve[0] - t1) <= error[0] <= 20 * abs(curve[0] - t1)
    assert abs(curve[1] - t2) <= error[1] <= 20 * abs(curve[1] - t2)

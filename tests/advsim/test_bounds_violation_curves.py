"""The never-high trade-off curves of `advsim.bounds._violation_curves` (used by
`certify_violation`), against scipy's closed forms.

A certificate that a release's curve lies below a bound's is only sound if the bound's
curve is never above the exact one, and it is only useful if it is close to it.
"""

import numpy as np
import pytest
from scipy.stats import norm

from advsim.bounds._violation_curves import gdp_curve_lower

ALPHAS = np.concatenate(
    [[0.0], np.geomspace(1e-12, 0.5, 40), 1 - np.geomspace(1e-12, 0.5, 40), [1.0]]
)


@pytest.mark.parametrize("mu", [0.1, 1.0, 4.0])
def test_gdp_curve_lower_is_g_mu_from_below(mu):
    # G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) (Definition 2.7 of arXiv:1905.02383),
    # with G_mu(0) = 1 and G_mu(1) = 0: the lower curve is below it, by at most 1e-9
    # relative plus 1e-15, at every alpha including the ends.
    f = gdp_curve_lower(mu)
    exact = norm.cdf(-norm.ppf(ALPHAS) - mu)  # Phi^{-1}(1 - a) = -Phi^{-1}(a), exactly
    got = np.asarray(f(ALPHAS), np.float64)
    assert np.all(got <= exact)
    assert np.all(got >= exact * (1 - 1e-9) - 2e-15)
    assert float(f(0.0)) <= 1.0 and float(f(1.0)) <= 0.0


def test_dropped_mass_is_the_binomial_tails_rounded_up():
    # The Binomial(n, q) mass outside the kept atoms 3..7 of n = 10, q = 1/2, from scipy:
    # P(K <= 2) + P(K >= 8) = 112 / 1024; the bound may round it up, never down.
    from advsim.bounds._violation_curves import _DROPPED_PER_ATOM, _dropped_mass

    exact = 112 / 1024
    got = _dropped_mass(10, 0.5, np.arange(3, 8))
    assert exact <= got <= exact * (1 + 1e-6) + 11 * _DROPPED_PER_ATOM
    assert _dropped_mass(10, 0.5, np.arange(0, 11)) <= 11 * _DROPPED_PER_ATOM

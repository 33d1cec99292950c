"""Trade-off curves: composition (PLD), linear-loss last iterate, GDP.

Expected values: the Gaussian mechanism's curve G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)
(Definition 2.7 of arXiv:1905.02383), and T Gaussian steps of noise sigma compose to
sqrt(T)/sigma-GDP (Corollary 3.3 there), so at q = 1 the PLD curve must reproduce G_mu;
the envelope of lines is checked against a brute-force maximum over the same lines; the
linear-loss curve against scipy's normal cdf summed over scipy's binomial pmf.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, norm

from advsim.bounds import (
    TradeoffCurve,
    composition_epsilon_from_pld,
    composition_pld,
    composition_tradeoff,
    composition_tradeoff_curve,
    gdp_epsilon,
    gdp_tradeoff,
    linear_loss_tradeoff,
)

ALPHAS = np.concatenate([[0.0], np.geomspace(1e-7, 1e-2, 60), np.linspace(0.01, 1.0, 100)])


def test_envelope_equals_brute_force_maximum_of_lines():
    # Proposition 2.12 of arXiv:1905.02383 as a plain maximum over every line.
    eps = np.linspace(0.0, 8.0, 801)
    delta = np.asarray(composition_pld(10, 0.2, 1.0).get_delta_for_epsilon(eps))
    rest = 1.0 - delta
    a = np.concatenate([rest, np.exp(-eps) * rest, [0.0]])
    b = np.concatenate([-np.exp(eps), -np.exp(-eps), [0.0]])
    brute = np.max(a[None, :] + b[None, :] * ALPHAS[:, None], axis=1)
    curve = TradeoffCurve.from_profile(eps, delta)
    np.testing.assert_allclose(curve(ALPHAS), np.clip(brute, 0, 1), atol=1e-15)


def test_curve_of_a_pure_dp_profile():
    # (eps, 0)-DP: f(alpha) = max(0, 1 - e^eps alpha, e^-eps (1 - alpha)) (Dong et al. eq. 5).
    f = TradeoffCurve.from_profile([0.0, 1.0], [1.0, 0.0])
    x = np.linspace(0, 1, 11)
    expected = np.maximum.reduce([np.zeros_like(x), 1 - math.e * x, (1 - x) / math.e])
    np.testing.assert_allclose(f(x), expected, atol=1e-15)


@pytest.mark.parametrize("steps,sigma", [(1, 1.0), (100, 10.0), (50, 2.0)])
def test_composition_at_q1_is_the_gdp_curve(steps, sigma):
    mu = math.sqrt(steps) / sigma  # Corollary 3.3 of arXiv:1905.02383
    f = composition_tradeoff(ALPHAS, steps, 1.0, sigma)
    exact = gdp_tradeoff(ALPHAS, mu)
    np.testing.assert_allclose(f, exact, atol=5e-5)
    # Sound side: the pessimistic PLD and the finite eps grid only lower the curve.
    assert np.all(f <= exact + 1e-12)


@pytest.mark.parametrize("steps,sigma", [(100, 10.0), (50, 2.0)])
def test_epsilon_of_the_curves_pld_at_q1_is_the_gdp_epsilon(steps, sigma):
    # The PLD the curves are built from, read at delta: at q = 1 the closed form
    # sqrt(T)/sigma-GDP (Corollary 3.3 of arXiv:1905.02383), measured within 1e-5 relative
    # (pessimistic: never below it).
    eps = composition_epsilon_from_pld(1e-5, steps, 1.0, sigma)
    exact = gdp_epsilon(1e-5, math.sqrt(steps) / sigma)
    assert exact <= eps <= exact * (1 + 1e-4)


def test_discretization_accuracy_at_paper_scale():
    # T = 1024, q = 0.01, sigma = 1.43 (eps = 1 at delta = 1e-5): the default grid 1e-3
    # against 1e-4 (measured max difference 1.3e-4).
    coarse = composition_tradeoff_curve(1024, 0.01, 1.43)(ALPHAS)
    fine = composition_tradeoff_curve(1024, 0.01, 1.43, value_discretization_interval=1e-4)(ALPHAS)
    assert np.max(np.abs(coarse - fine)) < 2e-3
    assert np.all(coarse <= fine + 1e-9)  # coarser = more pessimistic = lower


def test_curves_are_nested_in_sigma():
    # More noise is a post-processing of less: the curve can only rise.
    lo = composition_tradeoff(ALPHAS, 100, 0.1, 1.0)
    hi = composition_tradeoff(ALPHAS, 100, 0.1, 1.2)
    assert np.all(hi >= lo - 1e-12)


def test_linear_loss_curve_against_scipy():
    steps, q, sigma = 20, 0.3, 1.5
    s = sigma * math.sqrt(steps)
    tau = np.linspace(-5, 15, 41)
    alpha = norm.sf(tau / s)
    k = np.arange(steps + 1)
    beta = np.sum(binom.pmf(k, steps, q)[None, :] * norm.cdf((tau[:, None] - k) / s), axis=1)
    np.testing.assert_allclose(linear_loss_tradeoff(alpha, steps, q, sigma), beta, rtol=1e-9)


def test_linear_loss_above_composition_and_gdp_at_q1():
    # The last iterate is a post-processing of all iterates; at q = 1 both are GDP(sqrt(T)/sigma).
    a = ALPHAS[1:-1]
    assert np.all(linear_loss_tradeoff(a, 100, 0.1, 1.0) >= composition_tradeoff(a, 100, 0.1, 1.0))
    np.testing.assert_allclose(
        linear_loss_tradeoff(a, 16, 1.0, 2.0), gdp_tradeoff(a, 2.0), atol=1e-12
    )


def test_bad_inputs():
    with pytest.raises(ValueError, match="alpha"):
        composition_tradeoff([1.5], 10, 0.1, 1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        composition_tradeoff_curve(10, 0.1, -1.0)
    with pytest.raises(ValueError, match="deltas"):
        TradeoffCurve.from_profile([0.0], [2.0])


@pytest.mark.parametrize("args", [(1024, 0.01, 1.43), (10, 1.0, 0.8), (100, 0.1, 0.84)])
def test_vectorised_profile_matches_dp_accounting(args):
    # Our suffix-sum delta(eps) against dp_accounting's own get_delta_for_epsilon.
    from advsim.bounds._tradeoff import PROFILE_EPSILONS, _pmf_deltas

    pld = composition_pld(*args)
    eps = PROFILE_EPSILONS[::10]
    ours = np.maximum(_pmf_deltas(pld._pmf_remove, eps), _pmf_deltas(pld._pmf_add, eps))
    np.testing.assert_allclose(ours, pld.get_delta_for_epsilon(eps), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 1.0])
def test_curve_at_a_scalar_alpha(alpha):
    # A scalar alpha gives a scalar beta, the same as in an array: at q = 1, T = 1, sigma = 1
    # the curve is G_1(alpha) = Phi(Phi^{-1}(1 - alpha) - 1) (Definition 2.7 of
    # arXiv:1905.02383), evaluated with scipy; within the PLD grid's 5e-5, and never above.
    f = composition_tradeoff_curve(1, 1.0, 1.0)
    beta = f(alpha)
    assert np.ndim(beta) == 0
    exact = norm.cdf(norm.ppf(1 - alpha) - 1.0)
    assert exact - 5e-5 <= float(beta) <= exact + 1e-12
    assert float(beta) == float(f(np.array([alpha]))[0])

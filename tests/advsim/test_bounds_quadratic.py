"""The quadratic regularizer's exact law and epsilon (`advsim.bounds._quadratic`).

Where the expected values come from:

- Section 4.2 of arXiv:2410.06186: for T = 3, q = 0.1, sigma = 1, delta = 1e-6 the
  quadratic regularizer is (2.222, 1e-6)-DP for alpha = 0, (2.182, 1e-6)-DP for alpha = 1,
  and not (eps, 1e-6)-DP for eps < 2.274 when alpha = 1/2. An mpmath evaluation (30
  digits, both hockey-stick directions over the 8 atoms) gives 2.27487488527591 for
  alpha = 1/2 and delta(2.274) = 1.00398e-6 > 1e-6.
- The law of the last model in units of eta C, N(sum_t beta^(T - t) b_t, sigma^2 sum_i
  beta^(2(i-1))) with beta = 1 - eta alpha (Section 4.2), against a brute-force
  enumeration of the 2^n canary patterns; the rounding of Section 4.2 (atoms raised to
  powers of 1.05 above 0.0005) against the exact law: an upper bound within 10%.
- Identities: alpha = 0 is the heuristic (Theorem 1), eta alpha = 1 is one step of it.

The simulations of the regularizer through the engine are in
`tests/mechanisms/test_regularizers.py`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from advsim.bounds import (
    heuristic_epsilon,
    mixture_delta,
    mixture_epsilon,
    quadratic_exact_epsilon,
    quadratic_law,
)
from advsim.bounds._quadratic import FLOOR, round_support

# --- the paper's three numbers --------------------------------------------------------------


def test_section_4_2_numbers():
    eps = {a: quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, a) for a in (0.0, 0.5, 1.0)}
    assert round(eps[0.0], 3) == 2.222
    assert round(eps[1.0], 3) == 2.182
    # The paper states the alpha = 1/2 value as a floor ("not DP for eps < 2.274").
    assert math.floor(eps[0.5] * 1000) / 1000 == 2.274
    assert eps[0.5] == pytest.approx(2.27487488527591, rel=1e-9)  # mpmath, 30 digits
    support, probs, scale, rounded = quadratic_law(3, 0.1, 1.0, 0.5)
    assert not rounded and support.size == 8
    assert mixture_delta(2.274, support, probs, scale) == pytest.approx(1.00398e-6, rel=1e-4)
    # alpha = 1/2 beats both extremes (and so the heuristic maximised over t <= 3).
    assert eps[0.5] > max(eps[0.0], eps[1.0])


@pytest.mark.parametrize(("steps", "q", "sigma"), [(1, 0.3, 1.0), (7, 0.05, 0.7), (40, 0.2, 2.0)])
def test_extremes_are_the_heuristic(steps, q, sigma):
    # alpha = 0: Binomial(T, q) + N(0, T sigma^2) (Theorem 1); alpha = 1: one step.
    assert quadratic_exact_epsilon(1e-5, steps, q, sigma, 0.0) == pytest.approx(
        heuristic_epsilon(1e-5, steps, q, sigma), rel=1e-9
    )
    assert quadratic_exact_epsilon(1e-5, steps, q, sigma, 1.0) == pytest.approx(
        heuristic_epsilon(1e-5, 1, q, sigma), rel=1e-9
    )


def test_learning_rate_enters_as_eta_alpha():
    a = quadratic_exact_epsilon(1e-5, 5, 0.2, 1.0, 0.25, learning_rate=2.0)
    b = quadratic_exact_epsilon(1e-5, 5, 0.2, 1.0, 0.5)
    assert a == pytest.approx(b, rel=1e-12)


# --- the law of X ---------------------------------------------------------------------------------


def _brute_force(steps, q, alpha, canary_steps):
    """All 2^n patterns of sum_t (1 - alpha)^(T - t) b_t over the canary steps, merged."""
    values: dict[float, float] = {}
    for bits in itertools.product((0, 1), repeat=len(canary_steps)):
        x = sum(b * (1 - alpha) ** (steps - t) for b, t in zip(bits, canary_steps, strict=True))
        p = math.prod(q if b else 1 - q for b in bits)
        values[round(x, 12)] = values.get(round(x, 12), 0.0) + p
    keys = sorted(values)
    return np.array(keys), np.array([values[k] for k in keys])


@pytest.mark.parametrize(
    ("alpha", "canary_steps"), [(0.5, (1, 2, 3, 4, 5)), (0.3, (2, 5)), (0.0, (1, 2, 3, 4, 5))]
)
def test_exact_law_matches_brute_force(alpha, canary_steps):
    support, probs, scale, rounded = quadratic_law(
        5, 0.3, 1.5, alpha, canary_steps=canary_steps, rounding="exact"
    )
    expected_support, expected_probs = _brute_force(5, 0.3, alpha, canary_steps)
    assert not rounded
    np.testing.assert_allclose(support, expected_support, atol=1e-12)
    np.testing.assert_allclose(probs, expected_probs, rtol=1e-12)
    # sigma_hat^2 = sigma^2 sum_i (1 - alpha)^(2(i - 1)), all T steps' noise.
    assert scale == pytest.approx(1.5 * math.sqrt(sum((1 - alpha) ** (2 * i) for i in range(5))))


def test_round_support_raises_to_powers_of_1_05():
    support, probs = round_support([0.0, 1e-4, 1.0, 1.5, 1.05**3], [0.2] * 5)
    k = np.log(support) / math.log(1.05)
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    # 0 and 1e-4 go to the floor's power (1.05^-155 = 0.000520), merged.
    assert support[0] == pytest.approx(1.05**-155) and support[0] >= FLOOR
    assert probs[0] == pytest.approx(0.4)
    assert 1.0 in support and 1.05**3 == pytest.approx(support[-2])  # grid points stay
    assert support[-1] == pytest.approx(1.05**9) and 1.05**9 >= 1.5 > 1.05**8


@pytest.mark.parametrize(
    ("steps", "q", "sigma", "alpha"),
    [(10, 0.1, 1.0, 0.5), (14, 0.3, 2.0, 0.1), (12, 0.01, 0.5, 0.5), (12, 0.05, 1.0, 0.9)],
)
def test_rounding_is_an_upper_bound_within_10_percent(steps, q, sigma, alpha):
    exact = quadratic_exact_epsilon(1e-6, steps, q, sigma, alpha, rounding="exact")
    paper = quadratic_exact_epsilon(1e-6, steps, q, sigma, alpha, rounding="paper")
    fine = quadratic_exact_epsilon(1e-6, steps, q, sigma, alpha, rounding="fine")
    assert exact <= paper <= 1.1 * exact  # the paper expects about 1.05
    assert fine == exact  # the support fits, so "fine" is exact
    # The fine grid alone (forced through the private helper): an upper bound within 1e-3.
    from advsim.bounds._quadratic import _grid_support, _weights

    beta = 1 - alpha
    support, probs = _grid_support(beta, np.full(steps, q))
    scale = sigma * math.sqrt(float(np.sum(_weights(steps, beta) ** 2)))
    grid = mixture_epsilon(1e-6, support, probs, scale)
    # (Atoms that are dyadic fractions sit on the grid: equal up to float summation.)
    assert exact * (1 - 1e-12) <= grid <= exact * (1 + 1e-3)


def test_large_steps_use_a_small_rounded_support():
    # 2^200 patterns; the rounded support has at most ~ log(2 / 0.0005) / log(1.05) = 170.
    support, probs, _, rounded = quadratic_law(200, 0.1, 1.0, 0.5)
    assert rounded and support.size <= 171
    assert math.fsum(probs.tolist()) == pytest.approx(1.0, abs=1e-12)
    # alpha = 1/2 forgets geometrically: T = 200 is within the rounding of T = 16.
    e200 = quadratic_exact_epsilon(1e-6, 200, 0.1, 1.0, 0.5)
    e16 = quadratic_exact_epsilon(1e-6, 16, 0.1, 1.0, 0.5, rounding="exact")
    assert e16 <= e200 <= 1.1 * e16


def test_rounding_argument_validated():
    with pytest.raises(ValueError, match="rounding must be"):
        quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, 0.5, rounding="nearest")
    with pytest.raises(ValueError, match="more than 65536 atoms"):
        quadratic_law(20, 0.1, 1.0, 0.5, rounding="exact")
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, 1.5)
    # The law depends on which steps carry the canary: their number alone is refused, by
    # name, and a repeated step is an error (it was merged silently).
    with pytest.raises(TypeError, match="canary_steps must be the steps .* not their number"):
        quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, 0.5, canary_steps=2)
    with pytest.raises(ValueError, match=r"canary_steps must be distinct steps in \[1, 3\]"):
        quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, 0.5, canary_steps=(1, 1, 3))

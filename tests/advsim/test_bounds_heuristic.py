"""Tests for the last-iterate heuristic, Theorem 1 of arXiv:2410.06186.

Expected values come from (i) an mpmath oracle (30+ digits) written here from Appendix A.1
of arXiv:2410.06186: the privacy loss f(y) as a direct sum over Binomial atoms (pmf from
mpmath.loggamma), f^{-1} by a bracketed mpmath root find, delta as direct sums of
mpmath.ncdf, and epsilon by Newton's method in mpmath on delta(eps) = delta (its exact
derivative is -e^eps Q(S)); (ii) dp_accounting's mixture-of-Gaussians PLD; (iii) the
Gaussian-mechanism closed form when q = 1; (iv) Section 4.2 of the paper.
"""

import math

import mpmath as mp
import numpy as np
import pytest
import scipy.stats
from dp_accounting.pld import privacy_loss_distribution as pld

from advsim.bounds import (
    binomial_mixture,
    heuristic_delta,
    heuristic_epsilon,
    heuristic_epsilon_curve,
    heuristic_epsilon_max_over_steps,
)

from ._mp import MixtureOracle

RTOL = 1e-9  # the requirement is 1e-6; observed errors are ~1e-14


class TheoremOneOracle(MixtureOracle):
    """P = Binomial(n, q) + N(0, T sigma^2) vs Q = N(0, T sigma^2), in mpmath.

    Only the Binomial atoms with log pmf >= max - log_tol are summed (and renormalised):
    dropping mass m moves delta(eps) by at most e^eps m <= (n + 1) e^(eps - log_tol), which
    `truncation_bound` reports so that each test can show it is negligible.
    """

    def __init__(self, T, q, sigma, *, n=None, log_tol=200.0):
        n = T if n is None else n
        self.n, self.log_tol = n, log_tol
        q = mp.mpf(q)

        def logpmf(k):
            if q == 1:
                return mp.mpf(0) if k == n else mp.ninf
            return (
                mp.loggamma(n + 1)
                - mp.loggamma(k + 1)
                - mp.loggamma(n - k + 1)
                + k * mp.log(q)
                + (n - k) * mp.log1p(-q)
            )

        mode = n if q == 1 else min(n, int(mp.floor((n + 1) * q)))
        top = logpmf(mode)
        ks = [mode]
        k = mode - 1
        while k >= 0 and logpmf(k) >= top - log_tol:
            ks.append(k)
            k -= 1
        k = mode + 1
        while k <= n and logpmf(k) >= top - log_tol:
            ks.append(k)
            k += 1
        ks.sort()
        weights = [mp.exp(logpmf(k)) for k in ks]
        total = mp.fsum(weights)
        s = mp.sqrt(T) * mp.mpf(sigma)
        super().__init__([mp.mpf(k) for k in ks], [w / total for w in weights], s, newton_tol=1e-22)

    def truncation_bound(self, eps):
        return (self.n + 1) * mp.exp(mp.mpf(eps) - self.log_tol)


@pytest.fixture(autouse=True)
def _mp_precision():
    with mp.workdps(32):
        yield


# (T, q, sigma) spanning T = 1..10^6, q in (0, 1], eps from ~0.3 to ~50 (and one ~148).
FAST_CASES = [
    (1, 0.5, 1.0),
    (3, 0.1, 1.0),
    (10, 0.1, 1.0),
    (10, 0.5, 0.51),  # eps ~ 30 at delta = 1e-5, ~ 50 at delta = 1e-12
    (10, 0.5, 0.25),  # beyond the advertised range: eps ~ 148 at delta = 1e-12
    (100, 0.01, 0.8),
    (1000, 0.01, 1.0),
    (1, 1.0, 0.5),
    (50, 1.0, 3.0),
    (10**5, 1e-3, 2.0),
    (10**6, 1e-4, 1.0),
]
SLOW_CASES = [
    (1000, 0.5, 30.0),
    (10**4, 0.02, 0.7),
    (10**6, 1e-4, 0.3),
    (10**5, 0.01, 1.0),
]


def _check_epsilon_against_oracle(T, q, sigma, delta):
    eps = heuristic_epsilon(delta, T, q, sigma)
    # Atoms whose dropped mass cannot move delta(eps) by more than 1e-12 delta.
    log_tol = eps + 5.0 - math.log(delta) + math.log(T + 1) + 30.0
    oracle = TheoremOneOracle(T, q, sigma, log_tol=log_tol)
    expected = oracle.epsilon(delta, eps)
    assert oracle.truncation_bound(expected) < mp.mpf(1e-12) * delta
    assert eps == pytest.approx(float(expected), rel=RTOL)


@pytest.mark.parametrize(("T", "q", "sigma"), FAST_CASES)
@pytest.mark.parametrize("delta", [1e-5, 1e-12])
def test_epsilon_matches_appendix_a_oracle(T, q, sigma, delta):
    _check_epsilon_against_oracle(T, q, sigma, delta)


@pytest.mark.slow
@pytest.mark.parametrize(("T", "q", "sigma"), SLOW_CASES)
@pytest.mark.parametrize("delta", [1e-5, 1e-12])
def test_epsilon_matches_appendix_a_oracle_slow(T, q, sigma, delta):
    _check_epsilon_against_oracle(T, q, sigma, delta)


def test_fast_cases_reach_eps_50():
    # The grid above covers the advertised range eps <= 50 (value checked against the oracle
    # in the test above).
    assert 45.0 < heuristic_epsilon(1e-12, 10, 0.5, 0.51) <= 50.0


@pytest.mark.parametrize(
    ("T", "q", "sigma", "eps_grid"),
    [
        (1, 0.5, 1.0, [0.0, 0.5, 5.0, 30.0]),
        (10, 0.1, 1.0, [0.0, 0.5, 5.0, 50.0]),
        (100, 0.01, 0.8, [0.0, 0.5, 5.0, 50.0]),
        (1000, 0.01, 1.0, [0.0, 0.5, 5.0, 20.0]),
        (10**6, 1e-4, 1.0, [0.0, 0.5, 2.0]),
    ],
)
def test_delta_matches_appendix_a_oracle(T, q, sigma, eps_grid):
    for eps in eps_grid:
        delta = heuristic_delta(eps, T, q, sigma)
        assert delta > 1e-290, "pick eps so that delta is a normal double"
        log_tol = eps - math.log(delta) + math.log(T + 1) + 30.0
        oracle = TheoremOneOracle(T, q, sigma, log_tol=log_tol)
        expected = oracle.delta(eps)
        assert oracle.truncation_bound(eps) < mp.mpf(1e-12) * expected
        assert delta == pytest.approx(float(expected), rel=RTOL)


def test_delta_below_the_smallest_double_is_zero():
    # The oracle's value (5e-720) is not representable; 0.0 is its correct rounding.
    expected = TheoremOneOracle(1000, 0.01, 1.0, log_tol=900.0).delta(50.0)
    assert expected < mp.mpf("1e-700")
    assert heuristic_delta(50.0, 1000, 0.01, 1.0) == 0.0


@pytest.mark.parametrize(("T", "sigma"), [(1, 1.0), (7, 2.0), (1000, 30.0), (10**6, 900.0)])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_q_one_is_the_gaussian_mechanism(T, sigma, delta):
    """q = 1: P = N(T, T sigma^2), i.e. mu = sqrt(T) / sigma (Appendix B of the paper);
    the mpmath oracle with its single atom at T is the Gaussian mechanism."""
    eps = heuristic_epsilon(delta, T, 1.0, sigma)
    expected = TheoremOneOracle(T, 1.0, sigma).epsilon(delta, eps)
    assert eps == pytest.approx(float(expected), rel=1e-11)


def test_canary_steps_with_q_one():
    # n of T steps carry the canary: P = N(n, T sigma^2), mu = n / (sqrt(T) sigma).
    eps = heuristic_epsilon(1e-6, 100, 1.0, 5.0, canary_steps=30)
    expected = TheoremOneOracle(100, 1.0, 5.0, n=30).epsilon(1e-6, eps)
    assert eps == pytest.approx(float(expected), rel=1e-11)


@pytest.mark.parametrize(("T", "n"), [(10, 1), (100, 37), (1000, 1000)])
def test_canary_steps_is_the_binomial_mixture_over_all_noise(T, n):
    """n canary steps of T: Binomial(n, q) atoms over the noise of all T steps, checked
    against the mpmath oracle built with that n (not against advsim's own mixture)."""
    q, sigma, delta = 0.1, 0.9, 1e-6
    eps = heuristic_epsilon(delta, T, q, sigma, canary_steps=n)
    log_tol = eps + 5.0 - math.log(delta) + math.log(n + 1) + 30.0
    oracle = TheoremOneOracle(T, q, sigma, n=n, log_tol=log_tol)
    assert oracle.truncation_bound(max(eps, 1.0)) < mp.mpf(1e-12) * delta
    assert eps == pytest.approx(float(oracle.epsilon(delta, eps)), rel=RTOL)
    assert heuristic_delta(1.0, T, q, sigma, canary_steps=n) == pytest.approx(
        float(oracle.delta(1.0)), rel=RTOL
    )
    if n < T:
        assert eps < heuristic_epsilon(delta, T, q, sigma)


@pytest.mark.parametrize("T", [1, 2, 5, 10])
def test_agrees_with_dp_accounting_mixture_of_gaussians(T):
    """dp_accounting's PLD of the same mixture (sensitivities k = 0..T with Binomial
    probabilities, noise sqrt(T) sigma): pessimistic, so never below the exact value, and
    above it by its discretization error (~7e-5 at interval 1e-2, quadratic in it)."""
    q, sigma, delta = 0.1, 1.0, 1e-5
    support = np.arange(T + 1)  # the atoms from scipy, not from advsim's binomial code
    probs = scipy.stats.binom.pmf(support, T, q)
    pmf = pld.from_mixture_gaussian_mechanism(
        standard_deviation=math.sqrt(T) * sigma,
        sensitivities=support.tolist(),
        sampling_probs=probs.tolist(),
        value_discretization_interval=1e-2,
    )
    eps = heuristic_epsilon(delta, T, q, sigma)
    assert 0.0 <= pmf.get_epsilon_for_delta(delta) - eps < 2e-4
    # eps = 1 is on the discretization grid, where the PLD's delta is exact to rounding.
    d = heuristic_delta(1.0, T, q, sigma)
    assert pmf.get_delta_for_epsilon(1.0) == pytest.approx(d, rel=1e-9)


def test_section_4_2_linear_case():
    # "for T=3, q=0.1, sigma=1, alpha=0, DP-SGD is (2.222, 1e-6)-DP" (arXiv:2410.06186).
    assert round(heuristic_epsilon(1e-6, 3, 0.1, 1.0), 3) == 2.222
    # alpha = 1 is "linear losses after T=1 iteration": (2.182, 1e-6).
    assert round(heuristic_epsilon(1e-6, 1, 0.1, 1.0), 3) == 2.182


def test_curve_equals_single_calls():
    steps = np.array([[1, 2, 3], [10, 57, 400]])
    curve = heuristic_epsilon_curve(1e-6, steps, 0.02, 0.8)
    assert curve.shape == steps.shape
    for t, e in zip(steps.ravel(), curve.ravel(), strict=True):
        assert e == pytest.approx(heuristic_epsilon(1e-6, int(t), 0.02, 0.8), rel=1e-12)


def test_max_over_steps():
    T, q, sigma, delta = 200, 0.01, 1.0, 1e-6
    curve = heuristic_epsilon_curve(delta, np.arange(1, T + 1), q, sigma)
    best = heuristic_epsilon_max_over_steps(delta, T, q, sigma)
    assert best == pytest.approx(np.max(curve), rel=1e-12)
    assert best >= heuristic_epsilon(delta, T, q, sigma)


def test_section_4_1_heuristic_is_not_monotone_in_steps():
    """Section 4.1: eps_{T,q,sigma} can decrease with T, so a model-zeroing regularizer
    (only the last step counts) beats the heuristic; the max over t <= T covers it."""
    q, sigma, delta = 0.01, 1.0, 1e-6
    assert heuristic_epsilon(delta, 5, q, sigma) < heuristic_epsilon(delta, 1, q, sigma)
    assert heuristic_epsilon_max_over_steps(delta, 5, q, sigma) == pytest.approx(
        heuristic_epsilon(delta, 1, q, sigma), rel=1e-12
    )


@pytest.mark.parametrize(("n", "q"), [(1, 0.3), (40, 0.5), (1000, 0.01), (10**6, 1e-4)])
def test_binomial_mixture_matches_mpmath_pmf(n, q):
    support, probs = binomial_mixture(n, q)
    assert math.fsum(probs) == pytest.approx(1.0, abs=1e-14)
    # Exact pmf from mpmath.loggamma at 32 digits.
    for k, p in zip(support[::7], probs[::7], strict=True):
        k = int(k)
        log_pmf = (
            mp.loggamma(n + 1)
            - mp.loggamma(k + 1)
            - mp.loggamma(n - k + 1)
            + k * mp.log(q)
            + (n - k) * mp.log1p(-mp.mpf(q))
        )
        if log_pmf > -700:
            assert p == pytest.approx(float(mp.exp(log_pmf)), rel=1e-11)


def test_binomial_mixture_truncation():
    n, q, log_tol = 2000, 0.5, 50.0
    support, probs = binomial_mixture(n, q, log_tol=log_tol)
    assert support[np.argmax(probs)] == 1000
    kept = set(support.astype(int).tolist())
    dropped = [k for k in range(n + 1) if k not in kept]
    # Kept atoms form one interval around the mode ...
    assert support[-1] - support[0] + 1 == len(support)
    # ... and the dropped mass is below n e^{-log_tol} (mpmath, relative to the max pmf).
    log_max = mp.loggamma(n + 1) - 2 * mp.loggamma(n / 2 + 1) + n * mp.log(0.5)
    dropped_mass = mp.fsum(
        mp.exp(mp.loggamma(n + 1) - mp.loggamma(k + 1) - mp.loggamma(n - k + 1) + n * mp.log(0.5))
        for k in dropped
    )
    assert 0 < dropped_mass < n * mp.exp(-log_tol) * mp.exp(log_max)


def test_binomial_mixture_edge_cases():
    support, probs = binomial_mixture(5, 1.0)
    np.testing.assert_array_equal(support, [5.0])
    np.testing.assert_array_equal(probs, [1.0])
    support, probs = binomial_mixture(0, 0.3)
    np.testing.assert_array_equal(support, [0.0])
    support, probs = binomial_mixture(2, 0.5)
    np.testing.assert_allclose(probs, [0.25, 0.5, 0.25], rtol=1e-15)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: heuristic_epsilon(0.0, 10, 0.1, 1.0), r"delta must be in \(0, 1\), got 0.0"),
        (lambda: heuristic_epsilon(1.5, 10, 0.1, 1.0), r"delta must be in \(0, 1\), got 1.5"),
        (lambda: heuristic_delta(-1.0, 10, 0.1, 1.0), r"eps must be in \[0, inf\), got -1.0"),
        (lambda: heuristic_delta(math.inf, 10, 0.1, 1.0), r"eps must be in \[0, inf\), got inf"),
        (lambda: heuristic_epsilon(1e-5, 0, 0.1, 1.0), r"steps must be an integer in \[1, inf\)"),
        (lambda: heuristic_epsilon(1e-5, 10, 0.0, 1.0), r"sampling_prob must be in \(0, 1\]"),
        (lambda: heuristic_epsilon(1e-5, 10, 1.5, 1.0), r"sampling_prob must be in \(0, 1\], got"),
        (lambda: heuristic_epsilon(1e-5, 10, 0.1, 0.0), r"noise_multiplier must be in \(0, inf\)"),
        (
            lambda: heuristic_epsilon(1e-5, 10, 0.1, 1.0, canary_steps=11),
            r"canary_steps must be an integer in \[1, 10\], got 11",
        ),
        (
            lambda: heuristic_delta(1.0, 10, 0.1, 1.0, canary_steps=0),
            r"canary_steps must be an integer in \[1, 10\], got 0",
        ),
        (
            lambda: heuristic_epsilon_curve(1e-5, [3, 0], 0.1, 1.0),
            r"steps must be an integer in \[1, inf\), got 0",
        ),
        (
            lambda: heuristic_epsilon_max_over_steps(1e-5, 0, 0.1, 1.0),
            r"steps must be an integer in \[1, inf\)",
        ),
        (lambda: binomial_mixture(-1, 0.5), r"n must be an integer in \[0, inf\)"),
        (lambda: binomial_mixture(5, 0.5, log_tol=0.0), r"log_tol must be in \(0, inf\)"),
    ],
)
def test_invalid_inputs_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_integer_steps_is_a_type_error():
    with pytest.raises(TypeError, match="steps must be an integer, got 2.5"):
        heuristic_epsilon(1e-5, 2.5, 0.1, 1.0)


# ----------------------------------------------------------------------------------------
# The max over steps (branch and bound over t, atom cut tied to delta) against the
# reference: heuristic_epsilon_curve over every t (fixed cut 800, no bound, no skip).


@pytest.mark.parametrize(
    ("T", "q", "sigma", "delta"),
    [
        (1, 0.3, 1.0, 1e-5),
        (64, 0.01, 1.0, 1e-6),
        (300, 0.2, 0.6, 1e-10),  # eps ~ 10: the cut's raise applies
        (500, 0.01, 1.0, 1e-5),  # eps increasing in t: the max is at T
        (400, 0.05, 3.0, 1e-3),
        (257, 1.0, 4.0, 1e-5),  # q = 1: one atom
        (300, 1e-6, 100.0, 1e-300),  # eps ~ 1e-5 at the smallest delta
        (300, 0.5, 0.3, 1e-12),
    ],
)
def test_max_over_steps_equals_every_t(T, q, sigma, delta):
    curve = heuristic_epsilon_curve(delta, np.arange(1, T + 1), q, sigma)
    best = heuristic_epsilon_max_over_steps(delta, T, q, sigma)
    assert best == pytest.approx(float(np.max(curve)), rel=1e-12, abs=1e-300)
    assert best >= heuristic_epsilon(delta, T, q, sigma)


def test_max_over_steps_finds_a_maximum_away_from_T():
    # Section 4.1: eps_t is largest at t = 1 and dips (q = 0.01, sigma = 0.5, delta =
    # 1e-6: 4.29 at t = 1, 1.01 at t = 21) before growing again, still below eps_1 at
    # T = 1000 (3.40): the search must not stop at T.
    T, q, sigma, delta = 1000, 0.01, 0.5, 1e-6
    curve = heuristic_epsilon_curve(delta, np.arange(1, T + 1), q, sigma)
    assert int(np.argmax(curve)) == 0 and np.min(curve) < curve[-1] < curve[0]
    assert heuristic_epsilon_max_over_steps(delta, T, q, sigma) == pytest.approx(
        float(np.max(curve)), rel=1e-12
    )


def test_max_over_steps_atom_cut_errs_upwards():
    # The cut drops <= 2^-52 delta of Binomial mass and is corrected upwards
    # (_upper_epsilons): never below the uncut value at t = T, where both are computed, up to
    # the float rounding of two different summation orders (1 ulp seen with scipy 1.17).
    from advsim.bounds._heuristic import _upper_epsilons

    for T, q, sigma, delta in [(1000, 0.01, 1.0, 1e-5), (50, 0.3, 0.5, 1e-9)]:
        cut = _upper_epsilons(delta, [T], [T], q, sigma)[0]
        full = heuristic_epsilon(delta, T, q, sigma)
        assert full * (1 - 1e-14) <= cut <= full * (1 + 1e-13)


@pytest.mark.slow
def test_max_over_steps_equals_every_t_at_ten_thousand():
    T, q, sigma, delta = 10_000, 0.01, 1.0, 1e-5  # the reference takes ~10 s
    curve = heuristic_epsilon_curve(delta, np.arange(1, T + 1), q, sigma)
    assert heuristic_epsilon_max_over_steps(delta, T, q, sigma) == pytest.approx(
        float(np.max(curve)), rel=1e-12
    )


@pytest.mark.parametrize(("q", "sigma"), [(0.1, 1.0), (1.0, 1.0), (0.1, 1e-9), (0.5, 1e-3)])
def test_delta_at_eps_1e308_is_zero_without_warnings(q, sigma):
    # Far beyond z (z + 40), z = n / (sqrt(T) sigma), delta is below Phi(-40) < 1e-349;
    # the conftest turns any numpy overflow warning into an error.
    assert heuristic_delta(1e308, 10, q, sigma) == 0.0

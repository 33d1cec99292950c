"""Tests for the composition, full-batch and GDP bounds (_composition.py, _gdp.py).

Expected values come from (i) Corollary 2.13 of Dong, Roth, Su (arXiv:1905.02383)
evaluated in mpmath at 40 digits; (ii) Appendix B of arXiv:2410.06186 (q = 1: composition,
last iterate and full batch all equal sqrt(T)/sigma-GDP); (iii) post-processing (the last
iterate is a function of all iterates, so heuristic <= composition); (iv) T = 1, where the
composition of one Poisson-subsampled Gaussian is exactly the pair of Theorem 1.
"""

import math

import mpmath as mp
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from advsim import Accounting
from advsim.bounds import (
    bounds_for,
    calibrate_noise_multiplier,
    composition_delta,
    composition_epsilon,
    composition_epsilon_from_pld,
    composition_pld,
    composition_tradeoff,
    full_batch_epsilon,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    heuristic_delta,
    heuristic_epsilon,
    linear_loss_tradeoff,
)

# Measured discretization error of composition_epsilon at the default interval 1e-4:
# ~1e-5 at T = 1e3 (q = 0.01), ~3e-9 when q = 1; pessimistic (never below the exact value).
COMPOSITION_ATOL = 1e-4


def gdp_delta_mpmath(eps, mu):
    """Corollary 2.13 of arXiv:1905.02383 at 40 digits."""
    with mp.workdps(40):
        eps, mu = mp.mpf(eps), mp.mpf(mu)
        return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def gdp_epsilon_mpmath(delta, mu):
    """The root in eps of Corollary 2.13 of arXiv:1905.02383 = delta, at 40 digits
    (delta(eps) decreases in eps; bisection on [0, mu^2 / 2 + mu * Phi^{-1}(1 - delta) + 1],
    where Phi(-eps/mu + mu/2) alone is already below delta)."""
    with mp.workdps(40):
        target = mp.mpf(delta)
        lo, hi = mp.mpf(0), mp.mpf(mu) ** 2 / 2 + mu * (-mp.sqrt(2) * mp.erfinv(2 * target - 1))
        hi = max(hi, mp.mpf(0)) + 1
        if gdp_delta_mpmath(0, mu) <= target:
            return 0.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if gdp_delta_mpmath(mid, mu) > target else (lo, mid)
        return float((lo + hi) / 2)


def gaussian_composition_dp_accounting(delta, sigma, n, vdi=1e-4):
    """dp_accounting's PLD accountant on n Gaussian mechanisms of noise sigma, called
    directly (no code of advsim.bounds in the way)."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(sigma), n))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("mu", [1e-3, 0.1, 1.0, 4.0, 30.0])
@pytest.mark.parametrize("eps", [0.0, 0.01, 1.0, 10.0, 100.0])
def test_gdp_delta_matches_mpmath(mu, eps):
    expected = gdp_delta_mpmath(eps, mu)
    got = gdp_delta(eps, mu)
    if expected < mp.mpf("1e-300"):
        assert 0.0 <= got < 1e-300
    else:
        assert got == pytest.approx(float(expected), rel=1e-12)


@pytest.mark.parametrize("mu", [1e-3, 0.1, 1.0, 4.0, 30.0])
@pytest.mark.parametrize("delta", [0.5, 1e-5, 1e-12])
def test_gdp_epsilon_and_mu_invert_gdp_delta(mu, delta):
    eps = gdp_epsilon(delta, mu)
    if eps == 0.0:
        assert gdp_delta(0.0, mu) <= delta
        return
    # delta(eps) = delta, checked with the 40-digit closed form.
    assert float(gdp_delta_mpmath(eps, mu)) == pytest.approx(delta, rel=1e-10)
    assert gdp_mu(eps, delta) == pytest.approx(mu, rel=1e-10)


def test_gdp_special_values():
    # mu = 0 is perfect privacy; at eps = 0, delta = TV = erf(mu / (2 sqrt 2)).
    assert gdp_delta(1.0, 0.0) == 0.0
    assert gdp_epsilon(1e-5, 0.0) == 0.0
    assert gdp_delta(0.0, 1.0) == pytest.approx(math.erf(1 / (2 * math.sqrt(2))), rel=1e-15)
    assert gdp_mu(0.0, gdp_delta(0.0, 0.3)) == pytest.approx(0.3, rel=1e-14)
    # mu = 1 at delta = 1e-5: eps = 4.37717809568122462765..., the root of Corollary 2.13
    # found with mpmath.findroot at 40 digits (computed once, pasted here).
    assert gdp_epsilon(1e-5, 1.0) == pytest.approx(4.377178095681225, rel=1e-13)
    # The documented range of mu is the closed interval [0, 1e100]: its end is accepted,
    # and there the two Gaussians are disjoint (delta(1) = Phi(5e99) = 1).
    assert gdp_delta(1.0, 1e100) == 1.0
    with pytest.raises(ValueError, match="mu must be in"):
        gdp_delta(1.0, 1.0000001e100)
    # delta far below the smallest double (mpmath at 50 digits: 9.2e-35003571) is 0, also
    # where log A and eps + log B round to the same double.
    for eps in (1.0553861, 1.269635127659974):
        assert float(gdp_delta_mpmath(eps, 1e-4)) == 0.0
        assert gdp_delta(eps, 1e-4) == 0.0


@pytest.mark.parametrize(("T", "n", "sigma"), [(1, 1, 1.0), (10, 10, 3.0), (100, 100, 10.0)])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_q_one_all_three_bounds_coincide(T, n, sigma, delta):
    """Appendix B of arXiv:2410.06186: full-batch DP-GD, all iterates or last only, is
    sqrt(T)/sigma-GDP. The reference is the 40-digit root of Corollary 2.13 of
    arXiv:1905.02383, and dp_accounting's accountant on T Gaussian mechanisms."""
    exact = gdp_epsilon_mpmath(delta, math.sqrt(n) / sigma)
    assert heuristic_epsilon(delta, T, 1.0, sigma) == pytest.approx(exact, rel=1e-11)
    assert full_batch_epsilon(delta, T, 1.0, sigma) == pytest.approx(exact, rel=1e-12)
    comp = composition_epsilon(delta, T, 1.0, sigma)
    assert comp == pytest.approx(exact, rel=1e-12)
    # The accountant is pessimistic, within its grid (measured 3e-9 here).
    pld = gaussian_composition_dp_accounting(delta, sigma, n)
    assert exact - 1e-9 <= pld <= exact + COMPOSITION_ATOL
    assert composition_delta(exact, T, 1.0, sigma) == pytest.approx(delta, rel=1e-9)


def test_composition_over_canary_steps_only():
    # With q = 1, n canary steps of T compose to sqrt(n)/sigma-GDP (the 40-digit root),
    # and only the canary steps count (dp_accounting on 9 Gaussian mechanisms).
    comp = composition_epsilon(1e-6, 50, 1.0, 4.0, canary_steps=9)
    exact = gdp_epsilon_mpmath(1e-6, 3 / 4.0)
    assert comp == pytest.approx(exact, rel=1e-12)
    pld = gaussian_composition_dp_accounting(1e-6, 4.0, 9)
    assert exact - 1e-9 <= pld <= exact + COMPOSITION_ATOL
    # Subsampled: the canary steps are what the accountant composes, not the steps.
    sub = composition_epsilon(
        1e-6, 50, 0.1, 1.0, canary_steps=9, value_discretization_interval=1e-3
    )
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    event = dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0))
    acc.compose(dp_event.SelfComposedDpEvent(event, 9))
    assert sub == pytest.approx(acc.get_epsilon(1e-6), rel=1e-12)


@pytest.mark.parametrize("q", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_single_step_composition_is_the_heuristic(q, sigma):
    """T = 1: one Poisson-subsampled Gaussian is exactly P = Bernoulli(q) + N(0, sigma^2)
    vs Q = N(0, sigma^2) (add/remove), so the PLD value is the exact one plus its
    (pessimistic) discretization error (<= 2e-5 at the interval 1e-3 used for speed)."""
    vdi = 1e-3
    exact = heuristic_epsilon(1e-6, 1, q, sigma)
    comp = composition_epsilon(1e-6, 1, q, sigma, value_discretization_interval=vdi)
    assert exact - 1e-9 <= comp <= exact + COMPOSITION_ATOL
    exact_delta = heuristic_delta(1.0, 1, q, sigma)
    comp_delta = composition_delta(1.0, 1, q, sigma, value_discretization_interval=vdi)
    assert comp_delta == pytest.approx(exact_delta, rel=1e-4)


@pytest.mark.parametrize("T", [2, 10, 100])
@pytest.mark.parametrize("q", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_heuristic_never_exceeds_composition(T, q, sigma):
    """The last iterate is a post-processing of all iterates (Section 2.1 of the paper);
    the coarse interval 1e-3 keeps this fast and is still pessimistic."""
    heur = heuristic_epsilon(1e-6, T, q, sigma)
    comp = composition_epsilon(1e-6, T, q, sigma, value_discretization_interval=1e-3)
    assert heur <= comp


def test_composition_delta_near_one_is_at_most_one():
    # eps = 0: delta is the total variation, 1 - (1 - q)^n (...) ~ 1 - 1e-100 here; the
    # accountant's pessimistic rounding returns 1 + 1.9e-10, which must come back as 1
    # (a delta in [0, 1], as documented), not as an error.
    d = composition_delta(0.0, 50, 0.99, 0.2, value_discretization_interval=1e-2)
    assert d == 1.0


def test_composition_delta_and_epsilon_are_consistent():
    eps = composition_epsilon(1e-6, 20, 0.1, 1.0, value_discretization_interval=1e-3)
    delta = composition_delta(eps, 20, 0.1, 1.0, value_discretization_interval=1e-3)
    assert delta == pytest.approx(1e-6, rel=1e-3)


@pytest.mark.parametrize(
    ("T", "n", "q", "sigma"), [(100, 100, 0.1, 1.0), (100, 25, 0.1, 1.0), (7, 3, 0.3, 0.7)]
)
def test_full_batch_is_gdp_with_mu_q_sqrt_n_over_sigma(T, n, q, sigma):
    """DP-GD with q = 1 and noise sigma / q over the n canary steps (Equation 4 of
    arXiv:2410.06186): the 40-digit GDP root with mu = q sqrt(n) / sigma, and
    dp_accounting's accountant on n Gaussian mechanisms of noise sigma / q."""
    got = full_batch_epsilon(1e-5, T, q, sigma, canary_steps=n)
    exact = gdp_epsilon_mpmath(1e-5, q * math.sqrt(n) / sigma)
    assert got == pytest.approx(exact, rel=1e-12)
    pld = gaussian_composition_dp_accounting(1e-5, sigma / q, n)
    assert exact - 1e-9 <= pld <= exact + COMPOSITION_ATOL


def test_calibrate_noise_multiplier_gaussian():
    # q = 1, T = 100: composition is sqrt(100)/sigma-GDP, so eps(mu = 1) needs sigma = 10;
    # eps(mu = 1, delta = 1e-5) = 4.377178095681225 (the mpmath root, see above).
    sigma = calibrate_noise_multiplier(4.377178095681225, 1e-5, 100, 1.0)
    assert sigma == pytest.approx(10.0, rel=1e-5)


def test_calibrate_noise_multiplier_subsampled():
    target, delta, T, q, vdi = 2.0, 1e-5, 10, 0.1, 1e-3
    sigma = calibrate_noise_multiplier(
        target, delta, T, q, value_discretization_interval=vdi, tol=1e-7
    )
    # The returned sigma meets the target; a slightly smaller one (beyond tol) does not.
    assert composition_epsilon(delta, T, q, sigma, value_discretization_interval=vdi) <= target
    assert (
        composition_epsilon(delta, T, q, sigma - 1e-5, value_discretization_interval=vdi) > target
    )


def test_bounds_for_accounting():
    acc = Accounting(steps=100, sampling_prob=0.1, noise_multiplier=1.5, canary_steps=(1, 50))
    b = bounds_for(acc, 1e-6)
    assert set(b) == {"heuristic", "composition", "full_batch"}
    assert b["heuristic"] == heuristic_epsilon(1e-6, 100, 0.1, 1.5, canary_steps=2)
    assert b["composition"] == composition_epsilon(1e-6, 100, 0.1, 1.5, canary_steps=2)
    assert b["full_batch"] == full_batch_epsilon(1e-6, 100, 0.1, 1.5, canary_steps=2)
    assert b["heuristic"] <= b["composition"]


@pytest.mark.parametrize(
    "bound",
    [
        heuristic_delta,
        heuristic_epsilon,
        composition_delta,
        composition_epsilon,
        full_batch_epsilon,
        composition_epsilon_from_pld,
    ],
)
def test_every_bound_accepts_an_accounting(bound):
    # The record of a run in place of (steps, sampling_prob, noise_multiplier,
    # canary_steps): the same number, bit for bit (only the count of canary steps counts,
    # so the steps themselves or their number give it too).
    acc = Accounting(steps=20, sampling_prob=0.1, noise_multiplier=1.5, canary_steps=(1, 5, 9))
    x = 1.0 if "delta" in bound.__name__ else 1e-6
    assert bound(x, acc) == bound(x, 20, 0.1, 1.5, canary_steps=3)
    assert bound(x, acc) == bound(x, 20, 0.1, 1.5, canary_steps=(1, 5, 9))
    with pytest.raises(ValueError, match=r"canary_steps must be distinct steps in \[1, 20\]"):
        bound(x, 20, 0.1, 1.5, canary_steps=(1, 5, 5))


def test_tradeoff_bounds_accept_an_accounting():
    acc = Accounting(steps=20, sampling_prob=0.1, noise_multiplier=1.5, canary_steps=(1, 5, 9))
    alpha = np.array([0.01, 0.1, 0.5])
    for bound in (linear_loss_tradeoff, composition_tradeoff):
        np.testing.assert_array_equal(bound(alpha, acc), bound(alpha, 20, 0.1, 1.5, canary_steps=3))
        steps = bound(alpha, 20, 0.1, 1.5, canary_steps=[9, 5, 1])
        np.testing.assert_array_equal(bound(alpha, acc), steps)
    assert composition_pld(acc) is composition_pld(20, 0.1, 1.5, canary_steps=3)  # cached


def test_an_accounting_and_numbers_together_are_refused():
    acc = Accounting(steps=20, sampling_prob=0.1, noise_multiplier=1.5, canary_steps=(1,))
    with pytest.raises(TypeError, match="either an Accounting or steps.*canary_steps"):
        heuristic_epsilon(1e-6, acc, canary_steps=1)
    with pytest.raises(TypeError, match="missing noise_multiplier"):
        composition_epsilon(1e-6, 20, 0.1)


def test_bounds_for_rejects_other_records():
    with pytest.raises(TypeError, match="accounting must be an advsim.Accounting"):
        bounds_for({"steps": 3}, 1e-6)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gdp_delta(-1.0, 1.0), r"eps must be in \[0, inf\), got -1.0"),
        (lambda: gdp_delta(1.0, -0.5), r"mu must be in \[0, inf\), got -0.5"),
        (lambda: gdp_delta(1.0, math.inf), r"mu must be in \[0, inf\), got inf"),
        (lambda: gdp_epsilon(0.0, 1.0), r"delta must be in \(0, 1\), got 0.0"),
        (lambda: gdp_mu(1.0, 1.0), r"delta must be in \(0, 1\), got 1.0"),
        (lambda: gdp_mu(math.nan, 1e-5), "eps must be a number, got nan"),
        (
            lambda: composition_epsilon(1e-5, 10, 1.5, 1.0),
            r"sampling_prob must be in \(0, 1\], got 1.5",
        ),
        (lambda: composition_epsilon(1e-5, 10, 0.1, -1.0), r"noise_multiplier must be in \(0"),
        (lambda: composition_epsilon(1e-5, 0, 0.1, 1.0), r"steps must be an integer in \[1"),
        (lambda: composition_epsilon(2.0, 10, 0.1, 1.0), r"delta must be in \(0, 1\), got 2.0"),
        (
            lambda: composition_epsilon(1e-5, 10, 0.1, 1.0, canary_steps=11),
            r"canary_steps must be an integer in \[1, 10\], got 11",
        ),
        (
            lambda: composition_epsilon(1e-5, 10, 0.1, 1.0, value_discretization_interval=0),
            r"value_discretization_interval must be in \(0, inf\)",
        ),
        (lambda: composition_delta(-0.5, 10, 0.1, 1.0), r"eps must be in \[0, inf\)"),
        (lambda: full_batch_epsilon(1e-5, 10, 0.0, 1.0), r"sampling_prob must be in \(0, 1\]"),
        (
            lambda: full_batch_epsilon(1e-5, 10, 0.1, 1.0, canary_steps=0),
            r"canary_steps must be an integer in \[1, 10\], got 0",
        ),
        (
            lambda: calibrate_noise_multiplier(0.0, 1e-5, 10, 0.1),
            r"target_epsilon must be in \(0, inf\), got 0.0",
        ),
        (
            lambda: calibrate_noise_multiplier(1.0, 1e-5, 10, 0.1, canary_steps=20),
            r"canary_steps must be an integer in \[1, 10\], got 20",
        ),
    ],
)
def test_invalid_inputs_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------
# The fast calibration path against the reference (dp_accounting called directly)


def accountant_epsilon(delta, q, sigma, n, vdi):
    """dp_accounting's PLDAccountant on n Poisson-subsampled Gaussian steps, called
    directly (no code of advsim.bounds in the way)."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    acc.compose(dp_event.SelfComposedDpEvent(event, n))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize(
    ("target", "T", "q", "vdi"),
    [
        (2.0, 10, 0.1, 1e-3),
        (1.0, 3, 0.5, 1e-2),
        pytest.param(8.0, 5, 0.01, 1e-3, marks=pytest.mark.slow),  # the audit's q and eps
    ],
)
def test_calibration_contract_and_dp_accounting(target, T, q, vdi):
    # The contract, literally: eps(sigma) <= target < eps(sigma - tol), both epsilons
    # dp_accounting's own (equal to composition_epsilon, whose numbers the search used).
    delta, tol = 1e-5, 1e-6
    sigma = calibrate_noise_multiplier(target, delta, T, q, value_discretization_interval=vdi)
    at, below = (accountant_epsilon(delta, q, s, T, vdi) for s in (sigma, sigma - tol))
    assert at <= target < below
    comp = composition_epsilon(delta, T, q, sigma, value_discretization_interval=vdi)
    assert comp == pytest.approx(at, rel=1e-9)


def test_bounds_for_reuses_the_calibration(monkeypatch):
    # After calibration, bounds_for's composition epsilon and a second calibration with
    # the same arguments (another cell of a sweep) run no PLD at all.
    import advsim.bounds._composition as comp_mod

    sigma = calibrate_noise_multiplier(2.0, 1e-5, 3, 0.1)
    expected = accountant_epsilon(1e-5, 0.1, sigma, 3, 1e-4)

    def no_pld(*args, **kwargs):
        raise AssertionError("a PLD was built again")

    monkeypatch.setattr(comp_mod, "_composed_pld", no_pld)
    monkeypatch.setattr(comp_mod, "gaussian_pld", no_pld)
    assert calibrate_noise_multiplier(2.0, 1e-5, 3, 0.1) == sigma
    acc = Accounting(steps=3, sampling_prob=0.1, noise_multiplier=sigma, canary_steps=(1, 2, 3))
    b = bounds_for(acc, 1e-5)
    assert b["composition"] == expected <= 2.0


def test_calibration_q_one_is_the_closed_form_contract():
    # q = 1: composition_epsilon is sqrt(n)/sigma-GDP exactly; the contract holds for it.
    sigma = calibrate_noise_multiplier(1.5, 1e-6, 40, 1.0, tol=1e-9)
    assert composition_epsilon(1e-6, 40, 1.0, sigma) <= 1.5
    assert composition_epsilon(1e-6, 40, 1.0, sigma - 1e-9) > 1.5


def test_extreme_delta_and_sigma_give_clear_errors():
    # dp_accounting's PLD keeps >= 1e-15 at infinite loss (tail truncation): delta = 1e-300
    # is a ValueError giving the range (also a RuntimeError), not a brentq error.
    with pytest.raises(ValueError, match=r"delta=1e-300 is out of.*delta must be in \("):
        calibrate_noise_multiplier(1.0, 1e-300, 10, 0.1)
    with pytest.raises(RuntimeError, match="epsilon inf"):
        composition_epsilon(1e-300, 10, 0.1, 1.0, value_discretization_interval=1e-2)
    # sigma = 1e-9: a grid of 1e22 points; dp_accounting fails with numpy's "Maximum allowed
    # size exceeded", here a ValueError naming noise_multiplier and its range.
    with pytest.raises(ValueError, match=r"noise_multiplier=1e-09 .*must be >= 0\.01"):
        composition_epsilon(1e-5, 10, 0.1, 1e-9)

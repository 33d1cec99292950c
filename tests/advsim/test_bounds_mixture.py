"""Tests for the Gaussian location-mixture bounds (advsim/bounds/_mixture.py).

Expected values come from (i) a 40-digit mpmath oracle written here from the formulas of
Appendix A.1 of arXiv:2410.06186 for a general non-negative X (direct sums with
mpmath.ncdf, the inverse privacy loss by a bracketed mpmath root find, epsilon by Newton
iteration in mpmath on delta(eps) = delta), (ii) the Gaussian-mechanism closed form of
Corollary 2.13 of arXiv:1905.02383, and (iii) the numbers printed in Section 4.2 of
arXiv:2410.06186.
"""

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from advsim.bounds import (
    gdp_delta,
    gdp_epsilon,
    merge_atoms,
    mixture_delta,
    mixture_epsilon,
    mixture_log_likelihood_ratio,
    mixture_tradeoff,
)

from ._mp import MixtureOracle

RTOL = 1e-9  # the requirement is 1e-6; observed errors are ~1e-14


@pytest.fixture(autouse=True)
def _mp_precision():
    with mp.workdps(40):
        yield


def quadratic_example(alpha, T=3, q=0.1, sigma=1.0):
    """Section 4.2 of arXiv:2410.06186: X = sum_i (1 - alpha)^(i-1) Bernoulli(q),
    s^2 = sigma^2 sum_i (1 - alpha)^(2(i-1)); all 2^T atoms enumerated."""
    support, probs = [], []
    for bits in itertools.product([0, 1], repeat=T):
        support.append(sum(b * (1 - alpha) ** i for i, b in enumerate(bits)))
        probs.append(math.prod(q if b else 1 - q for b in bits))
    scale = sigma * math.sqrt(sum((1 - alpha) ** (2 * i) for i in range(T)))
    return np.array(support), np.array(probs), scale


MIXTURES = {
    # A point mass away from 0: the Gaussian mechanism (eps_- unbounded).
    "gaussian": ([1.3], [1.0], 1.0),
    # Bernoulli(0.1) in noise 1: T = 1 of Theorem 1 (closed-form inverse loss).
    "bernoulli": ([0.0, 1.0], [0.9, 0.1], 1.0),
    # No atom at 0, several atoms: eps_- has no finite supremum.
    "no_zero_atom": ([0.2, 1.0, 2.5], [0.5, 0.3, 0.2], 0.8),
    # A heavy atom at 0 and a far atom: eps_- <= -log(0.99).
    "heavy_zero": ([0.0, 3.0, 7.0], [0.99, 0.009, 0.001], 2.0),
    # Section 4.2, alpha = 1/2 (8 distinct atoms).
    "quadratic_half": quadratic_example(0.5),
}


@pytest.mark.parametrize("name", sorted(MIXTURES))
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_epsilon_matches_mpmath_oracle(name, delta):
    support, probs, scale = MIXTURES[name]
    eps = mixture_epsilon(delta, support, probs, scale)
    oracle = MixtureOracle(support, probs, scale)
    if oracle.delta(0) <= delta:
        assert eps == 0.0
        return
    expected = float(oracle.epsilon(delta, eps))
    assert eps == pytest.approx(expected, rel=RTOL)


@pytest.mark.parametrize("name", sorted(MIXTURES))
@pytest.mark.parametrize("eps", [0.0, 0.3, 2.0, 8.0, 50.0])
def test_delta_matches_mpmath_oracle(name, eps):
    support, probs, scale = MIXTURES[name]
    delta = mixture_delta(eps, support, probs, scale)
    expected = MixtureOracle(support, probs, scale).delta(eps)
    if expected < mp.mpf("1e-300"):  # not a (normal) double: the answer rounds to ~0
        assert 0.0 <= delta < 1e-300
    else:
        assert delta == pytest.approx(float(expected), rel=RTOL)


@pytest.mark.parametrize(
    ("alpha", "expected", "rounding"),
    [
        # "for T=3, q=0.1, sigma=1, alpha=0, DP-SGD is (2.222, 1e-6)-DP" (Section 4.2).
        (0.0, 2.222, round),
        # "for alpha=1 instead DP-SGD is (2.182, 1e-6)-DP".
        (1.0, 2.182, round),
        # "for alpha=0.5 ... does not satisfy (eps, 1e-6)-DP for eps < 2.274": a lower bound,
        # so the exact value (2.27487...) is truncated, not rounded, to 3 decimals.
        (0.5, 2.274, lambda v, nd: math.floor(v * 10**nd) / 10**nd),
    ],
)
def test_paper_section_4_2_quadratic_regularizer(alpha, expected, rounding):
    support, probs, scale = quadratic_example(alpha)
    assert len(support) == 8
    eps = mixture_epsilon(1e-6, support, probs, scale)
    assert rounding(eps, 3) == pytest.approx(expected, abs=1e-12)


def test_paper_section_4_2_counterexample_beats_both_extremes():
    """alpha = 1/2 exceeds alpha in {0, 1}: the heuristic is not monotone in alpha."""
    eps = {a: mixture_epsilon(1e-6, *quadratic_example(a)) for a in (0.0, 0.5, 1.0)}
    assert eps[0.5] > max(eps[0.0], eps[1.0])


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 5.0, 20.0])
def test_single_atom_is_the_gaussian_mechanism(mu, eps):
    """delta(eps) of N(mu, 1) vs N(0, 1): Corollary 2.13 of arXiv:1905.02383, evaluated in
    mpmath at 40 digits; the threshold has a closed form, so agreement is to rounding."""
    expected = mp.ncdf(-eps / mp.mpf(mu) + mp.mpf(mu) / 2) - mp.exp(eps) * mp.ncdf(
        -eps / mp.mpf(mu) - mp.mpf(mu) / 2
    )
    got = mixture_delta(eps, [mu], [1.0], 1.0)
    if expected < mp.mpf("1e-300"):
        assert got < 1e-300
    else:
        assert got == pytest.approx(float(expected), rel=1e-12)
        assert got == pytest.approx(gdp_delta(eps, mu), rel=1e-12)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-6, 1e-12])
def test_single_atom_epsilon_is_gdp_epsilon(mu, delta):
    # Two implementations of the same closed form: _mixture's batched Newton solver and
    # _gdp's brentq.
    assert mixture_epsilon(delta, [mu], [1.0], 1.0) == pytest.approx(
        gdp_epsilon(delta, mu), rel=1e-11, abs=1e-15
    )


def test_atom_at_zero_caps_eps_minus():
    """P >= p0 Q, so H_{e^eps}(Q, P) = 0 for eps >= -log p0 and only H(P, Q) remains."""
    support, probs, scale = [0.0, 4.0], [0.3, 0.7], 1.0
    oracle = MixtureOracle(support, probs, scale)
    for eps in (-math.log(0.3) - 1e-3, -math.log(0.3), -math.log(0.3) + 1e-9, 3.0):
        d_plus, _, d_minus, _ = oracle.parts(eps)
        assert (d_minus > 0) == (eps < -math.log(0.3))
        got = mixture_delta(eps, support, probs, scale)
        assert got == pytest.approx(float(max(d_plus, d_minus)), rel=RTOL)


@pytest.mark.parametrize("name", ["bernoulli", "no_zero_atom", "quadratic_half"])
@pytest.mark.parametrize("eps", [0.0, 0.05, 0.5, 2.0])
def test_both_directions_match_oracle(name, eps):
    """Each hockey-stick direction on its own (the public functions return their max; for
    every X >= 0 tried so far H(P, Q) >= H(Q, P), so the - direction is checked here)."""
    from advsim.bounds._mixture import _Batch

    support, probs, scale = MIXTURES[name]
    d_plus, _, d_minus, _ = MixtureOracle(support, probs, scale).parts(eps)
    values, weights = merge_atoms(support, probs)
    batch = _Batch((values / scale)[None, :], np.log(weights)[None, :])
    rows = np.array([0])
    u = batch.solve_loss(np.array([eps]), rows)
    assert math.exp(batch.log_delta_plus(u, rows)[0][0]) == pytest.approx(float(d_plus), rel=RTOL)
    if d_minus > 0:
        u = batch.solve_loss(np.array([-eps]), rows)
        got = math.exp(batch.log_delta_minus(u, rows)[0][0])
        assert got == pytest.approx(float(d_minus), rel=RTOL)


def test_repeated_rows_are_taken_row_by_row():
    """Rows [0, 0, 2] of a 3-row batch span it but repeat row 0: each result must be that
    of the row asked for (a shortcut once returned every row in order whenever the first
    and last index spanned the batch, so the second entry read row 1). The reference is
    each row's own one-row batch."""
    from advsim.bounds._mixture import _Batch

    z = np.array([[0.5, 1.0], [2.0, 3.0], [0.25, 4.0]])
    logp = np.log(np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]))
    batch = _Batch(z, logp)
    rows, eps, one = np.array([0, 0, 2]), np.array([0.1, 0.3, 0.2]), np.array([0])
    u = batch.solve_loss(eps, rows)
    alone = [_Batch(z[[r]], logp[[r]]) for r in rows]
    u_alone = [b.solve_loss(eps[[i]], one)[0] for i, b in enumerate(alone)]
    np.testing.assert_allclose(u, u_alone, rtol=1e-12)
    d_alone = [math.exp(b.log_delta_plus(u[[i]], one)[0][0]) for i, b in enumerate(alone)]
    np.testing.assert_allclose(np.exp(batch.log_delta_plus(u, rows)[0]), d_alone, rtol=1e-12)


def test_point_mass_at_zero_is_perfectly_private():
    assert mixture_delta(0.0, [0.0], [1.0], 1.0) == 0.0
    assert mixture_epsilon(1e-9, [0.0, 0.0], [0.5, 0.5], 3.0) == 0.0


def test_total_variation_at_eps_zero():
    # delta(0) = TV(P, Q); for a point mass mu it is 2 Phi(mu / 2) - 1.
    assert mixture_delta(0.0, [1.0], [1.0], 1.0) == pytest.approx(2 * norm.cdf(0.5) - 1, rel=1e-13)
    # eps(delta) = 0 exactly when delta >= TV.
    tv = mixture_delta(0.0, [0.0, 1.0], [0.9, 0.1], 1.0)
    assert mixture_epsilon(tv * (1 + 1e-9), [0.0, 1.0], [0.9, 0.1], 1.0) == 0.0
    assert mixture_epsilon(tv * (1 - 1e-6), [0.0, 1.0], [0.9, 0.1], 1.0) > 0.0


@pytest.mark.parametrize("factor", [1e-3, 0.37, 1.0, 41.0, 1e4])
def test_invariant_under_joint_rescaling(factor):
    support, probs, scale = MIXTURES["no_zero_atom"]
    base_eps = mixture_epsilon(1e-6, support, probs, scale)
    base_delta = mixture_delta(1.5, support, probs, scale)
    scaled = np.asarray(support) * factor
    assert mixture_epsilon(1e-6, scaled, probs, scale * factor) == pytest.approx(
        base_eps, rel=1e-12
    )
    assert mixture_delta(1.5, scaled, probs, scale * factor) == pytest.approx(base_delta, rel=1e-12)


def test_invariant_under_splitting_permuting_and_zero_atoms():
    support, probs, scale = [0.0, 1.0, 2.5], [0.5, 0.3, 0.2], 1.1
    base = mixture_epsilon(1e-6, support, probs, scale)
    split = ([2.5, 1.0, 0.0, 1.0, 0.0, 4.0], [0.2, 0.1, 0.25, 0.2, 0.25, 0.0], scale)
    assert mixture_epsilon(1e-6, *split) == pytest.approx(base, rel=1e-13)
    assert mixture_delta(0.7, *split) == pytest.approx(
        mixture_delta(0.7, support, probs, scale), rel=1e-13
    )


def test_merge_atoms():
    values, merged = merge_atoms([2.0, 0.0, 2.0, 1.0, 5.0], [0.25, 0.25, 0.25, 0.25, 0.0])
    np.testing.assert_array_equal(values, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(merged, [0.25, 0.25, 0.5])


def test_delta_is_decreasing_and_inverts_epsilon():
    support, probs, scale = MIXTURES["heavy_zero"]
    eps_grid = np.linspace(0.0, 6.0, 25)
    deltas = [mixture_delta(e, support, probs, scale) for e in eps_grid]
    assert all(a >= b for a, b in zip(deltas, deltas[1:], strict=False))
    assert deltas[0] < 1e-2  # TV: eps(1e-2) = 0
    assert mixture_epsilon(1e-2, support, probs, scale) == 0.0
    for delta in (1e-3, 1e-5, 1e-9):
        eps = mixture_epsilon(delta, support, probs, scale)
        assert mixture_delta(eps, support, probs, scale) == pytest.approx(delta, rel=1e-9)


def test_log_likelihood_ratio_against_densities():
    support, probs, scale = [0.0, 1.0, 2.5], [0.5, 0.3, 0.2], 1.1
    y = np.linspace(-4.0, 6.0, 21).reshape(3, 7)
    p = sum(w * norm.pdf(y, loc=x, scale=scale) for x, w in zip(support, probs, strict=True))
    expected = np.log(p / norm.pdf(y, scale=scale))
    got = mixture_log_likelihood_ratio(y, support, probs, scale)
    assert got.shape == (3, 7)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    # Far in the tails the densities underflow, the log-sum-exp does not.
    far = mixture_log_likelihood_ratio(np.array([-1e4, 1e4]), [1.0], [1.0], 1.0)
    np.testing.assert_allclose(far, [-1e4 - 0.5, 1e4 - 0.5], rtol=1e-15)


def test_tradeoff_is_gdp_curve_for_a_point_mass():
    # G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu), Definition 2.7 of arXiv:1905.02383.
    alpha = np.array([0.0, 1e-12, 1e-3, 0.1, 0.5, 0.9, 1.0])
    expected = norm.cdf(norm.isf(alpha) - 1.7)
    np.testing.assert_allclose(mixture_tradeoff(alpha, [1.7], [1.0], 1.0), expected, rtol=1e-12)


def test_tradeoff_agrees_with_hockey_stick():
    """H_{e^eps}(P, Q) = sup_alpha 1 - beta(alpha) - e^eps alpha over threshold tests."""
    support, probs, scale = MIXTURES["heavy_zero"]
    alpha = np.geomspace(1e-12, 1.0, 200001)
    beta = mixture_tradeoff(alpha, support, probs, scale)
    for eps in (0.0, 0.5, 2.0):
        d_plus, _, _, _ = MixtureOracle(support, probs, scale).parts(eps)
        best = np.max(1 - beta - math.exp(eps) * alpha)
        assert best <= float(d_plus) * (1 + 1e-12)
        assert best == pytest.approx(float(d_plus), rel=1e-6)


_atoms = st.lists(
    st.tuples(st.one_of(st.just(0.0), st.floats(1e-3, 6.0)), st.floats(0.01, 1.0)),
    min_size=1,
    max_size=4,
)


@settings(derandomize=True, deadline=None, max_examples=40)
@given(
    atoms=_atoms, scale=st.floats(0.3, 3.0), eps=st.floats(0.0, 8.0), log10_delta=st.floats(-12, -1)
)
def test_random_mixtures_match_oracle(atoms, scale, eps, log10_delta):
    support = [x for x, _ in atoms]
    weights = np.array([w for _, w in atoms])
    probs = weights / weights.sum()
    if max(support) == 0.0:  # P = Q
        assert mixture_delta(eps, support, probs, scale) == 0.0
        assert mixture_epsilon(10.0**log10_delta, support, probs, scale) == 0.0
        return
    oracle = MixtureOracle(*merge_atoms(support, probs), scale)
    expected = oracle.delta(eps)
    got = mixture_delta(eps, support, probs, scale)
    if expected < mp.mpf("1e-300"):
        assert 0.0 <= got < 1e-300
    else:
        assert got == pytest.approx(float(expected), rel=RTOL)
    delta = 10.0**log10_delta
    eps_got = mixture_epsilon(delta, support, probs, scale)
    if oracle.delta(0) <= delta:
        assert eps_got == 0.0
    else:
        assert eps_got == pytest.approx(float(oracle.epsilon(delta, eps_got)), rel=RTOL)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(
    support=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=5),
    scale=st.floats(1e-6, 1e6),
    eps=st.floats(0.0, 1e6),
    delta=st.floats(1e-300, 0.999),
)
def test_never_nan_never_negative(support, scale, eps, delta):
    probs = np.full(len(support), 1.0 / len(support))
    d = mixture_delta(eps, support, probs, scale)
    e = mixture_epsilon(delta, support, probs, scale)
    assert 0.0 <= d <= 1.0
    assert 0.0 <= e < math.inf


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mixture_delta(-0.1, [1.0], [1.0], 1.0), r"eps must be in \[0, inf\), got -0.1"),
        (lambda: mixture_delta(math.inf, [1.0], [1.0], 1.0), r"eps must be in \[0, inf\)"),
        (lambda: mixture_delta(math.nan, [1.0], [1.0], 1.0), "eps must be a number"),
        (lambda: mixture_epsilon(0.0, [1.0], [1.0], 1.0), r"delta must be in \(0, 1\), got 0.0"),
        (lambda: mixture_epsilon(1.0, [1.0], [1.0], 1.0), r"delta must be in \(0, 1\), got 1.0"),
        (lambda: mixture_epsilon(1e-5, [1.0], [1.0], 0.0), r"scale must be in \(0, inf\), got 0.0"),
        (lambda: mixture_epsilon(1e-5, [1.0], [1.0], -2), r"scale must be in \(0, inf\)"),
        (lambda: mixture_epsilon(1e-5, [-1.0], [1.0], 1.0), "support must be finite and >= 0"),
        (lambda: mixture_epsilon(1e-5, [np.inf], [1.0], 1.0), "support must be finite and >= 0"),
        (lambda: mixture_epsilon(1e-5, [1.0, 2.0], [0.5, 0.4], 1.0), "probs must sum to 1"),
        (lambda: mixture_epsilon(1e-5, [1.0, 2.0], [1.5, -0.5], 1.0), "probs must be finite and"),
        (lambda: mixture_epsilon(1e-5, [1.0, 2.0], [1.0], 1.0), "probs must have the same shape"),
        (lambda: mixture_epsilon(1e-5, [], [], 1.0), "support must be a non-empty 1-D array"),
        (lambda: mixture_tradeoff([0.5, 1.1], [1.0], [1.0], 1.0), r"alpha must be in \[0, 1\]"),
        (lambda: mixture_log_likelihood_ratio([np.nan], [1.0], [1.0], 1.0), "y must be finite"),
    ],
)
def test_invalid_inputs_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_negligible_atom_is_zero_without_overflow():
    # The case hypothesis found (support 1e-300, scale 456): z = 2e-303 overflowed the
    # threshold solver's brackets. N(z, 1) with z < 1e-150 is N(0, 1) up to TV < 1e-150,
    # so every result equals the one without that atom (exactly, in float64).
    for eps in (0.0, 1.0, 394231.0):
        assert mixture_delta(eps, [1e-300], [1.0], 456.0) == 0.0
        assert mixture_delta(eps, [1e-300, 1.0], [0.5, 0.5], 456.0) == mixture_delta(
            eps, [0.0, 1.0], [0.5, 0.5], 456.0
        )
    assert mixture_epsilon(0.5, [1e-300], [1.0], 456.0) == 0.0


def test_gdp_epsilon_refuses_mu_beyond_float64_with_a_clear_error():
    # eps(delta) of mu-GDP is mu u - mu^2/2 with u near mu: at mu = 1e8 the two terms
    # (5e15) cancel beyond float64 precision. mu = 3e7 still resolves; 1e8 is refused by
    # name instead of scipy's "f(a) and f(b) must have different signs".
    assert gdp_epsilon(1e-5, 3e7) == pytest.approx(0.5 * 9e14, rel=1e-6)
    with pytest.raises(ValueError, match=r"mu=1e\+08 is too large for gdp_epsilon"):
        gdp_epsilon(1e-5, 1e8)

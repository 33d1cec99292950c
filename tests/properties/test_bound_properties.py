"""Properties of the privacy bounds, searched by hypothesis with `advsim.testing`.

Each property is a theorem or an exact identity about `advsim.bounds`, stated through the
public API only; a counterexample is a bug in the bounds or in the statement. The mpmath
oracles of tests/advsim/test_bounds_*.py check values; these check the relations between
values over the whole parameter space:

- heuristic <= composition (the last iterate is a post-processing of all iterates), and
  equality up to the PLD grid for a single step;
- delta(eps) non-increasing in eps and in sigma, eps(delta) non-increasing in delta and
  in sigma (more noise is a post-processing: add independent noise);
- q = 1: the heuristic (mixture code) is the Gaussian mechanism (GDP code); composition
  and full batch at q = 1 are the GDP code by construction, so they are tested once against
  mpmath and dp_accounting in tests/advsim/test_bounds_composition.py, not here;
- mixture bounds invariant under joint rescaling of atoms and noise, and under splitting,
  permuting and adding zero-probability atoms; the heuristic agrees with a scipy oracle of
  the Binomial mixture written here;
- eps(delta) and delta(eps) invert each other; delta dominates every threshold test of
  the trade-off curve (hockey-stick divergence is a supremum over tests);
- max over t <= T of the heuristic >= the heuristic at T (and is the curve's maximum);
- dp_accounting's (pessimistic) mixture PLD is never below the exact value and within
  its grid of it.
"""

import math

import numpy as np
import pytest
import scipy.stats
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.special import log_ndtr, logsumexp

from advsim.bounds import (
    composition_epsilon,
    gdp_delta,
    gdp_epsilon,
    heuristic_delta,
    heuristic_epsilon,
    heuristic_epsilon_curve,
    heuristic_epsilon_max_over_steps,
    mixture_delta,
    mixture_epsilon,
    mixture_tradeoff,
)
from advsim.testing import (
    SETTINGS,
    Mixture,
    assert_bound_below,
    assert_monotone,
    deltas,
    dpsgd_params,
    epsilons,
    mixtures,
)

# A coarser PLD grid than the default 1e-4, for speed: dp_accounting rounds
# pessimistically at any grid, so composition stays an upper bound, within ~ the grid.
VDI = 1e-3
# dp_accounting's mixture PLD finds each grid point's loss by a root search in Python:
# ~0.3 s per mixture at this grid (20 s at 1e-3); eps is rounded up by at most ~the grid.
PLD_VDI = 1e-2
RTOL = 1e-9  # identities: observed agreement is ~1e-14 relative


def composition(delta, steps, q, sigma, *, canary_steps=None):
    return composition_epsilon(
        delta, steps, q, sigma, canary_steps=canary_steps, value_discretization_interval=VDI
    )


def heuristic(delta, steps, q, sigma, *, canary_steps=None):
    return heuristic_epsilon(delta, steps, q, sigma, canary_steps=canary_steps)


def close(a, b, rel=RTOL, abs_=0.0):
    return a == pytest.approx(b, rel=rel, abs=abs_)


# ----------------------------------------------------------------------------------------
# heuristic vs composition


@settings(SETTINGS, max_examples=40)
@given(
    dpsgd_params(steps=(1, 100), noise_multiplier=(0.5, 10.0), delta=(1e-10, 1e-2), period=(1, 4))
)
def test_heuristic_at_most_composition(p):
    assert_bound_below(heuristic, composition, p, rtol=RTOL)


@settings(SETTINGS, max_examples=30)
@given(dpsgd_params(steps=1, noise_multiplier=(0.5, 10.0), delta=(1e-10, 1e-2)))
def test_single_step_heuristic_is_composition(p):
    # One step: releasing the last iterate is releasing every iterate.
    lower, upper = assert_bound_below(heuristic, composition, p, rtol=RTOL)
    assert upper <= lower + 2 * VDI, (p, lower, upper)


# ----------------------------------------------------------------------------------------
# monotonicity


@settings(SETTINGS, max_examples=40)
@given(
    dpsgd_params(steps=(1, 1000), period=(1, 5)),
    st.lists(epsilons(max_value=30.0), min_size=2, max_size=6),
)
def test_heuristic_delta_non_increasing_in_eps(p, eps):
    eps = sorted(set(eps))
    vals = [heuristic_delta(e, *p.bound_args[1:], **p.bound_kwargs) for e in eps]
    assert all(0.0 <= v <= 1.0 for v in vals), vals
    assert_monotone(eps, vals, decreasing=True, rtol=RTOL, label="heuristic_delta(eps)", params=p)


@settings(SETTINGS, max_examples=40)
@given(
    dpsgd_params(steps=(1, 1000), period=(1, 5), noise_multiplier=(0.3, 3.0)),
    epsilons(max_value=10.0),
    st.lists(st.floats(1.0, 30.0), min_size=1, max_size=4),
)
def test_heuristic_non_increasing_in_sigma(p, eps, factors):
    sigmas = [p.noise_multiplier * f for f in sorted({1.0, *factors})]
    T, q, kw = p.steps, p.sampling_prob, p.bound_kwargs
    d = [heuristic_delta(eps, T, q, s, **kw) for s in sigmas]
    e = [heuristic_epsilon(p.delta, T, q, s, **kw) for s in sigmas]
    assert_monotone(sigmas, d, decreasing=True, rtol=RTOL, label="heuristic_delta(sigma)", params=p)
    assert_monotone(
        sigmas, e, decreasing=True, rtol=RTOL, label="heuristic_epsilon(sigma)", params=p
    )


@settings(SETTINGS, max_examples=40)
@given(
    dpsgd_params(steps=(1, 1000), period=(1, 5)),
    st.lists(deltas(min_value=1e-15, max_value=0.5), min_size=2, max_size=6),
)
def test_heuristic_epsilon_non_increasing_in_delta(p, ds):
    ds = sorted(set(ds))
    vals = [heuristic_epsilon(d, *p.bound_args[1:], **p.bound_kwargs) for d in ds]
    assert all(math.isfinite(v) and v >= 0 for v in vals), vals
    assert_monotone(
        ds, vals, decreasing=True, rtol=RTOL, label="heuristic_epsilon(delta)", params=p
    )


# ----------------------------------------------------------------------------------------
# q = 1: the Gaussian mechanism


@settings(SETTINGS, max_examples=40)
@given(
    dpsgd_params(sampling_prob=1.0, steps=(1, 10**6), noise_multiplier=(0.3, 1e3), period=(1, 5)),
    epsilons(max_value=20.0),
)
def test_q_one_heuristic_is_gaussian(p, eps):
    # X = n a.s. over noise sqrt(T) sigma: mu = n / (sqrt(T) sigma) (Theorem 1 of
    # arXiv:2410.06186 with q = 1). The heuristic goes through the mixture solver with one
    # atom, gdp_* through Corollary 2.13 of arXiv:1905.02383 (checked against mpmath in
    # test_bounds_composition.py): two implementations that share no code. Composition and
    # full batch at q = 1 *are* gdp_epsilon by construction, so they are checked once,
    # against mpmath and dp_accounting, in test_bounds_composition.py, not restated here.
    n = p.num_canary_steps
    mu_last = n / (math.sqrt(p.steps) * p.noise_multiplier)
    # Large mu (eps in the thousands) is covered by test_robustness.py at the extremes.
    assume(math.sqrt(n) / p.noise_multiplier <= 100.0)
    assert close(heuristic(*p.bound_args, canary_steps=n), gdp_epsilon(p.delta, mu_last))
    assert close(
        heuristic_delta(eps, p.steps, 1.0, p.noise_multiplier, canary_steps=n),
        gdp_delta(eps, mu_last),
        abs_=1e-300,
    )


# ----------------------------------------------------------------------------------------
# mixtures


@settings(SETTINGS, max_examples=50)
@given(mixtures(), st.floats(-3.0, 3.0), epsilons(max_value=10.0), deltas())
def test_mixture_invariant_under_joint_rescaling(m, log10_factor, eps, delta):
    c = 10.0**log10_factor
    support, probs, scale = m.args
    assert close(
        mixture_epsilon(delta, support * c, probs, scale * c),
        mixture_epsilon(delta, *m.args),
        abs_=1e-12,
    )
    assert close(
        mixture_delta(eps, support * c, probs, scale * c), mixture_delta(eps, *m.args), abs_=1e-300
    )


@st.composite
def _split_atoms(draw, m: Mixture):
    """The same law written differently: one atom split in two, a zero-probability atom
    added, the order permuted."""
    support, probs = list(m.support), list(m.probs)
    i = draw(st.integers(0, len(support) - 1))
    f = draw(st.floats(0.01, 0.99))
    support.append(support[i])
    probs[i], extra = probs[i] * f, probs[i] * (1 - f)
    probs.append(extra)
    support.append(draw(st.floats(0.0, 10.0)))
    probs.append(0.0)
    order = draw(st.permutations(range(len(support))))
    return [support[j] for j in order], [probs[j] for j in order]


@settings(SETTINGS, max_examples=50)
@given(st.data(), mixtures(), epsilons(max_value=10.0), deltas())
def test_mixture_invariant_under_splitting_merging_permuting(data, m, eps, delta):
    support, probs = data.draw(_split_atoms(m))
    assert close(
        mixture_epsilon(delta, support, probs, m.scale), mixture_epsilon(delta, *m.args), abs_=1e-12
    )
    assert close(
        mixture_delta(eps, support, probs, m.scale), mixture_delta(eps, *m.args), abs_=1e-300
    )


def _binomial_atoms(p):
    """Binomial(n, q) atoms from scipy (not from advsim's binomial code), the dropped
    mass below 1e-30 of the pmf's maximum."""
    n, q = p.num_canary_steps, p.sampling_prob
    k = np.arange(n + 1)
    logpmf = scipy.stats.binom.logpmf(k, n, q)
    keep = logpmf >= logpmf.max() - 70.0
    return k[keep].astype(float), logpmf[keep]


def _scipy_heuristic_delta(eps, p) -> float:
    """max(H(P, Q), H(Q, P)) for P = Binomial(n, q) + N(0, s^2), Q = N(0, s^2), s^2 = T
    sigma^2 (Theorem 1 of arXiv:2410.06186), written from the definition: the privacy
    loss L(y) = log sum_k p_k exp((2ky - k^2) / 2s^2) increases in y, so the optimal sets
    are {L > eps} = {y > y+} and {L < -eps} = {y < y-} (brentq), and each hockey stick is
    a difference of Gaussian tails, taken in log space."""
    k, logp = _binomial_atoms(p)
    s = math.sqrt(p.steps) * p.noise_multiplier
    loss = lambda y: logsumexp(logp + (2 * k * y - k * k) / (2 * s * s))  # noqa: E731

    def root(level):
        lo, hi = -1.0, 1.0
        while loss(lo) > level:
            lo *= 2
        while loss(hi) < level:
            hi *= 2
        return brentq(lambda y: loss(y) - level, lo, hi, xtol=1e-15 * s, rtol=1e-15)

    def log_diff(log_a, log_b):  # log(e^log_a - e^log_b), or -inf
        return log_a + math.log(-math.expm1(log_b - log_a)) if log_b < log_a else -math.inf

    out = -math.inf
    if loss(1e300 if k.max() > 0 else 0.0) > eps:  # P(L > eps) > 0
        y = root(eps)
        out = log_diff(logsumexp(logp + log_ndtr((k - y) / s)), eps + log_ndtr(-y / s))
    if loss(-1e300) < -eps:  # P(L < -eps) > 0: the zero atom has mass below e^-eps
        y = root(-eps)
        out = max(out, log_diff(log_ndtr(y / s), eps + logsumexp(logp + log_ndtr((y - k) / s))))
    return math.exp(out)


@settings(SETTINGS, max_examples=40)
@given(dpsgd_params(steps=(1, 2000), period=(1, 5)), epsilons(max_value=10.0))
def test_heuristic_matches_a_scipy_oracle(p, eps):
    """heuristic_delta against `_scipy_heuristic_delta` (scipy's binomial pmf, brentq and
    log_ndtr; no advsim code), and heuristic_epsilon as its inverse, both to 1e-6 (the
    requirement of the bounds; the oracle's own error is ~1e-12)."""
    d = heuristic_delta(eps, *p.bound_args[1:], **p.bound_kwargs)
    expected = _scipy_heuristic_delta(eps, p)
    assert close(d, expected, rel=1e-6, abs_=1e-15), (p, eps, d, expected)
    e = heuristic(*p.bound_args, **p.bound_kwargs)
    if e > 0:
        assert close(_scipy_heuristic_delta(e, p), p.delta, rel=1e-6), (p, e)
    else:
        assert _scipy_heuristic_delta(0.0, p) <= p.delta * (1 + 1e-9), (p, e)


@settings(SETTINGS, max_examples=50)
@given(mixtures(), deltas(min_value=1e-14, max_value=0.5))
def test_mixture_epsilon_inverts_delta(m, delta):
    eps = mixture_epsilon(delta, *m.args)
    assert math.isfinite(eps) and eps >= 0
    tv = mixture_delta(0.0, *m.args)
    if eps == 0.0:  # exactly when the total variation is already <= delta
        assert tv <= delta * (1 + 1e-9), (m, delta, tv)
    else:
        assert tv > delta * (1 - 1e-9), (m, delta, tv)
        assert close(mixture_delta(eps, *m.args), delta, rel=1e-6)


@settings(SETTINGS, max_examples=50)
@given(mixtures(), epsilons(max_value=8.0))
def test_mixture_delta_dominates_every_threshold_test(m, eps):
    # H_{e^eps}(P, Q) >= P(S) - e^eps Q(S) for every S; for S = {y >= c} this is
    # 1 - beta - e^eps alpha, and for S = {y < c} in the other order 1 - alpha - e^eps beta.
    alpha = np.concatenate([np.geomspace(1e-12, 0.5, 200), 1 - np.geomspace(1e-12, 0.5, 200)])
    beta = mixture_tradeoff(alpha, *m.args)
    assert np.all((beta >= 0) & (beta <= 1))
    best = max(np.max(1 - beta - math.exp(eps) * alpha), np.max(1 - alpha - math.exp(eps) * beta))
    d = mixture_delta(eps, *m.args)
    assert best <= d * (1 + 1e-9) + 1e-15, (m, eps, best, d)


# ----------------------------------------------------------------------------------------
# max over steps


@settings(SETTINGS, max_examples=30)
@given(dpsgd_params(steps=(1, 300)))
def test_max_over_steps_at_least_plain(p):
    best = heuristic_epsilon_max_over_steps(*p.bound_args)
    assert best >= heuristic(*p.bound_args)  # exactly, not up to rounding
    curve = heuristic_epsilon_curve(p.delta, np.arange(1, p.steps + 1), *p.bound_args[2:])
    assert close(best, float(np.max(curve)), rel=1e-12)


# ----------------------------------------------------------------------------------------
# dp_accounting's mixture PLD


def _pld_epsilon(delta, m: Mixture) -> float:
    support, probs, scale = m.args
    return _pld_epsilon_of(delta, support, probs, scale)


def _pld_epsilon_of(delta, support, probs, scale) -> float:
    return pld.from_mixture_gaussian_mechanism(
        standard_deviation=scale,
        sensitivities=support.tolist(),
        sampling_probs=probs.tolist(),
        value_discretization_interval=PLD_VDI,
    ).get_epsilon_for_delta(delta)


@pytest.mark.slow  # 3-6 s: the fast suite stays under 5 minutes
@settings(SETTINGS, max_examples=25)
@given(dpsgd_params(steps=(1, 10), noise_multiplier=(0.5, 5.0), delta=(1e-10, 1e-2), period=(1, 3)))
def test_heuristic_agrees_with_dp_accounting_mixture_pld(p):
    exact = heuristic(*p.bound_args, **p.bound_kwargs)
    k, logp = _binomial_atoms(p)  # scipy's atoms, not advsim's binomial_mixture
    scale = math.sqrt(p.steps) * p.noise_multiplier
    got = _pld_epsilon_of(p.delta, k, np.exp(logp), scale)
    assert exact * (1 - RTOL) - 1e-12 <= got <= exact + 1.5 * PLD_VDI, (p, got, exact)


@pytest.mark.slow  # measured 10-17 s: keeps plain `pytest` under 5 minutes
@settings(SETTINGS, max_examples=25)
@given(mixtures(support=(0.05, 2.0), scale=(0.4, 3.0)), deltas(min_value=1e-10))
def test_mixture_agrees_with_dp_accounting_mixture_pld(m, delta):
    exact = mixture_epsilon(delta, *m.args)
    got = _pld_epsilon(delta, m)
    assert exact * (1 - RTOL) - 1e-12 <= got <= exact + 1.5 * PLD_VDI, (m, delta, got, exact)

"""Properties of the privacy bounds, searched by hypothesis with `advsim.testing`.

Each property is a theorem or an exact identity about `advsim.bounds`, stated through the
public API only; a counterexample is a bug in the bounds or in the statement. The mpmath
oracles of tests/advsim/test_bounds_*.py check values; these check the relations between
values over the whole parameter space:

- heuristic <= composition (the last iterate is a post-processing of all iterates), and
  equality up to the PLD grid for a single step;
- delta(eps) non-increasing in eps and in sigma, eps(delta) non-increasing in delta and
  in sigma (more noise is a post-processing: add independent noise);
- q = 1: the heuristic, full batch and composition are the Gaussian mechanism;
- mixture bounds invariant under joint rescaling of atoms and noise, and under splitting,
  permuting and adding zero-probability atoms; the heuristic is the Binomial mixture;
- eps(delta) and delta(eps) invert each other; delta dominates every threshold test of
  the trade-off curve (hockey-stick divergence is a supremum over tests);
- max over t <= T of the heuristic >= the heuristic at T (and is the curve's maximum);
- dp_accounting's (pessimistic) mixture PLD is never below the exact value and within
  its grid of it.
"""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from advsim.bounds import (
    composition_epsilon,
    full_batch_epsilon,
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
def test_q_one_heuristic_and_full_batch_are_gaussian(p, eps):
    # X = n a.s. over noise sqrt(T) sigma: mu = n / (sqrt(T) sigma) (Theorem 1 of
    # arXiv:2410.06186 with q = 1); full batch over the n canary steps: sqrt(n) / sigma.
    n = p.num_canary_steps
    mu_last = n / (math.sqrt(p.steps) * p.noise_multiplier)
    mu_all = math.sqrt(n) / p.noise_multiplier
    # Large mu (eps in the thousands) is covered by test_robustness.py at the extremes;
    # here the examples stay in the range where the three closed forms are compared.
    assume(mu_all <= 100.0)
    assert close(heuristic(*p.bound_args, canary_steps=n), gdp_epsilon(p.delta, mu_last))
    assert close(
        heuristic_delta(eps, p.steps, 1.0, p.noise_multiplier, canary_steps=n),
        gdp_delta(eps, mu_last),
        abs_=1e-300,
    )
    assert close(full_batch_epsilon(*p.bound_args, canary_steps=n), gdp_epsilon(p.delta, mu_all))
    if n == p.steps:  # canary in every step: the last iterate is as revealing as all
        assert close(heuristic(*p.bound_args), full_batch_epsilon(*p.bound_args))


@settings(SETTINGS, max_examples=25)
@given(dpsgd_params(sampling_prob=1.0, steps=(1, 100), noise_multiplier=(1.0, 10.0), period=(1, 5)))
def test_q_one_composition_is_gaussian(p):
    n = p.num_canary_steps
    exact = gdp_epsilon(p.delta, math.sqrt(n) / p.noise_multiplier)
    got = composition(*p.bound_args, canary_steps=n)
    assert exact * (1 - RTOL) <= got <= exact + 2 * VDI, (p, got, exact)


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


@settings(SETTINGS, max_examples=40)
@given(dpsgd_params(steps=(1, 2000), period=(1, 5)), epsilons(max_value=10.0))
def test_heuristic_is_the_binomial_mixture(p, eps):
    m = Mixture.from_params(p)
    assert close(heuristic(*p.bound_args, **p.bound_kwargs), mixture_epsilon(p.delta, *m.args))
    assert close(
        heuristic_delta(eps, *p.bound_args[1:], **p.bound_kwargs),
        mixture_delta(eps, *m.args),
        abs_=1e-300,
    )


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
    return pld.from_mixture_gaussian_mechanism(
        standard_deviation=scale,
        sensitivities=support.tolist(),
        sampling_probs=probs.tolist(),
        value_discretization_interval=PLD_VDI,
    ).get_epsilon_for_delta(delta)


@settings(SETTINGS, max_examples=25)
@given(dpsgd_params(steps=(1, 10), noise_multiplier=(0.5, 5.0), delta=(1e-10, 1e-2), period=(1, 3)))
def test_heuristic_agrees_with_dp_accounting_mixture_pld(p):
    exact = heuristic(*p.bound_args, **p.bound_kwargs)
    got = _pld_epsilon(p.delta, Mixture.from_params(p))
    assert exact * (1 - RTOL) - 1e-12 <= got <= exact + 1.5 * PLD_VDI, (p, got, exact)


@settings(SETTINGS, max_examples=25)
@given(mixtures(support=(0.05, 2.0), scale=(0.4, 3.0)), deltas(min_value=1e-10))
def test_mixture_agrees_with_dp_accounting_mixture_pld(m, delta):
    exact = mixture_epsilon(delta, *m.args)
    got = _pld_epsilon(delta, m)
    assert exact * (1 - RTOL) - 1e-12 <= got <= exact + 1.5 * PLD_VDI, (m, delta, got, exact)

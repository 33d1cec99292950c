"""`ProjectionScore` and `LikelihoodRatioScore`.

Expected values: the projection <m_T - m_0, u / ||u||> computed in numpy, and the
log-likelihood ratio of P = Binomial(n, q) + N(0, s^2) against Q = N(0, s^2) (Theorem 1 of
arXiv:2410.06186), computed independently from scipy's binomial pmf and normal log-density:

    log p_in(y) / p_out(y) = logsumexp_k(log Bin(k; n, q) + log N(y; k, s^2)) - log N(y; 0, s^2)

with y the projection in units of eta * C and s = sqrt(T) sigma.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats

import advsim
from advsim import AbstractMechanism, CanarySchedule, DPSGDParams
from advsim.adversaries import LikelihoodRatioScore, ProjectionScore
from advsim.mechanisms import LinearProcess

T, Q, SIGMA = 20, 0.2, 1.5


class _Offset(AbstractMechanism):
    """m_0 = (0.5, -1), canary gradient (3, 4): clipped to C = 2 it is (1.2, 1.6), so the
    descent direction is -(0.6, 0.8). No projection_law."""

    params: DPSGDParams

    def __init__(self):
        self.params = DPSGDParams(3, 0.5, 1.0, clip_norm=2.0)  # Poisson, every step

    def init_model(self):
        return jnp.asarray([0.5, -1.0], jnp.float32)

    def canary_gradient(self, model, t):
        return jnp.asarray([3.0, 4.0], jnp.float32)


# --- ProjectionScore ------------------------------------------------------------------------------


def test_projection_default_direction_is_canary_descent():
    mech = LinearProcess(T, Q, SIGMA, dim=5, canary_coordinate=2)
    release = jnp.asarray([1.0, -2.0, 3.5, 4.0, 5.0])
    assert float(ProjectionScore().score(mech, release)) == 3.5


def test_projection_subtracts_initial_model_and_uses_descent_sign():
    mech = _Offset()
    release = np.asarray([2.0, 3.0])
    expected = np.dot(release - [0.5, -1.0], [-0.6, -0.8])  # = -0.9 - 3.2 = -4.1
    np.testing.assert_allclose(
        float(ProjectionScore().score(mech, jnp.asarray(release))), expected, rtol=1e-6
    )


@pytest.mark.parametrize("direction", [[1.0, 2.0, 2.0], [0.0, 0.0, -5.0], [1e-6, 0.0, 0.0]])
def test_projection_given_direction(direction):
    mech = LinearProcess(T, Q, SIGMA, dim=3)
    adv = ProjectionScore(direction)
    release = np.asarray([0.7, -1.3, 2.9])
    u = np.asarray(direction, np.float64) / np.linalg.norm(direction)
    expected = float(release @ u)
    np.testing.assert_allclose(float(adv.score(mech, jnp.asarray(release))), expected, rtol=1e-6)
    # The direction is stored normalised, and the score is jittable.
    np.testing.assert_allclose(np.linalg.norm(adv.direction), 1.0, rtol=1e-6)
    jitted = eqx.filter_jit(lambda a, m, r: a.score(m, r))(adv, mech, jnp.asarray(release))
    np.testing.assert_allclose(float(jitted), expected, rtol=1e-6)


def test_projection_reads_last_row_of_a_trajectory():
    mech = LinearProcess(T, Q, SIGMA, dim=3)
    adv = ProjectionScore([1.0, 2.0, 2.0])
    trajectory = jnp.asarray(np.random.default_rng(0).normal(size=(T + 1, 3)), jnp.float32)
    assert float(adv.score(mech, trajectory)) == float(adv.score(mech, trajectory[-1]))


@pytest.mark.parametrize(
    "direction", [[0.0, 0.0], [], [np.nan, 1.0], [np.inf, 1.0], [[1.0, 0.0]], 3.0]
)
def test_projection_direction_validation(direction):
    with pytest.raises(ValueError, match="direction must be a non-zero finite vector"):
        ProjectionScore(direction)


@pytest.mark.parametrize("direction", [[1e-25, 0.0, 0.0], [3e20, 4e20, 0.0]])
def test_projection_direction_scale_does_not_matter(direction):
    # Only the direction's orientation matters: [1e-25, 0, 0] is e_0, [3e20, 4e20, 0] is
    # (0.6, 0.8, 0). Normalising in float64 before casting to float32 would accept both.
    u = np.asarray(direction) / np.linalg.norm(np.asarray(direction, np.float64))
    np.testing.assert_allclose(ProjectionScore(direction).direction, u, rtol=1e-6)


# --- LikelihoodRatioScore -------------------------------------------------------------------------


def _llr_oracle(y: np.ndarray, n: int, q: float, s: float) -> np.ndarray:
    k = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        log_pmf = scipy.stats.binom.logpmf(k, n, q)
    log_in = scipy.special.logsumexp(log_pmf + scipy.stats.norm.logpdf(y[:, None], k, s), axis=1)
    return log_in - scipy.stats.norm.logpdf(y, 0.0, s)


_score_grid = eqx.filter_jit(
    lambda adv, mech, releases: jax.vmap(lambda r: adv.score(mech, r))(releases)
)

_LLR_CASES = [
    # (mechanism kwargs, n, q): the law's binomial parameters.
    (dict(), T, Q),
    (dict(clip_norm=2.0, learning_rate=0.25, canary_schedule=CanarySchedule.every(3)), 7, Q),
    (dict(canary_schedule=CanarySchedule.only(1, sampled=False)), 1, 1.0),
    (dict(batching="fixed", clip_norm=3.0), T, 1.0),
]


@pytest.mark.parametrize(("kwargs", "n", "q"), _LLR_CASES)
def test_llr_matches_scipy(kwargs, n, q):
    mech = LinearProcess(T, Q, SIGMA, **kwargs)
    unit = float(mech.learning_rate) * float(mech.clip_norm)
    y = np.linspace(-15.0, 30.0, 91)
    releases = jnp.asarray(y[:, None] * unit, jnp.float32)
    got = np.asarray(_score_grid(LikelihoodRatioScore(), mech, releases), np.float64)
    expected = _llr_oracle(y, n, q, math.sqrt(T) * SIGMA)
    # float32 evaluation of terms of size <= ~15: atol 2e-4.
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-4)


def test_llr_is_monotone_in_projection():
    # d/dy LLR = E[k | y] / s^2 > 0: strictly increasing. Checked on a fine grid, where
    # consecutive differences (>= ~1e-3 here) are far above float32 rounding.
    mech = LinearProcess(T, Q, SIGMA)
    y = np.linspace(-25.0, 40.0, 1301)
    got = np.asarray(
        _score_grid(LikelihoodRatioScore(), mech, jnp.asarray(y[:, None], jnp.float32))
    )
    assert np.all(np.isfinite(got))
    assert np.all(np.diff(got) > 0)
    # And it orders simulated runs exactly as the projection does (both worlds).
    releases = jnp.asarray(np.random.default_rng(1).normal(4.0, 7.0, (500, 1)), jnp.float32)
    llr = np.asarray(_score_grid(LikelihoodRatioScore(), mech, releases))
    proj = np.asarray(releases[:, 0])
    np.testing.assert_array_equal(np.argsort(llr, kind="stable"), np.argsort(proj, kind="stable"))


def test_llr_refuses_non_zero_data():
    mech = LinearProcess.with_data(T, Q, SIGMA, dim=3, num_examples=4, distribution="gaussian")
    with pytest.raises(ValueError, match="exact only without other data gradients"):
        LikelihoodRatioScore().score(mech, jnp.zeros(3))


def test_llr_needs_projection_law():
    with pytest.raises(TypeError, match="_Offset has no projection_law"):
        LikelihoodRatioScore().score(_Offset(), jnp.zeros(2))


_DATA = dict(dim=5, num_examples=20)


def test_llr_refuses_non_zero_data_inside_simulate():
    mech = LinearProcess.with_data(5, 0.3, 1.0, distribution="gaussian", **_DATA)
    with pytest.raises(ValueError, match="exact only without other data gradients"):
        advsim.simulate(mech, LikelihoodRatioScore(), 16, 0, chunk_size=1)


@pytest.mark.slow  # measured 10-17 s: keeps plain `pytest` under 5 minutes
def test_llr_simulates_with_zero_data():
    # With zero data gradients the law of Theorem 1 holds exactly, so the LLR applies and
    # orders runs as the projection does (same key, same runs).
    mech = LinearProcess.with_data(5, 0.3, 1.0, distribution="zero", **_DATA)
    llr = advsim.simulate(mech, LikelihoodRatioScore(), 100, 0, chunk_size=1)
    proj = advsim.simulate(mech, ProjectionScore(), 100, 0, chunk_size=1)
    for world in ("canary_in", "canary_out"):
        a, b = getattr(llr, world), getattr(proj, world)
        assert scipy.stats.spearmanr(a, b).statistic > 0.999


@pytest.mark.parametrize(
    "mechanism, capability",
    [
        ("LinearProcess", "AbstractProjectionLaw"),
        ("ZeroingRegularizer", "AbstractProjectionLaw"),
        ("QuadraticRegularizer", "AbstractProjectionLaw"),
        ("HistoryRegularizer", "AbstractCoordinateLaws"),
        ("MaliciousRepeaters", "AbstractCoordinateLaws"),
        ("LikelihoodEncodingLoss", "AbstractSumEncoding"),
        ("GradientCanary", "AbstractDirectedCanary"),
        ("ThresholdLandscape", "AbstractThresholdLandscape"),
    ],
)
def test_capabilities_are_declared_on_abstract_bases(mechanism, capability):
    # Adversaries check capabilities with isinstance on the abstract bases of `advsim`
    # (docs/tutorials/counterexample.md): each built-in mechanism subclasses the base its
    # adversaries ask for.
    import advsim.mechanisms

    cls = getattr(advsim.mechanisms, mechanism)
    base = getattr(advsim, capability)
    assert issubclass(cls, base) and issubclass(base, AbstractMechanism)


def test_a_duck_typed_projection_law_is_not_a_capability():
    class _Duck(eqx.Module):
        def projection_law(self):  # the method without the declared base
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="has no projection_law"):
        LikelihoodRatioScore().score(_Duck(), jnp.zeros(2))


class _NoCanaryGradient(AbstractMechanism):
    """A canary whose gradient is zero at m_0 = 0 (the loss m^2 / 2 at its minimum)."""

    params: DPSGDParams

    def __init__(self):
        self.params = DPSGDParams(3, 0.5, 1.0)

    def init_model(self):
        return jnp.zeros(2)

    def canary_gradient(self, model, t):
        return model


def test_projection_refuses_a_zero_canary_gradient_before_any_run():
    # The default direction -g/||g|| is 0/0 there: every score would be NaN. The reason is
    # given before anything is simulated, and by the contract's craft check.
    mech = _NoCanaryGradient()
    with pytest.raises(ValueError, match="cannot score runs of _NoCanaryGradient: .* zero here"):
        advsim.simulate(mech, ProjectionScore(), 100, key=0)
    with pytest.raises(AssertionError, match="craft.*cannot score runs of _NoCanaryGradient"):
        advsim.testing.check_adversary(ProjectionScore(), mech, checks=["craft"])
    # A direction of the user's choice has no such condition, but must fit the model.
    scores = advsim.simulate(mech, ProjectionScore(direction=[1.0, 0.0]), 100, key=0)
    assert np.all(np.isfinite(scores.canary_in)) and np.all(np.isfinite(scores.canary_out))
    with pytest.raises(ValueError, match="direction has 3 coordinates, the model 2"):
        advsim.simulate(mech, ProjectionScore(direction=[1.0, 0.0, 0.0]), 100, key=0)

"""`CoordinateLikelihoodRatio` and `bernoulli_gaussian_llr`.

Expected values: the log-likelihood ratio of independent coordinates
y_i ~ Bernoulli(p_i) + N(0, s_i^2) (in) against N(0, s_i^2) (out), computed independently
with scipy's normal log-density:

    sum_i log((1 - p_i) N(y_i; 0, s_i^2) + p_i N(y_i; 1, s_i^2)) - log N(y_i; 0, s_i^2).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from scipy.special import logsumexp

from advsim.adversaries import CoordinateLikelihoodRatio
from advsim.adversaries.history import bernoulli_gaussian_llr
from advsim.mechanisms import HistoryRegularizer, LinearProcess


def _scipy_llr(y, p, s):
    y = np.atleast_1d(np.asarray(y, np.float64))
    terms = np.stack([scipy.stats.norm.logpdf(y, 0, s), scipy.stats.norm.logpdf(y, 1, s)])
    weights = np.array([[1 - p], [p]]) * np.ones_like(terms)
    return logsumexp(terms, b=weights, axis=0) - scipy.stats.norm.logpdf(y, 0, s)


@pytest.mark.parametrize("p", [0.0, 0.01, 0.5, 1.0])
def test_bernoulli_gaussian_llr_matches_scipy(p):
    y = np.linspace(-4.0, 6.0, 41)
    got = np.asarray(bernoulli_gaussian_llr(jnp.asarray(y), jnp.float32(p), 0.7), np.float64)
    np.testing.assert_allclose(got, _scipy_llr(y, p, 0.7), rtol=2e-5, atol=2e-5)


def test_score_matches_scipy_on_the_rescaled_model():
    mech = HistoryRegularizer(
        4, 0.2, 0.9, v=3.0, learning_rate=0.5, clip_norm=2.0
    )  # unit_i = eta C v^i = 3^i
    model = jnp.array([0.8, -1.5, 20.0, 4.0])
    y = np.asarray(model, np.float64) / 3.0 ** np.arange(4)
    s = 0.9 * np.sqrt(np.cumsum(3.0 ** (-2.0 * np.arange(4))))
    expected = sum(float(_scipy_llr(y[i], 0.2, s[i])[0]) for i in range(4))
    got = float(CoordinateLikelihoodRatio().score(mech, model))
    assert got == pytest.approx(expected, rel=1e-5)
    # A trajectory (release="all") is scored by its last model.
    traj = jnp.stack([jnp.zeros(4), model])
    assert float(CoordinateLikelihoodRatio().score(mech, traj)) == pytest.approx(got)


def test_needs_coordinate_laws():
    with pytest.raises(TypeError, match="has no coordinate_laws"):
        CoordinateLikelihoodRatio().score(LinearProcess(3, 0.1, 1.0), jnp.zeros(1))

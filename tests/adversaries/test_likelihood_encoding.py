"""The decoder of the likelihood-encoding loss (Section 4.3 of Annamalai 2024).

Expected values: the decoded score of a hand-built model from scipy's normal pdf (L(v) of
Section 4.1), and the mean score of the no-canary world, T times E[round(L(V), 2)]
with V ~ N(0, sigma^2) (steps 2..T test v_1..v_{T-1}, the adversary v_T), by numerical
integration on a fine grid.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import advsim
from advsim.adversaries import LikelihoodSumDecoder
from advsim.mechanisms import LikelihoodEncodingLoss, LinearProcess


def _llr(v, q, sigma):
    return np.log(q * norm.pdf(v, 1, sigma) / norm.pdf(v, 0, sigma) + 1 - q)


def test_score_of_a_hand_built_model(x64):
    mech = LikelihoodEncodingLoss(3, 0.1, 1.0)
    # theta = -119.7: running sum -120 / 1000 = -0.12, raw last value v = 0.3.
    expected = -0.12 + np.round(_llr(0.3, 0.1, 1.0), 2)
    score = LikelihoodSumDecoder().score(mech, jnp.array([-119.7]))
    assert float(score) == pytest.approx(expected, abs=1e-12)
    # A trajectory (release="all") is scored by its last row.
    traj = jnp.array([[0.0], [0.7], [-119.7]])
    assert float(LikelihoodSumDecoder().score(mech, traj)) == pytest.approx(expected, abs=1e-12)


def test_wrong_mechanism():
    with pytest.raises(TypeError, match="LikelihoodEncodingLoss"):
        LikelihoodSumDecoder().score(LinearProcess(3, 0.1, 1.0), jnp.zeros(1))


def test_mean_score_without_canary(x64):
    q, sigma, steps = 0.1, 1.0, 20
    mech = LikelihoodEncodingLoss(steps, q, sigma)
    scores = advsim.simulate(mech, LikelihoodSumDecoder(), 4000, 5)
    v = np.linspace(-10 * sigma, 10 * sigma, 400_001)
    w = norm.pdf(v, 0, sigma) * (v[1] - v[0])
    per_step = np.sum(w * np.round(_llr(v, q, sigma), 2))  # E[round(L(V), 2)], V ~ N(0, s^2)
    per_step_sq = np.sum(w * np.round(_llr(v, q, sigma), 2) ** 2)
    mean = steps * per_step  # v_1..v_T: steps 2..T test v_1..v_{T-1}, the decoder v_T
    sd = np.sqrt(steps * (per_step_sq - per_step**2) / 4000)
    assert abs(scores.canary_out.mean() - mean) < 4 * sd
    assert scores.canary_in.mean() > scores.canary_out.mean() + 10 * sd

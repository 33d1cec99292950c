"""`RepeaterDecoder`.

Expected values, computed independently with scipy: for `encoding="threshold"` the last
model holds T - 1 decisions D_j = [m_j > 0] with P(D = 1) = p_in = q Phi((1 - tau)/sigma) +
(1 - q) Phi(-tau/sigma) (in) and p_out = Phi(-tau/sigma) (out), and the raw last step
y = m_{T-1} / (eta C) ~ Bernoulli(q) + N(0, sigma^2) (Appendix C of arXiv:2410.06186);
the score is the sum of their log-likelihood ratios. For `encoding="amplify"` coordinate j
over V eta C (eta C for the last) is Bernoulli(q) + N(0, sigma^2 (1 + (T - j - 1) / V^2)).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from advsim.adversaries import RepeaterDecoder
from advsim.mechanisms import HistoryRegularizer, MaliciousRepeaters

Q, SIGMA, TAU = 0.1, 0.5, 1.7


def _gauss_llr(y, p, s):
    n = scipy.stats.norm
    return math.log((1 - p) * n.pdf(y, 0, s) + p * n.pdf(y, 1, s)) - n.logpdf(y, 0, s)


def test_threshold_score_matches_scipy():
    mech = MaliciousRepeaters(4, Q, SIGMA, threshold=TAU, learning_rate=0.5, clip_norm=2.0)
    v = 1000.0  # units of eta C = 1
    model = jnp.array([v, -v, v, 0.9, 4 * v])  # decisions 1, 0, 1; raw 0.9; counter
    p_out = scipy.stats.norm.sf(TAU / SIGMA)
    p_in = Q * scipy.stats.norm.sf((TAU - 1) / SIGMA) + (1 - Q) * p_out
    one, zero = math.log(p_in / p_out), math.log((1 - p_in) / (1 - p_out))
    expected = 2 * one + zero + _gauss_llr(0.9, Q, SIGMA)
    assert float(RepeaterDecoder().score(mech, model)) == pytest.approx(expected, rel=1e-5)


def test_amplify_score_matches_scipy():
    mech = MaliciousRepeaters(3, Q, SIGMA, encoding="amplify", amplification=50.0)
    model = jnp.array([40.0, -10.0, 0.3, 3 * 50.0])
    y = [40.0 / 50, -10.0 / 50, 0.3]
    s = [SIGMA * math.sqrt(1 + (3 - j - 1) / 50.0**2) for j in range(3)]
    expected = sum(_gauss_llr(y[j], Q, s[j]) for j in range(3))
    assert float(RepeaterDecoder().score(mech, model)) == pytest.approx(expected, rel=1e-5)


def test_off_schedule_steps_contribute_nothing():
    from advsim import CanarySchedule

    mech = MaliciousRepeaters(3, Q, SIGMA, canary_schedule=CanarySchedule.only(1))
    base = float(RepeaterDecoder().score(mech, jnp.array([1000.0, 1000.0, 5.0, 3000.0])))
    flipped = float(RepeaterDecoder().score(mech, jnp.array([1000.0, -1000.0, -5.0, 3000.0])))
    assert base == flipped != 0.0
    assert np.isfinite(base)


def test_needs_repeaters():
    with pytest.raises(TypeError, match="needs a MaliciousRepeaters"):
        RepeaterDecoder().score(HistoryRegularizer(3, 0.1, 1.0, v=2.0), jnp.zeros(3))

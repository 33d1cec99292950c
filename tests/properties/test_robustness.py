"""Numerical robustness: extreme but valid inputs give finite, monotone answers or a clear
error; never NaN, never a silent 0 or inf.

The grid is every combination of q in {1e-6, 1}, T in {1, 10^6}, sigma in {0.05, 100}
and delta in {1e-15, 1e-5}. A returned delta is checked against an independent witness
(`_delta_witness`: the hockey-stick divergence is a supremum over threshold tests, so any
threshold's P(S) - e^eps Q(S) is a lower bound), which is what rules out a silent 0 (or a
too small epsilon) rather than merely a NaN.
"""

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
import scipy.stats
from scipy.special import log_ndtr, logsumexp

from advsim import Accounting, Scores
from advsim.audits import audit
from advsim.bounds import (
    composition_epsilon,
    full_batch_epsilon,
    heuristic_delta,
    heuristic_epsilon,
    heuristic_epsilon_curve,
    heuristic_epsilon_max_over_steps,
    mixture_epsilon,
)
from advsim.testing import assert_monotone

QS, STEPS, SIGMAS, DELTAS = (1e-6, 1.0), (1, 10**6), (0.05, 100.0), (1e-15, 1e-5)
GRID = list(itertools.product(STEPS, QS, SIGMAS))
EPS_GRID = (0.0, 0.01, 1.0, 10.0, 100.0, 1e4)


def _atoms(T, q, sigma):
    """Binomial(T, q) atoms in noise units (z = k / (sqrt(T) sigma)), their log-probs, and
    an upper bound on the probability mass left out (atoms below 1e-320 of the mode)."""
    if q == 1.0:
        return np.array([T / (math.sqrt(T) * sigma)]), np.array([0.0]), 0.0
    k = np.arange(min(T, 1000) + 1)  # T q <= 1 in the grid: the mass is near 0
    logp = scipy.stats.binom.logpmf(k, T, q)
    keep = logp > logp.max() - 737.0
    missing = float(scipy.stats.binom.sf(k[keep][-1], T, q)) + 1e-300
    # scipy's pmf at T = 10^6 sums to 1 - 7e-11: renormalise, or the witness of a
    # delta ~ 1e-6 (a difference of two tails ~ 0.5) is off by 1e-5 relative.
    logp = logp[keep] - logsumexp(logp[keep])
    return k[keep] / (math.sqrt(T) * sigma), logp, missing


def _delta_witness(eps, T, q, sigma):
    """A lower bound on delta(eps) = max(H_e^eps(P, Q), H_e^eps(Q, P)) from ~5000 threshold
    tests around 0, the atoms and the Gaussian optima z / 2 + eps / z, evaluated in log
    space with scipy (no root finding, no code shared with advsim.bounds)."""
    z, logp, missing = _atoms(T, q, sigma)
    pos = z[z > 0]
    pos = pos[np.unique(np.linspace(0, pos.size - 1, 8).astype(int))]  # a few suffice
    centers = np.concatenate([[0.0], pos, pos / 2 + eps / pos])
    c = (centers[:, None] + np.linspace(-40, 40, 321)[None, :]).ravel()
    # H(P, Q) >= P(Y >= c) - e^eps Q(Y >= c)
    log_a = logsumexp(logp[None, :] + log_ndtr(z[None, :] - c[:, None]), axis=1)
    log_b = eps + log_ndtr(-c)
    # H(Q, P) >= Q(Y < c) - e^eps P(Y < c), with P(Y < c) bounded above (missing mass)
    log_pc = logsumexp(logp[None, :] + log_ndtr(c[:, None] - z[None, :]), axis=1)
    log_c = log_ndtr(c)
    log_d = eps + np.logaddexp(log_pc, math.log(missing) if missing > 0 else -np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w1 = np.where(log_a > log_b, np.exp(log_a) * -np.expm1(log_b - log_a), 0.0)
        w2 = np.where(log_c > log_d, np.exp(log_c) * -np.expm1(log_d - log_c), 0.0)
    return float(max(np.max(w1), np.max(w2)))


@pytest.mark.parametrize(("T", "q", "sigma"), GRID)
def test_heuristic_delta_finite_monotone_never_silently_zero(T, q, sigma):
    d = [heuristic_delta(e, T, q, sigma) for e in EPS_GRID]
    assert all(0.0 <= v <= 1.0 for v in d), d  # never NaN, never outside [0, 1]
    assert_monotone(EPS_GRID, d, decreasing=True, rtol=1e-12, label="delta(eps)")
    for e, v in zip(EPS_GRID, d, strict=True):
        w = _delta_witness(e, T, q, sigma)
        # Not below a threshold test's divergence (up to rounding): rules out a silent 0.
        assert v >= w * (1 - 1e-6), (T, q, sigma, e, v, w)
        if v == 0.0:
            assert w < 1e-300


@pytest.mark.parametrize(("T", "q", "sigma"), GRID)
def test_heuristic_epsilon_finite_and_not_too_small(T, q, sigma):
    for delta in DELTAS:
        eps = heuristic_epsilon(delta, T, q, sigma)
        assert math.isfinite(eps) and eps >= 0.0, (T, q, sigma, delta, eps)
        # delta(eps) <= delta: no threshold test beats it (a too small eps, or a silent
        # 0 while the total variation exceeds delta, would show here).
        w = _delta_witness(eps, T, q, sigma)
        assert w <= delta * (1 + 1e-5), (T, q, sigma, delta, eps, w)
        if eps == 0.0:
            assert heuristic_delta(0.0, T, q, sigma) <= delta
        else:  # and the smallest such eps: delta a little below eps is above delta
            assert heuristic_delta(eps * (1 - 1e-6), T, q, sigma) >= delta * (1 - 1e-9)


@pytest.mark.parametrize(("T", "delta"), list(itertools.product(STEPS, DELTAS)))
def test_heuristic_monotone_across_the_extremes(T, delta):
    for q in QS:  # more noise, less privacy loss
        eps = [heuristic_epsilon(delta, T, q, s) for s in SIGMAS]
        assert_monotone(SIGMAS, eps, decreasing=True, label="eps(sigma)", params=(T, q, delta))
    for sigma in SIGMAS:  # q = 1 dominates any q (joint convexity of the divergence)
        eps = [heuristic_epsilon(delta, T, q, sigma) for q in QS]
        assert_monotone(QS, eps, label="eps(q)", params=(T, sigma, delta))
    for q, sigma in itertools.product(QS, SIGMAS):
        eps = [heuristic_epsilon(d, T, q, sigma) for d in DELTAS]
        assert_monotone(DELTAS, eps, decreasing=True, label="eps(delta)", params=(T, q, sigma))


@pytest.mark.parametrize(("T", "q", "sigma"), GRID)
def test_full_batch_and_curve_at_the_extremes(T, q, sigma):
    for delta in DELTAS:
        fb = full_batch_epsilon(delta, T, q, sigma)
        assert math.isfinite(fb) and fb >= 0.0
        # (fb's value is checked once against mpmath and dp_accounting, in
        # tests/advsim/test_bounds_composition.py; here: finite at the extremes.)
        if q == 1.0:  # q = 1: the heuristic (mixture code) is the full-batch (GDP code) bound
            assert heuristic_epsilon(delta, T, q, sigma) == pytest.approx(fb, rel=1e-9)
    curve = heuristic_epsilon_curve(1e-15, [1, T], q, sigma)
    assert np.all(np.isfinite(curve)) and np.all(curve >= 0)
    assert curve[-1] == pytest.approx(heuristic_epsilon(1e-15, T, q, sigma), rel=1e-12)


@pytest.mark.parametrize(
    ("q", "sigma"),
    [
        (1e-6, 0.05),
        (1e-6, 100.0),
        (1.0, 0.05),
        (1.0, 100.0),
    ],
)
def test_max_over_steps_at_the_extremes(q, sigma):
    # T = 10^6 is out of reach (10^4: ~10 s, 10^5: ~5 min here); T = 1000 covers t = 1.
    for delta in DELTAS:
        best = heuristic_epsilon_max_over_steps(delta, 1000, q, sigma)
        assert math.isfinite(best)
        assert best >= heuristic_epsilon(delta, 1000, q, sigma)
        assert best >= heuristic_epsilon(delta, 1, q, sigma)


# Composition (dp_accounting PLD) on a coarse grid (pessimistic at any grid): 0.2-1.5 s
# per call here, where the default grid takes up to 100 s at sigma = 0.05.
COMPOSITION_CASES = [
    (T, q, s, d)
    for (T, q, s), d in itertools.product(GRID, DELTAS)
    if not (T == 10**6 and s == 0.05 and q < 1.0)  # minutes per call at any grid
]


@pytest.mark.parametrize(("T", "q", "sigma", "delta"), COMPOSITION_CASES)
def test_composition_finite_or_clear_error(T, q, sigma, delta):
    try:
        eps = composition_epsilon(delta, T, q, sigma, value_discretization_interval=1e-2)
    except RuntimeError as err:
        # dp_accounting's PLD keeps ~1.5e-15 of mass at infinite loss, so delta = 1e-15
        # gets eps = inf, which advsim turns into this error (never a silent inf).
        assert delta < 2e-15 and "epsilon inf" in str(err) and "sigma" in str(err)
        return
    assert math.isfinite(eps)
    assert eps >= heuristic_epsilon(delta, T, q, sigma) * (1 - 1e-9)


def _gdp_epsilon_mpmath(delta, mu):
    """The root in eps of delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
    (Corollary 2.13 of arXiv:1905.02383) by bisection at 50 digits."""
    with mp.workdps(50):
        mu, target = mp.mpf(mu), mp.mpf(delta)

        def d(e):
            return mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2)

        lo, hi = mp.mpf(0), mu * mu / 2 + 10 * mu + 1  # d(hi) < Phi(-10) < delta
        for _ in range(250):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if d(mid) > target else (lo, mid)
        return float(lo)


def test_composition_q_one_tiny_sigma_huge_steps():
    # sqrt(10^6) / 0.05 = 2e4-GDP (Corollary 3.3 of arXiv:1905.02383): no PLD grid could
    # hold it; the closed form must give the 50-digit root.
    eps = composition_epsilon(1e-5, 10**6, 1.0, 0.05)
    assert eps == pytest.approx(_gdp_epsilon_mpmath(1e-5, 1000 / 0.05), rel=1e-9)


def test_large_signal_to_noise_emits_no_warning():
    # One atom at 151 over unit noise is 151-GDP: eps(0.5) = 11399.500014617... (mpmath).
    eps = mixture_epsilon(0.5, [151.0], [1.0], 1.0)
    assert eps == pytest.approx(_gdp_epsilon_mpmath(0.5, 151.0), rel=1e-12)


# ----------------------------------------------------------------------------------------
# Audits at the extremes: finite eps_lower from family scores and from degenerate sets


def _check_finite_or_explained(r, name, method):
    """A finite number >= 0, or None with the reason in `<name>_note` (AuditResult)."""
    value = getattr(r, name)
    if value is None:
        assert getattr(r, f"{name}_note"), (method, r)
    else:
        assert math.isfinite(value) and value >= 0.0, (method, r)


def _family_scores(T, q, sigma, n, seed=0):
    rng = np.random.default_rng(seed)
    scale = math.sqrt(T) * sigma
    return Scores(rng.binomial(T, q, n) + rng.normal(0, scale, n), rng.normal(0, scale, n))


@pytest.mark.parametrize(("T", "q", "sigma"), GRID)
def test_audits_finite_at_the_extremes(T, q, sigma):
    acc = Accounting(T, q, sigma, canary_steps=tuple(range(1, T + 1)))
    scores = _family_scores(T, q, sigma, 2000)
    for method in ("gdp", "eps_delta", "family"):
        r = audit(scores, method, delta=1e-15, accounting=acc)
        assert math.isfinite(r.eps_lower) and r.eps_lower >= 0.0, (method, r)
        _check_finite_or_explained(r, "eps_point", method)


@pytest.mark.parametrize(
    "scores",
    [
        Scores(np.zeros(1000), np.zeros(1000)),  # no signal
        Scores(np.ones(1000), np.zeros(1000)),  # perfectly separated
        Scores(np.full(1000, 1e300), np.full(1000, -1e300)),  # huge but finite
        Scores(np.array([1.0, 2.0]), np.array([0.0, 0.5])),  # the smallest audit
    ],
    ids=["identical", "separated", "huge", "two_runs"],
)
@pytest.mark.parametrize(("T", "q", "sigma"), [(1, 1e-6, 0.05), (10**6, 1.0, 100.0)])
# Separated scores reject the family's assumption (a warning, by design): what is checked
# here is that no audit returns NaN or a negative epsilon, whatever it concludes.
@pytest.mark.filterwarnings("ignore::advsim.audits.AssumptionRejectedWarning")
def test_audits_finite_on_degenerate_scores(scores, T, q, sigma):
    acc = Accounting(T, q, sigma, canary_steps=tuple(range(1, T + 1)))
    for method in ("gdp", "eps_delta", "family"):
        r = audit(scores, method, delta=1e-15, accounting=acc)
        _check_finite_or_explained(r, "eps_lower", method)

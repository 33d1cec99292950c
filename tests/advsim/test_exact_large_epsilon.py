"""The exact epsilon at large epsilon (log space) and the exact engine's cost warning.

Where the expected values come from:

- The linear process (`LinearProcess`, 1-D, no other data): its last model is exactly
  Binomial(T, q) + N(0, T sigma^2) against N(0, T sigma^2) in units of eta C (Theorem 1 of
  arXiv:2410.06186), so its exact epsilon is `heuristic_epsilon` (computed in log space by
  `advsim.bounds`), and, independently, the mpmath oracle of that mixture
  (`tests/advsim/_mp.py::MixtureOracle`: the privacy loss's level sets in closed form,
  Newton on delta(eps), 30 digits), checked on the fast cells.
- The noise multipliers are those at which the heuristic gives the listed epsilons
  (scipy's brentq on `heuristic_epsilon`), down to where it gives 100: the sweep asked for.
- The quadratic regularizer: its closed form, a mixture of 2^T Gaussians
  (`quadratic_exact_epsilon`, Section 4.2 of arXiv:2410.06186).
- Where the grid resolves epsilon, the log-space ladder must give the grid ladder's value
  (the two discretise the chain alike): a projection, a declared jump, a data group.
- The cost warning: `estimate_seconds` is a prediction; the test states only that the
  warning comes before any propagation (the propagations are replaced by a function that
  fails) for T = 100,000 and not for the rows of `advsim audit` (their sigmas,
  `tests/advsim/test_exact_adaptive.py::AUDIT_SIGMAS`, calibrated to composition eps = 8).
"""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import pytest
import scipy.optimize
import scipy.stats
from tqdm.auto import tqdm

import advsim.exact._api as exact_api
import advsim.exact._logladder as logladder
from advsim.bounds import heuristic_epsilon, quadratic_exact_epsilon
from advsim.exact import (
    ExactCostWarning,
    estimate_seconds,
    last_iterate_epsilon,
    resolution_limit,
)
from advsim.exact._cost import WARN_SECONDS
from advsim.mechanisms import (
    LinearProcess,
    ProjectedLinearCanary,
    QuadraticRegularizer,
    ThresholdLandscape,
)

from ._mp import MixtureOracle

DELTA = 1e-5
#: The heuristic's epsilons the sweep's noise multipliers are chosen for: both sides of
#: the grid's resolution limit (20.7 at delta = 1e-5) and up to 100.
TARGETS = (2.0, 10.0, 19.0, 22.0, 40.0, 70.0, 100.0)
#: The rows of `advsim audit` (q = 0.01): T -> sigma.
AUDIT_SIGMAS = {1: 0.3425588693398479, 5: 0.3738635224783458, 10: 0.39000507686113034,
                50: 0.43859392342147285, 100: 0.46452841426243907, 500: 0.541509937713052,
                1000: 0.5862602729787919}  # fmt: skip


def _sigma_at(steps: int, q: float, eps: float) -> float:
    """The noise multiplier at which the heuristic (Theorem 1) gives `eps`."""
    return scipy.optimize.brentq(
        lambda s: heuristic_epsilon(DELTA, steps, q, s) - eps, 1e-3, 50.0, xtol=1e-13
    )


def _oracle(steps: int, q: float, sigma: float, start: float) -> float:
    """Theorem 1's mixture in mpmath: Binomial(T, q) + N(0, T sigma^2) vs N(0, T sigma^2)."""
    with mp.workdps(30):
        ks = list(range(steps + 1))
        probs = [mp.binomial(steps, k) * mp.mpf(q) ** k * (1 - mp.mpf(q)) ** (steps - k)
                 for k in ks]  # fmt: skip
        oracle = MixtureOracle(ks, probs, mp.sqrt(steps) * mp.mpf(sigma))
        return float(oracle.epsilon(DELTA, start))


def _check(steps: int, q: float, sigma: float, **kwargs):
    """The engine against the heuristic: finite, within 1e-3 relative, and the stated error
    covering the actual one."""
    law = last_iterate_epsilon(LinearProcess(steps, q, sigma), DELTA, **kwargs)
    truth = heuristic_epsilon(DELTA, steps, q, sigma)
    where = f"T={steps} q={q} sigma={sigma:.6g}: exact {law.epsilon!r} +- {law.error:.3g}, " \
            f"heuristic {truth!r}"  # fmt: skip
    assert law.resolved and math.isfinite(law.epsilon) and math.isfinite(law.error), where
    assert abs(law.epsilon / truth - 1) <= 1e-3, where
    assert law.log_space == (law.epsilon > resolution_limit(DELTA)), where
    return law, truth, where


# Measured: 8-11 s on 2 busy cores, of which about 6-8 s compiling the grid and the
# log-space propagations; each further cell 0.3-0.5 s.
@pytest.mark.parametrize("steps, q", [(1, 1.0)])
def test_large_epsilons_fast(steps, q):
    # q = 1: the Gaussian mechanism with mu = sqrt(T) / sigma, whose epsilon up to 100
    # the grid's float64 masses cannot resolve (it needs out-world masses ~ delta e^-100).
    for eps in (100.0, 40.0):
        sigma = _sigma_at(steps, q, eps)
        law, truth, where = _check(steps, q, sigma)
        assert law.log_space, where
        assert abs(law.epsilon - truth) <= law.error, where
        assert truth == pytest.approx(_oracle(steps, q, sigma, eps), rel=1e-9)
    # Without the log-space ladder the grid's value there is flagged, never passed off.
    flagged = last_iterate_epsilon(LinearProcess(steps, q, sigma), DELTA, log_space=False)
    assert not flagged.resolved and flagged.error == math.inf and not flagged.log_space
    # q = 0.1, at the heuristic's 70: a mixture of two Gaussians.
    sigma = _sigma_at(1, 0.1, 70.0)
    law, truth, where = _check(1, 0.1, sigma)
    assert abs(law.epsilon - truth) <= law.error, where
    assert truth == pytest.approx(_oracle(1, 0.1, sigma, 70.0), rel=1e-9)


# Measured: 58-75 s on 2 busy cores for the 42 cells (2-22 s per (T, q)).
@pytest.mark.slow
@pytest.mark.parametrize("steps", [1, 3, 10])
@pytest.mark.parametrize("q", [1.0, 0.1])
def test_large_epsilons_sweep(steps, q):
    lines = []
    for eps in TARGETS:
        sigma = _sigma_at(steps, q, eps)
        law, truth, where = _check(steps, q, sigma)
        lines.append(where)
        if law.log_space:  # the grid ladder's own coverage is measured elsewhere
            assert abs(law.epsilon - truth) <= law.error, where
    print("\n".join(lines))


# Measured: 8 s on 2 busy cores (compiling the grids sized for epsilon up to 995).
@pytest.mark.slow
def test_beyond_the_largest_target_is_sized_for_it():
    # T = 1, q = 0.01, sigma = 0.026: the heuristic gives 853 (the GDP bound 903), beyond
    # the first two log-space targets (128, 512): the third is sized from the bound.
    mech = LinearProcess(1, 0.01, 0.026)
    assert logladder.targets(mech, DELTA)[:2] == [128.0, 512.0]
    bound = logladder.epsilon_bound(mech, DELTA)
    # The bound is mu-GDP's epsilon with mu = 1 / sigma: at q = 1 it is Theorem 1's value.
    assert bound == pytest.approx(heuristic_epsilon(DELTA, 1, 1.0, 0.026), rel=1e-9)
    law = last_iterate_epsilon(mech, DELTA, refinements=2)
    truth = heuristic_epsilon(DELTA, 1, 0.01, 0.026)
    assert law.log_space and law.epsilon == pytest.approx(truth, rel=1e-2)
    assert law.epsilon <= bound


def test_gdp_bound_matches_the_gaussian_mechanism():
    # mu-GDP's delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) (Corollary 2.13
    # of arXiv:1905.02383), here evaluated by scipy at the bound's own epsilon.
    for mu in (0.5, 3.0, 12.0):
        eps = logladder._gdp_epsilon(mu, DELTA)
        norm = scipy.stats.norm
        delta = norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)
        assert delta == pytest.approx(DELTA, rel=1e-6)


def _no_propagation(*args, **kwargs):
    raise AssertionError("a propagation started")


def test_cost_warning_comes_before_any_propagation(monkeypatch):
    monkeypatch.setattr(exact_api, "advance", _no_propagation)
    monkeypatch.setattr(logladder, "advance_log", _no_propagation)
    mech = LinearProcess(steps=100_000, sampling_prob=0.01, noise_multiplier=0.6)
    seconds = estimate_seconds(mech, DELTA)
    assert seconds > 3600  # hours (measured: 12-14 h)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExactCostWarning)
        with pytest.raises(ExactCostWarning, match=r"predicted to take about .* h") as info:
            last_iterate_epsilon(mech, DELTA)
    assert "estimate_seconds" in str(info.value) and "cells_per_sd" in str(info.value)
    assert issubclass(ExactCostWarning, UserWarning)


def test_no_cost_warning_for_the_audit_rows():
    for steps, sigma in AUDIT_SIGMAS.items():
        mech = LinearProcess(steps, 0.01, sigma)
        assert estimate_seconds(mech, DELTA) < WARN_SECONDS / 2, steps


def test_log_space_refuses_a_grid_too_large_before_propagating(monkeypatch):
    # The log-space ladder (which the grid ladder hands a value beyond its resolution)
    # checks its grid's working set against max_bytes before it runs, and names its size.
    monkeypatch.setattr(logladder, "advance_log", _no_propagation)
    with pytest.raises(exact_api.GridTooLargeError, match=r"log space .* kernel taps"):
        logladder.beyond_resolution(
            LinearProcess(1, 1.0, 0.1), DELTA, cells_per_sd=6.0, refinements=3, rtol=None,
            support=None, every_step=False, max_bytes=2**16, progress=False,
            stop=lambda t0, steps: None,
        )  # fmt: skip


# Measured: 10 s on 2 busy cores.
@pytest.mark.slow
def test_large_epsilons_of_a_contracting_field():
    # The quadratic regularizer (a field of m: the drift moves mass by fractions of a
    # cell) against its closed form, a mixture of 2^T Gaussians (Section 4.2 of
    # arXiv:2410.06186, `quadratic_exact_epsilon`), beyond the grid's resolution.
    for steps, q, sigma, alpha in ((3, 0.1, 0.25, 0.5), (3, 1.0, 0.3, 0.5), (5, 0.5, 0.3, 0.3),
                                   (3, 0.1, 0.15, 1.0)):  # fmt: skip
        law = last_iterate_epsilon(QuadraticRegularizer(steps, q, sigma, alpha=alpha), DELTA)
        truth = quadratic_exact_epsilon(DELTA, steps, q, sigma, alpha)
        where = f"T={steps} q={q} sigma={sigma} alpha={alpha}: {law.epsilon!r} +- " \
                f"{law.error:.3g}, closed form {truth!r}"  # fmt: skip
        assert law.log_space and truth > resolution_limit(DELTA), where
        assert abs(law.epsilon / truth - 1) <= 1e-3, where
        assert abs(law.epsilon - truth) <= law.error, where


# Measured: 7-13 s each on 2 busy cores.
@pytest.mark.slow
@pytest.mark.parametrize("mech", [
    ProjectedLinearCanary(10, 1.0, radius=0.5),  # the projection's atoms
    ThresholdLandscape(5, 1.0, 4),  # a declared jump (split cells), a data group
    ThresholdLandscape(3, 0.5, 4, orientation="restore"),
], ids=["projected", "landscape", "landscape-restore"])  # fmt: skip
def test_log_space_gives_the_grids_value_where_both_resolve(mech):
    # The two propagations discretise the chain alike (same grids here, same deposit, same
    # sampled kernel, same atoms): where the grid resolves epsilon, the log-space ladder
    # must give its value, to within the grid's error estimate.
    grid = last_iterate_epsilon(mech, DELTA, progress=False)
    logs = logladder.log_ladder(
        mech, DELTA, cells_per_sd=6.0, refinements=3, rtol=None, support=None,
        every_step=False, max_bytes=8 * 2**30, bar=tqdm(disable=True),
        stop=lambda t0, steps: None,
    )  # fmt: skip
    assert not grid.log_space and grid.resolved
    assert logs["epsilon"] == pytest.approx(grid.epsilon, abs=grid.error)

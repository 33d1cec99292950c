"""The last-iterate heuristic at a learning-rate schedule (`Accounting.step_sizes`).

For a linear loss at step sizes eta_t the last model is m_0 + sum_t eta_t (b_t C + sigma C
xi_t), so the pair is N(X, s^2) vs N(0, s^2) with X = sum_{canary steps} eta_t b_t and
s = sigma sqrt(sum_t eta_t^2) (Theorem 1 of arXiv:2410.06186 at a schedule).

Where the expected numbers come from:
- a constant schedule: the constant-rate code (the same numbers, compared with ==);
- the threshold landscape's schedule (1, then 1/B; canary at step 1 only, unsampled):
  X = 1 a.s., so mu-GDP with mu = 1 / (sigma sqrt(1 + (T - 1) / B^2)) (Corollary 2.13 of
  arXiv:1905.02383, `gdp_epsilon`), and the exact engine (`advsim.exact`) on the linear
  construction at that schedule, a grid computation independent of the closed form;
- Poisson cases: X enumerated over all 2^n subsets of the canary steps in mpmath and the
  pair evaluated by the mpmath oracle of Appendix A.1 (`tests/advsim/_mp.py`);
- the lower trade-off curve: the exact Neyman-Pearson curve of those enumerated atoms
  (`scipy.special.ndtr`), and the curve of their privacy profile (`mixture_delta` of the
  enumerated atoms), which the lower curve must never exceed.
"""

import dataclasses
import itertools
import math
import types

import mpmath as mp
import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from advsim import Accounting, CanarySchedule, Scores
from advsim.audits import HeuristicFamilyAudit, certify_violation
from advsim.bounds import (
    TradeoffCurve,
    bounds_for,
    composition_epsilon,
    full_batch_epsilon,
    gdp_curve_lower,
    gdp_epsilon,
    heuristic_curve_lower,
    heuristic_delta,
    heuristic_epsilon,
    heuristic_epsilon_max_over_steps,
    linear_loss_tradeoff,
    mixture_delta,
)
from advsim.bounds._run import run_parameters
from advsim.bounds._step_sizes import MAX_ATOMS, schedule_atoms
from advsim.bounds._violation_curves import EPS_GRID
from advsim.mechanisms import LinearProcess, PiecewiseConstruction, ThresholdLandscape

from ._mp import MixtureOracle

RTOL = 1e-9  # against the 30-digit oracle; observed ~1e-13


def landscape(steps=25, sigma=4.0, b=4) -> Accounting:
    return Accounting(steps, 1.0, sigma, (1,), step_sizes=(1.0,) + (1.0 / b,) * (steps - 1))


def landscape_mu(steps, sigma, b) -> float:
    return 1.0 / (sigma * math.sqrt(1.0 + (steps - 1) / b**2))


def enumerated(acc: Accounting):
    """X's atoms by brute force over every subset of the canary steps (mpmath), and s."""
    with mp.workdps(40):
        return _enumerated(acc)


def _enumerated(acc: Accounting):
    q = mp.mpf(acc.sampling_prob)
    etas = [mp.mpf(e) for e in acc.step_sizes]
    law = {}
    cs = acc.canary_steps
    for bits in itertools.product((0, 1), repeat=len(cs)):
        k = sum(bits)
        x = mp.fsum(etas[t - 1] for t, b in zip(cs, bits, strict=True) if b)
        p = q**k * (1 - q) ** (len(cs) - k)
        key = mp.nstr(x, 25)  # equal sums (0.5 + 0.5 = 1) merge
        law[key] = (x, law.get(key, (x, mp.mpf(0)))[1] + p)
    atoms = sorted(law.values())
    scale = mp.mpf(acc.noise_multiplier) * mp.sqrt(mp.fsum(e * e for e in etas))
    return [x for x, _ in atoms], [p for _, p in atoms], scale


# ---------------------------------------------------------------------------------------
# A constant schedule is the constant-rate code


def test_constant_schedule_is_none_and_the_same_numbers():
    acc = Accounting(40, 0.05, 0.9, tuple(range(1, 41)), step_sizes=(0.5,) * 40)
    assert acc.step_sizes is None
    assert acc == Accounting(40, 0.05, 0.9, tuple(range(1, 41)))
    numbers = (40, 0.05, 0.9)
    assert heuristic_epsilon(1e-5, acc) == heuristic_epsilon(1e-5, *numbers, canary_steps=40)
    assert heuristic_delta(2.0, acc) == heuristic_delta(2.0, *numbers, canary_steps=40)
    assert bounds_for(acc, 1e-5)["heuristic"] == heuristic_epsilon(1e-5, *numbers)


def test_mechanisms_with_one_rate_record_no_schedule():
    # the default step_size at a learning rate other than 1
    assert LinearProcess(10, 0.1, 1.0, learning_rate=0.3).accounting().step_sizes is None
    # an overridden step_size that is constant (read through the vmap, then normalised)
    mech = PiecewiseConstruction.linear_loss(6, 0.2, 1.0, step_sizes=[0.5] * 6)
    assert mech.accounting().step_sizes is None
    # the landscape at B = 1: step sizes 1, then 1/1
    assert ThresholdLandscape(5, 2.0, 1).accounting().step_sizes is None


def test_mechanisms_with_a_schedule_record_it():
    want = landscape(25, 4.0, 4)
    assert ThresholdLandscape(25, 4.0, 4).accounting() == want
    assert PiecewiseConstruction.threshold_landscape(25, 4.0, 4).accounting() == want



def test_search_family_at_the_landscape_cell_records_the_schedule():
    # The Fig. 4 heatmap cell (advsim.figures._tables_search.heatmap_cells): search/_run.py
    # reports bounds_for(family.template.accounting(), delta), so at the schedule.
    from advsim.search import config_from_mapping
    from advsim.search._family import build_family, paper_start

    cfg = config_from_mapping({
        "steps": 25, "noise_multiplier": 4.0, "batching": "fixed", "counts": [4],
        "canary_schedule": "only:1", "canary_sampled": False, "step_sizes": "landscape",
        "per_step": ["groups"], "starts": ["landscape", "linear"],
    })  # fmt: skip
    want = landscape(25, 4.0, 4)
    assert paper_start(cfg, "linear").accounting() == want
    assert build_family(cfg).template.accounting() == want


def test_step_sizes_are_checked():
    with pytest.raises(ValueError, match=r"step_sizes must have one entry per step \(steps = 3\)"):
        Accounting(3, 1.0, 1.0, (1,), step_sizes=(1.0, 0.5))
    with pytest.raises(ValueError, match=r"step_sizes must be finite and in \(0, inf\).*step 2"):
        Accounting(3, 1.0, 1.0, (1,), step_sizes=(1.0, 0.0, 0.5))
    with pytest.raises(ValueError, match=r"step_sizes\[2\] = nan"):
        Accounting(3, 1.0, 1.0, (1,), step_sizes=(1.0, 0.5, math.nan))
    with pytest.raises(TypeError, match="step_sizes must be a sequence"):
        Accounting(3, 1.0, 1.0, (1,), step_sizes=("a", 1, 2))


def test_to_dict_records_the_schedule_compactly():
    assert landscape(5, 1.0, 2).to_dict()["step_sizes"] == [1.0, 0.5, 0.5, 0.5, 0.5]
    assert landscape(100, 1.0, 4).to_dict()["step_sizes"] == "100 step sizes: 1 x1, 0.25 x99"
    ramp = Accounting(100, 1.0, 1.0, (1,), step_sizes=np.linspace(0.01, 1.0, 100))
    assert ramp.to_dict()["step_sizes"] == "100 step sizes in [0.01, 1]"
    assert Accounting(3, 1.0, 1.0, (1,)).to_dict()["step_sizes"] is None


# ---------------------------------------------------------------------------------------
# The landscape's schedule: X = 1, a Gaussian pair


@pytest.mark.parametrize(("sigma", "b"), [(4.0, 4), (1.0, 16), (8.0, 2)])
def test_landscape_schedule_is_gaussian(sigma, b):
    acc = landscape(25, sigma, b)
    mu = landscape_mu(25, sigma, b)
    eps = heuristic_epsilon(1e-5, acc)
    assert eps == pytest.approx(gdp_epsilon(1e-5, mu), rel=1e-9)
    assert bounds_for(acc, 1e-5)["heuristic"] == eps
    assert heuristic_delta(eps, acc) == pytest.approx(1e-5, rel=1e-8)
    # ignoring the schedule (one rate, canary at 1 of 25 steps) is far off
    constant = heuristic_epsilon(1e-5, 25, 1.0, sigma, canary_steps=1)
    assert eps > 2.0 * constant


@pytest.mark.slow  # ~10 s alone (the exact engine's grids at two refinements)
def test_landscape_schedule_equals_the_exact_engine():
    # sigma = 4, B = 4, T = 25: eps = 0.5613 (the brief's number); constant rate 0.1600
    from advsim.exact import last_iterate_epsilon

    mech = PiecewiseConstruction.linear_loss(
        25, 1.0, 4.0, step_sizes=[1.0] + [0.25] * 24,
        canary_schedule=CanarySchedule.only(1, sampled=False), batching="fixed",
    )  # fmt: skip
    exact = last_iterate_epsilon(mech, 1e-5, refinements=2)
    eps = heuristic_epsilon(1e-5, mech.accounting())
    assert abs(eps - exact.epsilon) <= max(exact.error, 1e-6)
    assert eps == pytest.approx(0.5613, abs=1e-4)
    assert heuristic_epsilon(1e-5, 25, 1.0, 4.0, canary_steps=1) == pytest.approx(0.1600, abs=1e-4)
    assert abs(heuristic_epsilon(1e-5, 25, 1.0, 4.0, canary_steps=1) - exact.epsilon) > 0.3


# ---------------------------------------------------------------------------------------
# Poisson sampling at a schedule: against brute-force enumeration


POISSON = [
    # two step-size groups, canary at every step
    Accounting(7, 0.3, 0.9, tuple(range(1, 8)), step_sizes=(1.0,) * 3 + (0.5,) * 4),
    # three groups whose sums coincide (0.5 + 0.5 = 1, 4 x 0.25 = 1), the canary in 5 of 8
    # steps, the noise of all 8
    Accounting(8, 0.2, 0.6, (1, 2, 4, 5, 7), step_sizes=(1, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 2)),
]


@pytest.mark.parametrize("acc", POISSON)
@pytest.mark.parametrize("delta", [1e-5, 1e-2])
def test_poisson_schedule_epsilon_against_enumeration(acc, delta):
    xs, ps, scale = enumerated(acc)
    eps = heuristic_epsilon(delta, acc)
    with mp.workdps(40):
        want = float(MixtureOracle(xs, ps, scale).epsilon(delta, eps))
    assert eps == pytest.approx(want, rel=RTOL)
    # and the schedule matters
    n = acc.num_canary_steps
    constant = heuristic_epsilon(delta, acc.steps, acc.sampling_prob, acc.noise_multiplier,
                                 canary_steps=n)  # fmt: skip
    assert abs(eps - constant) > 0.01 * eps


@pytest.mark.parametrize("acc", POISSON)
@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_poisson_schedule_delta_against_enumeration(acc, eps):
    xs, ps, scale = enumerated(acc)
    with mp.workdps(40):
        want = float(MixtureOracle(xs, ps, scale).delta(eps))
    assert heuristic_delta(eps, acc) == pytest.approx(want, rel=RTOL)


@pytest.mark.parametrize("acc", POISSON)
def test_linear_loss_tradeoff_at_a_schedule(acc):
    xs, ps, scale = enumerated(acc)
    alpha = np.array([1e-4, 1e-2, 0.1, 0.5])
    x = np.array([float(v) for v in xs])
    p = np.array([float(v) for v in ps])
    want = np.sum(p * ndtr(ndtri(1.0 - alpha)[:, None] - x / float(scale)), axis=1)
    np.testing.assert_allclose(linear_loss_tradeoff(alpha, acc), want, rtol=1e-9)


@pytest.mark.parametrize("acc", [*POISSON, landscape(25, 4.0, 4)])
def test_lower_curve_at_a_schedule_is_below_the_exact_curve(acc):
    xs, ps, scale = enumerated(acc)
    x = np.array([float(v) for v in xs])
    p = np.array([float(v) for v in ps])
    alpha = np.concatenate([np.geomspace(1e-8, 1e-2, 30), np.linspace(0.01, 0.99, 60)])
    lower = heuristic_curve_lower(acc)(alpha)
    # below the Neyman-Pearson curve of "canary out" against "canary in" (one order)
    neyman_pearson = np.sum(p * ndtr(ndtri(1.0 - alpha)[:, None] - x / float(scale)), axis=1)
    assert np.all(lower <= neyman_pearson)
    # and just below the curve of the enumerated law's privacy profile (both orders,
    # Proposition 2.12 of arXiv:1905.02383) on the same epsilons, unrounded
    deltas = [mixture_delta(e, x, p, float(scale)) for e in EPS_GRID]
    profile = TradeoffCurve.from_profile(EPS_GRID, np.clip(deltas, 0.0, 1.0))(alpha)
    assert np.all(lower <= profile)
    assert np.max(profile - lower) < 1e-5


def test_lower_curve_at_the_landscape_schedule_matches_gdp():
    mu = landscape_mu(25, 4.0, 4)
    alpha = np.linspace(0.001, 0.999, 200)
    lower = heuristic_curve_lower(landscape(25, 4.0, 4))(alpha)
    gdp = gdp_curve_lower(mu)(alpha)
    assert np.all(lower <= gdp + 1e-9)
    assert np.max(gdp - lower) < 1e-3


def test_certify_heuristic_at_a_schedule():
    # Scores of a leakier run: the landscape pair at sigma = 2 (mu = 0.316), audited
    # against the run's claimed sigma = 4 (mu = 0.158): certified, with the index the
    # heuristic at the schedule.
    acc = landscape(25, 4.0, 4)
    s = 1.0 / landscape_mu(25, 2.0, 4)
    rng = np.random.default_rng(0)
    scores = Scores(rng.normal(1.0, s, 200_000), rng.normal(0.0, s, 200_000))
    cert = certify_violation(scores, "heuristic", acc, delta=1e-5)
    assert cert.certified
    assert 1.9 < cert.sigma_star < 4.0
    want = heuristic_epsilon(1e-5, dataclasses.replace(acc, noise_multiplier=cert.sigma_star))
    assert cert.eps_equivalent == pytest.approx(want, rel=1e-12)
    # at the constant rate the same scores would be judged against a far smaller epsilon
    assert heuristic_epsilon(1e-5, 25, 1.0, cert.sigma_star, canary_steps=1) < 0.5 * want


# ---------------------------------------------------------------------------------------
# Composition and full batch ignore a schedule; what cannot take one refuses it


def test_composition_and_full_batch_do_not_depend_on_the_schedule():
    acc = Accounting(20, 0.1, 1.2, tuple(range(1, 21)), step_sizes=(1.0,) * 10 + (0.1,) * 10)
    plain = dataclasses.replace(acc, step_sizes=None)
    assert composition_epsilon(1e-5, acc) == composition_epsilon(1e-5, plain)
    assert full_batch_epsilon(1e-5, acc) == full_batch_epsilon(1e-5, plain)
    b = bounds_for(acc, 1e-5)
    assert b["composition"] == composition_epsilon(1e-5, plain)
    assert b["heuristic"] != heuristic_epsilon(1e-5, plain)


def test_sweep_coarse_grid_bounds_read_the_schedule():
    from advsim.sweep._runner import _bounds_cell

    mech = ThresholdLandscape(25, 4.0, 4)
    config = types.SimpleNamespace(exact=False)
    row = _bounds_cell(config, mech, {"delta": 1e-5, "composition_discretization": 1e-3}, False)
    assert row["heuristic"] == pytest.approx(gdp_epsilon(1e-5, landscape_mu(25, 4.0, 4)))


def test_refusals_name_the_schedule():
    acc = landscape(25, 4.0, 4)
    with pytest.raises(ValueError, match=r"learning-rate schedule.*step_sizes = \(1, 0.25"):
        run_parameters(acc, bound="some bound")
    with pytest.raises(ValueError, match="heuristic_epsilon_max_over_steps.*learning-rate sch"):
        heuristic_epsilon_max_over_steps(1e-5, acc, 1.0, 4.0)
    rng = np.random.default_rng(0)
    scores = Scores(rng.normal(1.0, 1.0, 100), rng.normal(0.0, 1.0, 100))
    with pytest.raises(ValueError, match="heuristic_max_over_steps.*learning-rate schedule"):
        certify_violation(scores, "heuristic_max_over_steps", acc)
    with pytest.raises(ValueError, match="'family' audit.*learning-rate schedule.*step_sizes"):
        HeuristicFamilyAudit()(scores, delta=1e-5, accounting=acc)


def test_too_many_atoms_is_refused_by_name():
    # 30 distinct step sizes 1 + 2^-i, each a Bernoulli(1/2): 2^30 sums, no two equal.
    t = 30
    sizes = 1.0 + 2.0 ** -np.arange(1, t + 1)
    acc = Accounting(t, 0.5, 1.0, tuple(range(1, t + 1)), step_sizes=sizes)
    too_many = rf"learning-rate schedule.*more than MAX_ATOMS = {MAX_ATOMS}"
    with pytest.raises(ValueError, match=too_many):
        heuristic_epsilon(1e-5, acc)
    with pytest.raises(ValueError, match="advsim.exact.last_iterate_epsilon"):
        heuristic_curve_lower(acc)
    # a few distinct sizes are cheap: two groups of 1000 Poisson steps each
    two = Accounting(2000, 0.01, 1.0, tuple(range(1, 2001)),
                     step_sizes=(1.0,) * 1000 + (0.3,) * 1000)  # fmt: skip
    assert schedule_atoms(two).x.size < 10**5

"""The gradient-crafting adversaries of arXiv:2405.14457 on `GradientCanary`.

Where the expected values come from:

- Zero other gradients, canary inserted deterministically at the n = T / k steps
  k, 2k, ..., T (Algorithm 4 there): the biased coordinate's score is
  eta (n C + N(0, T sigma^2 C^2)) in and eta N(0, T sigma^2 C^2) out, so the last model is
  exactly mu_last = n / (sqrt(T) sigma)-GDP (eps from Corollary 2.13 of arXiv:1905.02383,
  `gdp_epsilon`), and composition over the n insertion steps is sqrt(n)/sigma-GDP
  (dp-accounting's PLD in `composition_epsilon`). Soundness: the GDP audit's eps_lower
  (Clopper-Pearson 95%, held-out threshold) and the assumption-free eps_delta audit's are
  <= the exact eps (hence <= composition). Tightness: GDP eps_lower >= 75% of the exact
  eps at 20k runs per world (measured 85-95%). For k = 5 the exact eps is below
  composition, so the audit is too: k = 1 matches composition, k > 1 falls below it.
- `RandomDirection` with `statistic="projection"` and zero data: the projection of an
  isotropic Gaussian on a unit u is the same law as one coordinate, so it audits the same
  mu as `BiasedCoordinate` (same tolerance).
- Algorithm 3's statistic in closed form: noiseless, fixed batch, constant ("gaussian")
  gradients g_i: theta_t - theta_{t-1} = -eta sum_i c_i g_i every step, so
  PerStep S_j = sqrt(r T) eta |sum_i c_i g_ij| and FinalModel S_j = r T eta |sum_i c_i g_ij|.
  Noisy, zero data: S_j^2 = eta^2 sigma^2 C^2 chi^2_{r T}.
- On logistic data whose feature scales differ by 100x, the least-moved coordinate is the
  one with the smallest feature scale (its gradients are scale * bounded residuals), and
  its audit beats the coordinate with the largest scale (where the data's curvature
  contracts the canary's push).
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import advsim
from advsim import CanarySchedule
from advsim.adversaries import BiasedCoordinate, RandomDirection, SimulatedBiasedDimension
from advsim.audits import AssumptionRejectedWarning, audit
from advsim.bounds import composition_epsilon, gdp_epsilon
from advsim.mechanisms import GradientCanary, LinearProcess

N_INSERT, MU_COMP, DELTA = 10, 1.5, 1e-5
SIGMA = math.sqrt(N_INSERT) / MU_COMP  # composition over the 10 insertions is 1.5-GDP
TRIALS = 20_000


def _zero_data(k: int, dim: int = 2) -> GradientCanary:
    return GradientCanary(
        N_INSERT * k,
        0.1,
        SIGMA,
        learning_rate=0.1,
        dim=dim,
        canary_schedule=CanarySchedule.every(k, first=k, sampled=False),
    )


def _simulate(mech, adversary, trials=TRIALS, key=0):
    crafted = adversary.craft(mech)
    chunk = advsim.block_size(crafted) * len(jax.devices())
    return advsim.simulate(mech, adversary, trials, key, chunk_size=chunk * 8)


@pytest.mark.parametrize("k", [1, 5])
def test_biased_coordinate_gdp_audit_is_sound_and_tight(k):
    mech = _zero_data(k)
    steps = mech.steps
    exact = gdp_epsilon(DELTA, N_INSERT / (math.sqrt(steps) * SIGMA))
    comp = composition_epsilon(DELTA, steps, 1.0, SIGMA, canary_steps=N_INSERT)
    scores = _simulate(mech, BiasedCoordinate(1), key=k)
    gdp = audit(scores, "gdp", delta=DELTA)
    assert gdp.eps_lower <= exact <= comp * (1 + 1e-3)
    assert gdp.eps_lower >= 0.75 * exact, (gdp.eps_lower, exact)
    free = audit(scores, "eps_delta", delta=DELTA)
    assert free.eps_lower <= exact
    if k == 1:
        assert exact == pytest.approx(comp, rel=1e-3)  # k = 1 matches composition
    else:
        # mu_last / mu_comp = sqrt(n / T) = 1 / sqrt(k): the audit falls below composition.
        assert gdp.eps_lower < exact < 0.6 * comp


def test_random_direction_projection_audits_like_a_coordinate():
    mech = _zero_data(1, dim=3)
    exact = gdp_epsilon(DELTA, MU_COMP)
    proj = audit(_simulate(mech, RandomDirection(3, "projection"), key=11), "gdp", delta=DELTA)
    assert 0.75 * exact <= proj.eps_lower <= exact
    cos = _simulate(mech, RandomDirection(3, "cosine"), 5_000, key=12)
    # The cosine is not a Gaussian statistic: the GDP audit's held-out check says so.
    with pytest.warns(AssumptionRejectedWarning):
        r = audit(cos, "gdp", delta=DELTA)
    assert 0 < r.eps_lower <= exact and r.assumption_rejected


def test_random_direction_is_seeded_unit_vector():
    a, b = RandomDirection(5).direction(7), RandomDirection(5).direction(7)
    np.testing.assert_array_equal(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, rel=1e-6)
    assert not np.allclose(a, RandomDirection(6).direction(7))
    crafted = RandomDirection(5).craft(_zero_data(1, dim=7))
    np.testing.assert_allclose(crafted.canary_direction, a, rtol=1e-6)


def test_random_coordinate_is_seeded_and_in_range():
    picks = [int(BiasedCoordinate.random(4, seed=s).coordinate) for s in range(40)]
    assert set(picks) == {0, 1, 2, 3}
    assert picks[3] == int(BiasedCoordinate.random(4, seed=3).coordinate)


@pytest.mark.parametrize("rank", ["per_step", "final_model"])
def test_noiseless_statistic_closed_form(rank):
    steps, runs, lr = 6, 3, 0.05
    mech = GradientCanary(
        steps,
        0.1,
        1.0,
        learning_rate=lr,
        dim=4,
        data="gaussian",
        num_examples=9,
        copies=3,
        batching="fixed",
    )
    drift = lr * np.abs(3 * mech.features.astype(np.float64).sum(0))
    expected = math.sqrt(runs * steps) * drift if rank == "per_step" else runs * steps * drift
    adv = SimulatedBiasedDimension("noiseless", rank, runs=runs)
    np.testing.assert_allclose(adv.statistic(mech), expected, rtol=1e-4)
    assert adv.select(mech) == int(np.argmin(drift))


def test_noisy_statistic_zero_data_is_chi_square():
    steps, runs, lr, sigma = 50, 8, 0.1, 2.0
    mech = GradientCanary(steps, 0.1, sigma, learning_rate=lr, dim=20)
    s2 = SimulatedBiasedDimension("noisy", "per_step", runs=runs).statistic(mech) ** 2
    # S_j^2 / (eta sigma C)^2 ~ chi^2 with r T = 400 degrees of freedom, independent over j.
    x = s2 / (lr * sigma) ** 2
    assert abs(x.mean() - runs * steps) <= 5 * math.sqrt(2 * runs * steps / x.size)


@pytest.mark.slow
def test_simulated_dimension_picks_the_quiet_feature_and_beats_the_loud_one():
    n, sigma = 20, math.sqrt(20) / 2.0
    mech = GradientCanary(
        n,
        0.1,
        sigma,
        learning_rate=0.05,
        dim=6,
        data="logistic",
        num_examples=16,
        copies=8,
        batching="fixed",
        data_seed=2,
    )
    # |gradient_ij| <= |x_ij| (residuals are in [-1, 1]): the column norms bound how much
    # the data can move each coordinate.
    scales = np.linalg.norm(mech.features, axis=0)
    quiet, loud = set(np.argsort(scales)[:2].tolist()), int(np.argmax(scales))
    for rank in ("per_step", "final_model"):
        assert SimulatedBiasedDimension("noiseless", rank).select(mech) in quiet, rank
    adv = SimulatedBiasedDimension()
    picked = audit(_simulate(mech, adv, 10_000, key=21), "gdp", delta=DELTA)
    # The loud coordinate carries the data's gradients: its scores are not Gaussian, and
    # the held-out check says so (the binned test, p ~ 1e-24 at this seed).
    with pytest.warns(AssumptionRejectedWarning, match="binned likelihood-ratio test rejects"):
        loud_res = audit(
            _simulate(mech, BiasedCoordinate(loud), 10_000, key=22), "gdp", delta=DELTA
        )
    exact_comp = gdp_epsilon(DELTA, 2.0)
    assert picked.eps_lower <= exact_comp
    assert picked.eps_lower >= 0.75 * exact_comp  # the quiet coordinate is almost data-free
    assert loud_res.eps_lower < 0.8 * picked.eps_lower, (loud_res.eps_lower, picked.eps_lower)


def test_adversaries_refuse_bad_input():
    with pytest.raises(ValueError, match="coordinate"):
        BiasedCoordinate(-1)
    with pytest.raises(ValueError, match=r"coordinate must be in \[0, 1\]"):
        BiasedCoordinate(2).craft(_zero_data(1, dim=2))
    with pytest.raises(ValueError, match="statistic"):
        RandomDirection(0, "angle")
    with pytest.raises(ValueError, match="simulation"):
        SimulatedBiasedDimension("exact")
    with pytest.raises(ValueError, match="rank"):
        SimulatedBiasedDimension(rank="median")
    with pytest.raises(ValueError, match="runs"):
        SimulatedBiasedDimension(runs=0)
    with pytest.raises(ValueError, match="seed"):
        RandomDirection(-1)
    with pytest.raises(TypeError, match="GradientCanary"):
        RandomDirection(0).craft(LinearProcess(5, 0.1, 1.0))


@pytest.mark.slow  # 4 s: two sign checks at 20000 runs per world
def test_logistic_data_overturn_the_push_along_coordinate_3():
    # The sign check is right to fail this pair (BiasedCoordinate's docstring): the
    # logistic data overshoot along coordinate 3, so its in-world displacement is lower.
    # Coordinate 0, which the data move less, passes.
    from advsim.testing import check_adversary

    mech = GradientCanary.contract_examples()["logistic"]
    with pytest.raises(AssertionError, match="canary-in scores are below the canary-out"):
        check_adversary(BiasedCoordinate(3), mech, checks=["sign"], trials=20_000)
    check_adversary(BiasedCoordinate(0), mech, checks=["sign"], trials=20_000)

"""Calibration of sigma to a composition epsilon for one or several horizons
(advsim/bounds/_calibrate.py), and the PLD composition it reads (_composition.py).

References, none of them the code under test:

- dp_accounting's `PLDAccountant` composing `SelfComposedDpEvent(PoissonSampledDpEvent(q,
  GaussianDpEvent(sigma)), n)`, called directly: its PLD (compared with ==) and its
  `get_epsilon` (compared with ==), against `_composed_pld` and `_pld_epsilon_for_delta`,
  which do its loops on arrays;
- the contract of a calibration, literally: eps(sigma) <= target < eps(sigma - tol), both
  epsilons the accountant's own;
- `calibrate_noise_multiplier` per T (the search a sweep cell runs on its own), against
  `calibrate_noise_multipliers` for several T at once.
"""

import numpy as np
import pytest

import advsim.bounds._calibrate as cal_mod
import advsim.bounds._composition as comp_mod
from advsim import Accounting, bounds
from advsim.bounds import (
    bounds_for,
    calibrate_noise_multiplier,
    calibrate_noise_multipliers,
    composition_epsilon,
)
from advsim.bounds._pld_fast import composed_pld
from advsim.sweep import parse_config, run_sweep
from advsim.sweep._runner import _add_shared_calibration, _calibrate_up_front

from ._dp_accounting import accountant, assert_same_pmf

# advsim audit's cells: T = 1..1000 at q = 0.01, composition eps = 8 at delta = 1e-5.
AUDIT_STEPS = [1, 5, 10, 50, 100, 500, 1000]


def assert_same_as_accountant(q, sigma, n, vdi, deltas=(1e-5, 1e-3, 0.3, 1e-12)):
    acc = accountant(q, sigma, n, vdi)
    pld = comp_mod._composed_pld(q, sigma, n, vdi)
    assert_same_pmf(pld._pmf_remove, acc._pld._pmf_remove)
    assert_same_pmf(pld._pmf_add, acc._pld._pmf_add)
    for delta in deltas:
        assert comp_mod._pld_epsilon_for_delta(pld, delta) == acc.get_epsilon(delta)


# (q, sigma, n, vdi): the audit's end points on the 1e-3 grid, dense and sparse (<= 1000
# points) grids, q near 0 and 1, one step and many.
@pytest.mark.parametrize(
    ("q", "sigma", "n", "vdi"),
    [
        (0.01, 0.586, 1000, 1e-3),
        (0.01, 0.3426, 1, 1e-3),
        (0.1, 1.0, 37, 1e-2),
        (0.5, 3.0, 3, 1e-2),
        (0.99, 20.0, 2, 1e-2),
        (0.001, 0.5, 3000, 1e-2),
        pytest.param(0.01, 0.5862603, 1000, 1e-4, marks=pytest.mark.slow),
        pytest.param(0.01, 0.3425589, 1, 1e-4, marks=pytest.mark.slow),
    ],
)
def test_composition_is_the_accountants_bit_for_bit(q, sigma, n, vdi):
    assert_same_as_accountant(q, sigma, n, vdi)


def test_every_fallback_gives_the_same_floats(monkeypatch):
    # Every Chernoff bound through scipy's logsumexp (as dp_accounting computes it), every
    # stopping test near a tie through math.log, and the epsilon read in blocks of 5
    # losses: still the accountant's floats.
    monkeypatch.setattr(comp_mod, "_LOG_MGF_ERROR", 1e3)
    monkeypatch.setattr(comp_mod, "_LOG_MARGIN", 1e-3)
    monkeypatch.setattr(comp_mod, "_READ_BLOCK", 5)
    assert_same_as_accountant(0.1, 0.8, 10, 1e-2)


def test_delta_below_the_infinite_mass_is_refused():
    # The accountant keeps >= 1e-15 at infinite loss: its epsilon is inf, and so is ours.
    pld = comp_mod._composed_pld(0.1, 1.0, 10, 1e-2)
    assert comp_mod._pld_epsilon_for_delta(pld, 1e-300) == np.inf
    with pytest.raises(ValueError, match=r"delta=1e-300 is out of.*delta must be in \("):
        calibrate_noise_multipliers(1.0, 1e-300, [10, 20], 0.1)


def reference_epsilon(delta, q, sigma, n, vdi, full=True):
    """dp_accounting's epsilon: the accountant itself (`full`), or dp_accounting's own
    composition and reading (`PLD.self_compose`, `identity().compose`,
    `get_epsilon_for_delta`, through `_pld_fast.composed_pld`) of the step PLD built as in
    `from_gaussian_mechanism` (bit for bit: test_bounds_pld_fast.py), 4 times faster."""
    if full:
        return accountant(q, sigma, n, vdi).get_epsilon(delta)
    return composed_pld(q, sigma, n, vdi).get_epsilon_for_delta(delta)


def assert_contract(target, delta, q, sigma, n, vdi, tol=1e-6, full=True):
    at, below = (reference_epsilon(delta, q, s, n, vdi, full) for s in (sigma, sigma - tol))
    assert at <= target < below
    assert composition_epsilon(delta, n, q, sigma, value_discretization_interval=vdi) == at


def calibrate_each(target, delta, steps, q, vdi):
    """calibrate_noise_multiplier per T with no calibration cached (each T its own search)."""
    comp_mod._CALIBRATED.clear()
    return [
        calibrate_noise_multiplier(target, delta, t, q, value_discretization_interval=vdi)
        for t in steps
    ]


def test_the_audits_end_steps_at_once_on_the_1e3_grid():
    # Four of the audit's seven T on a 10 times coarser grid (the seven on its own grid:
    # the slow test below).
    steps, target, delta, q, vdi = [1, 10, 100, 1000], 8.0, 1e-5, 0.01, 1e-3
    sigmas = calibrate_noise_multipliers(target, delta, steps, q, value_discretization_interval=vdi)
    assert sigmas == sorted(sigmas)  # more steps, more noise
    for t, sigma in zip(steps, sigmas, strict=True):
        assert_contract(target, delta, q, sigma, t, vdi, full=t == 1000)
    assert calibrate_each(target, delta, steps, q, vdi) == sigmas


@pytest.mark.slow
def test_the_audits_seven_steps_at_once():
    # What `advsim audit` asks for: the default grid 1e-4.
    target, delta, q, vdi = 8.0, 1e-5, 0.01, 1e-4
    sigmas = calibrate_noise_multipliers(target, delta, AUDIT_STEPS, q)
    for t, sigma in zip(AUDIT_STEPS, sigmas, strict=True):
        assert_contract(target, delta, q, sigma, t, vdi)
    # Each T's own search finds the same sigma, or one within tol (both meet the contract).
    each = calibrate_each(target, delta, AUDIT_STEPS, q, vdi)
    assert np.allclose(each, sigmas, rtol=0, atol=1e-6)


def test_the_batch_fills_the_cells_cache(monkeypatch):
    # After the batch, each cell's calibrate_noise_multiplier and bounds_for read caches:
    # no PLD is built again.
    steps, q = [2, 6], 0.1
    sigmas = calibrate_noise_multipliers(2.0, 1e-5, steps, q)
    expected = [
        reference_epsilon(1e-5, q, s, t, 1e-4, full=False)
        for t, s in zip(steps, sigmas, strict=True)
    ]

    def no_pld(*args, **kwargs):
        raise AssertionError("a PLD was built again")

    monkeypatch.setattr(comp_mod, "_composed_pld", no_pld)
    monkeypatch.setattr(comp_mod, "gaussian_pld", no_pld)
    for t, sigma, eps in zip(steps, sigmas, expected, strict=True):
        assert calibrate_noise_multiplier(2.0, 1e-5, t, q) == sigma
        acc = Accounting(
            steps=t, sampling_prob=q, noise_multiplier=sigma, canary_steps=range(1, t + 1)
        )
        assert bounds_for(acc, 1e-5)["composition"] == eps <= 2.0
    assert calibrate_noise_multipliers(2.0, 1e-5, steps[::-1], q) == sigmas[::-1]


def test_horizons_with_one_canary_count_share_a_search(monkeypatch):
    searched = []
    search = cal_mod._calibrate

    def counted(target, delta, q, n, *args):
        searched.append(n)
        return search(target, delta, q, n, *args)

    monkeypatch.setattr(cal_mod, "_calibrate", counted)
    sigmas = calibrate_noise_multipliers(
        1.0, 1e-5, [10, 20, 4], 0.2, canary_steps=[4, 4, 4], value_discretization_interval=1e-2
    )
    assert searched == [4] and sigmas[0] == sigmas[1] == sigmas[2]
    assert_contract(1.0, 1e-5, 0.2, sigmas[0], 4, 1e-2)


def test_a_failure_keeps_the_other_horizons(monkeypatch):
    search = cal_mod._calibrate

    def fail_at_3(target, delta, q, n, *args):
        if n == 3:
            raise ValueError("out of reach at n=3")
        return search(target, delta, q, n, *args)

    monkeypatch.setattr(cal_mod, "_calibrate", fail_at_3)
    with pytest.raises(ValueError, match="out of reach at n=3"):
        calibrate_noise_multipliers(1.0, 1e-5, [1, 3], 0.1, value_discretization_interval=1e-2)
    key = (1.0, 1e-5, 1, 0.1, 1, 1e-2, 1e-6)
    assert comp_mod._CALIBRATED.lookup(key)[0]


def test_q_one_is_the_closed_form_contract():
    # q = 1: sqrt(n)/sigma-GDP exactly, whose epsilon is composition_epsilon's closed form.
    sigmas = calibrate_noise_multipliers(1.5, 1e-6, [10, 40], 1.0, tol=1e-9)
    for t, sigma in zip([10, 40], sigmas, strict=True):
        assert composition_epsilon(1e-6, t, 1.0, sigma) <= 1.5
        assert composition_epsilon(1e-6, t, 1.0, sigma - 1e-9) > 1.5


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"steps": []}, ValueError, "steps must hold at least one horizon"),
        ({"steps": [3, 0]}, ValueError, r"steps\[1\] must be an integer in \[1, inf\), got 0"),
        ({"steps": 5}, TypeError, "steps must be a sequence of integers, got 5"),
        ({"steps": [3, 2.5]}, TypeError, r"steps\[1\] must be an integer, got 2.5"),
        (
            {"canary_steps": [1]},
            ValueError,
            r"canary_steps must hold one count per horizon \(2\), got 1",
        ),
        (
            {"canary_steps": [1, 5]},
            ValueError,
            r"canary_steps\[1\] must be an integer in \[1, 4\], got 5",
        ),
        ({"target_epsilon": 0.0}, ValueError, r"target_epsilon must be in \(0, inf\), got 0.0"),
        ({"delta": 1.0}, ValueError, r"delta must be in \(0, 1\), got 1.0"),
        ({"sampling_prob": 1.5}, ValueError, r"sampling_prob must be in \(0, 1\], got 1.5"),
        ({"tol": -1e-6}, ValueError, r"tol must be in \(0, inf\), got -1e-06"),
        (
            {"value_discretization_interval": 0},
            ValueError,
            r"value_discretization_interval must be in \(0, inf\)",
        ),
    ],
)
def test_invalid_inputs_name_the_parameter(kwargs, error, match):
    args = {"target_epsilon": 1.0, "delta": 1e-5, "steps": [3, 4], "sampling_prob": 0.1}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        calibrate_noise_multipliers(**args)


def test_a_sweep_calibrates_its_cells_up_front(tmp_path, monkeypatch):
    # One batched call for the cells that share target, delta and q; each cell's sigma is
    # then what its own calibrate_noise_multiplier call returns (from the cache), and its
    # calibrate_time_s holds an equal share of the batch's time.
    calls = []
    batch = bounds.calibrate_noise_multipliers

    def recorded(*args, **kwargs):
        calls.append((args, kwargs))
        return batch(*args, **kwargs)

    monkeypatch.setattr(bounds, "calibrate_noise_multipliers", recorded)
    raw = {
        "sweep": {"mode": "bounds", "delta": 1e-5, "exact": False},
        "mechanism": {"name": "linear", "sampling_prob": 0.1, "target_epsilon": 2.0},
        "grid": {"steps": [2, 6]},
    }
    rows = run_sweep(raw, tmp_path / "s", progress=False)
    assert len(calls) == 1 and calls[0][0][2] == [2, 6]
    for row in rows:
        sigma = calibrate_noise_multiplier(2.0, 1e-5, row["steps"], 0.1)
        assert row["noise_multiplier"] == sigma
    config = parse_config(raw)
    shares = _calibrate_up_front(config, config.cells(), False)
    assert sorted(shares) == sorted(c.cell_id for c in config.cells())
    assert len(set(shares.values())) == 1 and min(shares.values()) > 0
    row = {"calibrate_time_s": 0.001, "wall_time_s": 2.0, "steps": 2}
    assert _add_shared_calibration(row, 0.5) == {
        **row,
        "calibrate_time_s": 0.501,
        "wall_time_s": 2.5,
    }

"""The calibration table (audits against exact epsilons): its cap in closed form, and a
small run of its compute hook where the linear process's tradeoff row must pass."""

import dataclasses
import math

import pytest

from advsim.bounds import heuristic_epsilon
from advsim.figures import load_figure
from advsim.figures._tables_calibration import compute_calibration, eps_delta_cap


def test_cap_is_the_zero_error_clopper_pearson_bound():
    # With 0 errors in m runs the upper Clopper-Pearson bound at level a is the Beta(1, m)
    # quantile 1 - a^(1/m) (closed form), and the cap is log((1 - delta - u) / u).
    trials, confidence, delta = 10_000, 0.8, 1e-5
    m = trials - trials // 2
    for tests in (1, 2):
        u = 1 - ((1 - confidence) / (2 * tests)) ** (1 / m)
        expected = math.log((1 - delta - u) / u)
        assert eps_delta_cap(trials, confidence, delta, tests) == pytest.approx(expected, rel=1e-9)


@pytest.mark.slow
def test_compute_calibration_small(tmp_path):
    fig = load_figure("calibration", quick=True, out=tmp_path, resume=True)
    params = dict(fig.params, landscape=dict(fig.params["landscape"], batch_sizes=[16],
                  repeats={"gdp": 3}))  # fmt: skip
    params["linear"] = dict(params["linear"], trials=4000, repeats=3)
    fig = dataclasses.replace(fig, params=params)
    (landscape, linear) = compute_calibration(fig, {})["calibration"]
    assert (landscape["method"], landscape["check"]) == ("gdp", "measured")
    assert linear["truth"] == pytest.approx(heuristic_epsilon(1e-5, 10, 0.01, 0.3544))
    assert linear["check"] == "pass" and linear["repeats"] == 3
    # Rows are files in OUT/cells/: a resumed run reads them instead of auditing again.
    assert len(list((tmp_path / "cells").glob("*.json"))) == 2
    again = compute_calibration(fig, {})["calibration"]
    assert [r["wall_time_s"] for r in again] == [landscape["wall_time_s"], linear["wall_time_s"]]

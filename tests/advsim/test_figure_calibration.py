"""The calibration table (audits against exact epsilons): its cap in closed form, and a
small run of its compute hook where the linear process's tradeoff row must pass."""

import dataclasses
import math

import pytest

from advsim.bounds import gdp_epsilon, heuristic_epsilon
from advsim.figures import load_figure
from advsim.figures._tables_calibration import (
    compute_calibration,
    compute_point_estimate_bias,
    eps_delta_cap,
)


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


@pytest.mark.slow
def test_point_estimate_bias_small(tmp_path):
    fig = load_figure("point_estimate_bias", quick=True, out=tmp_path)
    gaussian, family_small = fig.params["cases"][:2]
    cases = [dict(gaussian, trials=20_000, repeats=3), dict(family_small, repeats=2)]
    fig = dataclasses.replace(fig, params=dict(fig.params, cases=cases))
    (g, f) = compute_point_estimate_bias(fig, {})["point_estimate_bias"]
    # N(1, 1) vs N(0, 1) is exactly 1-GDP: the GDP rule on raw rates is close to the truth.
    assert g["truth"] == pytest.approx(gdp_epsilon(1e-5, 1.0))
    assert g["undefined"] == 0 and 0.9 < g["ratio_median"] < 1.1
    # 2000 runs cannot show 50 errors of each kind at the family's threshold: undefined.
    assert f["truth"] == pytest.approx(2.0, abs=1e-3) and f["undefined"] == 2

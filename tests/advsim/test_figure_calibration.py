"""The calibration table (audits against exact epsilons): its cap in closed form, and a
small run of its compute hook where the linear process's tradeoff row must pass."""

import dataclasses
import math

import pytest

from advsim.audits import get_audit
from advsim.bounds import gdp_epsilon, heuristic_epsilon
from advsim.figures import CLOSED_FORM, add_labels, label_problems, load_figure
from advsim.figures._tables_calibration import (
    _rows,
    _run,
    compute_calibration,
    compute_point_estimate_bias,
    eps_delta_cap,
    linear_law_sampler,
)
from advsim.mechanisms import LinearProcess


def test_cap_is_the_zero_error_clopper_pearson_bound():
    # With 0 errors in m runs the upper Clopper-Pearson bound at level a is the Beta(1, m)
    # quantile 1 - a^(1/m) (closed form), and the cap is log((1 - delta - u) / u).
    trials, confidence, delta = 10_000, 0.8, 1e-5
    m = trials - trials // 2
    for tests in (1, 2):
        u = 1 - ((1 - confidence) / (2 * tests)) ** (1 / m)
        expected = math.log((1 - delta - u) / u)
        assert eps_delta_cap(trials, confidence, delta, tests) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("quick", [True, False])
def test_every_row_is_one_its_audit_accepts_and_the_left_out_ones_say_why(tmp_path, quick):
    """The family audit refuses a learning-rate schedule, and the landscape at B > 1 has
    one (its steps after the first are 1/B of the first): those rows are left out, by
    name, instead of stopping the figure at its first B > 1 cell."""
    fig = load_figure("calibration", quick=quick, out=tmp_path)
    rows, refused = _rows(fig.params)
    for row in rows:
        get_audit(row["method"]).context(row["accounting"])  # raises where it refuses
    land = fig.params["landscape"]
    expected = [
        (b, t) for b in land["batch_sizes"] for t in land["steps"] if b > 1
    ]  # the landscape's schedule: (1, 1/B, ..., 1/B)
    assert [line.split(" family: ")[0] for line in refused] == [
        f"landscape_B{b}_T{t}" for b, t in expected
    ]
    # the reason printed is the audit's own refusal
    assert all("not defined at a learning-rate schedule" in line for line in refused)


def test_a_rows_columns_pass_the_figures_label_check():
    """`run_figure` refuses a table whose epsilon-like columns have no label beside them;
    `calibration_full` writes every column of a row, so a row's own keys must pass
    (a boolean named like a bound, `claims_eps_delta_bound`, did not)."""
    row = dict(
        scenario="linear", sampler=lambda: linear_law_sampler(10, 0.01, 0.3544, 2000),
        accounting=LinearProcess(10, 0.01, 0.3544).accounting(), truth=2.0,
        truth_error=0.0, truth_error_kind=CLOSED_FORM, trials=2000, method="eps_delta",
        repeats=2, claim=True,
    )  # fmt: skip
    rec = _run(row, 0.8, 1e-5)
    columns = add_labels(list(rec), [rec])
    assert label_problems(columns, [{c: rec.get(c) for c in columns}]) == []


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

"""The streaming audit from `run_audit`, a sweep and `advsim audit --streaming`.

References: `run_audit(..., streaming=True)` is checked against
`advsim.streaming.audit_streaming` called directly with the same arguments (the same
runs, the same pilot, so the same numbers); the sweep's and the command's rows against
`run_audit` at the cell's seed. The case is one Gaussian step (LinearProcess, T = 1,
q = 1, sigma = 1), 20000 runs per world and a pilot of 5000: a few seconds each, most of
it compilation.
"""

import json

import pytest

from advsim.adversaries import ProjectionScore
from advsim.cli import main
from advsim.experiment import STREAMING, run_audit
from advsim.mechanisms import LinearProcess
from advsim.streaming import audit_streaming
from advsim.sweep import parse_config, run_sweep

GAUSS = LinearProcess(steps=1, sampling_prob=1.0, noise_multiplier=1.0)


def _config(**sweep) -> dict:
    return {
        "sweep": {"trials": 20000, "exact": False, **sweep},
        "mechanism": {"name": "linear", "sampling_prob": 1.0, "noise_multiplier": 1.0},
        "grid": {"steps": [1]},
    }


# --- run_audit -----------------------------------------------------------------------------------


def test_run_audit_streaming_is_audit_streaming():
    record = run_audit(GAUSS, ProjectionScore(), trials=20000, seed=3, streaming=True,
                       pilot_runs=5000)  # fmt: skip
    direct = audit_streaming(GAUSS, ProjectionScore(), 20000, 3, pilot_runs=5000)
    assert record.eps_lower == direct.eps_lower > 0
    assert (record.eps_point, record.threshold) == (direct.eps_point, direct.threshold)
    assert (record.fpr, record.fnr) == (direct.fpr, direct.fnr)
    assert record.method == "eps_delta" and record.threshold_selection == STREAMING
    assert record.rigorous and record.guarantee == "rigorous" and record.assumption == "none"
    assert record.assumption_rejected is None and record.trials == 20000
    parts = (record.compile_time_s, record.simulate_time_s, record.audit_time_s,
             record.bounds_time_s)  # fmt: skip
    assert min(parts) >= 0 and sum(parts) <= record.wall_time_s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "gdp"}, "method must be 'eps_delta' or unset, got 'gdp'"),
        ({"method": "family"}, "method must be 'eps_delta' or unset, got 'family'"),
        ({"threshold_selection": "same"}, "threshold_selection must be unset"),
        ({"strategy_options": {"threshold": 0.5}}, "takes no threshold strategy option"),
        ({"sides": "one"}, "sides must be 'two', got 'one'"),
        ({"min_count": 9}, r"min_count must be 50 \(the default\), got 9"),
        ({"audit_seed": 1}, "audit_seed must be unset, got 1"),
        ({"pilot_runs": 1}, r"pilot_runs must be an integer in \[2, trials\] = \[2, 20000\]"),
        ({"pilot_runs": 20001}, r"in \[2, trials\] = \[2, 20000\] .*got 20001"),
        ({"pilot_runs": 5000.0}, "got 5000.0"),
    ],
)  # fmt: skip
def test_run_audit_streaming_refuses_what_it_does_not_take(kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        run_audit(GAUSS, ProjectionScore(), trials=20000, streaming=True, **kwargs)
    assert "\n" not in str(err.value)


def test_run_audit_refuses_pilot_runs_without_streaming():
    with pytest.raises(ValueError, match="pilot_runs applies to streaming audits only"):
        run_audit(GAUSS, ProjectionScore(), trials=20000, pilot_runs=5000)


# --- sweeps --------------------------------------------------------------------------------------


def test_cells_of_configs_without_streaming_keep_their_ids():
    """The pinned ids of a config with `threshold_selection = "split"`, computed without
    the streaming keys: `streaming = false` is that config. Under the default strategy,
    "by_sample_size", the cells are others (their ids pinned too)."""
    config = {
        "sweep": {"trials": 20000, "exact": False, "sides": "one", "method": "eps_delta"},
        "mechanism": {"name": "linear", "sampling_prob": 1.0, "noise_multiplier": 1.0},
        "grid": {"steps": [1, 2]},
    }
    assert [c.cell_id for c in parse_config(config).cells()] == [
        "fdc81c4ed51f4d12", "ca0a2a13b5e0d417",
    ]  # fmt: skip
    config["sweep"]["threshold_selection"] = "split"
    ids = ["d20d10fa1959ba0c", "fde358a55277d060"]
    assert [c.cell_id for c in parse_config(config).cells()] == ids
    config["sweep"]["streaming"] = False
    parsed = parse_config(config)
    assert [c.cell_id for c in parsed.cells()] == ids
    assert "streaming" not in parsed.to_dict()["sweep"]


def test_a_streaming_config_s_cells():
    cells = parse_config(_config(streaming=True)).cells()
    params = cells[0].params
    assert params["streaming"] is True and params["method"] == "eps_delta"
    assert "threshold_selection" not in params and "pilot_runs" not in params
    # "split" given is the same cell; the pilot's size may be swept.
    assert parse_config(_config(streaming=True, threshold_selection="split")).cells() == cells
    swept = _config(streaming=True)
    swept["grid"]["pilot_runs"] = [5000, 10000]
    assert [c.params["pilot_runs"] for c in parse_config(swept).cells()] == [5000, 10000]


@pytest.mark.parametrize(
    ("sweep", "grid", "message"),
    [
        ({"streaming": True, "method": "gdp"}, {},
         "method must be 'eps_delta' or unset, got 'gdp'"),
        ({"streaming": True, "method": "tradeoff"}, {}, "got 'tradeoff'"),
        ({"streaming": True, "method": "family"}, {}, "got 'family'"),
        ({"streaming": True, "threshold_selection": "same"}, {},
         "threshold_selection must be unset .*got 'same'"),
        ({"streaming": True, "threshold_selection": "projected_split",
          "selection_fraction": 0.3}, {}, "got 'projected_split'"),
        ({"streaming": True, "selection_fraction": 0.3}, {},
         "takes no threshold strategy option .*selection_fraction=0.3"),
        ({"streaming": True, "pilot_runs": 0}, {},
         r"sweep.pilot_runs: pilot_runs must be an integer in \[2, trials\].*got 0"),
        ({"streaming": True, "pilot_runs": 20001}, {},
         r"pilot_runs must be an integer in \[2, trials\] = \[2, 20000\].*got 20001"),
        ({"streaming": True, "pilot_runs": 2.5}, {}, "pilot_runs must be an integer"),
        ({"streaming": True, "sides": "one"}, {}, "sides must be 'two'"),
        ({"streaming": "yes"}, {}, "sweep.streaming: streaming must be true or false"),
        ({"pilot_runs": 5000}, {}, "pilot_runs applies to streaming audits only"),
        ({}, {"streaming": [False, True]}, "streaming cannot vary per cell"),
        ({"streaming": True}, {"threshold_selection": ["split", "same"]},
         "threshold_selection cannot be swept with streaming = true"),
        ({"streaming": True}, {"method": ["eps_delta", "gdp"]}, "got 'gdp'"),
    ],
)  # fmt: skip
def test_a_streaming_config_refuses_what_it_does_not_take(sweep, grid, message):
    config = _config(**sweep)
    config["grid"].update(grid)
    with pytest.raises(ValueError, match=message) as err:
        parse_config(config)
    assert "\n" not in str(err.value)


def test_a_streaming_sweep_runs_and_stores_a_streaming_record(tmp_path):
    rows = run_sweep(_config(streaming=True, pilot_runs=5000), tmp_path / "s", progress=False)
    (row,) = rows
    assert row["threshold_selection"] == "streaming" and row["streaming"] is True
    assert row["method"] == "eps_delta" and row["guarantee"] == "rigorous"
    assert row["pilot_runs"] == 5000
    ref = run_audit(GAUSS, ProjectionScore(), trials=20000, seed=row["seed"], streaming=True,
                    pilot_runs=5000)  # fmt: skip
    assert row["eps_lower"] == ref.eps_lower > 0
    (cell,) = (tmp_path / "s" / "cells").glob("*.json")
    stored = json.loads(cell.read_text())
    assert stored["params"]["streaming"] is True
    assert stored["result"]["threshold_selection"] == "streaming"


# --- advsim audit --streaming --------------------------------------------------------------------


def test_audit_streaming_prints_a_row(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ("audit --streaming --pilot-runs 5000 --trials 20000 --steps 1 --sampling-prob 1 "
            "--noise-multiplier 1 --no-exact --quiet").split()  # fmt: skip
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "streaming eps_delta audit (a pilot of 5,000 runs per world plans the tests)" in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("     1 ")]
    assert line.rstrip().endswith("rigorous")
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    assert row["threshold_selection"] == "streaming" and row["seed"] == 0
    ref = run_audit(GAUSS, ProjectionScore(), trials=20000, seed=0, streaming=True,
                    pilot_runs=5000)  # fmt: skip
    assert row["eps_lower"] == ref.eps_lower and f"{ref.eps_lower:.3f}" in line


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--streaming", "--pilot-runs", "0"],
         "argument --pilot-runs: must be a positive integer, got '0'"),
        (["--streaming", "--pilot-runs", "1"],
         "--streaming: --pilot-runs must be an integer in [2, --trials] = [2, 20000]"),
        (["--streaming", "--pilot-runs", "20001"], "[2, --trials] = [2, 20000]"),
        (["--streaming", "--method", "gdp"],
         "--streaming: a streaming audit's bound is assumption-free (eps_delta, held out by "
         "construction): --method must be 'eps_delta' or unset, got 'gdp'"),
        (["--streaming", "--method", "family"], "--method must be 'eps_delta'"),
        (["--streaming", "--threshold", "same"], "--threshold must be unset"),
        (["--streaming", "--sides", "one"], "--sides must be 'two', got 'one'"),
        (["--streaming", "--min-count", "9"], "--min-count must be 50"),
        (["--streaming", "--audit-seed", "4"], "--audit-seed must be unset"),
        (["--pilot-runs", "5000"], "--pilot-runs applies to --streaming only"),
    ],
)  # fmt: skip
def test_audit_streaming_errors_are_one_line_before_running(tmp_path, capsys, flags, message):
    out = tmp_path / "run"
    assert main(["audit", "--steps", "1", "--trials", "20000", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_audit_help_says_what_streaming_does(capsys):
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--streaming" in text and "--pilot-runs N" in text
    assert "plans up to 6 threshold tests" in text and "memory independent of --trials" in text
    assert "advsim audit --streaming --trials 100000000 --steps 25" in text

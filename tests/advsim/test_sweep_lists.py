"""The sweep's lists are derived from their one source: its threshold selections and their
options from `advsim.audits.THRESHOLD_SELECTIONS`, its columns from `AuditRecord`'s fields,
the default audit method from each cell's built mechanism; and every strategy runs in a sweep."""

import dataclasses
import json
import textwrap

import pytest

from advsim.audits import AUDIT_METHODS, THRESHOLD_SELECTIONS
from advsim.experiment import AuditRecord, default_audit_method, record_columns
from advsim.mechanisms import LinearProcess, ThresholdLandscape
from advsim.plotting import _NOT_PARAMS
from advsim.sweep import (
    AUDIT_COLUMNS,
    BOUNDS_COLUMNS,
    TIME_COLUMNS,
    load_config,
    parse_config,
    run_sweep,
)
from advsim.sweep._config import STRATEGY_KEYS, strategy_options


def _config(**sweep) -> dict:
    return {
        "sweep": {"trials": 200, "delta": 1e-3, **sweep},
        "mechanism": {"name": "linear", "steps": 2, "noise_multiplier": 1.0},
        "grid": {"sampling_prob": [0.5]},
    }


def test_columns_are_the_records_fields_in_order():
    fields = tuple(f.name for f in dataclasses.fields(AuditRecord))
    assert AUDIT_COLUMNS == fields == record_columns()
    assert TIME_COLUMNS == tuple(c for c in fields if c.endswith("_time_s") and c != "wall_time_s")
    assert BOUNDS_COLUMNS == tuple(c for c in fields if c in BOUNDS_COLUMNS)
    assert set(record_columns("parameter")) | set(record_columns("result")) | set(
        TIME_COLUMNS
    ) == set(fields)


def test_every_non_parameter_column_is_no_parameter_for_the_heatmap():
    results = set(AUDIT_COLUMNS) - set(record_columns("parameter"))
    assert results <= _NOT_PARAMS and {"cell", "cell_id"} <= _NOT_PARAMS
    assert not set(record_columns("parameter")) & _NOT_PARAMS
    with pytest.raises(ValueError, match="role must be"):
        record_columns("params")


def test_threshold_selection_and_its_options_come_from_the_audits():
    options = {o for opts in THRESHOLD_SELECTIONS.values() for o in opts}
    assert set(STRATEGY_KEYS.values()) == options
    assert STRATEGY_KEYS["audit_threshold"] == "threshold"  # a mechanism may take `threshold`
    for name in THRESHOLD_SELECTIONS:
        takes = THRESHOLD_SELECTIONS[name]
        valid = {"audit_threshold": 1.0, "num_splits": 3, "selection_fraction": 0.2}
        extra = {k: valid[k] for k, o in STRATEGY_KEYS.items() if o in takes}
        config = parse_config(_config(threshold_selection=name, **extra))
        params = config.cells()[0].params
        assert params["threshold_selection"] == name
        assert strategy_options(params) == {STRATEGY_KEYS[k]: v for k, v in extra.items()}
    with pytest.raises(ValueError) as err:
        parse_config(_config(threshold_selection="magic"))
    assert str(list(THRESHOLD_SELECTIONS)) in str(err.value)
    with pytest.raises(ValueError) as err:
        parse_config(_config(method="magic"))
    assert str(list(AUDIT_METHODS)) in str(err.value)


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"selection_fraction": 0.2}, "selection_fraction applies to threshold_selection = "),
        ({"threshold_selection": "bonferroni", "num_splits": 3}, "num_splits applies to"),
        ({"threshold_selection": "explicit"}, "'explicit' needs audit_threshold"),
        (
            {"threshold_selection": "projected_split", "selection_fraction": 1.0},
            "sweep.selection_fraction: selection_fraction must be in (0, 1)",
        ),
        ({"threshold_selection": "multi_split", "num_splits": 0}, "sweep.num_splits: num_splits"),
        (
            {"threshold_selection": "explicit", "audit_threshold": float("inf")},
            "sweep.audit_threshold",
        ),
    ],
)
def test_strategy_options_are_checked_per_cell(sweep, message):
    with pytest.raises(ValueError) as err:
        parse_config(_config(**sweep))
    assert message in str(err.value)


def test_bounds_mode_refuses_strategy_options():
    data = _config(mode="bounds", selection_fraction=0.2)
    data["sweep"].pop("trials")
    with pytest.raises(ValueError, match="selection_fraction has no effect in bounds mode"):
        parse_config(data)


@pytest.mark.slow
def test_projected_split_with_its_selection_fraction_runs_in_a_sweep(tmp_path):
    path = tmp_path / "projected.toml"
    path.write_text(
        textwrap.dedent("""
        [sweep]
        trials = 2000
        delta = 1e-3
        method = "eps_delta"

        [mechanism]
        name = "linear"
        steps = 2
        sampling_prob = 0.5
        noise_multiplier = 0.5

        [[cases]]
        threshold_selection = ["projected_split"]
        selection_fraction = [0.1, 0.3]

        [[cases]]
        threshold_selection = ["multi_split"]
        num_splits = [3]
        """)
    )
    rows = run_sweep(load_config(path), tmp_path / "out", progress=False)
    assert [r["threshold_selection"] for r in rows] == ["projected_split"] * 2 + ["multi_split"]
    assert [r.get("selection_fraction") for r in rows] == [0.1, 0.3, None]
    assert rows[2]["num_splits"] == 3
    for r in rows:
        assert r["eps_lower"] is not None and r["eps_lower"] > 0
    table = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "selection_fraction" in table["columns"]


def test_the_default_method_is_decided_on_each_cells_built_mechanism(monkeypatch):
    data = _config()
    data["sweep"].pop("trials")
    assert parse_config(data).fixed["method"] == "family"
    linear_data = {**data, "mechanism": {**data["mechanism"], "name": "linear-data"}}
    assert parse_config(linear_data).fixed["method"] == "eps_delta"  # has data gradients
    gradient = {
        "sweep": {},
        "mechanism": {"name": "gradient-canary", "steps": 2, "sampling_prob": 0.5,
                      "noise_multiplier": 1.0},
    }  # fmt: skip
    assert parse_config(gradient).fixed["method"] == "eps_delta"
    # The instances decide, not the class: the same config as a config naming the method.
    monkeypatch.setattr(LinearProcess, "in_heuristic_family", lambda self: False)
    decided = parse_config(data)
    named = parse_config({**data, "sweep": {**data["sweep"], "method": "eps_delta"}})
    assert decided.fixed["method"] == "eps_delta" and decided.identity() == named.identity()
    # Cells whose mechanisms disagree are refused until the config names the method.
    monkeypatch.setattr(LinearProcess, "in_heuristic_family", lambda self: self.steps > 2)
    mechanism = {k: v for k, v in data["mechanism"].items() if k != "steps"}
    mixed = {**data, "mechanism": mechanism, "grid": {"steps": [2, 4], "sampling_prob": [0.5]}}
    with pytest.raises(ValueError, match=r"methods differ \(eps_delta: cells \[0\]; family"):
        parse_config(mixed)
    assert parse_config({**mixed, "sweep": {"method": "eps_delta"}}).fixed["method"] == "eps_delta"


def test_the_default_method_needs_a_built_mechanism():
    with pytest.raises(TypeError, match="takes a built mechanism"):
        default_audit_method(LinearProcess)


def test_the_default_method_of_an_instance_asks_whether_it_is_in_the_family():
    # run_audit's default: the linear process is the family's tight case; with data
    # gradients its sampled counts add a shift the family lacks, so the assumption-free
    # audit (the class alone cannot say which instance it is).
    assert default_audit_method(LinearProcess(5, 0.1, 1.0)) == "family"
    with_data = LinearProcess.with_data(5, 0.1, 1.0, dim=2, num_examples=4)
    assert with_data.has_data and default_audit_method(with_data) == "eps_delta"
    assert default_audit_method(ThresholdLandscape(5, 1.0, 4)) == "eps_delta"


def test_method_and_strategy_pairs_are_checked_when_the_config_is_read():
    # Every cell's combination of method and audit options, swept or fixed, is checked
    # before any cell runs; the message names the cell.
    data = _config(sides="one")
    data["grid"] |= {"method": ["eps_delta", "family"]}
    with pytest.raises(ValueError, match=r"method='family'.*sides='one' does not apply"):
        parse_config(data)
    data = _config()
    data["cases"] = [{"threshold_selection": ["split"], "num_splits": [3]}]
    with pytest.raises(ValueError, match="num_splits applies to threshold_selection = "):
        parse_config(data)


class _MethodSeen(Exception):
    """Stops `run_audit` at its simulation, carrying the method it decided."""


@pytest.mark.parametrize(
    ("name", "method"),
    [("linear", "family"), ("linear-data", "eps_delta"), ("gradient-canary", "eps_delta")],
)
def test_the_sweep_run_audit_and_default_audit_method_agree(monkeypatch, name, method):
    # One rule on one built mechanism: the sweep's cell method, default_audit_method on the
    # mechanism the cell builds, and the method run_audit decides for it without one.
    import advsim.experiment._run_audit
    from advsim.adversaries import ProjectionScore
    from advsim.experiment import run_audit
    from advsim.sweep._config import build_mechanism

    mechanism = {"name": name, "steps": 2, "sampling_prob": 0.5, "noise_multiplier": 1.0}
    config = parse_config({"sweep": {}, "mechanism": mechanism})
    built = build_mechanism(config, config.cells()[0].params)
    assert config.fixed["method"] == default_audit_method(built) == method

    def stop(*args, method, **kwargs):
        raise _MethodSeen(method)

    monkeypatch.setattr(advsim.experiment._run_audit, "_simulate_and_audit", stop)
    with pytest.raises(_MethodSeen) as seen:
        run_audit(built, ProjectionScore(), trials=200)
    assert seen.value.args == (method,)


def test_audit_options_are_checked_against_each_cells_own_default_method(monkeypatch):
    # sides = "one" is refused with the family audit only; a mechanism whose instances
    # are outside the family takes it, whatever its class's first guess.
    monkeypatch.setattr(LinearProcess, "in_heuristic_family", lambda self: False)
    config = parse_config(_config(sides="one"))
    assert config.fixed["method"] == "eps_delta" and config.fixed["sides"] == "one"
    monkeypatch.setattr(LinearProcess, "in_heuristic_family", lambda self: True)
    with pytest.raises(ValueError, match=r"method='family'.*sides='one' does not apply"):
        parse_config(_config(sides="one"))

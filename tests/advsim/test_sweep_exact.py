"""The exact epsilon column of sweeps and of `advsim audit`: filled where the mechanism has
the capability (`advsim.AbstractScalarLaw`), empty elsewhere, computed once per distinct
mechanism, off with `exact = false`.

The reference of every exact value is `advsim.exact.last_iterate_epsilon` called directly
on the cell's mechanism (the function the column calls), and the composition bound (no
last model can be less private than all iterates released).
"""

import csv
import json
import math
import textwrap

import pytest

import advsim._exact_columns as _exact_columns
import advsim.experiment as experiment
from advsim.cli import main
from advsim.cli._audit_table import shows_exact
from advsim.exact import GridTooLargeError, last_iterate_epsilon
from advsim.mechanisms import LinearProcess
from advsim.plotting import _NOT_PARAMS, plot_heatmap
from advsim.sweep import AUDIT_COLUMNS, BOUNDS_COLUMNS, parse_config, run_sweep
from advsim.sweep._config import build_mechanism

from ._user_module import USER_MODULE

DELTA = 1e-5


@pytest.fixture
def cubic(tmp_path, monkeypatch):
    """A user's own construction, in a module of their own: the linear canary under a cubic
    regularizer r(m) = alpha m^4 / 4 (gradient alpha m^3, alpha traced); the configs below
    give it alpha = 0.05 and learning rate 1/2, so the drift m - eta alpha m^3 is stable
    where the mass is. No closed form: only the exact engine knows its last model's epsilon."""
    (tmp_path / "my_cubic.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_cubic:Cubic"


@pytest.fixture
def engine_calls(monkeypatch):
    """Counts the exact engine's calls, from an empty per-process cache."""
    calls = []

    def counted(mechanism, delta, **kwargs):
        calls.append(type(mechanism).__name__)
        return last_iterate_epsilon(mechanism, delta, **kwargs)

    monkeypatch.setattr(_exact_columns, "_EXACT_CACHE", type(_exact_columns._EXACT_CACHE)())
    monkeypatch.setattr(_exact_columns, "last_iterate_epsilon", counted)
    return calls


def _bounds(mechanism: dict, grid: dict, **sweep) -> dict:
    return {
        "sweep": {"mode": "bounds", "delta": DELTA, "composition_discretization": 1e-2, **sweep},
        "mechanism": mechanism,
        "grid": grid,
    }


@pytest.mark.slow
def test_class_path_sweep_has_the_exact_column_below_composition(tmp_path, cubic, engine_calls):
    config = tmp_path / "cubic.toml"
    config.write_text(
        textwrap.dedent(f"""
        [sweep]
        mode = "bounds"
        delta = {DELTA}
        composition_discretization = 1e-2
        exact_refinements = 2

        [mechanism]
        name = "{cubic}"
        steps = 4
        noise_multiplier = 1.0
        alpha = 0.05
        learning_rate = 0.5

        [grid]
        sampling_prob = [0.5, 0.25]
    """)
    )
    out = tmp_path / "out"
    rows = run_sweep(config, out, progress=False)
    cfg = parse_config(json.loads((out / "run.json").read_text())["config"])
    assert cfg.exact and cfg.exact_refinements == 2
    for cell, row in zip(cfg.cells(), rows, strict=True):
        ref = last_iterate_epsilon(build_mechanism(cfg, cell.params), DELTA, refinements=2)
        assert row["exact_epsilon"] == ref.epsilon and row["exact_error"] == ref.error
        assert row["exact_error_kind"] == "refinement estimate" and row["exact_note"] is None
        assert 0.0 < row["exact_epsilon"] < row["composition"]
        assert 0.0 <= row["exact_error"] < 0.05 * row["exact_epsilon"]
        assert row["exact_time_s"] >= 0.0
    assert rows[0]["exact_epsilon"] > rows[1]["exact_epsilon"]  # rarer canary, more private
    assert engine_calls == ["Cubic"] * 2
    with open(out / "results.csv") as f:
        table = list(csv.DictReader(f))
    header = list(table[0])
    at = header.index("full_batch")  # beside the bounds, after what the last one assumes
    assert header[at + 1 : at + 5] == [
        "full_batch_assumes", "exact_epsilon", "exact_error", "exact_error_kind"
    ]  # fmt: skip
    assert [float(r["exact_epsilon"]) for r in table] == [r["exact_epsilon"] for r in rows]


def test_replicates_reuse_one_exact_value_and_audit_rows_carry_it(tmp_path, cubic, engine_calls):
    config = {
        "sweep": {"mode": "audit", "trials": 500, "delta": DELTA, "exact_refinements": 2},
        "mechanism": {
            "name": cubic,
            "steps": 4,
            "sampling_prob": 0.5,
            "noise_multiplier": 1.0,
            "alpha": 0.05,
            "learning_rate": 0.5,
        },
        "adversary": {"name": "projection"},
        "grid": {"replicate": [0, 1]},
    }
    rows = run_sweep(config, tmp_path / "s", progress=False)
    assert engine_calls == ["Cubic"]  # once for both replicates
    assert rows[0]["seed"] != rows[1]["seed"]
    assert rows[0]["exact_epsilon"] == rows[1]["exact_epsilon"]
    assert math.isfinite(rows[0]["exact_epsilon"]) and rows[0]["exact_note"] is None
    assert rows[0]["exact_epsilon"] < rows[0]["composition"]
    assert rows[0]["eps_lower"] is None or rows[0]["eps_lower"] <= rows[0]["composition"]
    assert rows[1]["exact_time_s"] < rows[0]["exact_time_s"]  # found, not recomputed


@pytest.mark.slow
def test_a_vector_cell_leaves_the_exact_columns_empty(tmp_path, engine_calls):
    rows = run_sweep(
        _bounds(
            {"name": "linear", "steps": 2, "sampling_prob": 0.5, "noise_multiplier": 2.0},
            {"dim": [1, 2]},
        ),
        tmp_path / "s",
        progress=False,
    )
    scalar, vector = rows
    assert math.isfinite(scalar["exact_epsilon"]) and scalar["exact_note"] is None
    # Theorem 1 of arXiv:2410.06186 is exact for the linear process.
    assert scalar["exact_epsilon"] == pytest.approx(scalar["heuristic"], abs=1e-2)
    assert {k: vector[k] for k in ("exact_epsilon", "exact_error", "exact_error_kind")} == (
        dict.fromkeys(("exact_epsilon", "exact_error", "exact_error_kind"))
    )
    assert "scalar model" in vector["exact_note"]
    assert engine_calls == ["LinearProcess"]  # the vector cell never reached the engine
    with open(tmp_path / "s" / "results.csv") as f:
        empty = list(csv.DictReader(f))[1]
    assert empty["exact_epsilon"] == "" and empty["exact_error"] == ""


def test_exact_false_turns_it_off(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the exact engine ran with exact = false")

    monkeypatch.setattr(_exact_columns, "last_iterate_epsilon", refuse)
    monkeypatch.setattr(_exact_columns, "_EXACT_CACHE", type(_exact_columns._EXACT_CACHE)())
    config = _bounds(
        {"name": "linear", "sampling_prob": 0.5, "noise_multiplier": 2.0},
        {"steps": [1, 2]},
        exact=False,
    )
    out = tmp_path / "off"
    rows = run_sweep(config, out, progress=False)
    for row in rows:
        assert all(row[k] is None for k in experiment.EXACT_COLUMNS)
        assert row["exact_time_s"] == 0.0
    parsed = parse_config(config)
    assert not parsed.exact and parsed.to_dict()["sweep"]["exact"] is False
    assert parse_config(parsed.to_dict()) == parsed
    # The switch is not a cell's identity (nothing simulated changes) but a resume keeps it.
    on = parse_config({**config, "sweep": {**config["sweep"], "exact": True}})
    assert [c.cell_id for c in on.cells()] == [c.cell_id for c in parsed.cells()]
    assert "exact" not in on.to_dict()["sweep"]  # at its default, a config without the key
    with pytest.raises(Exception, match=r"differs in \['sweep.exact'\]"):
        run_sweep(on, out, resume=True, progress=False)


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"exact": "yes"}, "sweep.exact must be true or false"),
        ({"exact_refinements": 1}, r"sweep.exact_refinements must be an integer in \[2, 6\]"),
        ({"exact_refinements": 2.5}, "sweep.exact_refinements must be an integer"),
    ],
)
def test_bad_exact_settings_are_refused(sweep, message):
    with pytest.raises(ValueError, match=message):
        parse_config(_bounds({"name": "linear", "noise_multiplier": 1.0}, {"steps": [1]}, **sweep))


def test_an_engine_refusal_is_a_note_not_a_failed_cell(tmp_path, monkeypatch):
    def too_large(*args, **kwargs):
        raise GridTooLargeError("the exact propagation needs a grid of 10 nodes")

    monkeypatch.setattr(_exact_columns, "last_iterate_epsilon", too_large)
    monkeypatch.setattr(_exact_columns, "_EXACT_CACHE", type(_exact_columns._EXACT_CACHE)())
    (row,) = run_sweep(
        _bounds({"name": "linear", "sampling_prob": 0.5, "noise_multiplier": 2.0}, {"steps": [1]}),
        tmp_path / "s",
        progress=False,
    )
    assert row["exact_epsilon"] is None and math.isfinite(row["heuristic"])
    assert row["exact_note"] == "exact engine: the exact propagation needs a grid of 10 nodes"


def test_a_grid_too_long_to_propagate_is_skipped_with_a_note(engine_calls):
    mech = LinearProcess(steps=2, sampling_prob=0.5, noise_multiplier=2.0)
    cols = experiment.exact_columns(mech, DELTA, max_work=10)
    assert cols["exact_epsilon"] is None and engine_calls == []
    assert cols["exact_note"].startswith("skipped: predicted to take about")
    assert "the coarsest grid would be" in cols["exact_note"]
    assert "call advsim.exact.last_iterate_epsilon" in cols["exact_note"]


def test_a_long_exact_column_says_its_predicted_time_and_the_audit_prints_it(engine_calls):
    """T = 10^5 at the README's rates: `advsim.exact.estimate_seconds` predicts hours (the
    engine's own cost model, planned on the host), so the column is skipped, says so with
    the estimate, and `advsim audit`'s notes print it under the table."""
    from advsim.cli._audit_table import format_notes
    from advsim.exact import estimate_seconds
    from advsim.exact._cost import duration

    mech = LinearProcess(steps=100_000, sampling_prob=0.01, noise_multiplier=0.6)
    cols = experiment.exact_columns(mech, DELTA)
    assert cols["exact_epsilon"] is None and engine_calls == []
    hours = duration(estimate_seconds(mech, DELTA))
    assert hours.endswith(" h") and float(hours.split()[0]) > 1
    assert f"predicted to take about {hours}" in cols["exact_note"]
    notes = format_notes([{"steps": 100_000, "eps_lower": 1.0, "eps_point": 1.0,
                           "guarantee": "rigorous", **cols}], exact=True)  # fmt: skip
    assert f"exact at T = 100000: {cols['exact_note']}" in notes
    assert duration(40) == "40 s" and duration(180) == "3 min" and duration(46080) == "12.8 h"


def test_exact_columns_are_results_not_parameters():
    """The table's columns come from `AUDIT_COLUMNS` / `BOUNDS_COLUMNS` (the exact ones from
    `advsim.experiment.EXACT_COLUMNS`); plotting must not take a result for a parameter."""
    for cols in (AUDIT_COLUMNS, BOUNDS_COLUMNS):
        for key in experiment.EXACT_COLUMNS:
            assert key in cols
    assert set(experiment.EXACT_COLUMNS) <= set(experiment.AuditRecord.__dataclass_fields__)
    params = {
        "mechanism", "adversary", "method", "steps", "sampling_prob", "noise_multiplier",
        "delta", "confidence", "threshold_selection", "trials",
    }  # fmt: skip
    assert (set(AUDIT_COLUMNS) | set(BOUNDS_COLUMNS)) - params <= _NOT_PARAMS
    # Two rows of one heatmap cell that differ only in results: no parameter to name.
    rows = [
        {"steps": 1, "sampling_prob": 0.1, "heuristic": 1.0, "exact_epsilon": e,
         "exact_error": 1e-3, "exact_note": None, "exact_time_s": t}
        for e, t in ((1.0, 0.5), (1.1, 0.0))
    ]  # fmt: skip
    with pytest.raises(ValueError) as err:
        plot_heatmap(rows, "steps", "sampling_prob", "heuristic", "/nonexistent/h")
    assert "two rows share" in str(err.value) and "differ in" not in str(err.value)


def _header(text: str) -> str:
    """The table's header line in `advsim audit`'s output."""
    return next(line for line in text.splitlines() if line.lstrip().startswith("T "))


def test_audit_prints_exact_beside_the_heuristic_and_writes_it(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [*"audit --steps 2 --sampling-prob 0.5 --noise-multiplier 2 --trials 2000".split(),
            "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert _header(text).split()[:8] == [
        "T", "sigma", "eps_lower", "eps_point", "exact", "est.", "err", "heuristic",
    ]  # fmt: skip
    assert "est. err: its numerical error as a refinement estimate" in text
    assert "not a bound" in text
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    ref = last_iterate_epsilon(LinearProcess(2, 0.5, 2.0), 1e-5)  # the engine's 3 grids
    assert row["exact_epsilon"] == ref.epsilon and row["exact_error"] == ref.error
    assert row["exact_error_kind"] == "refinement estimate"
    # The linear process: the exact epsilon is the heuristic, both printed.
    assert row["exact_epsilon"] == pytest.approx(row["heuristic"], abs=1e-2)
    line = next(line for line in text.splitlines() if line.split()[:1] == ["2"])
    assert f"{row['exact_epsilon']:.3f}" in line and f"{row['heuristic']:.3f}" in line
    with open(out / "results.csv") as f:
        header = next(csv.reader(f))
    # the bounds' columns, each followed by what it assumes, then the exact epsilon
    assert header.index("exact_epsilon") == header.index("full_batch_assumes") + 1
    assert "exact_time_s" in header


def test_audit_no_exact_and_a_mechanism_without_the_capability(tmp_path, capsys):
    out = tmp_path / "off"
    argv = "audit --steps 2 --sampling-prob 0.5 --noise-multiplier 2 --trials 500 --quiet"
    assert main([*argv.split(), "--no-exact", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    (times,) = [line for line in text.splitlines() if line.startswith("time:")]
    assert "exact" not in _header(text) and "exact" not in times
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    assert row["exact_epsilon"] is None and row["exact_time_s"] == 0.0
    # No exact column in the printed table for a mechanism without the capability (a
    # vector model: the cells' exact_note says why), nor with --no-exact.
    config = {
        "sweep": {"trials": 500},
        "mechanism": {"name": "linear-data", "dim": 2, "num_examples": 3, "sampling_prob": 0.5,
                      "noise_multiplier": 2.0},
        "grid": {"steps": [2]},
    }  # fmt: skip
    assert not shows_exact(parse_config(config))
    config["mechanism"]["dim"] = 1  # groups of identical examples: a scalar law
    assert shows_exact(parse_config(config))
    assert not shows_exact(parse_config({**config, "sweep": {"trials": 500, "exact": False}}))


def test_a_sweep_says_once_that_a_long_exact_column_was_skipped(tmp_path, capsys, engine_calls):
    """A bounds sweep over two cells of 10^5 steps: the exact column is skipped in both
    with its predicted time, and the sweep says so once, naming the first cell."""
    config = _bounds(
        {"name": "linear", "steps": 100000, "noise_multiplier": 2.0},
        {"sampling_prob": [0.01, 0.02]},
    )
    rows = run_sweep(config, tmp_path / "out", progress=True)
    assert engine_calls == []
    assert all(r["exact_note"].startswith("skipped: predicted to take about") for r in rows)
    said = [line for line in capsys.readouterr().out.splitlines() if "exact column" in line]
    assert len(said) == 1 and "was skipped: predicted to take about" in said[0]

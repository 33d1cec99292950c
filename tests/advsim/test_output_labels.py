"""Every epsilon-valued column the toolkit writes has its label beside it
(`advsim.figures.label_problems`, `add_labels`).

A walker reads every CSV and JSON table under a folder and states each unlabelled
epsilon column. It runs on an audit's and a sweep's written output (slow: a real
`advsim audit` and a bounds sweep), on the sweep writer fed synthetic records (fast), and
fails on planted unlabelled columns. Figures: every figure definition's declared columns
are checked statically (with the labels `run_figure` inserts), and the written tables of
the quick figures in test_figures.py's QUICK_RUNS by its slow test.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from advsim._io import write_csv, write_json
from advsim._labels import above_exact_note
from advsim.bounds import Composition, FullBatchGDP, LastIterateHeuristic
from advsim.experiment import record_columns
from advsim.figures import add_labels, label_problems, list_figures, load_figure


def walk(folder: Path) -> list[str]:
    """`path: problem` for every unlabelled epsilon of every table under `folder` (CSV
    files; JSON files holding `columns` and `rows`)."""
    problems = []
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".csv":
            with path.open() as f:
                reader = csv.DictReader(f)
                rows = list(reader)
            problems += [f"{path.name}: {p}" for p in label_problems(reader.fieldnames, rows)]
        elif path.suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict) and "columns" in data and "rows" in data:
                found = label_problems(data["columns"], data["rows"])
                problems += [f"{path.name}: {p}" for p in found]
    return problems


def _tables(tmp_path: Path, columns, rows) -> Path:
    write_csv(tmp_path / "t.csv", rows, columns)
    write_json(tmp_path / "t.json", {"columns": columns, "rows": rows})
    return tmp_path


def _record(**values) -> dict:
    """An audit record's row (every `AuditRecord` column), synthetic values."""
    row = dict.fromkeys(record_columns())
    row.update(
        eps_lower=1.70, eps_point=1.90, heuristic=2.0, composition=3.0, full_batch=2.5,
        exact_epsilon=1.68, exact_error=0.001, exact_error_kind="refinement estimate",
        guarantee="rigorous", confidence=0.95, eps_point_above_composition=False,
    )  # fmt: skip
    row.update(values)
    return row


def test_the_sweep_writer_labels_every_epsilon(tmp_path):
    rows = [_record(), _record(eps_lower=1.0, cell=1)]
    columns = add_labels(list(rows[0]), rows)
    assert walk(_tables(tmp_path, columns, rows)) == []
    # each label right after its column
    for column, label in [("eps_point", "eps_point_guarantee"), ("heuristic", "heuristic_assumes"),
                          ("composition", "composition_assumes"),
                          ("full_batch", "full_batch_assumes"),
                          ("eps_lower", "eps_lower_above_exact")]:  # fmt: skip
        assert columns[columns.index(column) + 1] == label
    assert rows[0]["eps_point_guarantee"] == "point estimate, not a bound"


@pytest.mark.parametrize(
    "drop, planted, says",
    [
        ("eps_point_guarantee", None, "eps_point has no point-estimate label"),
        ("heuristic_assumes", None, "heuristic is a bound with no label"),
        ("composition_assumes", None, "composition is a bound with no label"),
        ("full_batch_assumes", None, "full_batch is a bound with no label"),
        ("eps_lower_above_exact", None, "no eps_lower_above_exact flag"),
        ("exact_error", None, "exact_epsilon is an exact epsilon with no error"),
        ("exact_error_kind", None, "no kind of its error"),
        (None, "h_star_eps_point", "h_star_eps_point has no point-estimate label"),
        (None, "exact_t25", "exact_t25 is an exact epsilon with no error"),
        (None, "eps_heuristic_max", "eps_heuristic_max is a bound with no label"),
        (None, "truth", "truth is an exact epsilon with no error"),
        (None, "eps", "eps is an epsilon with no label of what it is"),
        (None, "eps_cap", "eps_cap is an epsilon with no label of what it is"),
        (None, "exact_h2", "exact_h2 is an epsilon with no label of what it is"),
        (None, "eps_plateau", "eps_plateau is an epsilon with no label of what it is"),
    ],
)  # fmt: skip
def test_the_walker_fails_on_a_planted_unlabelled_column(tmp_path, drop, planted, says):
    rows = [_record()]
    columns = add_labels(list(rows[0]), rows)
    if drop:
        columns.remove(drop)
    if planted:
        columns.append(planted)
        rows[0][planted] = 1.5
    rows = [{c: r.get(c) for c in columns} for r in rows]
    problems = walk(_tables(tmp_path, columns, rows))
    assert any(says in p for p in problems), problems
    assert {p.split(":")[0] for p in problems} == {"t.csv", "t.json"}


def test_a_point_label_that_calls_it_a_bound_fails():
    rows = [{"eps_point": 1.9, "eps_point_guarantee": "rigorous"}]
    assert "does not say so" in label_problems(["eps_point", "eps_point_guarantee"], rows)[0]
    # the shared guarantee of eps_lower does not label a point estimate
    assert label_problems(["eps_lower", "eps_point", "guarantee"])


def test_bound_labels_are_the_bounds_own_statements():
    rows = [{"heuristic": 2.0, "composition": 3.0, "full_batch": 2.5}]
    add_labels(list(rows[0]), rows)
    for column, bound in [("heuristic", LastIterateHeuristic), ("composition", Composition),
                          ("full_batch", FullBatchGDP)]:  # fmt: skip
        label = rows[0][f"{column}_assumes"]
        assert bound.reference in label and all(a.describe() in label for a in bound.assumptions)
    assert "linear losses" in rows[0]["heuristic_assumes"]
    assert "Theorem 1" in rows[0]["heuristic_assumes"]
    assert "every iterate released" in rows[0]["composition_assumes"]
    assert "GDP of full-batch DP-GD" in rows[0]["full_batch_assumes"]


def test_an_eps_lower_above_the_exact_epsilon_is_flagged_with_its_note():
    # eps_lower 1.70 against exact 1.68 + 0.001: above (allowed at 95%: up to 5% of seeds);
    # 1.0: below; 1.6805 within the exact value's error: not flagged.
    rows = [_record(), _record(eps_lower=1.0), _record(eps_lower=1.6805), _record(eps_lower=None)]
    add_labels(list(rows[0]), rows)
    assert [r["eps_lower_above_exact"] for r in rows] == [True, False, False, None]
    note = rows[0]["eps_lower_above_exact_note"]
    assert "allowed" in note and "0.95 confidence" in note and "0.05 of seeds" in note
    assert [r["eps_lower_above_exact_note"] for r in rows[1:]] == [None, None, None]
    # the pairs the rule knows: a suffixed estimate and its exact value, h* and its exact
    assert add_labels(["eps_lower_t25", "guarantee_t25", "exact_t25"])[1] == (
        "eps_lower_t25_above_exact"
    )
    assert "h_star_eps_lower_above_exact" in add_labels(
        ["h_star_eps_lower", "h_star_guarantee", "exact_eps_h_star"]
    )


def test_print_table_marks_an_eps_lower_above_exact(capsys):
    from advsim.figures import print_table

    rows = [_record(), _record(eps_lower=1.0)]
    columns = add_labels(["eps_lower", "guarantee", "exact_epsilon", "exact_error"], rows)
    print_table("t", rows, columns)
    out = capsys.readouterr().out
    assert "1.700*" in out and "1.000*" not in out and "above the exact epsilon" in out


def test_the_audit_table_marks_an_eps_lower_above_exact():
    # `advsim audit`'s printed row and its note: eps_lower 1.70 above exact 1.68 + 0.001 at
    # 95% confidence gets `*`, 1.0 does not; the note says it is allowed (up to 5% of seeds).
    from advsim.cli._audit_table import format_notes, format_row

    rows = [_record(steps=2, noise_multiplier=1.0), _record(steps=2, noise_multiplier=1.0,
                                                            eps_lower=1.0)]  # fmt: skip
    add_labels(list(rows[0]), rows)
    assert "1.700*" in format_row(rows[0], exact=True)
    assert "1.000*" not in format_row(rows[1], exact=True)
    notes = [n for n in format_notes(rows, exact=True) if n.startswith("*")]
    assert notes == ["* eps_lower lies " + above_exact_note(0.95)]
    assert "allowed" in notes[0] and "0.05 of seeds" in notes[0]
    assert not [n for n in format_notes(rows[1:], exact=True) if n.startswith("*")]


@pytest.mark.parametrize("quick", [False, True])
def test_every_figure_definition_labels_its_epsilons(quick):
    # Statically: each table's declared columns, with the labels run_figure inserts.
    missing_error = set()
    for name in list_figures():
        for table, spec in load_figure(name, quick=quick).tables.items():
            if spec.get("exact_error_missing"):
                missing_error.add(table)
            if spec.get("columns"):
                exact = not spec.get("exact_error_missing")
                assert label_problems(add_labels(spec["columns"]), exact=exact) == [], table
    # Every table's exact columns carry their error estimate: none declares it missing.
    assert missing_error == set()


@pytest.mark.parametrize(
    "name, table, labels",
    [
        ("counterexamples", "counterexamples", {"exact_error", "exact_error_kind"}),
        ("certificates", "certificates", {"exact_error", "exact_error_kind"}),
        ("certificates", "quadratic", {"exact_error", "exact_error_kind"}),
        ("figure6", "figure6", {"exact_error", "exact_error_kind"}),
        ("history_vs_v", "history_vs_v", {"exact_error", "exact_error_kind"}),
        ("tightness_atlas", "tightness_atlas", {"exact_error_kind"}),
        ("gradient_canary", "gradient_canary", {"exact_last_model_error_kind"}),
        ("figure4", "figure4_heatmap", {"exact_t1_error_kind", "exact_t25_error_kind"}),
        ("one_run", "one_run", {"exact_error", "exact_error_kind"}),
        ("threshold_search", "threshold_search", {"exact_gdp_error_kind", "exact_error_kind"}),
        ("threshold_search", "threshold_search_summary",
         {"exact_gdp_max_error_kind", "exact_eps_h_star_error_kind", "composition"}),
        ("threshold_vs_jax_privacy", "threshold_vs_jax_privacy", {"exact_error_kind"}),
        ("threshold_vs_jax_privacy", "threshold_calibration", {"exact_error_kind"}),
        ("calibration", "calibration", {"truth_error_kind", "eps_cap_kind"}),
        ("exact_truth", "exact_truth_details", {"exact_h_kind", "exact_h4_kind"}),
        ("its_our_loss_figure2", "its_our_loss_figure2", {"eps_kind"}),
        ("shifted_interpolation", "shifted_interpolation", {"eps_shifted_interpolation_plateau"}),
    ],
)  # fmt: skip
def test_exact_values_carry_error_and_kind(name, table, labels):
    assert labels <= set(load_figure(name, quick=True).tables[table]["columns"])


@pytest.mark.slow  # 8-15 s: a real `advsim audit` (T = 2, 2,000 runs/world, exact on)
def test_an_audits_output_is_labelled(tmp_path):
    from advsim.cli import main

    out = tmp_path / "audit"
    argv = "audit --steps 2 --sampling-prob 0.1 --noise-multiplier 1.0 --trials 2000 --quiet"
    assert main([*argv.split(), "--out", str(out)]) == 0
    assert walk(out) == []
    with (out / "results.csv").open() as f:
        header = next(csv.reader(f))
    for label in ("eps_point_guarantee", "heuristic_assumes", "composition_assumes",
                  "full_batch_assumes", "eps_lower_above_exact", "exact_error_kind"):  # fmt: skip
        assert label in header
    # planted: the same output with the point estimate's label dropped fails
    data = json.loads((out / "results.json").read_text())
    data["columns"].remove("eps_point_guarantee")
    (out / "results.json").write_text(json.dumps(data))
    assert any("eps_point has no point-estimate label" in p for p in walk(out))


@pytest.mark.slow  # 3-6 s: an audit sweep of two cells (1,000 runs/world, GDP audit)
def test_a_sweeps_output_is_labelled(tmp_path):
    from advsim.sweep import run_sweep

    config = {
        "sweep": {"mode": "audit", "seed": 0, "trials": 1000, "delta": 1e-5, "method": "gdp",
                  "name": "labels", "exact": False},
        "mechanism": {"name": "landscape", "clip_norm": 1.0},
        "adversary": {"name": "landscape-threshold"},
        "grid": {"noise_multiplier": [4.0], "batch_size": [1], "steps": [1, 2]},
    }  # fmt: skip
    rows = run_sweep(config, tmp_path / "s", progress=False)
    assert len(rows) == 2 and all(r["composition_assumes"] for r in rows)
    assert all(r["eps_point_guarantee"] == "point estimate, not a bound" for r in rows)
    assert walk(tmp_path / "s") == []

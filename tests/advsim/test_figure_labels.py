"""Every epsilon a figure writes carries its label (`advsim.figures.label_problems`).

The rule (module docstring of `advsim.figures`): an audit's epsilon column has a
guarantee label column beside it; where the label says it rests on an assumption, the
verdict of the assumption's check; a point estimate in a table with a composition column,
the flag of an estimate above composition. Here: every figure definition, full and
--quick, passes on its declared columns; planted unlabelled columns fail; `run_figure`
refuses a figure that writes one. The written tables of the quick figures are checked in
test_figures.py, on the outputs its module fixture already computes.
"""

from __future__ import annotations

import dataclasses

import pytest

import advsim.figures as figures
from advsim.figures import add_labels, label_problems, list_figures, load_figure


@pytest.mark.parametrize("quick", [False, True])
def test_every_figure_definition_labels_its_epsilons(quick):
    checked = 0
    for name in list_figures():
        for table, spec in load_figure(name, quick=quick).tables.items():
            if spec.get("columns"):  # with the labels run_figure inserts
                exact = not spec.get("exact_error_missing")
                columns = add_labels(spec["columns"])
                assert label_problems(columns, exact=exact) == [], (name, table)
                checked += 1
    assert checked >= 23  # the tables that name their columns (23 of 36)


def test_the_tables_named_in_the_rule_carry_labels():
    # The columns a reader compares with the exact epsilon: figure 4's curves and heat map
    # (GDP audits), the threshold search's summary, figure 14, its_our_loss_figure1.
    def columns(name, table):
        return load_figure(name, quick=True).tables[table]["columns"]

    curves = columns("figure4", "figure4_curves")
    assert {"guarantee", "assumption_rejected", "eps_point_above_composition"} <= set(curves)
    heat = columns("figure4", "figure4_heatmap")
    assert {"guarantee_t25", "assumption_rejected_t25", "eps_point_t25_above_composition"} <= set(
        heat
    )
    summary = columns("threshold_search", "threshold_search_summary")
    assert {"h_star_guarantee", "h_star_assumption_rejected", "search_guarantee"} <= set(summary)
    assert "guarantee" in columns("figure14", "figure14")
    its = columns("its_our_loss_figure1", "its_our_loss_figure1")
    assert {"eps_point_above_composition", "eps_point_guarantee", "guarantee"} <= set(its)


@pytest.mark.parametrize(
    "columns, rows, missing",
    [
        # a derived column with no label of its own and no shared one
        (["sigma", "h_star_eps_lower", "exact_eps_h_star"], (), "h_star_eps_lower has no"),
        # the label of another estimate does not count for a suffixed one
        (["eps_lower_t25", "guarantee_t1"], (), "eps_lower_t25 has no guarantee"),
        # an assumption-based label without the verdict of its check
        (["eps_lower", "guarantee"], [{"eps_lower": 3.7, "guarantee": "assumes Gaussian"}],
         "rests on an assumption"),
        # a point estimate beside composition without its `!` flag
        (["eps_point", "guarantee", "composition"], (), "eps_point_above_composition flag"),
        (["eps_gdp", "eps_delta_lower", "eps_delta_lower_guarantee"], (), "eps_gdp has no"),
    ],
)  # fmt: skip
def test_planted_unlabelled_columns_fail(columns, rows, missing):
    problems = label_problems(columns, rows)
    assert any(missing in p for p in problems), problems


def test_labelled_variants_pass():
    assert label_problems(["eps_lower_t25", "guarantee_t25"]) == []
    assert label_problems(["h_star_eps_lower", "h_star_guarantee"]) == []
    rows = [{"eps_gdp": 1.0, "eps_gdp_guarantee": "assumes Gaussian"}]
    assert label_problems(["eps_gdp", "eps_gdp_guarantee"], rows)  # no verdict
    ok = ["eps_gdp", "eps_gdp_guarantee", "gdp_assumption_rejected"]
    assert label_problems(ok, rows) == []
    # flags, notes and bounds are not estimates
    assert label_problems(["eps_point_above_composition", "eps_lower_note"]) == []
    # any other epsilon needs a label of what it is
    assert label_problems(["eps_plateau"]) and label_problems(["eps", "eps_kind"]) == []


def test_flag_and_word_columns_hold_no_epsilon_whatever_their_names():
    """A column named like a bound or an estimate whose rows hold only flags or words
    (a bool column named after a claim tripped the name rules) needs no label; the same
    name holding numbers, as Python values or as a CSV spells them, still does."""
    flags = [{"claims_bound": True}, {"claims_bound": False}, {"claims_bound": None}]
    assert label_problems(["claims_bound"], flags) == []
    assert add_labels(["claims_bound"], flags) == ["claims_bound"]
    words = [{"heuristic": "see the heuristic table"}, {"heuristic": ""}]
    assert label_problems(["heuristic"], words) == []
    csv = [{"claims_bound": "False"}, {"claims_bound": "True"}]
    assert label_problems(["claims_bound"], csv) == []
    for value in (1.5, "1.5", "nan", "inf"):
        assert label_problems(["heuristic"], [{"heuristic": value}]), value
        assert label_problems(["eps_lower"], [{"eps_lower": value}]), value
    assert label_problems(["heuristic"], [{"heuristic": None}])  # no value read: the name rules


def test_run_figure_refuses_a_planted_unlabelled_table(tmp_path, monkeypatch, capsys):
    # A figure whose compute hook returns an eps_lower without a label: the table is
    # written (nothing computed is lost), then the figure fails, naming the column.
    fig = load_figure("figure1", quick=True, out=tmp_path)
    planted = dataclasses.replace(
        fig,
        sweeps={},
        plot=None,
        compute="planted",
        tables={"planted": {"source": "planted", "columns": ["sigma", "eps_lower"]}},
    )
    monkeypatch.setattr(figures, "load_figure", lambda *a, **k: planted)
    real = figures._function
    monkeypatch.setattr(
        figures,
        "_function",
        lambda path: (
            (lambda f, rows: {"planted": [{"sigma": 1.0, "eps_lower": 3.7}]})
            if path == "planted"
            else real(path)
        ),
    )
    with pytest.raises(ValueError, match="planted: eps_lower has no guarantee label"):
        figures.run_figure("figure1", out=tmp_path, progress=False)
    assert (tmp_path / "planted.csv").exists()


def test_print_table_marks_estimates_above_composition(capsys):
    # its_our_loss_figure1 at --quick: eps_point 8.200 against composition 7.047 (sigma = 1,
    # q = 0.1, T = 100) is printed with `!`, as `advsim audit` prints it.
    rows = [
        {"eps_point": 8.2, "eps_point_above_composition": True, "eps_composition": 7.047},
        {"eps_point": 1.0, "eps_point_above_composition": False, "eps_composition": 3.816},
    ]
    figures.print_table("t", rows, list(rows[0]))
    out = capsys.readouterr().out
    assert "8.200!" in out and "1.000!" not in out and "above the composition bound" in out

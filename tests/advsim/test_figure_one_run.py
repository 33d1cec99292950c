"""The one-run table (`advsim figure one_run`): its file, and a small run of its hook."""

import dataclasses
import re
from pathlib import Path

import pytest
import scipy.stats

from advsim.bounds import gdp_epsilon
from advsim.figures import list_figures, load_figure
from advsim.figures._tables_one_run import compute_one_run


def test_figure_file_states_the_issue_setting():
    assert "one_run" in list_figures()
    fig = load_figure("one_run")
    p = fig.params
    # m in {100, 1000, 10000}, 50 repetitions, exact epsilon known.
    assert p["num_canaries"] == [100, 1000, 10000] and p["repeats"] == 50
    quick = load_figure("one_run", quick=True).params
    assert quick["repeats"] < p["repeats"] and max(quick["num_canaries"]) <= 1000


@pytest.mark.slow
def test_compute_small(tmp_path):
    fig = load_figure("one_run", quick=True, out=tmp_path)
    fig = dataclasses.replace(fig, params=dict(fig.params, num_canaries=[64], repeats=6, batch=6))
    rows = {r["method"]: r for r in compute_one_run(fig, {})["one_run"]}
    assert set(rows) == {
        "one_run",
        "one_run_split",
        "one_run_fdp",
        "one_run_order",
        "one_run_fdp_heuristic",
        "one_run_fdp_composition",
        "eps_delta",
    }
    # mu = sqrt(T) / sigma = 1 / 0.5 = 2: eps = 9.997 at delta 1e-5 (Corollary 2.13 of
    # arXiv:1905.02383); allowance = 0.999-quantile of Binomial(6, 0.05) = 3.
    allowed = int(scipy.stats.binom.ppf(0.999, 6, 0.05))
    for row in rows.values():
        assert row["exact_eps"] == pytest.approx(gdp_epsilon(1e-5, 2.0))
        assert row["allowed"] == allowed and row["repeats"] == 6
        assert row["over"] <= allowed and row["check"] == "pass"
        assert 0 < row["median_eps_lower"] < row["exact_eps"]
        assert row["exact_share"] == row["median_eps_lower"] / row["exact_eps"]
    # At T = 1, q = 1 the heuristic's and composition's curves are G_{1/sigma}: their
    # numerical curves (never above the exact one) give at most the closed-form G_mu row,
    # and within 1% (the sigma grid's 0.1% and the curves' rounding).
    gauss = rows["one_run_fdp"]["median_eps_lower"]
    for name in ("one_run_fdp_heuristic", "one_run_fdp_composition"):
        assert gauss * 0.99 <= rows[name]["median_eps_lower"] <= gauss * (1 + 1e-9)
    assert rows["one_run"]["training_runs"] == 1 and rows["eps_delta"]["training_runs"] == 128


@pytest.mark.slow
def test_readme_section_runs_and_prints_what_it_says(capsys):
    # The "Auditing with few runs" code of docs/tutorials/one_run.md, run as written; its
    # comments state the printed values (the Bayesian interval of the worked example, the
    # one-run bound on one simulated run, the exact eps of mu = 2).
    text = (Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "one_run.md").read_text()
    start = text.index("## Auditing with few runs")
    section = text[start : text.index("\n## ", start + 1)]
    (code,) = re.findall(r"```python[^\n]*\n(.*?)```", section, flags=re.S)
    namespace = {"__name__": "readme_one_run"}
    exec(compile(code, "README.md", "exec"), namespace)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["[0.144, 6.416] credible interval", "2.78 rigorous 9.997"]
    assert namespace["r"].eps_lower < namespace["mech"].epsilon(1e-5)

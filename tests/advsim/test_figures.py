"""Figures as data (`advsim.figures`): every figure file loads, names importable hooks and
valid sweeps; the command lists and runs them. Running a whole figure is covered by
test_sweep.py's Figure 1 test (fast) and the slow Figure 14 test here."""

from __future__ import annotations

import csv

import pytest

from advsim.cli import main
from advsim.figures import _function, list_figures, load_figure, run_figure
from advsim.sweep import parse_config, resolve


@pytest.mark.parametrize("quick", [False, True])
def test_every_figure_loads(quick):
    figures = list_figures()
    assert {"figure1", "figure4", "figure5", "figure6", "figure14", "history_vs_v",
            "threshold_search", "its_our_loss_figure1", "its_our_loss_figure2",
            "counterexamples"} <= set(figures)
    for name in figures:
        fig = load_figure(name, quick=quick)
        assert fig.plot is None or callable(_function(fig.plot))
        assert fig.compute is None or callable(_function(fig.compute))
        for config in fig.sweeps.values():
            assert parse_config(config).cells()
        for spec in fig.tables.values():
            assert spec["source"] in fig.sweeps or fig.compute


def test_quick_merges_over_the_file():
    full, quick = load_figure("figure4"), load_figure("figure4", quick=True)
    assert quick.sweeps["sweep_b"]["grid"]["replicate"] == [0]
    assert full.sweeps["sweep_b"]["grid"]["replicate"] == [0, 1, 2]
    assert quick.sweeps["sweep_b"]["mechanism"] == full.sweeps["sweep_b"]["mechanism"]
    assert quick.sweeps["sweep_a"]["sweep"]["trials"] == 20_000


def test_figure14_cells_are_figure4_cells():
    """Same (sigma, B, T): same cell id, hence the same seed and numbers in both figures."""
    ids14 = {c.cell_id for c in parse_config(load_figure("figure14").sweeps["sweep"]).cells()}
    ids4 = {c.cell_id for c in parse_config(load_figure("figure4").sweeps["sweep_a"]).cells()}
    assert ids4 and ids4 <= ids14


def test_command_lists_and_rejects(capsys):
    assert main(["figure", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in list_figures())
    assert main(["figure", "no-such-figure"]) == 2
    assert "figure1" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::advsim.audits.AssumptionRejectedWarning")
def test_figure14_quick(tmp_path):
    """The GDP audit of the threshold landscape (its Gaussian assumption is rejected where B
    is small: the figure shows it): below the accounting's epsilon; B = 1 amplifies by
    T = 25."""
    out = tmp_path / "fig14"
    paths = run_figure("figure14", quick=True, out=out, progress=False)
    assert out / "figure14.png" in paths
    with (out / "figure14.csv").open() as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    assert len(rows) == 27
    for r in rows:
        assert r["eps_lower"] <= r["composition"] + 0.05
    at = {(r["noise_multiplier"], r["batch_size"], r["steps"]): r["eps_lower"] for r in rows}
    assert at[(4.0, 1.0, 25.0)] < 0.6 * at[(4.0, 1.0, 1.0)]


@pytest.mark.slow  # 3-6 s: the fast suite stays under 5 minutes
@pytest.mark.filterwarnings("ignore::advsim.audits.AssumptionRejectedWarning")
def test_threshold_search_quick(tmp_path):
    """Algorithm 5 at T = 2 (a compute hook, no sweep): the search is at least the audit of
    h* = C/2 (h* is on its grid), and the exact eps(delta) of theta_2 is smallest at h*."""
    out = tmp_path / "search"
    assert main(["figure", "threshold_search", "--quick", "--out", str(out), "--quiet"]) == 0
    with (out / "threshold_search_summary.csv").open() as f:
        summary = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    assert len(summary) == 4
    for s in summary:
        assert s["search_eps_lower"] >= s["h_star_eps_lower"]
        assert s["exact_eps_h_star"] <= s["exact_eps_max"]
        assert s["exact_gdp_max"] <= s["accounting"] + 1e-6
    assert (out / "threshold_search.png").stat().st_size > 0


@pytest.mark.slow
def test_its_our_loss_figure1_quick(tmp_path):
    """Annamalai's Figure 1 (float64 only while it runs): the rigorous bound is positive and
    below composition; the x64 flag is restored afterwards."""
    import jax

    before = jax.config.jax_enable_x64
    out = tmp_path / "its1"
    run_figure("its_our_loss_figure1", quick=True, out=out, progress=False)
    assert jax.config.jax_enable_x64 == before
    with (out / "its_our_loss_figure1.csv").open() as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    assert [r["steps"] for r in rows] == [100, 100]
    for r in rows:
        assert 0 < r["eps_lower"] <= r["eps_composition"]
    assert (out / "its_our_loss_figure1_log.png").stat().st_size > 0


def test_counterexamples_zeroing_row_is_the_nonmonotone_search():
    """The zeroing row's (T, q, sigma) are what the bounds code finds (eps_T < eps_1)."""
    from advsim.mechanisms import nonmonotone_heuristic_parameters

    found = nonmonotone_heuristic_parameters(
        1e-5, steps=(50,), sampling_probs=(0.01,), noise_multipliers=(0.4,)
    )[0]
    row = load_figure("counterexamples").params["rows"][0]
    assert row["mechanism"].endswith(":ZeroingRegularizer")
    assert row["params"] == {k: found[k] for k in ("steps", "sampling_prob", "noise_multiplier")}


def test_counterexamples_quick_exact_laws_are_the_mechanisms():
    """A row's `exact` function (the quick mode's coarser grid) is the one its mechanism's
    `exact_epsilon` calls, and takes the row's parameters as they are written."""
    import inspect

    rows = [r for r in load_figure("counterexamples", quick=True).params["rows"] if "exact" in r]
    certificates = load_figure("certificates", quick=True).params["constructions"]
    rows += [r for r in certificates if "exact" in r]
    assert len(rows) == 3
    for row in rows:
        function = _function(row["exact"])
        mech = resolve("mechanism", row["mechanism"]).build(**row["params"])
        assert function.__name__ in inspect.getsource(type(mech).exact_epsilon)
        inspect.signature(function).bind(
            row["delta"], **row["params"], value_discretization_interval=1e-3
        )


@pytest.mark.slow
def test_counterexamples_quick_exact_matches_the_fine_grid():
    """The quick mode's 1e-3 grid gives the fine grid's exact epsilons to 1e-4."""
    fig = load_figure("counterexamples", quick=True)
    for row in (r for r in fig.params["rows"] if "exact" in r):
        mech = resolve("mechanism", row["mechanism"]).build(**row["params"])
        coarse = _function(row["exact"])(
            row["delta"], **row["params"],
            value_discretization_interval=fig.params["exact_discretization"],
        )
        assert coarse == pytest.approx(mech.exact_epsilon(row["delta"]), abs=1e-4)


@pytest.mark.slow
def test_counterexamples_quick(tmp_path):
    """A table, no plot: for every construction, eps_lower <= exact <= composition."""
    out = tmp_path / "ce"
    paths = run_figure("counterexamples", quick=True, out=out, progress=False)
    assert {p.suffix for p in paths} == {".csv", ".json"}
    with (out / "counterexamples.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5
    for r in rows:
        assert float(r["eps_lower"]) <= float(r["exact"]) + 1e-9
        assert float(r["exact"]) <= float(r["composition"]) + 1e-3


@pytest.mark.slow
def test_its_our_loss_figure2_quick_resumes(tmp_path):
    """Annamalai's Figure 2: Algorithm 2's estimate is at least the held-out one, the
    rigorous bound at most composition's eps; --resume reads the repetitions back (NaN
    included) and rebuilds the same table."""
    out = tmp_path / "its2"
    run_figure("its_our_loss_figure2", quick=True, out=out, progress=False)
    table = (out / "its_our_loss_figure2.csv").read_text()
    with (out / "its_our_loss_figure2.csv").open() as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    assert [r["eps"] for r in rows] == [1.0, 2.0, 4.0, 10.0]
    for r in rows:
        assert r["eps_lower_min"] <= r["eps"] + 1e-9
        assert r["eps_point_mean"] >= r["eps_held_out_mean"] - 1e-9
    run_figure("its_our_loss_figure2", quick=True, out=out, resume=True, progress=False)
    assert (out / "its_our_loss_figure2.csv").read_text() == table

"""Figures as data (`advsim.figures`): every figure file loads, names importable hooks and
valid sweeps; the command lists and runs them. Running a whole figure is covered by
test_sweep.py's Figure 1 test (fast) and the slow quick-figure tests here, which share
one run of each figure (`quick_run`) and check its written tables' labels and its
pictures' layout (no legend over a label, title, tick label or curve; no marker cut by
the axes: `advsim._plot_style.layout_problems`, warned by every `save_figure`)."""

from __future__ import annotations

import csv
import warnings

import pytest

from advsim._plot_style import FigureLayoutWarning
from advsim.audits import AssumptionRejectedWarning
from advsim.cli import main
from advsim.figures import (
    _function,
    exact_with_error,
    label_problems,
    list_figures,
    load_figure,
    run_figure,
)
from advsim.sweep import parse_config, resolve

#: The figures the slow tests here run at --quick (once each, through `quick_run`): every
#: figure that draws pictures (`test_quick_runs_cover_every_picture`), and counterexamples.
QUICK_RUNS = (
    "figure1",
    "figure4",
    "figure5",
    "figure6",
    "figure14",
    "history_vs_v",
    "threshold_search",
    "its_our_loss_figure1",
    "counterexamples",
    "its_our_loss_figure2",
    "tightness_atlas",
    "exact_truth",
    "gradient_canary",
    "machine_found",
    "real_models",
    "shifted_interpolation",
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """`run(name) -> (out, paths, layout)`: the figure at --quick, run once for this
    module; `layout` holds the `FigureLayoutWarning`s its pictures raised."""
    done = {}

    def run(name):
        if name not in done:
            out = tmp_path_factory.mktemp(name)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("ignore", AssumptionRejectedWarning)
                warnings.simplefilter("always", FigureLayoutWarning)
                paths = run_figure(name, quick=True, out=out, progress=False)
            layout = [str(w.message) for w in caught if w.category is FigureLayoutWarning]
            done[name] = (out, paths, layout)
        return done[name]

    return run


def test_quick_runs_cover_every_picture():
    """The slow layout test draws every figure that has a plot hook."""
    drawn = {name for name in list_figures() if load_figure(name, quick=True).plot}
    assert drawn <= set(QUICK_RUNS), drawn - set(QUICK_RUNS)


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
@pytest.mark.parametrize("name", QUICK_RUNS)
def test_quick_tables_label_every_epsilon(quick_run, name):
    """Every CSV a quick figure wrote: each epsilon with its guarantee label, the verdict
    where the label names an assumption, and the `!` flag of a point estimate beside
    composition (`advsim.figures.label_problems` on the written header and rows)."""
    out, paths, _ = quick_run(name)
    tables = [p for p in paths if p.suffix == ".csv"]
    assert tables
    specs = load_figure(name, quick=True).tables
    for path in tables:
        with path.open() as f:
            reader = csv.DictReader(f)
            rows = list(reader)
        exact = not specs[path.stem].get("exact_error_missing")
        assert label_problems(reader.fieldnames, rows, exact=exact) == [], path.name


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK_RUNS)
def test_quick_pictures_have_no_covered_labels_or_cut_markers(quick_run, name):
    """Every picture a quick figure drew: no legend over a text, another legend or a curve,
    no text over another text (an offset text over a title, crowded tick labels), no text
    or legend past the figure's edge, no marker cut or hidden by the axes' edge (figure6's
    audits at eps = 0 sit on it) and no two series' markers merged, from matplotlib's
    layout extents (`layout_problems`)."""
    _, paths, layout = quick_run(name)
    assert layout == [], layout
    assert all(p.stat().st_size > 0 for p in paths if p.suffix == ".png")


@pytest.mark.slow
def test_figure14_quick(quick_run):
    """The GDP audit of the threshold landscape (its Gaussian assumption is rejected where B
    is small: the figure shows it): below the accounting's epsilon; B = 1 amplifies by
    T = 25."""
    out, paths, _ = quick_run("figure14")
    assert out / "figure14.png" in paths
    with (out / "figure14.csv").open() as f:
        rows = [{k: float(v) for k, v in r.items() if _numeric(v)} for r in csv.DictReader(f)]
    assert len(rows) == 27
    for r in rows:
        assert r["eps_lower"] <= r["composition"] + 0.05
    at = {(r["noise_multiplier"], r["batch_size"], r["steps"]): r["eps_lower"] for r in rows}
    assert at[(4.0, 1.0, 25.0)] < 0.6 * at[(4.0, 1.0, 1.0)]


def _numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


@pytest.mark.slow  # 3-6 s: the fast suite stays under 5 minutes
def test_threshold_search_quick(quick_run):
    """Algorithm 5 at T = 2 (a compute hook, no sweep): the search is at least the audit of
    h* = C/2 (h* is on its grid), and the exact eps(delta) of theta_2 is smallest at h*;
    both GDP audits are labelled as assuming a Gaussian curve, and every row names its
    threshold selection."""
    out, _, _ = quick_run("threshold_search")
    with (out / "threshold_search_summary.csv").open() as f:
        raw = list(csv.DictReader(f))
    summary = [{k: float(v) for k, v in r.items() if _numeric(v)} for r in raw]
    assert {r["h_star_guarantee"] for r in raw} == {"assumes Gaussian"}
    assert len(summary) == 4
    for s in summary:
        assert s["search_eps_lower"] >= s["h_star_eps_lower"]
        assert s["exact_eps_h_star"] <= s["exact_eps_max"]
        assert s["exact_gdp_max"] <= s["composition"] + 1e-6
    assert (out / "threshold_search.png").stat().st_size > 0
    # Every row names its threshold selection: the paper's split, passed by the figure.
    with (out / "threshold_search.csv").open() as f:
        assert {r["threshold_selection"] for r in csv.DictReader(f)} == {"split"}


@pytest.mark.slow
def test_its_our_loss_figure1_quick(quick_run):
    """Annamalai's Figure 1 (float64 only while it runs): the rigorous bound is positive and
    below composition; the x64 flag is restored afterwards; an estimate above composition
    is flagged (the `!` of the printed table)."""
    import jax

    before = jax.config.jax_enable_x64
    out, _, _ = quick_run("its_our_loss_figure1")
    assert jax.config.jax_enable_x64 == before
    with (out / "its_our_loss_figure1.csv").open() as f:
        raw = list(csv.DictReader(f))
    rows = [{k: float(v) for k, v in r.items() if _numeric(v)} for r in raw]
    assert [r["steps"] for r in rows] == [100, 100]
    for r, text in zip(rows, raw, strict=True):
        assert 0 < r["eps_lower"] <= r["eps_composition"] and text["guarantee"] == "rigorous"
        above = r["eps_point"] > r["eps_composition"]
        assert text["eps_point_above_composition"] == str(above)
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
    assert len(rows) == 5
    # the other rows' mechanisms have closed forms (`exact_with_error` says so)
    for row in load_figure("counterexamples").params["rows"] + certificates:
        if "exact" not in row:
            mech = resolve("mechanism", row["mechanism"]).build(**row["params"])
            source = inspect.getsource(type(mech).exact_epsilon)
            assert "history_epsilon" not in source and "repeaters_epsilon" not in source
    for row in rows:
        function = _function(row["exact"])
        mech = resolve("mechanism", row["mechanism"]).build(**row["params"])
        assert function.__name__ in inspect.getsource(type(mech).exact_epsilon)
        inspect.signature(function).bind(
            row["delta"], **row["params"], value_discretization_interval=1e-3
        )


def _fast_gaussian_steps(monkeypatch) -> list[float]:
    """Makes dp_accounting's PLD accountant build each Poisson-subsampled Gaussian step with
    `advsim.bounds._pld_fast.gaussian_pld`: bit for bit `from_gaussian_mechanism`'s PLD
    (tests/advsim/test_bounds_pld_fast.py compares the PMFs with ==), without its scalar
    loop over the grid. Returns the noise multipliers of the steps built that way."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    from advsim.bounds._pld_fast import gaussian_pld

    original, built = pld_lib.from_gaussian_mechanism, []

    def from_gaussian_mechanism(standard_deviation, **kwargs):
        relation = kwargs.pop("neighboring_relation", pld_lib.NeighborRel.ADD_OR_REMOVE_ONE)
        vdi, q = kwargs.pop("value_discretization_interval"), kwargs.pop("sampling_prob", 1.0)
        if kwargs or relation != pld_lib.NeighborRel.ADD_OR_REMOVE_ONE:  # not its case
            return original(standard_deviation, **kwargs, neighboring_relation=relation,
                            value_discretization_interval=vdi, sampling_prob=q)  # fmt: skip
        built.append(standard_deviation)
        return gaussian_pld(standard_deviation, q, vdi)

    monkeypatch.setattr(pld_lib, "from_gaussian_mechanism", from_gaussian_mechanism)
    return built


@pytest.mark.slow
@pytest.mark.parametrize(
    "construction",  # the rows whose quick mode computes the exact epsilon on a coarse grid
    [r["construction"] for r in load_figure("counterexamples").params["rows"] if "exact" in r],
)
def test_counterexamples_quick_exact_matches_the_fine_grid(construction, monkeypatch):
    """The quick mode's 1e-3 grid gives the fine grid's exact epsilons within the error it
    states (its change from the 2e-3 grid, `exact_with_error`), and to 1e-4 except for the
    thresholded repeaters (1.32942 against 1.32893, stated error 9.9e-4).

    The fine grid's value is `exact_epsilon` (the full figure's, 1e-4) with each step's PLD
    built by `_fast_gaussian_steps`: the same number, bit for bit (checked here too, on the
    quick grid, with ==), 3x faster (history: 24 s of CPU -> 8 s; repeaters: 34 -> 12)."""
    fig = load_figure("counterexamples", quick=True)
    row = next(r for r in fig.params["rows"] if r["construction"] == construction)
    mech = resolve("mechanism", row["mechanism"]).build(**row["params"])
    exact, vdi = _function(row["exact"]), fig.params["exact_discretization"]
    coarse = exact(row["delta"], **row["params"], value_discretization_interval=vdi)
    built = _fast_gaussian_steps(monkeypatch)
    assert exact(row["delta"], **row["params"], value_discretization_interval=vdi) == coarse
    assert built, "the steps were built by the fast PLD"
    fine = mech.exact_epsilon(row["delta"])
    stated = exact_with_error(row, mech, row["delta"], vdi)
    assert stated["exact"] == coarse and abs(coarse - fine) <= stated["exact_error"]
    if construction != "repeaters, thresholded (App. C)":
        assert coarse == pytest.approx(fine, abs=1e-4)


@pytest.mark.slow
def test_counterexamples_quick(quick_run):
    """A table, no plot: for every construction, eps_lower <= exact <= composition."""
    out, paths, _ = quick_run("counterexamples")
    assert {p.suffix for p in paths} == {".csv", ".json"}
    with (out / "counterexamples.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5
    for r in rows:
        assert float(r["eps_lower"]) <= float(r["exact"]) + 1e-9
        assert float(r["exact"]) <= float(r["composition"]) + 1e-3


@pytest.mark.slow
def test_its_our_loss_figure2_quick_resumes(quick_run):
    """Annamalai's Figure 2: Algorithm 2's estimate is at least the held-out one, the
    rigorous bound at most composition's eps; --resume reads the repetitions back (NaN
    included) and rebuilds the same table."""
    out, _, _ = quick_run("its_our_loss_figure2")
    table = (out / "its_our_loss_figure2.csv").read_text()
    with (out / "its_our_loss_figure2.csv").open() as f:
        rows = [{k: float(v) for k, v in r.items() if _numeric(v)} for r in csv.DictReader(f)]
    assert [r["eps"] for r in rows] == [1.0, 2.0, 4.0, 10.0]
    for r in rows:
        assert r["eps_lower_min"] <= r["eps"] + 1e-9
        assert r["eps_point_mean"] >= r["eps_held_out_mean"] - 1e-9
    run_figure("its_our_loss_figure2", quick=True, out=out, resume=True, progress=False)
    assert (out / "its_our_loss_figure2.csv").read_text() == table

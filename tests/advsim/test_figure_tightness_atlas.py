"""The `tightness_atlas` figure: exact / bound for each bound value over T and its key
parameter (advsim/figures/_plots_tightness_atlas.py).

What must hold on every cell: the bound is an upper bound on the exact epsilon of a
construction inside its assumptions, so exact / bound <= 1 up to the exact value's
refinement error (never a bound itself: twice it, and 1e-3 of slack). Where the bound is
the exact value by its own proof, the ratio is 1: the strongly convex GDP bound with a
linear canary (the last model is Gaussian in both worlds), the heuristic with no other data
(Theorem 1 of arXiv:2410.06186). Composition is exact for one step at q = 1 and loose for
the last iterate once T > 1 at q < 1.

Fast: the compute hook on a tiny grid (T = 1, 2, 5; one or two values per panel; two grids
per exact call: 10-20 s on 2 shared cores, most of it compiling one propagation per panel),
the figure file's full grid, and a construction outside an assumption refused by name.
Slow: the quick figure end to end (its table, summary and picture).
"""

import csv
import dataclasses
import math

import pytest

from advsim.bounds import AssumptionError
from advsim.figures import list_figures, load_figure, run_figure
from advsim.figures._plots_tightness_atlas import compute_tightness_atlas

#: The tiny grid of the fast test (merged over the quick figure's params).
TINY = dict(
    steps=[1, 2, 5],
    sc_contractions=[0.5],  # lr * a <= 1: the tight case of the strongly convex bound
    sc_tanh_width=1.0,
    si_radii=[2.0],  # one radius: each radius compiles its own (projected) grid
    poisson_rates=[0.1, 1.0],
    data_rate=0.5,
    data_examples=2,  # few copies: a small count window, cheap
    refinements=2,
)


def _num(value) -> float:
    return math.nan if value in (None, "") else float(value)


def _tiny(**over):
    fig = load_figure("tightness_atlas", quick=True)
    return dataclasses.replace(fig, params={**fig.params, **TINY, **over})


def _check_upper_bounds(cells):
    """(a) every resolved cell: exact / bound <= 1 + 2 error / bound + 1e-3."""
    assert cells
    for c in cells:
        where = (c["panel"], c["block"], c["steps"], c["parameter_value"])
        ratio, err, bound = _num(c["ratio"]), _num(c["exact_error"]), _num(c["bound_epsilon"])
        if str(c["exact_resolved"]).lower() != "true":
            assert math.isnan(ratio), where  # no ratio from an unresolved exact value
            continue
        assert math.isfinite(ratio) and ratio > 0, where
        assert abs(_num(c["ratio_error"]) - err / bound) < 1e-12, where
        assert ratio <= 1.0 + 2.0 * err / bound + 1e-3, where


@pytest.mark.slow  # 15-20 s; each bound's value has its own fast check in its test file
def test_tiny_grid_bounds_hold_and_tight_cases_are_tight():
    tables = compute_tightness_atlas(_tiny(), {})
    cells = tables["tightness_atlas"]
    # Every cell of the tiny grid is resolved (eps <= 11.5 here, below the limit 20.7).
    assert all(c["exact_resolved"] for c in cells)
    _check_upper_bounds(cells)

    # (b) The tight cases, ratio within 1e-2 of 1.
    # StronglyConvexGDP, linear canary -C, lr * a = 0.5 <= 1: the last model is
    # N(-lr C sum_k c^k, (lr sigma C)^2 sum_k c^2k) against the same variance at mean 0,
    # c = 1 - lr a, whose GDP parameter is the bound's mu_T (the derivation in
    # advsim/bounds/_strongly_convex.py); measured ratio 0.9998-0.9999 on two grids.
    sc = [c for c in cells if c["panel"] == "strongly_convex_linear"]
    assert len(sc) == 3 and all(c["parameter_value"] <= 1.0 for c in sc)
    for c in sc:
        assert abs(c["ratio"] - 1.0) < 1e-2, c
    # The heuristic with no other data: the proof of Theorem 1 of arXiv:2410.06186 (the
    # last model is the heuristic's pair, Binomial(T, q) C + N(0, T sigma^2 C^2) against
    # the noise alone; `ScalarFieldConstruction.heuristic_is_tight`); measured 0.9988-0.9999.
    heur = [c for c in cells if c["panel"] == "heuristic" and c["block"] == "poisson_no_data"]
    assert len(heur) == 6
    for c in heur:
        assert abs(c["ratio"] - 1.0) < 1e-2, c

    # (c) Composition on the same constructions.
    comp = {(c["steps"], c["q"]): c["ratio"] for c in cells
            if c["panel"] == "composition" and c["block"] == "poisson_no_data"}  # fmt: skip
    # T = 1, q = 1: one unsampled Gaussian step, the only iterate is the last one, so
    # composition is its exact epsilon (`composition_is_tight`; 4.377 at sigma = 1).
    assert abs(comp[(1, 1.0)] - 1.0) < 1e-2
    # q < 1: equal at T = 1 (one subsampled Gaussian mechanism, both exact), then falling
    # with T: the full figure measured 1.00, 0.88, 0.78 at T = 1, 2, 5 for q = 0.1
    # (heuristic / composition, both closed forms at sigma = 1; it turns up again past
    # T = 20, so only T <= 5 is asserted).
    assert abs(comp[(1, 0.1)] - 1.0) < 1e-2
    assert comp[(1, 0.1)] > comp[(2, 0.1)] + 0.05 > comp[(5, 0.1)] + 0.1
    # q = 1 stays tight at every T: composition and the heuristic are both sqrt(T)/sigma-GDP.
    assert all(abs(comp[(t, 1.0)] - 1.0) < 1e-2 for t in (1, 2, 5))

    # Loose where the bound's worst case is not the construction: the convex tanh canary
    # (it moves the model by at most C/2 at m_0 = 0; the full figure: 0.27-0.92), the
    # heuristic with two sampled copies of the canary among the data.
    tanh = [c for c in cells if c["panel"] == "strongly_convex_tanh"]
    assert tanh and all(c["ratio"] < 0.95 for c in tanh)
    data = [c for c in cells if c["panel"] == "heuristic" and c["block"] == "poisson_data"]
    assert data and all(c["ratio"] < 0.99 for c in data)

    summary = tables["tightness_atlas_summary"]
    assert {s["panel"] for s in summary} == {c["panel"] for c in cells}
    for s in summary:
        assert s["ratio_min"] <= s["ratio_max"] and s["resolved"] == s["cells"]


def test_a_construction_outside_an_assumption_is_refused_by_name():
    # lr * a = 0: no regularizer, so the objective is not strongly convex; the bound
    # refuses the construction (before any exact work), naming the assumption.
    with pytest.raises(AssumptionError, match="strongly convex"):
        compute_tightness_atlas(_tiny(sc_contractions=[0.0]), {})


def test_the_figure_file_holds_the_stated_grid():
    assert "tightness_atlas" in list_figures()
    p = load_figure("tightness_atlas").params
    assert p["delta"] == 1e-5 and p["steps"] == [1, 2, 5, 10, 20, 50, 100]
    assert p["sc_contractions"] == [0.05, 0.1, 0.3, 0.6, 0.9]
    assert p["si_radii"] == [0.5, 2.0, 8.0, 32.0]
    assert p["poisson_rates"] == [0.01, 0.1, 0.5, 1.0]
    assert p["refinements"] == 3


@pytest.mark.slow
def test_tightness_atlas_quick(tmp_path):
    paths = run_figure("tightness_atlas", quick=True, out=tmp_path, progress=False)
    names = {p.name for p in paths}
    assert {"tightness_atlas.csv", "tightness_atlas_summary.csv", "tightness_atlas.png"} <= names
    with open(tmp_path / "tightness_atlas.csv") as f:
        cells = list(csv.DictReader(f))
    _check_upper_bounds(cells)
    tight = [c for c in cells if c["panel"] == "strongly_convex_linear"]
    assert tight and all(abs(_num(c["ratio"]) - 1.0) < 1e-2 for c in tight)

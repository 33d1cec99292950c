"""The `exact_truth` figure: the exact epsilon of every 1-D construction's last model beside
a rigorous audit and the bounds (advsim/figures/_plots_exact.py).

What must hold on every row, whatever the runs: the assumption-free audit stays below the
truth (eps_lower <= exact + its error estimate: a sound audit never certifies more than
the last model leaks, up to the grid's error) and the truth below every upper bound
(composition; shifted interpolation on the projected canary). And on the linear process,
the truth is the heuristic (Theorem 1 of arXiv:2410.06186).

Fast: the figure file (every row a scalar chain the exact engine accepts) and the picture
from a made-up table (no JAX work; 3-6 s). Slow: the quick run end to end, 2 x 10^4 runs
per world: about 90 s of CPU on 2 cores, most of it compiling the exact propagations (three
grids per class) and the simulations, measured at 99-250 s of wall time on a machine shared
with other jobs (load average 5-8), so it is not a fast test.
"""

import csv
import math

import pytest

from advsim.exact import check_scalar_law
from advsim.figures import list_figures, load_figure, run_figure
from advsim.figures._plots_exact import plot_exact_truth
from advsim.sweep import resolve


def _num(value) -> float:
    return math.nan if value in (None, "") else float(value)


def _check_rows(rows):
    assert rows
    for r in rows:
        name = r["construction"]
        exact, err = _num(r["exact"]), _num(r["exact_error"])
        lower, composition = _num(r["eps_lower"]), _num(r["composition"])
        assert math.isfinite(exact) and 0 <= err < 0.01 * max(exact, 1.0), name
        assert r["guarantee"] == "rigorous", name
        assert lower <= exact + err, name
        assert exact <= composition, name
        shifted = _num(r["shifted_interpolation"])
        if math.isfinite(shifted):
            assert exact <= shifted, name
        if name.startswith("linear"):
            assert exact == pytest.approx(_num(r["heuristic"]), rel=1e-3)


def test_exact_truth_rows_are_scalar_chains():
    assert "exact_truth" in list_figures()
    for quick in (False, True):
        fig = load_figure("exact_truth", quick=quick)
        assert fig.compute and fig.plot
        for spec in fig.params["rows"]:
            mech = resolve("mechanism", spec["mechanism"]).build(**spec["params"])
            check_scalar_law(mech)  # raises if the exact engine cannot propagate it
    full, quick = load_figure("exact_truth"), load_figure("exact_truth", quick=True)
    assert full.params["trials"] == 1_000_000 and quick.params["trials"] < 100_000
    assert full.params["rows"] == quick.params["rows"]


def test_exact_truth_picture_from_a_table(tmp_path):
    import dataclasses

    fig = dataclasses.replace(load_figure("exact_truth", quick=True), out=tmp_path)
    base = dict(delta=1e-5, exact_error=1e-3, guarantee="rigorous", confidence=0.95,
                trials=20000, full_batch=1.0, shifted_interpolation=None)  # fmt: skip
    table = [
        dict(base, label="linear", parameters="T=100, q=0.05, sigma=1", exact=2.44,
             eps_lower=0.98, heuristic=2.44, composition=3.5),
        dict(base, label="zeroing", parameters="T=10, q=0.01, sigma=0.5", exact=3.02,
             eps_lower=0.0, heuristic=0.77, composition=4.36),
        dict(base, label="projected", parameters="T=50, q=1, sigma=1, radius=0.5",
             exact=2.28, eps_lower=2.1, heuristic=54.4, composition=54.4,
             shifted_interpolation=10.0),
    ]  # fmt: skip
    paths = plot_exact_truth(fig, {}, {"exact_truth": table})
    assert {p.name for p in paths} == {"exact_truth.png", "exact_truth.pdf"}
    assert all(p.stat().st_size > 10_000 for p in paths)


@pytest.mark.slow
def test_exact_truth_quick(tmp_path):
    paths = run_figure("exact_truth", quick=True, out=tmp_path, progress=False)
    assert {p.name for p in paths} >= {"exact_truth.csv", "exact_truth.png",
                                       "exact_truth_details.csv"}  # fmt: skip
    with open(tmp_path / "exact_truth_details.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(load_figure("exact_truth").params["rows"])
    _check_rows(rows)
    assert all(r["exact_resolved"] == "True" for r in rows)
    for r in rows:  # three grids, each closer to the finest (the error is their change)
        h, h2, h4 = (_num(r[k]) for k in ("exact_h", "exact_h2", "exact_h4"))
        assert abs(h4 - h2) <= abs(h2 - h) + 1e-12, r["construction"]

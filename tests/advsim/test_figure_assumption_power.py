"""The assumption checks' power table: a small run of its compute hook (slow)."""

import dataclasses

import pytest

from advsim.figures import load_figure
from advsim.figures._tables_assumption_power import compute_assumption_power


@pytest.mark.slow
def test_compute_assumption_power_small(tmp_path):
    fig = load_figure("assumption_power", quick=True, out=tmp_path)
    params = dict(fig.params, trials=20_000)
    params["power"] = dict(params["power"], batch_sizes=[1], repeats=2)
    params["null"] = dict(params["null"], linear=[[1, 1.0]], repeats=3)
    params["discrete"] = dict(cases=["binary", "binomial"], repeats=2)
    tables = compute_assumption_power(dataclasses.replace(fig, params=params), {})
    rows = {(r["case"], r["check"]): r for r in tables["assumption_power"]}
    # B = 1: the landscape's central tests keep the side chosen at step 1, far from a
    # Gaussian ROC (rejected in every repeat at 10^5 runs, and at 2 x 10^4).
    assert rows[("landscape sigma=1 T=25 B=1", "gdp")]["rejected_held_out"] == 2
    # Exact nulls: N(1, 1) vs N(0, 1), and the linear process with q = 1 (Gaussian shifts).
    for key in [("gaussian numpy mu=1", "gdp"), ("linear T=1 q=1 sigma=1", "gdp"),
                ("linear T=1 q=1 sigma=1", "family")]:  # fmt: skip
        assert rows[key]["ok"] and rows[key]["repeats"] == 3
    # Discrete scores: binary 0.99 vs 0.01 (the segments through the one threshold point
    # are far from every G_mu) and Binomial(20, .6) vs Binomial(20, .5) (atoms of 12-18%
    # with mu limited to about [0.87, 0.94]): rejected in every repeat at 2 x 10^4 runs.
    for case in ("binary 0.99 vs 0.01", "Binomial(20, .6) vs Binomial(20, .5)"):
        assert rows[(case, "gdp")]["rejected_held_out"] == 2
    assert len(tables["assumption_power_outcomes"]) == 2 * 2 + 2 * 2 + 3 + 2 * 3

"""The gradient-canary figure (Figure 2 of arXiv:2405.14457) as data: its compute hook at a
small scale against the closed form of part (a), and its quick mode end to end (slow)."""

import dataclasses
import math

import pytest

from advsim.bounds import gdp_epsilon
from advsim.figures import load_figure, run_figure
from advsim.figures._plots_gradient_canary import _periodicity


@pytest.mark.slow
def test_periodicity_rows_follow_the_closed_form():
    # Part (a) with n = 4 insertions, sigma = sqrt(n) / mu = 1: the last model is
    # mu_last = n / (sqrt(n k) sigma) = 2 / sqrt(k)-GDP (zero other gradients, deterministic
    # insertion), composition over the insertions is 2-GDP at every k.
    params = dict(insertions=4, ks=[1, 4], dim=2, trials=4000, mu_composition=2.0,
                  poisson_q=0.0, delta=1e-5, seed=3)  # fmt: skip
    rows = _periodicity(params, progress=False)
    assert [(r["k"], r["steps"]) for r in rows] == [(1, 4), (4, 16)]
    for r in rows:
        assert r["exact_last_model"] == pytest.approx(gdp_epsilon(1e-5, 2 / math.sqrt(r["k"])))
        assert r["composition"] == pytest.approx(gdp_epsilon(1e-5, 2.0), rel=1e-3)
        # The assumption-free bound never exceeds the truth; GDP's estimate is near it.
        assert r["eps_delta_lower"] <= r["exact_last_model"] + 1e-9
        assert r["mu_lower"] <= 2 / math.sqrt(r["k"]) + 1e-9
    assert rows[1]["eps_gdp"] < rows[0]["eps_gdp"]


def test_quick_mode_is_smaller_than_the_paper_run():
    full, quick = load_figure("gradient_canary"), load_figure("gradient_canary", quick=True)
    assert full.params["periodicity"]["insertions"] == 250
    assert quick.params["periodicity"]["insertions"] == 10
    assert quick.params["logistic"]["trials"] < full.params["logistic"]["trials"]


@pytest.mark.slow
def test_gradient_canary_quick(tmp_path):
    out = tmp_path / "gc"
    paths = run_figure("gradient_canary", quick=True, out=out, progress=False)
    assert {p.name for p in paths} >= {"gradient_canary.csv", "picks.json", "gradient_canary.png"}
    fig = dataclasses.replace(load_figure("gradient_canary", quick=True), out=out)
    assert fig.params["periodicity"]["ks"] == [1, 5, 25]

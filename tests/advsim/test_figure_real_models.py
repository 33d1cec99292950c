"""The real-model figure as data: its quick mode is smaller than the
full run (fast), and (slow) its quick run end to end reproduces the papers' qualitative
results: k = 1 audits above k = 4 (Cebere et al., Figure 2: the last model of T = n k steps
is less revealing as k grows), the gradient canary audits above the mislabeled input
canary and below composition (Section 5 of arXiv:2410.06186)."""

import csv

import pytest

from advsim.figures import list_figures, load_figure, run_figure


def test_quick_mode_is_smaller_than_the_full_run():
    assert "real_models" in list_figures()
    full, quick = load_figure("real_models"), load_figure("real_models", quick=True)
    for part in ("canaries", "periodicity"):
        assert quick.params[part]["trials"] < full.params[part]["trials"]
        assert quick.params[part]["num_examples"] < full.params[part]["num_examples"]
    assert full.params["periodicity"]["ks"][0] == 1


@pytest.mark.slow
def test_real_models_quick(tmp_path):
    paths = run_figure("real_models", quick=True, out=tmp_path, progress=False)
    assert {p.name for p in paths} >= {"real_models.csv", "real_models.json", "real_models.png"}
    with open(tmp_path / "real_models.csv") as f:
        rows = list(csv.DictReader(f))
    a = {r["canary"]: r for r in rows if r["part"] == "a"}
    b = sorted((r for r in rows if r["part"] == "b"), key=lambda r: int(r["k"]))
    gradient, mislabeled = a["gradient canary (A_GC-S)"], a["input canary, mislabeled"]
    # Measured at --quick (engine with gathered Poisson batches): eps_gdp 2.03 (gradient) vs
    # 1.37 (mislabeled), heuristic 5.40; part (b) eps_gdp 7.37 (k = 1) vs 3.84 (k = 4),
    # composition 10.0, and k = 4's last-iterate heuristic 4.38 (advsim.bounds, T = 20 with
    # the canary at 5 of the steps). Seeds 0-3 of part (b): k = 1 in 7.37-7.98, k = 4 in
    # 2.50-3.89, so the line between them is k = 4's heuristic (a reference value), not a
    # measured ratio (1.9-3.0 over those seeds).
    assert float(gradient["eps_gdp"]) > float(mislabeled["eps_gdp"])
    assert float(gradient["eps_family"]) > float(mislabeled["eps_family"])
    assert float(gradient["eps_family"]) <= float(gradient["heuristic"])
    assert float(b[-1]["eps_gdp"]) <= float(b[-1]["heuristic"]) < float(b[0]["eps_gdp"])
    assert float(b[0]["eps_gdp"]) <= float(b[0]["composition"])
    assert float(gradient["test_accuracy_private"]) > 0.85  # the models learn

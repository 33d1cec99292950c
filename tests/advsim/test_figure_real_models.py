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


def _row(part, k, family_rejected, gdp_rejected, eps):
    return dict(
        part=part, canary="gradient canary (A_GC-S)" if k else "input canary, mislabeled",
        model="logistic", k=k or 1, steps=10, insertions=5, sampling_prob=0.25,
        eps_family=eps, family_assumption_rejected=family_rejected, eps_gdp=eps,
        gdp_assumption_rejected=gdp_rejected, eps_delta_lower=eps / 3, heuristic=5.4,
        composition=6.0 if part == "a" else 10.0,
    )  # fmt: skip


def test_rejected_assumptions_are_drawn_hollow_with_a_legend_entry(tmp_path, monkeypatch):
    # A number whose assumption the held-out runs reject is drawn hollow, with a legend
    # entry, and the layout check finds no legend over data nor cut markers (the figure
    # is kept, not written: `save_figure` runs the same check).
    import advsim.figures._plots_real_models as plots
    from advsim._plot_style import layout_problems

    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda f, stem: drawn.append(f) or [])
    table = [
        _row("a", 1, False, False, 2.0), _row("a", 0, True, False, 1.6),
        _row("b", 1, False, False, 7.4), _row("b", 4, False, True, 3.8),
    ]  # fmt: skip
    fig = load_figure("real_models", quick=True, out=tmp_path)
    plots.plot_real_models(fig, {}, {"real_models": table})
    assert layout_problems(drawn[0]) == []
    ax, bx = drawn[0].axes
    labels_a = [t.get_text() for t in ax.get_legend().get_texts()]
    labels_b = [t.get_text() for t in bx.get_legend().get_texts()]
    assert "audit, heuristic family: assumption rejected by the held-out runs" in labels_a
    assert "audit, GDP: assumption rejected by the held-out runs" in labels_b
    # (a): the family bars are the first two patches; the rejected one is white.
    bars = [p.get_facecolor() for p in ax.patches[:2]]
    assert bars[0] != bars[1] and bars[1] == (1.0, 1.0, 1.0, 1.0)
    # (b): the rejected GDP point (k = 4) is a hollow triangle.
    hollow = [ln for ln in bx.get_lines() if ln.get_label().startswith("audit, GDP: assumption")]
    assert hollow[0].get_xdata().tolist() == [4.0] and hollow[0].get_markerfacecolor() == "white"
    # Without a rejection, no such entry.
    verdicts = dict(family_assumption_rejected=False, gdp_assumption_rejected=False)
    plain = [dict(r, **verdicts) for r in table]
    plots.plot_real_models(fig, {}, {"real_models": plain})
    texts = [t.get_text() for a in drawn[1].axes for t in a.get_legend().get_texts()]
    assert not any("rejected" in t for t in texts)
    import matplotlib.pyplot as plt

    for f in drawn:
        plt.close(f)

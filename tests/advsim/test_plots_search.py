"""The machine_found pictures: the fields picture of one construction (`plot_fields`) and the
table picture (`plot_table`, `plot_machine_found`), on a T = 3 construction and hand-made
rows.

Expected values: the third panel of the fields picture is log(p_in / p_out) of the law it
is given wherever both masses are above the engine's rounding floor, and nowhere else: m
itself for N(1/2, 1) against N(-1/2, 1); the regularizer below has knot values 0.5, -1, 2
and a jump of 0.5 at 0, so its largest |field| is 2 + 0.5 = 2.5 (beyond the last knot); the
ratio panel holds each value divided by the row's composition epsilon.
"""

import dataclasses
import functools
from types import SimpleNamespace

import numpy as np
import pytest

from advsim import CanarySchedule
from advsim.exact import last_iterate_epsilon
from advsim.exact._api import MASS_FLOOR
from advsim.figures import _plots_search, load_figure
from advsim.mechanisms import PiecewiseConstruction, PiecewiseField
from advsim.search import _report, plot_fields


def _tiny() -> PiecewiseConstruction:
    """The T = 3 landscape cell (B = 4, sigma = 2, step sizes 1 then 1/4, the canary at step
    1) with a regularizer that has a jump."""
    return PiecewiseConstruction(
        3, 1.0, 2.0, canary=PiecewiseField.constant(-1.0),
        groups=[PiecewiseField([0.5], [[0.0], [1.0], [1.0]], [[0.0], [-2.0], [-2.0]], steps=3)],
        counts=[4], regularizer=PiecewiseField([-1.0, 0.0, 1.0], [0.5, -1.0, 2.0], [0.0, 0.5, 0.0]),
        step_sizes=[1.0, 0.25, 0.25], canary_schedule=CanarySchedule.only(1, sampled=False),
        batching="fixed",
    )  # fmt: skip


def _spy(monkeypatch, module) -> list:
    """Keeps every figure `module` saves (then saves it as usual)."""
    figures, save = [], module.save_figure

    def keep(fig, stem):
        figures.append(fig)
        return save(fig, stem)

    monkeypatch.setattr(module, "save_figure", keep)
    return figures


def _two_gaussians():
    """A stand-in for `last_iterate_epsilon`'s result: the last model N(+-1/2, 1) in the two
    worlds on a grid of spacing 0.01, whose log-likelihood ratio is m itself."""
    grid = np.linspace(-12.0, 12.0, 2401)
    h = float(grid[1] - grid[0])
    pdf = lambda mu: h * np.exp(-((grid - mu) ** 2) / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    return SimpleNamespace(grid=grid, mass_in=pdf(0.5), mass_out=pdf(-0.5), atoms=0,
                           spacings=(h,), epsilon=1.5, delta=1e-5)  # fmt: skip


def test_plot_fields_draws_three_panels_with_the_log_likelihood_ratio(tmp_path, monkeypatch):
    mech, exact = _tiny(), _two_gaussians()
    figures = _spy(monkeypatch, _report)
    paths = plot_fields(mech, tmp_path / "fields", title="found by a test", exact=exact)
    assert [p.name for p in paths] == ["fields.png", "fields.pdf"]
    assert all(p.stat().st_size > 0 for p in paths)
    (fig,) = figures
    top, middle, bottom = fig.axes
    assert "log" in bottom.get_ylabel() and "density" in middle.get_ylabel()
    # The third panel: log(p_in / p_out) = m where both masses are above the floor, else a gap.
    (llr,) = [line for line in bottom.get_lines() if line.get_label() == "log-likelihood ratio"]
    both = (exact.mass_in > MASS_FLOOR) & (exact.mass_out > MASS_FLOOR)
    y = np.asarray(llr.get_ydata())
    assert np.array_equal(np.isfinite(y), both) and 0 < both.sum() < both.size
    np.testing.assert_allclose(y[both], exact.grid[both], atol=1e-9)
    # The canary: its own style, drawn over the group that has its field at step 1.
    lines = {line.get_label(): line for line in top.get_lines()}
    canary = lines["canary (step 1 only, unsampled)"]
    assert canary.get_linestyle() == "--" and canary.get_color() == "black"
    assert canary.get_zorder() > max(
        line.get_zorder() for label, line in lines.items() if not label.startswith("canary")
    )
    title = fig.get_suptitle()
    for part in ("T = 3", "fixed batch B = 4", r"$\sigma$ = 2", r"$\delta$ = $10^{-5}$",
                 "found by a test", "regularizer 2.5", "canary or group 1 "):  # fmt: skip
        assert part in title, part


def _rows():
    base = dict(steps=25, sampling_prob=1.0, random_exact_epsilon=0.5, heuristic=0.34,
                composition=2.0, search_error=1e-5, found_by="random")  # fmt: skip
    return [
        {**base, "cell": "heatmap-s2-b4", "noise_multiplier": 2.0, "batch_size": 4,
         "paper_exact_epsilon": 1.2, "search_exact_epsilon": 1.99, "confirm_runs": 10**6,
         "eps_lower": 1.0, "guarantee": "rigorous", "heuristic_violation_certified": True},
        {**base, "cell": "heatmap-s2-b1", "noise_multiplier": 2.0, "batch_size": 1,
         "paper_exact_epsilon": 0.5, "search_exact_epsilon": 1.0, "confirm_runs": 10**6,
         "eps_lower": None, "guarantee": "rigorous", "heuristic_violation_certified": False},
        {**base, "cell": "poisson-t10", "steps": 10, "sampling_prob": 0.01,
         "noise_multiplier": 1.0, "batch_size": None, "paper_exact_epsilon": 0.2,
         "search_exact_epsilon": 0.36, "composition": 0.38, "heuristic": 0.17},
    ]  # fmt: skip


def test_plot_table_has_the_ratio_panel_the_audit_and_the_certified_cell(tmp_path, monkeypatch):
    rows = _rows()
    figures = _spy(monkeypatch, _plots_search)
    paths = _plots_search.plot_table(rows, tmp_path / "table", delta=1e-5)
    assert all(p.exists() for p in paths)
    (fig,) = figures
    top, bottom = fig.axes
    ratio = [line for line in bottom.get_lines() if line.get_marker() == "o"][0]
    np.testing.assert_allclose(ratio.get_ydata(), [1.99 / 2.0, 1.0 / 2.0, 0.36 / 0.38])
    stars = [line for line in bottom.get_lines() if line.get_marker() == "*"]
    assert len(stars) == 1 and list(stars[0].get_xdata()) == [0]  # the certified cell only
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    audit = [s for s in labels if s.startswith("black-box eps_lower (rigorous audit")]
    assert len(audit) == 1
    (lower,) = [line for line in top.get_lines() if line.get_label() == audit[0]]
    np.testing.assert_array_equal(lower.get_ydata(), [1.0, np.nan, np.nan])
    printed = {t.get_text() for t in bottom.texts}
    assert {"0.995", "0.50", "0.95"} <= printed
    assert {"1.99", "1.00", "0.36"} <= {t.get_text() for t in top.texts}
    title = top.get_title()
    assert r"$\delta = 10^{-5}$" in title and "T = 25" in title


@pytest.mark.slow  # the quick figure's test draws both pictures too (test_figure_search.py)
def test_plot_machine_found_writes_both_pictures_from_the_cells_folder(
    tmp_path, capsys, monkeypatch
):
    rows = _rows()
    one_grid = functools.partial(last_iterate_epsilon, refinements=1)  # the law on one grid
    monkeypatch.setattr(_report, "last_iterate_epsilon", one_grid)
    _tiny().save(tmp_path / "heatmap-s2-b4" / "best.json", metadata={"exact_epsilon": 1.99})
    fig = dataclasses.replace(load_figure("machine_found", quick=True), out=tmp_path)
    fig.params["fields_cell"] = "heatmap-s8-b16"  # not in the table: the first row is drawn
    paths = _plots_search.plot_machine_found(fig, {}, {"machine_found": rows})
    names = {p.name for p in paths}
    assert {"machine_found.png", "machine_found_fields.png", "machine_found_fields.pdf"} <= names
    assert "drawing heatmap-s2-b4" in capsys.readouterr().out


def test_the_figure_file_names_its_fields_cell():
    assert load_figure("machine_found").params["fields_cell"].startswith("heatmap-")
    quick = load_figure("machine_found", quick=True).params
    assert quick["fields_cell"] == f"heatmap-s{quick['sigmas'][0]:g}-b{quick['batch_sizes'][0]}"


@pytest.mark.parametrize("ratio, text", [(0.9954, "0.995"), (0.994, "0.99"), (1.0, "1.00")])
def test_ratios_near_one_keep_a_third_decimal(ratio, text):
    assert _plots_search._ratio_text(ratio) == text

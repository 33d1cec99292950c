"""Plots: the number in every heatmap cell, contrast, colour bar, ratios, curves.

The figures are inspected through the matplotlib objects (texts, colour bar label) by
capturing the figure that `save_figure` receives; the expected numbers are the table's
own values and their ratios.
"""

import warnings

import matplotlib
import numpy as np
import pytest

import advsim.plotting as plotting

ROWS = [
    {"sampling_prob": q, "noise_multiplier": s, "steps": t, "delta": 1e-5,
     "heuristic": q * t / s, "composition": 2 * q * t / s, "full_batch": q * t / (2 * s)}
    for q in (0.1, 0.2, 0.5) for s in (1.0, 2.0) for t in (1, 10)
]


@pytest.fixture
def captured(monkeypatch):
    """The figures the plot functions would have saved (nothing is written)."""
    figures = []

    def fake_save(fig, path_stem):
        figures.append(fig)
        return []

    monkeypatch.setattr(plotting, "save_figure", fake_save)
    return figures


def _cell_texts(fig):
    return [t for t in fig.axes[0].texts]


def test_heatmap_writes_every_value_with_contrasting_text(captured):
    rows = [r for r in ROWS if r["steps"] == 10]
    plotting.plot_heatmap(rows, "sampling_prob", "noise_multiplier", "heuristic", "unused")
    (fig,) = captured
    texts = _cell_texts(fig)
    assert sorted(t.get_text() for t in texts) == sorted(
        format(r["heuristic"], ".3g") for r in rows
    )
    # Smallest value: darkest cividis colour, white text; largest: lightest, black text.
    by_value = {t.get_text(): t.get_color() for t in texts}
    assert by_value[format(min(r["heuristic"] for r in rows), ".3g")] == "white"
    assert by_value[format(max(r["heuristic"] for r in rows), ".3g")] == "black"
    colorbar = fig.axes[1]
    assert colorbar.get_ylabel() == "heuristic $\\varepsilon$\nat $\\delta=10^{-5}$"
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.2", "0.5"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"]
    assert ax.get_xlabel() == "sampling rate $q$"


def test_heatmap_marks_missing_cells_and_refuses_ambiguous_rows(captured):
    rows = [r for r in ROWS if r["steps"] == 10][:-1]
    plotting.plot_heatmap(rows, "sampling_prob", "noise_multiplier", "heuristic", "unused")
    assert sum(t.get_text() == "n/a" for t in _cell_texts(captured[0])) == 1
    with pytest.raises(ValueError, match="they differ in \\['steps'"):
        plotting.plot_heatmap(ROWS, "sampling_prob", "noise_multiplier", "heuristic", "unused")


def test_ratio_heatmap_over_a_column_and_over_a_baseline(captured):
    rows = [r for r in ROWS if r["noise_multiplier"] == 1.0]
    plotting.plot_ratio_heatmap(rows, "steps", "sampling_prob", "heuristic", "unused",
                                denominator="composition")
    assert {t.get_text() for t in _cell_texts(captured[0])} == {"0.50"}
    assert captured[0].axes[1].get_ylabel() == "heuristic / composition"
    plotting.plot_ratio_heatmap(rows, "steps", "sampling_prob", "heuristic", "unused",
                                baseline={"steps": 1})
    # heuristic = q T / sigma here, so eps(T) / eps(1) = T: 1.00 at T = 1, 10.00 at T = 10.
    assert sorted(t.get_text() for t in _cell_texts(captured[1])) == ["1.00"] * 3 + ["10.00"] * 3
    with pytest.raises(ValueError, match="exactly one of denominator and baseline"):
        plotting.plot_ratio_heatmap(rows, "steps", "sampling_prob", "heuristic", "unused")
    with pytest.raises(ValueError, match="no row has steps = 3"):
        plotting.plot_ratio_heatmap(rows, "steps", "sampling_prob", "heuristic", "unused",
                                    baseline={"steps": 3})


def test_default_colormap_reads_in_greyscale():
    """cividis's lightness increases monotonically, so grey-scale print keeps the order."""
    rgb = matplotlib.colormaps["cividis"](np.linspace(0, 1, 64))[:, :3]
    luminance = rgb @ np.array([0.2126, 0.7152, 0.0722])
    assert np.all(np.diff(luminance) > 0)


def test_curves_from_bounds_only_and_from_csv_strings(captured):
    rows = [r for r in ROWS if r["sampling_prob"] == 0.1 and r["noise_multiplier"] == 1.0]
    plotting.plot_eps_vs_steps(rows, "unused")
    labels = [line.get_label() for line in captured[0].axes[0].get_lines()]
    assert labels == [s["label"] for s in plotting.BOUND_STYLES.values()]
    as_csv = [{k: str(v) for k, v in r.items()} | {"eps_lower": "0.1", "eps_point": ""}
              for r in rows]
    plotting.plot_eps_vs_steps(as_csv, "unused")
    labels = [line.get_label() for line in captured[1].axes[0].get_lines()]
    assert "empirical (lower bound)" in labels and "empirical (point estimate)" not in labels
    assert captured[1].axes[0].get_ylabel() == r"$\varepsilon$ at $\delta=10^{-5}$"


def test_panels_write_png_and_pdf(tmp_path):
    panels = [
        (f"q = {q}", [r for r in ROWS if r["sampling_prob"] == q and r["noise_multiplier"] == 1])
        for q in (0.1, 0.5)
    ]
    paths = plotting.plot_eps_vs_steps_panels(panels, tmp_path / "fig")
    assert [p.name for p in paths] == ["fig.png", "fig.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert not list(tmp_path.glob(".*.tmp"))


def test_heatmap_ignores_every_non_parameter_column_of_a_sweep_table():
    """Two rows of one cell that differ in every column of `AUDIT_COLUMNS` that is not a
    parameter (results, times, the cell's id): the error names no parameter; a parameter
    that differs is named."""
    from advsim.experiment import record_columns
    from advsim.sweep import AUDIT_COLUMNS

    params = set(record_columns("parameter"))
    assert params < set(AUDIT_COLUMNS)

    def row(i):
        r = {c: (f"v{i}" if c not in params else "p") for c in AUDIT_COLUMNS}
        return {"cell": i, "cell_id": f"id{i}", **r, "sampling_prob": 0.1, "steps": 1}

    rows = [row(0), row(1)]
    with pytest.raises(ValueError) as err:
        plotting.plot_heatmap(rows, "sampling_prob", "steps", "heuristic", "/nonexistent/h")
    assert "two rows share" in str(err.value) and "differ in" not in str(err.value)
    rows[1]["method"] = "gdp"
    with pytest.raises(ValueError, match=r"they differ in \['method'\]"):
        plotting.plot_heatmap(rows, "sampling_prob", "steps", "heuristic", "/nonexistent/h")


# ----------------------------------------------------------------------------------------
# Layout: legends clear of labels, titles, tick labels and curves; markers not cut


def test_pictures_of_the_audit_and_the_sweeps_have_a_clear_layout(captured, monkeypatch):
    """`advsim audit`'s eps_vs_steps (six legend entries, one of them a rejected
    assumption), the heat maps of `advsim plot` (a title over the colour bar's column), the
    panels, and the trade-off panels of its_our_loss_figure1 (curves from (0, 1) to (1, 0),
    so no corner of a linear panel is free): `layout_problems` finds nothing."""
    import advsim._plot_tradeoff as tradeoff
    from advsim._plot_style import layout_problems

    monkeypatch.setattr(tradeoff, "save_figure", plotting.save_figure)
    audited = [
        dict(r, eps_lower=0.0 if r["steps"] == 1 else r["heuristic"] / 2,
             eps_point=r["heuristic"], guarantee="assumes Gaussian",
             assumption_rejected=r["steps"] == 10, eps_point_above_composition=False)
        for r in ROWS if r["sampling_prob"] == 0.1 and r["noise_multiplier"] == 1.0
    ]  # fmt: skip
    plotting.plot_eps_vs_steps(audited, "unused", title="q = 0.1, sigma = 1")
    plotting.plot_heatmap(
        [r for r in ROWS if r["steps"] == 10], "sampling_prob", "noise_multiplier",
        "heuristic", "unused", title="T = 10, a title as long as the colour bar's label",
    )  # fmt: skip
    plotting.plot_eps_vs_steps_panels([("a", audited), ("b", audited)], "unused")
    grid = np.linspace(0.0, 1.0, 201)
    curves = [("composition", grid, (1 - grid) ** 3, {}),
              ("linear loss", grid, (1 - grid) ** 2, {"linestyle": "--"}),
              ("observations (20,000 runs/world)", grid, (1 - grid) ** 2.1, {})]  # fmt: skip
    for log in (False, True):
        plotting.plot_tradeoff_panels([{"title": "a", "curves": curves}] * 2, "unused", log=log)
    assert len(captured) == 5
    for fig in captured:
        assert layout_problems(fig) == []


def test_layout_problems_find_a_planted_overlap_and_a_cut_marker():
    """The check can fail: a legend moved over the y label and ticks, a legend inside the
    axes over a curve, and a marker at y = 0 with the axes starting at 0."""
    from advsim._plot_style import layout_problems, styled_pyplot

    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=(3, 2.5))
    ax.plot([1, 2, 3], [1, 2, 3], label="a curve")
    ax.set_ylabel("a long y label")
    ax.legend(loc="center left", bbox_to_anchor=(-0.35, 0.5))
    problems = layout_problems(fig)
    assert any("y label" in p for p in problems) and any("tick labels" in p for p in problems)
    ax.get_legend().remove()
    ax.plot([0, 4], [2, 2], label="across")
    ax.legend(loc="center")
    assert any("covers the line 'across'" in p for p in layout_problems(fig))
    ax.get_legend().remove()
    ax.plot([2.0], [0.0], "v", ms=6, label="zero")
    ax.set_ylim(bottom=0)
    assert any("cut by the axes' edge" in p for p in layout_problems(fig))
    plt.close(fig)


def test_layout_problems_find_planted_text_overlaps_cut_texts_and_merged_markers():
    """The text checks can fail: two texts at one spot, a colour bar's offset text ("+1")
    under the title of a narrow range, a text past the figure's edge, and two series'
    filled markers at the same point; a hollow marker inside a larger filled one is
    readable and not reported."""
    from advsim._plot_style import layout_problems, styled_pyplot

    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=(3, 2.5))
    ax.plot([1, 2, 3], [1, 2, 3])
    ax.text(2, 2, "first note")
    ax.text(2, 2, "second note")
    assert any("'second note'" in p and "overlaps" in p and "'first note'" in p
               for p in layout_problems(fig))  # fmt: skip
    for t in list(ax.texts):
        t.remove()
    ax.text(3.0, 2.0, "a note running far past the right edge of the figure", in_layout=False)
    assert any("past the figure's edge" in p for p in layout_problems(fig))
    ax.texts[0].remove()
    assert layout_problems(fig) == []
    ax.plot([2.0], [1.5], "o", ms=5, label="series a")
    ax.plot([2.0], [1.5], "v", ms=5, label="series b")
    assert any("merge with" in p for p in layout_problems(fig))
    ax.lines[-1].remove()
    ax.plot([2.0], [1.5], "o", ms=10, color="0.7", label="series c", zorder=0)
    ax.lines[-2].set(markerfacecolor="white")
    assert layout_problems(fig) == []
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(3, 2.5))
    image = ax.imshow([[1.0, 1.0004], [1.0007, 1.001]], aspect="auto")
    fig.colorbar(image, ax=ax)  # its ticks read 0.0000 ... 0.0010 under an offset "+1"
    ax.set_title("a title of the heat map\nwith a second line reaching right to its colour bar",
                 fontsize=8)  # fmt: skip
    problems = layout_problems(fig)
    assert any("offset text ('+1') overlaps axes 0's title" in p for p in problems), problems
    plt.close(fig)


# ----------------------------------------------------------------------------------------
# eps_vs_steps: one T, the exact column, the guarantee; ratio heat maps and noise

AUDITED_T10 = {"steps": 10, "delta": 1e-5, "heuristic": 1.5195, "composition": 8.0,
               "full_batch": 0.2711, "exact_epsilon": 1.5197, "exact_error": 4e-4,
               "eps_lower": 0.2079, "eps_point": 1.2535, "guarantee": "rigorous",
               "assumption_rejected": False, "eps_point_above_composition": False}  # fmt: skip


def test_a_one_t_audit_draws_every_series_as_a_marker_side_by_side(captured):
    """One T (a one-T audit, `advsim audit --steps 10`): every series (the three bounds,
    the exact epsilon, the point estimate, the lower bound) is a marker at its value, each
    at its own place beside the others (none merged), and the layout check finds nothing."""
    from advsim._plot_style import layout_problems

    plotting.plot_eps_vs_steps([AUDITED_T10], "unused", title="one T")
    fig = captured[0]
    lines = fig.axes[0].get_lines()
    assert len(lines) == 6
    assert all(line.get_marker() not in (None, "None", "") for line in lines)
    values = {line.get_label(): float(line.get_ydata()[0]) for line in lines}
    assert values["exact (last model)"] == AUDITED_T10["exact_epsilon"]
    assert values["composition (all iterates)"] == AUDITED_T10["composition"]
    fig.canvas.draw()
    xs = [line.get_transform().transform(line.get_xydata())[0, 0] for line in lines]
    assert len({round(x) for x in xs}) == 6  # six different places in pixels
    assert layout_problems(fig) == []


def test_a_one_t_audit_whose_point_estimate_passes_composition_keeps_its_axes(tmp_path):
    """`advsim audit --steps 10` with the point estimate above composition (few runs):
    every point is then "above", and the plain point series was drawn empty and unclipped,
    whose extent (the figure's corner) collapsed constrained layout's axes to nothing (an
    "internal error" of the command under warnings as errors). Saved for real here."""
    row = dict(AUDITED_T10, eps_point=1.5 * AUDITED_T10["composition"],
               eps_point_above_composition=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no collapsed layout, no FigureLayoutWarning
        paths = plotting.plot_eps_vs_steps([row], tmp_path / "one")
    assert [p.suffix for p in paths] == [".png", ".pdf"]


def test_a_narrow_heatmap_wraps_its_marks_note_inside_the_figure(tmp_path):
    """Three columns make a 3.5-inch figure; the note of the "!" mark (57 characters) ran
    past its edge on one line (the sweep tutorial's point-estimate heatmap, cut). Saved
    for real: `save_figure` warns on a label past the edge."""
    rows = [dict(sampling_prob=q, noise_multiplier=s, eps_point=1.0 + q,
                 eps_point_above_composition=q == 0.1)
            for q in (0.01, 0.1, 1.0) for s in (0.5, 1.0, 2.0)]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a FigureLayoutWarning fails the test
        paths = plotting.plot_heatmap(
            rows, "sampling_prob", "noise_multiplier", "eps_point", tmp_path / "narrow"
        )
    assert [p.suffix for p in paths] == [".png", ".pdf"]


def test_eps_vs_steps_draws_the_exact_column_and_names_the_guarantee(captured):
    """Several T: `exact_epsilon` is a line of its own, labelled, through the rows' values;
    the lower bound's legend entry names the rows' guarantee, "rigorous" included."""
    rows = [dict(AUDITED_T10, steps=t, exact_epsilon=e) for t, e in ((1, 8.0), (10, 1.52))]
    plotting.plot_eps_vs_steps(rows, "unused")
    lines = {line.get_label(): line for line in captured[0].axes[0].get_lines()}
    assert list(lines["exact (last model)"].get_ydata()) == [8.0, 1.52]
    assert "empirical (lower bound; rigorous)" in lines
    assert "empirical (point estimate, not a bound)" in lines


@pytest.mark.parametrize("relative_error", [3e-4, 0.05])
def test_ratio_heatmap_colours_never_spread_noise(captured, relative_error):
    """heuristic / exact over a grid where the ratios span 1.0000 to 1.0005 (numerical
    noise): the colour range is at least `RATIO_MIN_SPAN` wide and at least twice the
    largest stated error of a ratio (|r| (e_exact / exact), first order: 2 x 1.0005 x
    `relative_error` for the larger error), and the colour bar has no offset text."""
    rows = [
        {"steps": t, "sampling_prob": q, "heuristic": 2.0 * (1 + 1e-4 * i),
         "exact_epsilon": 2.0, "exact_error": 2.0 * relative_error}
        for i, (t, q) in enumerate((t, q) for t in (1, 10, 100) for q in (0.01, 0.1))
    ]  # fmt: skip
    plotting.plot_ratio_heatmap(rows, "steps", "sampling_prob", "heuristic", "unused",
                                denominator="exact_epsilon", fmt=".4f")  # fmt: skip
    fig = captured[0]
    image = fig.axes[0].get_images()[0]
    span = image.norm.vmax - image.norm.vmin
    expected = max(plotting.RATIO_MIN_SPAN, 2 * 1.0005 * relative_error)
    assert span == pytest.approx(expected, rel=1e-9)
    fig.canvas.draw()
    assert fig.axes[1].yaxis.get_offset_text().get_text() == ""

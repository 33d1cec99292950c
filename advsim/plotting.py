"""Figures fit for a paper: readable in black-and-white print, PNG and PDF.

- `plot_eps_vs_steps`, `plot_eps_vs_steps_panels`: epsilon against T (or another
  parameter), the three bounds as reference lines told apart by line style, the exact
  epsilon of the last model (when there is one) as a thick light line, the empirical
  epsilon (when there is one) as markers, the lower bound's guarantee in the legend.
- `plot_heatmap`: one value over a grid of two parameters, the value written in every cell,
  a labelled colour bar; the colour map's lightness is monotone (cividis, Greys), so the
  order survives grey-scale printing, and each number's colour is chosen for contrast.
- `plot_ratio_heatmap`: a ratio over such a grid: one column over another (e.g. heuristic
  / composition), or a column over its value at a baseline (e.g. eps(T) / eps(1)).
- `plot_tradeoff_panels`, `plot_eps_emp_vs_eps`: Annamalai (2024)'s Figures 1-2.

Cells and markers whose number rests on an assumption, whose assumption was rejected, or
whose estimate lies above composition are marked (`MARK_NOTES`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from advsim._plot_marks import MARK_NOTES as MARK_NOTES
from advsim._plot_marks import mark, mark_legend, mark_matrix
from advsim._plot_style import (
    as_number,
    dodged,
    fit_data_limits,
    fit_figure_legends,
    fit_title,
    guarantee_text,
    has_column,
    relative_error,
    save_figure,
    styled_pyplot,
    symbol,
    tex_number,
)
from advsim._plot_tradeoff import plot_eps_emp_vs_eps, plot_tradeoff_panels
from advsim.experiment import record_columns

__all__ = [
    "plot_eps_emp_vs_eps",
    "plot_eps_vs_steps",
    "plot_eps_vs_steps_panels",
    "plot_heatmap",
    "plot_ratio_heatmap",
    "plot_tradeoff_panels",
    "save_figure",
]

#: Line styles carry the meaning, so the figure survives grey-scale printing.
BOUND_STYLES = {
    "composition": dict(color="0.0", linestyle="-", label="composition (all iterates)"),
    "heuristic": dict(color="0.35", linestyle="--", label="last-iterate heuristic"),
    "full_batch": dict(color="0.55", linestyle=":", label="full batch (DP-GD)"),
}

#: Axis and colour-bar labels of the usual columns.
LABELS = {
    "steps": "steps $T$",
    "sampling_prob": "sampling rate $q$",
    "noise_multiplier": r"noise multiplier $\sigma$",
    "target_epsilon": r"target $\varepsilon$ (composition)",
    "eps_lower": r"empirical $\varepsilon$ (lower bound)",
    "eps_point": r"empirical $\varepsilon$ (point estimate)",
    "heuristic": r"heuristic $\varepsilon$",
    "composition": r"composition $\varepsilon$",
    "full_batch": r"full-batch $\varepsilon$",
    "trials": "runs per world",
    "delta": r"$\delta$",
    "clip_norm": "clip norm $C$",
    "learning_rate": r"learning rate $\eta$",
}


def _delta_text(rows: Sequence[Mapping]) -> str | None:
    delta = as_number(rows[0].get("delta")) if rows else math.nan
    return rf"$\delta={tex_number(delta)}$" if np.isfinite(delta) else None


def _label(key: str) -> str:
    return LABELS.get(key, key.replace("_", " "))


_RATIO_LABELS = {
    "eps_lower": r"empirical $\varepsilon$ (lower)",
    "eps_point": r"empirical $\varepsilon$",
    "heuristic": "heuristic",
    "composition": "composition",
    "full_batch": "full batch",
}


def _ratio_label(key: str) -> str:
    return _RATIO_LABELS.get(key, _label(key))


#: The exact epsilon of the last model: a thick light line under the bounds (where the
#: heuristic is exact the two coincide and both stay visible).
EXACT_STYLE = dict(color="0.7", linestyle="-", linewidth=3.0, zorder=0)

#: Markers of a series drawn at a single x (a one-T audit): one shape per bound.
_SINGLE_MARKERS = {"composition": "s", "heuristic": "D", "full_batch": "p", "exact": "o"}

#: Points between two series' markers at the same x (side by side, never one blob).
_DODGE_PT = 6.0


def _exact_key(rows: Sequence[Mapping]) -> str | None:
    """The column holding the exact epsilon of the last model, if the rows have one."""
    return next((k for k in ("exact_epsilon", "exact") if has_column(rows, k)), None)


def _draw_curves(ax, rows: Sequence[Mapping], x: str, *, legend: bool = True) -> None:
    """The bounds (lines), the exact epsilon of the last model (a thick light line, where
    the rows have `exact_epsilon` or `exact`), the point estimate (circles) and the lower
    bound (triangles, labelled with its guarantee). A single x (a one-T audit) draws every
    series as a marker, side by side; the two empirical markers at one x always sit side
    by side. Markers are not clipped: an audit that certifies nothing sits at 0, the
    axes' edge."""
    rows = sorted(rows, key=lambda r: as_number(r[x]))
    xs = np.array([as_number(r[x]) for r in rows])
    single = len(set(xs[np.isfinite(xs)].tolist())) == 1
    exact = _exact_key(rows)
    series = [k for k in BOUND_STYLES if has_column(rows, k)] + ([exact] if exact else [])
    empirical = [k for k in ("eps_point", "eps_lower") if has_column(rows, k)]
    order = (series if single else []) + empirical

    def shifted(key):
        """transData moved sideways by the series' place among those at one x."""
        return dodged(ax, order.index(key), len(order), _DODGE_PT) if key in order else ax.transData

    for key in series:
        ys = [as_number(r.get(key)) for r in rows]
        style = dict(EXACT_STYLE, label="exact (last model)") if key == exact else BOUND_STYLES[key]
        if single:
            bound = key != exact
            marker = _SINGLE_MARKERS["exact" if key == exact else key]
            ax.plot(xs, ys, linestyle="none", marker=marker,
                    mfc="white" if bound else style["color"], mec=style["color"] if bound
                    else "0.45", ms=5, label=style["label"], transform=shifted(key),
                    clip_on=False)  # fmt: skip
        else:
            ax.plot(xs, ys, **style)
    if "eps_point" in empirical:
        above = np.array([mark(r, "eps_point") == "!" for r in rows])
        pts = np.array([as_number(r.get("eps_point")) for r in rows])
        # Never an empty unclipped series: its extent, the figure's corner, collapses the axes.
        if (~above).any():
            ax.plot(
                xs[~above], pts[~above], linestyle="none", marker="o", mfc="white", mec="0.0",
                ms=4.5, label="empirical (point estimate, not a bound)", clip_on=False,
                transform=shifted("eps_point"),
            )
        if above.any():
            ax.plot(
                xs[above], pts[above], linestyle="none", marker="o", mfc="white", mec="0.6",
                ms=4.5, label="point estimate above composition (outside the possible range)",
                clip_on=False, transform=shifted("eps_point"),
            )
    if "eps_lower" in empirical:
        lows = np.array([as_number(r.get("eps_lower")) for r in rows])
        guarantees = guarantee_text(rows)  # the legend names what the bound rests on
        label = "empirical (lower bound" + (f"; {guarantees})" if guarantees else ")")
        ax.plot(xs, lows, linestyle="none", marker="v", color="0.0", ms=4.5, label=label,
                clip_on=False, transform=shifted("eps_lower"))
        rejected = np.array([mark(r, "eps_lower").endswith("\u2021") for r in rows])
        if rejected.any():
            ax.plot(
                xs[rejected], lows[rejected], linestyle="none", marker="x", color="0.0",
                ms=8, label="assumption rejected by the held-out runs", clip_on=False,
                transform=shifted("eps_lower"),
            )
    fit_data_limits(ax)
    if single:
        x0 = float(xs[np.isfinite(xs)][0])
        ax.set_xticks([x0], [f"{x0:g}"])
        half = 1.0 if x0 == 0 else 0.1 * abs(x0)
        ax.set_xlim(x0 - half, x0 + half)
    elif len(xs) > 1 and xs.min() > 0 and xs.max() / xs.min() >= 20:
        ax.set_xscale("log")
    ax.set_xlabel(_label(x))
    delta = _delta_text(rows)
    ax.set_ylabel(rf"$\varepsilon$ at {delta}" if delta else r"$\varepsilon$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    if legend:
        ax.legend(frameon=False, loc="best")


def plot_eps_vs_steps(
    rows: Sequence[Mapping],
    path_stem: str | Path,
    *,
    title: str | None = None,
    x: str = "steps",
) -> list[Path]:
    """Epsilon against T with the three bounds as reference lines, the exact epsilon of
    the last model (where the rows have it) as a thick light line, the audit as markers.

    Args:
        rows: records with keys steps, heuristic, composition, full_batch and, when
            computed, exact_epsilon (or exact) and, when audited, eps_lower, eps_point and
            guarantee (named in the lower bound's legend entry) (e.g.
            `AuditRecord.to_dict()` or the rows of a sweep table), one per T. Missing
            columns are left out of the plot. With a single T every series is a marker,
            side by side.
        path_stem: output path without extension; writes .png and .pdf.
        title: optional title (e.g. the fixed parameters).
        x: the column on the horizontal axis (default "steps"); log scale when it spans a
            factor of 20 or more.

    Returns:
        The written paths.
    """
    plt = styled_pyplot()
    fig, ax = plt.subplots(figsize=(3.6, 2.7))
    _draw_curves(ax, rows, x, legend=False)
    # The legend below the axes, one entry a line (the labels are long): inside the axes
    # it covered the curves, and constrained layout drew it over the y label.
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        fig.set_size_inches(3.6, 2.7 + 0.17 * len(labels))
        fig.legend(handles, labels, loc="outside lower center", frameon=False, ncol=1)
    if title:
        fit_title(ax, title, fontsize=8)
    return save_figure(fig, path_stem)


def plot_eps_vs_steps_panels(
    panels: Sequence[tuple[str, Sequence[Mapping]]],
    path_stem: str | Path,
    *,
    x: str = "steps",
    ncols: int | None = None,
    suptitle: str | None = None,
) -> list[Path]:
    """Several eps-vs-T panels side by side, labelled (a), (b), ..., one shared legend.

    Args:
        panels: `(title, rows)` per panel; rows as for `plot_eps_vs_steps`.
        path_stem: output path without extension; writes .png and .pdf.
        x: the column on the horizontal axes.
        ncols: panels per row (default: all in one row, at most 4).
        suptitle: an optional title over all panels.

    Returns:
        The written paths.
    """
    if not panels:
        raise ValueError("panels must not be empty")
    plt = styled_pyplot()
    n = len(panels)
    ncols = ncols or min(n, 4)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.6 * ncols + 0.3, 2.3 * nrows + 0.5), squeeze=False
    )
    for i, (ax, (title, rows)) in enumerate(zip(axes.flat, panels, strict=False)):
        _draw_curves(ax, rows, x, legend=False)
        ax.set_title(f"({chr(ord('a') + i)}) {title}", fontsize=8)
        if i % ncols:
            ax.set_ylabel("")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    seen: dict = {}  # every panel's entries (some appear only where a mark applies)
    for ax in list(axes.flat)[:n]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    labels = list(seen)
    long = any(len(label) > 30 for label in labels)
    fig.legend(list(seen.values()), labels, loc="outside lower center",
               ncols=min(len(labels), 3 if long else 5), frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=9)
    fit_figure_legends(fig)
    return save_figure(fig, path_stem)


def _axis_values(rows: Sequence[Mapping], key: str) -> list:
    values = []
    for r in rows:
        v = r.get(key)
        if v not in values:
            values.append(v)
    nums = [as_number(v) for v in values]
    if all(np.isfinite(nums)):
        order = np.argsort(nums, kind="stable")
        return [values[i] for i in order]
    return values


def _tick(value) -> str:
    x = as_number(value)
    return f"{x:g}" if np.isfinite(x) else str(value)


def _pivot(rows: Sequence[Mapping], x: str, y: str, value) -> tuple[list, list, np.ndarray]:
    """(x values, y values, matrix[y, x]); `value(row)` gives a cell's number."""
    xs, ys = _axis_values(rows, x), _axis_values(rows, y)
    ix = {repr(v): i for i, v in enumerate(xs)}
    iy = {repr(v): i for i, v in enumerate(ys)}
    mat = np.full((len(ys), len(xs)), np.nan)
    seen = {}
    for r in rows:
        key = (iy[repr(r.get(y))], ix[repr(r.get(x))])
        if key in seen:
            other = _varying(rows, exclude={x, y})
            raise ValueError(
                f"two rows share {x}={r.get(x)!r}, {y}={r.get(y)!r}"
                + (f"; they differ in {other}: select one value of each first" if other else "")
            )
        seen[key] = r
        mat[key] = value(r)
    return xs, ys, mat


#: Columns of a sweep table that are not parameters: the cell's position and id, and
#: every field of `advsim.experiment.AuditRecord` that is a result or a time (the table's
#: columns, `advsim.sweep.AUDIT_COLUMNS` and `BOUNDS_COLUMNS`, are its fields).
_NOT_PARAMS = frozenset(
    {"cell", "cell_id", *(c for c in record_columns() if c not in record_columns("parameter"))}
)


def _varying(rows: Sequence[Mapping], exclude) -> list[str]:
    keys = [k for k in (rows[0] if rows else {}) if k not in exclude and k not in _NOT_PARAMS]
    return [k for k in keys if len({repr(r.get(k)) for r in rows}) > 1]


def _draw_heatmap(
    fig, ax, xs, ys, mat, *, x, y, cmap, fmt, colorbar_label, log_color, center=None,
    marks=None, min_span=0.0,
):
    """`min_span`: the colour range's least width, widened about the cells' midpoint (a
    range of numerical noise gets nearby colours, not the whole map)."""
    from matplotlib import colors

    finite = mat[np.isfinite(mat)]
    if finite.size == 0:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = float(finite.min()), float(finite.max())
    if hi - lo < min_span:
        mid = (lo + hi) / 2
        lo, hi = mid - min_span / 2, mid + min_span / 2
    if log_color and finite.size and lo > 0:
        norm = colors.LogNorm(vmin=lo, vmax=hi if hi > lo else lo * 1.0001)
    else:
        norm = colors.Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1e-12)
    cm = _colormap(cmap)
    shown = np.ma.masked_invalid(mat)
    im = ax.imshow(shown, cmap=cm, norm=norm, origin="lower", aspect="auto",
                   interpolation="nearest")
    ax.set_xticks(range(len(xs)), [_tick(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_tick(v) for v in ys])
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    ax.tick_params(length=0)
    ax.set_xticks(np.arange(len(xs) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(ys) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1.0)
    ax.tick_params(which="minor", length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    size = 7 if max(len(xs), len(ys)) <= 8 else 6
    for (i, j), v in np.ndenumerate(mat):
        if not np.isfinite(v):
            ax.text(j, i, "n/a", ha="center", va="center", fontsize=size, color="0.3")
            continue
        r, g, b, _ = cm(norm(v))
        luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
        cell_mark = "" if marks is None else marks[i, j]
        ax.text(j, i, format(v, fmt) + cell_mark, ha="center", va="center", fontsize=size,
                color="white" if luminance < 0.5 else "black")
    mark_legend(ax, marks)
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label(colorbar_label, fontsize=7)
    if hasattr(cbar.formatter, "set_useOffset"):  # ticks as the numbers, no "+1" above
        cbar.formatter.set_useOffset(False)
    if center is not None and lo < center < hi:
        cbar.ax.axhline(center, color="black", linewidth=0.8)
    return im


def _colormap(name):
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="0.93")


def _figsize(xs, ys):
    return (1.6 + 0.62 * max(len(xs), 3), 0.9 + 0.42 * max(len(ys), 3))


def plot_heatmap(
    rows: Sequence[Mapping],
    x: str,
    y: str,
    value: str,
    path_stem: str | Path,
    *,
    title: str | None = None,
    fmt: str = ".3g",
    cmap: str = "cividis",
    log_color: bool = False,
    colorbar_label: str | None = None,
) -> list[Path]:
    """`value` over the grid of `x` (columns) and `y` (rows), the number in every cell.

    Args:
        rows: table rows (e.g. a sweep's), one per (x, y) pair; missing pairs show "n/a".
        x, y: the columns on the horizontal and vertical axes (sorted when numeric).
        value: the column written in the cells and coloured. For `eps_lower` and
            `eps_point`, cells are marked from the rows' `guarantee`,
            `assumption_rejected` and `eps_point_above_composition` (see `MARK_NOTES`;
            the meaning is written under the figure).
        path_stem: output path without extension; writes .png and .pdf.
        title: optional title (e.g. the parameters held fixed).
        fmt: format of the numbers (default 3 significant digits).
        cmap: a matplotlib colour map; the default cividis (and Greys) have monotone
            lightness, so the order reads in grey-scale print too.
        log_color: logarithmic colour scale (positive values).
        colorbar_label: default: a label for `value` (with delta when the rows have one).

    Returns:
        The written paths.

    Raises:
        ValueError: two rows with the same (x, y) (another parameter varies: select first).

    Example:
        >>> rows = [dict(q=q, s=s, eps=q / s) for q in (0.1, 0.2) for s in (1, 2)]
        >>> paths = plot_heatmap(rows, "q", "s", "eps", "/tmp/advsim-doctest-heatmap")
    """
    plt = styled_pyplot()
    xs, ys, mat = _pivot(rows, x, y, lambda r: as_number(r.get(value)))
    if colorbar_label is None:
        colorbar_label = _label(value)
        delta = _delta_text(rows)
        if value in LABELS and "varepsilon" in LABELS[value] and delta:
            colorbar_label += f"\nat {delta}"
    fig, ax = plt.subplots(figsize=_figsize(xs, ys))
    _draw_heatmap(fig, ax, xs, ys, mat, x=x, y=y, cmap=cmap, fmt=fmt,
                  colorbar_label=colorbar_label, log_color=log_color,
                  marks=mark_matrix(rows, x, y, xs, ys, [value]))
    if title:
        fit_title(ax, title, fontsize=8)
    return save_figure(fig, path_stem)


#: The least width of a ratio heat map's colour range: ratios closer than this (2%) get
#: nearby colours, so a grid of ratios that differ by numerical noise (e.g. 1.0000 to
#: 1.0010) is not spread over the whole colour map.
RATIO_MIN_SPAN = 0.02


def plot_ratio_heatmap(
    rows: Sequence[Mapping],
    x: str,
    y: str,
    numerator: str,
    path_stem: str | Path,
    *,
    denominator: str | None = None,
    baseline: Mapping | None = None,
    title: str | None = None,
    fmt: str = ".2f",
    cmap: str = "cividis",
    colorbar_label: str | None = None,
) -> list[Path]:
    """A ratio over the grid of `x` and `y`, the number in every cell.

    Exactly one of:
    - `denominator`: the column to divide by, row by row (e.g. "heuristic" over
      "composition": how much hiding the iterates buys);
    - `baseline`: `{column: value}`, divide each row's `numerator` by its value in the row
      that has the baseline value and the same other parameters, e.g. `{"steps": 1}` for
      eps(T) / eps(1) (the amplification rate of a canary used at step 1).

    Args:
        rows: table rows, one per (x, y) pair.
        x, y: the columns on the horizontal and vertical axes.
        numerator: the column divided.
        path_stem: output path without extension; writes .png and .pdf.
        denominator: see above.
        baseline: see above.
        title: optional title.
        fmt: format of the numbers (default 2 decimals).
        cmap: colour map (monotone lightness by default); a line on the colour bar marks 1.
            The colour range is at least `RATIO_MIN_SPAN` wide and at least twice the
            largest error of a cell's ratio (from the stated errors of its columns:
            `exact_error` beside the exact epsilon, `<column>_error` beside others), so
            differences within numerical noise get nearby colours; the colour bar's ticks
            are the ratios themselves (no offset).
        colorbar_label: default "numerator / denominator".

    Returns:
        The written paths.
    """
    if (denominator is None) == (baseline is None):
        raise ValueError("give exactly one of denominator and baseline")
    if denominator is not None:
        def ratio(r):
            return as_number(r.get(numerator)) / as_number(r.get(denominator))

        def ratio_error(r):  # relative, to first order: e_n/|n| + e_d/|d|
            return relative_error(r, numerator) + relative_error(r, denominator)

        label = f"{_ratio_label(numerator)} / {_ratio_label(denominator)}"
    else:
        if len(baseline) != 1:
            raise ValueError(f"baseline must name one column, got {dict(baseline)!r}")
        (bkey, bval), = baseline.items()
        # "The same other parameters": the same position on the axes that are not bkey.
        others = [k for k in (x, y) if k != bkey]

        def key_of(r):
            return tuple(repr(r.get(k)) for k in others)

        base = {
            key_of(r): as_number(r.get(numerator))
            for r in rows
            if as_number(r.get(bkey)) == as_number(bval) or r.get(bkey) == bval
        }
        if not base:
            raise ValueError(f"no row has {bkey} = {bval!r} to divide by")

        def ratio(r):
            return as_number(r.get(numerator)) / base.get(key_of(r), math.nan)

        base_error = {
            key_of(r): relative_error(r, numerator)
            for r in rows
            if as_number(r.get(bkey)) == as_number(bval) or r.get(bkey) == bval
        }

        def ratio_error(r):  # relative, to first order
            return relative_error(r, numerator) + base_error.get(key_of(r), 0.0)

        label = f"{_ratio_label(numerator)} / its value at {symbol(bkey)} = {_tick(bval)}"
    plt = styled_pyplot()
    with np.errstate(divide="ignore", invalid="ignore"):
        xs, ys, mat = _pivot(rows, x, y, ratio)
        errors = _pivot(rows, x, y, ratio_error)[2]
    mat[~np.isfinite(mat)] = np.nan
    stated = (np.abs(mat) * errors)[np.isfinite(errors) & np.isfinite(mat)]
    min_span = max(RATIO_MIN_SPAN, 2.0 * float(stated.max()) if stated.size else 0.0)
    fig, ax = plt.subplots(figsize=_figsize(xs, ys))
    marked = [numerator] + ([denominator] if denominator else [])
    _draw_heatmap(fig, ax, xs, ys, mat, x=x, y=y, cmap=cmap, fmt=fmt,
                  colorbar_label=colorbar_label or label, log_color=False, center=1.0,
                  marks=mark_matrix(rows, x, y, xs, ys, marked), min_span=min_span)
    if title:
        fit_title(ax, title, fontsize=8)
    return save_figure(fig, path_stem)

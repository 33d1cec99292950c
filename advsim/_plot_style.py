"""The look every figure shares: pyplot's style, saving, and reading table values."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from advsim._io import atomic_path

__all__ = [
    "FigureLayoutWarning",
    "as_number",
    "dodged",
    "fit_data_limits",
    "fit_figure_legends",
    "fit_title",
    "guarantee_text",
    "has_column",
    "layout_problems",
    "relative_error",
    "save_figure",
    "styled_pyplot",
    "symbol",
    "tex_number",
]


class FigureLayoutWarning(UserWarning):
    """A saved figure with a legend over a text, another legend or the data, a text over
    another text, a text or legend past the figure's edge, markers cut or hidden by the
    axes' edge, or two series' markers merged (`layout_problems`)."""


def styled_pyplot():
    """`matplotlib.pyplot` with the figures' style (fonts, line widths, dpi) set, off-screen."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 9,
            "axes.labelsize": 9,
            "legend.fontsize": 8,
            "lines.linewidth": 1.4,
            "savefig.dpi": 200,
            "figure.constrained_layout.use": True,
        }
    )
    return plt


# Overlaps smaller than this (pixels at the figure's dpi, each way) are not reported:
# boxes that merely touch.
_OVERLAP_PX = 1.0


def _tick_labels(axis) -> list:
    """The tick labels `axis` draws (its ticks within the view limits)."""
    ticks = axis._update_ticks()
    return [t.label1 for t in ticks] + [t.label2 for t in ticks]


def _texts(fig, legends=()) -> list:
    """`(what, artist)` of every visible, non-empty text the figure draws outside its
    legends: titles, axis labels, tick labels, offset texts (the "+1" or "1e-3" above an
    axis) and texts placed on the figure or in an axes (e.g. a heat map's numbers)."""
    out = []
    for attr, what in (("_suptitle", "the title"), ("_supxlabel", "the figure's x label"),
                       ("_supylabel", "the figure's y label")):  # fmt: skip
        if getattr(fig, attr, None) is not None:
            out.append((what, getattr(fig, attr)))
    out += [("a figure text", t) for t in fig.texts]
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        name = f"axes {i}"
        out += [
            (f"{name}'s x label", ax.xaxis.label),
            (f"{name}'s y label", ax.yaxis.label),
            (f"{name}'s title", ax.title),
            (f"{name}'s title", ax._left_title),
            (f"{name}'s title", ax._right_title),
            (f"{name}'s x offset text", ax.xaxis.get_offset_text()),
            (f"{name}'s y offset text", ax.yaxis.get_offset_text()),
        ]
        out += [(f"{name}'s tick labels", t)
                for t in _tick_labels(ax.xaxis) + _tick_labels(ax.yaxis)]  # fmt: skip
        out += [(f"{name}'s text", t) for t in ax.texts]
    seen = {id(t) for leg in legends for t in [*leg.get_texts(), leg.get_title()]}
    kept = []
    for what, text in out:  # the title is among the figure's texts too: once each
        if text.get_visible() and text.get_text().strip() and id(text) not in seen:
            seen.add(id(text))
            kept.append((what, text))
    return kept


def _overlap(a, b) -> bool:
    from matplotlib.transforms import Bbox

    inter = Bbox.intersection(a, b)
    return inter is not None and inter.width > _OVERLAP_PX and inter.height > _OVERLAP_PX


def _line_points(line, step: float = 2.0):
    """Display coordinates along a plotted line (its segments sampled every `step` px for
    a line drawn, its vertices for markers only)."""
    xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    if line.get_linestyle() in ("None", "none", "", " ") or len(xy) < 2:
        return xy
    pieces = [xy[:1]]
    for a, b in zip(xy[:-1], xy[1:], strict=True):
        n = max(1, int(np.hypot(*(b - a)) / step))
        t = np.linspace(0.0, 1.0, n + 1)[1:, None]
        pieces.append(a + t * (b - a))
    return np.concatenate(pieces)


def _marker_centres(line):
    """Display coordinates of a line's finite markers."""
    xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
    return xy[np.all(np.isfinite(xy), axis=1)]


def _has_markers(line) -> bool:
    return line.get_visible() and line.get_marker() not in (None, "None", "none", "", " ")


def _text_problems(fig, renderer, texts, boxes) -> list[str]:
    """Texts over texts, texts (and legends) reaching past the figure's edge."""
    problems = []
    extents = [(what, t, t.get_window_extent(renderer)) for what, t in texts]
    for k, (what, text, box) in enumerate(extents):
        for other_what, other, other_box in extents[:k]:
            if _overlap(box, other_box):
                problems.append(
                    f"{what} ({text.get_text()!r}) overlaps {other_what} ({other.get_text()!r})"
                )
    edge = fig.bbox
    named = [(f"{w} ({t.get_text()!r})", box) for w, t, box in extents]
    named += [(f"legend {k}", box) for k, (_, box) in enumerate(boxes)]
    for what, box in named:
        if (box.x0 < edge.x0 - _OVERLAP_PX or box.y0 < edge.y0 - _OVERLAP_PX
                or box.x1 > edge.x1 + _OVERLAP_PX or box.y1 > edge.y1 + _OVERLAP_PX):
            problems.append(f"{what} reaches past the figure's edge (cut)")
    return problems


def _marker_problems(fig, renderer) -> list[str]:
    """Markers cut in half by the axes' edge, hidden outside it, or merged with another
    series' marker (centres closer than 0.6 of the two radii together: one blob)."""
    from matplotlib.container import ErrorbarContainer

    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        frame = ax.get_window_extent(renderer)
        # An error bar's caps belong to its marker: not a series of their own.
        caps = {id(cap) for c in ax.containers if isinstance(c, ErrorbarContainer)
                for cap in c.lines[1]}  # fmt: skip
        lines = [line for line in ax.get_lines() if _has_markers(line) and id(line) not in caps]
        for line in lines:
            if not line.get_clip_on():
                continue
            r = line.get_markersize() * fig.dpi / 72.0 / 2.0
            xy = _marker_centres(line)
            x, y = xy[:, 0], xy[:, 1]
            near = (
                (np.minimum(np.abs(x - frame.x0), np.abs(x - frame.x1)) < r - 0.5)
                & (y >= frame.y0 - r) & (y <= frame.y1 + r)
            ) | (
                (np.minimum(np.abs(y - frame.y0), np.abs(y - frame.y1)) < r - 0.5)
                & (x >= frame.x0 - r) & (x <= frame.x1 + r)
            )  # fmt: skip
            if near.any():
                problems.append(
                    f"axes {i}: {int(near.sum())} marker(s) of {line.get_label()!r} cut by "
                    "the axes' edge"
                )
            outside = ~near & (
                (x < frame.x0) | (x > frame.x1) | (y < frame.y0) | (y > frame.y1)
            )
            if outside.any():
                problems.append(
                    f"axes {i}: {int(outside.sum())} marker(s) of {line.get_label()!r} "
                    "outside the axes (not drawn)"
                )
        for k, line in enumerate(lines):
            a = _marker_centres(line)
            ra = line.get_markersize() * fig.dpi / 72.0 / 2.0
            for other in lines[:k]:
                b = _marker_centres(other)
                if not len(a) or not len(b):
                    continue
                rb = other.get_markersize() * fig.dpi / 72.0 / 2.0
                dist = np.hypot(*(a[:, None, :] - b[None, :, :]).transpose(2, 0, 1))
                merged = int((dist < 0.6 * (ra + rb)).sum())
                if merged and not _concentric(line, other):
                    problems.append(
                        f"axes {i}: {merged} marker(s) of {line.get_label()!r} merge with "
                        f"those of {other.get_label()!r}"
                    )
    return problems


def _hollow(line) -> bool:
    """Markers whose inside shows what lies under them: unfilled or line-only (x, +)."""
    return (
        str(line.get_markerfacecolor()) in ("none", "white", "w")
        or line.get_fillstyle() == "none"
        or line.get_marker() in ("x", "+", "1", "2", "3", "4", "_", "|")
    )


def _concentric(a, b) -> bool:
    """Two markers drawn one inside the other and both readable: sizes at least 1.6 apart
    and one of them hollow (e.g. a cross over a triangle, a ring inside a grey disc)."""
    small, big = sorted((a, b), key=lambda line: line.get_markersize())
    return big.get_markersize() >= 1.6 * small.get_markersize() and (
        _hollow(small) or _hollow(big)
    )


def layout_problems(fig) -> list[str]:
    """What a reader of `fig` would find covered or cut, from matplotlib's own layout
    extents after a draw (`get_window_extent` with the canvas's renderer): every legend's
    box against every text drawn (axis labels, titles, tick labels, offset texts, texts
    in the axes), the other legends and the lines drawn (a legend over a curve); every
    text against every other text; texts and legends reaching past the figure's edge;
    markers with their centre within half a marker of the axes' edge while clipped to it
    (drawn half) or outside it (not drawn); and markers of two series whose centres lie
    within 0.6 of their two radii together (merged into one blob), unless their sizes
    differ 1.6-fold and one is hollow (`_concentric`). An empty list when there is nothing
    to report."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    legends += list(fig.legends)
    legends = [leg for leg in legends if leg.get_visible()]
    boxes = [(leg, leg.get_window_extent(renderer)) for leg in legends]
    texts = _texts(fig, legends)
    problems = []
    for k, (leg, box) in enumerate(boxes):
        name = f"legend {k}"
        for what, text in texts:
            if _overlap(box, text.get_window_extent(renderer)):
                problems.append(f"{name} covers {what} ({text.get_text()!r})")
        for j, (_, other) in enumerate(boxes[:k]):
            if _overlap(box, other):
                problems.append(f"{name} covers legend {j}")
        own = set(leg.get_lines())
        for ax in fig.axes:
            for line in ax.get_lines():
                if line in own or not line.get_visible():
                    continue
                pts = _line_points(line)
                inside = (
                    (pts[:, 0] > box.x0)
                    & (pts[:, 0] < box.x1)
                    & (pts[:, 1] > box.y0)
                    & (pts[:, 1] < box.y1)
                )
                if inside.any():
                    problems.append(f"{name} covers the line {line.get_label()!r}")
    problems += _text_problems(fig, renderer, texts, boxes)
    problems += _marker_problems(fig, renderer)
    return problems


def fit_figure_legends(fig) -> None:
    """Widens `fig` to the width of its widest figure legend (a legend below the panels
    with several columns can be wider than the panels), so none reaches past its edge."""
    if not fig.legends:
        return
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = max(leg.get_window_extent(renderer).width for leg in fig.legends)
    need = width / fig.dpi + 0.1
    if need > fig.get_figwidth():
        fig.set_figwidth(need)


def fit_title(ax, title: str, **kwargs) -> None:
    """Sets `ax`'s title, broken into lines at its commas where one line would reach past
    the figure's edge (a sweep's fixed parameters make long titles); lines already in
    `title` are kept."""
    text = ax.set_title(title, **kwargs)
    fig = ax.get_figure()
    fig.canvas.draw()  # the laid-out axes: the title is centred over it
    renderer = fig.canvas.get_renderer()
    centre = (ax.get_window_extent(renderer).x0 + ax.get_window_extent(renderer).x1) / 2
    room = 1.9 * min(centre - fig.bbox.x0, fig.bbox.x1 - centre)
    if text.get_window_extent(renderer).width <= room:
        return
    lines = []
    for line in title.split("\n"):
        parts, current = line.split(", "), ""
        for part in parts:
            trial = f"{current}, {part}" if current else part
            text.set_text(trial)
            if current and text.get_window_extent(renderer).width > room:
                lines.append(current + ",")
                current = part
            else:
                current = trial
        lines.append(current)
    text.set_text("\n".join(lines))


def dodged(ax, k: int, n: int, step_pt: float = 6.0):
    """`ax.transData` moved sideways by `(k - (n - 1) / 2) * step_pt` points: series k of
    n drawn at the same x side by side (markers never merge into one blob). Lines drawn
    with it do not enter the data limits: call `fit_data_limits` after drawing."""
    from matplotlib.transforms import offset_copy

    dx = (k - (n - 1) / 2) * step_pt
    return offset_copy(ax.transData, fig=ax.get_figure(), x=dx, y=0.0, units="points")


def fit_data_limits(ax) -> None:
    """Autoscales `ax` to every line's data, the lines drawn with `dodged` included."""
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), float)
        ax.update_datalim(xy[np.all(np.isfinite(xy), axis=1)])
    ax.autoscale_view()


def guarantee_text(rows: Sequence[Mapping], key: str = "guarantee") -> str:
    """The guarantees of `rows[*][key]`, e.g. "rigorous" or "assumes Gaussian" (sorted,
    comma-separated; "" when none is given): what a legend entry of an audit names."""
    return ", ".join(sorted({str(r.get(key)) for r in rows if r.get(key) not in (None, "")}))


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Saves `fig` as `<stem>.png` and `<stem>.pdf`, each written atomically, and closes it.

    Warns (`FigureLayoutWarning`) when `layout_problems` finds anything covered or cut: a
    legend over a text, legend or line, a text over a text, a text past the figure's edge,
    markers cut, hidden or merged.
    """
    fit_figure_legends(fig)
    problems = layout_problems(fig)
    if problems:
        warnings.warn(
            f"{Path(path_stem).name}: " + "; ".join(problems), FigureLayoutWarning, stacklevel=2
        )
    paths = []
    for ext in ("png", "pdf"):
        path = Path(f"{path_stem}.{ext}")
        with atomic_path(path) as tmp:
            # Tight: long labels (colour bars, the marks' note) are never cut off.
            fig.savefig(tmp, format=ext, bbox_inches="tight", pad_inches=0.03)
        paths.append(path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths


def as_number(value) -> float:
    """A table value as a float (CSV cells are strings; '' and None are missing)."""
    if value is None or value == "":
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def has_column(rows: Sequence[Mapping], key: str) -> bool:
    """Whether any row has a finite value under `key`."""
    return any(np.isfinite(as_number(r.get(key))) for r in rows)


def relative_error(row: Mapping, key: str) -> float:
    """`row[key]`'s stated numerical error over its value: the error from `exact_error`
    beside an exact epsilon (`exact`, `exact_epsilon`), else from `<key>_error`; 0 where
    the row states none."""
    error_key = "exact_error" if key in ("exact", "exact_epsilon") else f"{key}_error"
    value, error = as_number(row.get(key)), as_number(row.get(error_key))
    return abs(error / value) if value and np.isfinite(error) else 0.0


def tex_number(x: float) -> str:
    """1e-06 -> 10^{-6}, 2e-05 -> 2\\times 10^{-5}, 0.05 -> 0.05 (for mathtext)."""
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:g}"
    mant, exp = f"{x:.2e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"10^{{{int(exp)}}}" if mant == "1" else rf"{mant}\times 10^{{{int(exp)}}}"


def symbol(key: str) -> str:
    """A parameter's symbol, for titles and short labels."""
    return {
        "steps": "$T$",
        "sampling_prob": "$q$",
        "noise_multiplier": r"$\sigma$",
        "delta": r"$\delta$",
        "clip_norm": "$C$",
        "learning_rate": r"$\eta$",
    }.get(key, key)

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
    "has_column",
    "layout_problems",
    "save_figure",
    "styled_pyplot",
    "symbol",
    "tex_number",
]


class FigureLayoutWarning(UserWarning):
    """A saved figure with a legend over a label, a title, tick labels, another legend or
    the data, or markers cut in half by the axes' edge (`layout_problems`)."""


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


def _texts(fig) -> list:
    """`(what, artist)` of every visible label, title and tick label of the figure."""
    out = []
    if getattr(fig, "_suptitle", None) is not None:
        out.append(("the title", fig._suptitle))
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
        ]
        out += [(f"{name}'s tick labels", t) for t in ax.get_xticklabels() + ax.get_yticklabels()]
    return [(w, t) for w, t in out if t.get_visible() and t.get_text().strip()]


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


def layout_problems(fig) -> list[str]:
    """What a reader of `fig` would find covered or cut, from matplotlib's own layout
    extents after a draw: every legend's box (`get_window_extent`) against every axis
    label, title and tick label, the other legends, and the lines drawn (a legend over a
    curve); and markers with their centre within half a marker of the axes' edge while
    clipped to it (drawn half). An empty list when there is nothing to report."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    legends += list(fig.legends)
    boxes = [(leg, leg.get_window_extent(renderer)) for leg in legends if leg.get_visible()]
    problems = []
    for k, (leg, box) in enumerate(boxes):
        name = f"legend {k}"
        for what, text in _texts(fig):
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
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        frame = ax.get_window_extent(renderer)
        for line in ax.get_lines():
            marker = line.get_marker()
            if marker in (None, "None", "none", "", " ") or not line.get_clip_on():
                continue
            r = line.get_markersize() * fig.dpi / 72.0 / 2.0
            xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
            xy = xy[np.all(np.isfinite(xy), axis=1)]
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
    return problems


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Saves `fig` as `<stem>.png` and `<stem>.pdf`, each written atomically, and closes it.

    Warns (`FigureLayoutWarning`) when `layout_problems` finds a legend over a label,
    title, tick label, legend or line, or markers cut by the axes' edge.
    """
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

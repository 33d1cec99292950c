"""The marks after a heatmap cell's number (`MARK_NOTES`): which a table row earns, and the
note under the figure that explains those used.

Used by `advsim.plotting`'s heatmaps and its epsilon-against-T markers.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np

#: Marks after a heatmap cell's number, and what they mean (written under the figure).
MARK_NOTES = {
    "\u2020": "rests on an assumption",
    "\u2021": "assumption rejected by held-out runs",
    "!": "estimate above composition (outside the possible range)",
}


def mark(row: Mapping, column: str) -> str:
    """The marks of one table row's `column` (see `MARK_NOTES`)."""
    marks = ""
    if column == "eps_lower":
        guarantee = row.get("guarantee")
        if guarantee not in (None, "", "rigorous"):
            marks += "\u2020"
        if str(row.get("assumption_rejected")).lower() == "true":
            marks += "\u2021"
    if column == "eps_point" and str(row.get("eps_point_above_composition")).lower() == "true":
        marks += "!"
    return marks


def mark_matrix(rows, x, y, xs, ys, columns) -> np.ndarray | None:
    """Marks per cell (`ys` rows, `xs` columns: the values of `y` and `x` in the order
    drawn) for the eps columns among `columns`, or None when there are none."""
    ix = {repr(v): i for i, v in enumerate(xs)}
    iy = {repr(v): i for i, v in enumerate(ys)}
    marks = np.full((len(ys), len(xs)), "", dtype=object)
    for r in rows:
        marks[iy[repr(r.get(y))], ix[repr(r.get(x))]] = "".join(mark(r, c) for c in columns)
    return marks if any(marks.flat) else None


def mark_legend(ax, marks) -> None:
    """Explains the marks used, as more lines of the x label (kept in the layout), each
    note wrapped to the figure's width (a heatmap of three columns is 3.5 inches wide)."""
    if marks is None:
        return
    used = [m for m in MARK_NOTES if any(m in str(v) for v in marks.flat)]
    points = ax.xaxis.label.get_fontsize()
    # about 0.55 em a character; 85% of the figure's width, for the margins
    chars = max(20, int(0.85 * ax.figure.get_figwidth() * 72 / (0.55 * points)))
    text = "\n".join(
        textwrap.fill(f"{m} {MARK_NOTES[m]}", chars, subsequent_indent="   ") for m in used
    )
    ax.set_xlabel(f"{ax.get_xlabel()}\n{text}", linespacing=1.3)

"""The look every figure shares: pyplot's style, saving, and reading table values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from advsim._io import atomic_path

__all__ = ["as_number", "has_column", "save_figure", "styled_pyplot", "symbol", "tex_number"]


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


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Saves `fig` as `<stem>.png` and `<stem>.pdf`, each written atomically, and closes it."""
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

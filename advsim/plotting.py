"""Figures fit for a paper: readable in black-and-white print, PNG and PDF."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from advsim._io import atomic_path

__all__ = ["plot_eps_vs_steps", "save_figure"]

#: Line styles carry the meaning, so the figure survives grey-scale printing.
BOUND_STYLES = {
    "composition": dict(color="0.0", linestyle="-", label="composition (all iterates)"),
    "heuristic": dict(color="0.35", linestyle="--", label="last-iterate heuristic"),
    "full_batch": dict(color="0.55", linestyle=":", label="full batch (DP-GD)"),
}


def _style():
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
    """Saves `fig` as `<stem>.png` and `<stem>.pdf`, each written atomically."""
    paths = []
    for ext in ("png", "pdf"):
        path = Path(f"{path_stem}.{ext}")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext)
        paths.append(path)
    return paths


def plot_eps_vs_steps(
    rows: Sequence[Mapping],
    path_stem: str | Path,
    *,
    title: str | None = None,
) -> list[Path]:
    """Empirical epsilon against T with the three bounds as reference lines.

    Args:
        rows: records with keys steps, eps_lower, eps_point, heuristic, composition,
            full_batch (e.g. `AuditRecord.to_dict()`), one per T.
        path_stem: output path without extension; writes .png and .pdf.
        title: optional title (e.g. the fixed parameters).

    Returns:
        The written paths.
    """
    plt = _style()
    rows = sorted(rows, key=lambda r: r["steps"])
    steps = np.array([r["steps"] for r in rows], float)
    fig, ax = plt.subplots(figsize=(3.6, 2.7))
    for key, style in BOUND_STYLES.items():
        ax.plot(steps, [r[key] for r in rows], **style)
    ax.plot(
        steps, [r["eps_point"] for r in rows], linestyle="none", marker="o", mfc="white",
        mec="0.0", ms=4.5, label="empirical (point estimate)",
    )
    ax.plot(
        steps, [r["eps_lower"] for r in rows], linestyle="none", marker="v", color="0.0",
        ms=4.5, label="empirical (lower bound)",
    )
    if len(steps) > 1 and steps.max() / max(steps.min(), 1) >= 20:
        ax.set_xscale("log")
    ax.set_xlabel("steps $T$")
    delta = rows[0].get("delta") if rows else None
    ax.set_ylabel(rf"$\varepsilon$ at $\delta={delta:g}$" if delta else r"$\varepsilon$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.legend(frameon=False, loc="best")
    if title:
        ax.set_title(title, fontsize=8)
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths

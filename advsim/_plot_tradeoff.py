"""Trade-off figures of Annamalai (2024, "It's Our Loss"): Figures 1 and 2.

Re-exported by `advsim.plotting`; the style they share is `advsim._plot_style`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from advsim._plot_style import (
    as_number,
    dodged,
    fit_title,
    has_column,
    save_figure,
    styled_pyplot,
)

__all__ = ["plot_eps_emp_vs_eps", "plot_tradeoff_panels"]


def _panel_axes(panels: Sequence[Mapping], width: float):
    """`(pyplot, figure, axes)`: one 3-inch-high panel of `width` inches per panel."""
    if len(panels) == 0:
        raise ValueError("panels must not be empty")
    plt = styled_pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), 3.0), squeeze=False)
    return plt, fig, axes[0]


def _label_panel(ax, panel: Mapping, xlabel: str, ylabel: str) -> None:
    """The axis labels, the panel's `title` (if any) and a light grid."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fit_title(ax, panel.get("title", ""), fontsize=8)
    ax.grid(True, color="0.9", linewidth=0.6)


def _legend_below(fig, axes, panels: Sequence[Mapping], ncols: int | None = None) -> None:
    """One legend below the panels, of the first panel's entries: in one column for a
    single panel, else in `ncols` columns (default one per entry)."""
    handles, labels = axes[0].get_legend_handles_labels()
    if len(panels) == 1:
        ncols = 1
    elif ncols is None:
        ncols = len(labels)
    fig.legend(handles, labels, loc="outside lower center", frameon=False, fontsize=7, ncols=ncols)


def plot_tradeoff_panels(
    panels: Sequence[Mapping],
    path_stem: str | Path,
    *,
    log: bool = True,
) -> list[Path]:
    r"""Observed FPR-FNR curves against trade-off curves, one panel per setting.

    As Figure 1 of Annamalai (2024), "It's Our Loss": the observed curve of a threshold
    test on the last model, the composition curve (every iterate released, PLD) and the
    linear-loss (heuristic) curve of the same $(q, T, \sigma)$.

    Args:
        panels: one mapping per panel with keys `title` and `curves`, a list of
            `(label, alpha, beta, style)` with `style` a dict of matplotlib line options
            (e.g. `{"color": "0.0", "linestyle": "-"}`; `{"marker": "."}` for observations).
        path_stem: output path without extension; writes .png and .pdf.
        log: a log FPR axis (the small-FPR region where large epsilons live), else linear.

    Returns:
        The written paths.
    """
    plt, fig, axes = _panel_axes(panels, width=3.0)
    for ax, panel in zip(axes, panels, strict=True):
        for label, alpha, beta, style in panel["curves"]:
            alpha, beta = np.asarray(alpha, float), np.asarray(beta, float)
            ok = (alpha > 0) if log else np.isfinite(alpha) & np.isfinite(beta)
            ax.plot(alpha[ok], beta[ok], label=label, **dict(style))
        if log:
            ax.set_xscale("log")
        else:
            ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        _label_panel(ax, panel, r"FPR $\alpha$", r"FNR $\beta$")
    # One legend below the panels: inside the first panel it covered its curves (they
    # start at FNR 1 and end at FPR 1, so no corner of a linear panel is free).
    _legend_below(fig, axes, panels)
    return save_figure(fig, path_stem)


def _mean_bars(ax, eps, rows: Sequence[Mapping], stem: str, shown: list[str], **style) -> None:
    """Plot the rows' `<stem>_mean` against `eps` with bars of +-2 `<stem>_sd`.

    Args:
        ax: the panel.
        eps: the theoretical epsilon of each row (the x values).
        rows: the panel's rows.
        stem: the column's stem, e.g. "eps_point".
        shown: the columns plotted side by side at each eps (`dodged`); `<stem>_mean` is
            one of them.
        **style: the markers' style and the legend's label.
    """
    ax.errorbar(
        eps,
        [as_number(r[f"{stem}_mean"]) for r in rows],
        yerr=[2 * as_number(r.get(f"{stem}_sd", 0.0)) for r in rows],
        linestyle="none", mec="0.0", capsize=3,
        transform=dodged(ax, shown.index(f"{stem}_mean"), len(shown), 4.5), **style,
    )  # fmt: skip


def plot_eps_emp_vs_eps(
    panels: Sequence[Mapping],
    path_stem: str | Path,
) -> list[Path]:
    r"""Empirical epsilon against theoretical epsilon, as Figure 2 of Annamalai (2024).

    Args:
        panels: one mapping per panel with keys `title` and `rows`; each row has
            `eps` (theoretical), `eps_point_mean`, `eps_point_sd` (over repetitions;
            error bars are +-2 sd as in the paper), and optionally `eps_held_out_mean`,
            `eps_held_out_sd`, `eps_lower_mean` and `heuristic`.
        path_stem: output path without extension; writes .png and .pdf.

    Returns:
        The written paths.
    """
    plt, fig, axes = _panel_axes(panels, width=3.2)
    for ax, panel in zip(axes, panels, strict=True):
        rows = sorted(panel["rows"], key=lambda r: as_number(r["eps"]))
        eps = np.array([as_number(r["eps"]) for r in rows])
        top = 1.08 * max(
            [eps.max()]
            + [as_number(r.get("eps_point_mean")) + 2 * as_number(r.get("eps_point_sd", 0.0))
               for r in rows]
        )
        ax.plot([0, top], [0, top], color="0.0", linestyle="-", linewidth=0.8,
                label=r"$\varepsilon_{emp} = \varepsilon$ (composition)")
        if has_column(rows, "heuristic"):
            ax.plot(eps, [as_number(r.get("heuristic")) for r in rows], color="0.35",
                    linestyle="--", label="linear-loss heuristic")
        # The estimates at one eps side by side (`dodged`): they are often equal.
        shown = ["eps_point_mean"] + [k for k in ("eps_held_out_mean", "eps_lower_mean")
                                      if has_column(rows, k)]  # fmt: skip
        _mean_bars(ax, eps, rows, "eps_point", shown, marker="o", mfc="white", color="0.0",
                   ms=4.5, label=r"Algorithm 2 (every threshold, optimistic; $\pm 2$ sd)")
        if has_column(rows, "eps_held_out_mean"):
            _mean_bars(ax, eps, rows, "eps_held_out", shown, marker="s", mfc="0.6", color="0.4",
                       ms=4, label=r"$\varepsilon_{emp}$ point (held-out rates, $\pm 2$ sd)")
        if has_column(rows, "eps_lower_mean"):
            # unclipped: a bound near 0 sits on the axes' edge, which would cut its marker
            ax.plot(eps, [as_number(r.get("eps_lower_mean")) for r in rows], linestyle="none",
                    marker="v", color="0.0", ms=4.5, label="lower bound (95% CP)",
                    clip_on=False,
                    transform=dodged(ax, shown.index("eps_lower_mean"), len(shown), 4.5))
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        _label_panel(ax, panel, r"theoretical $\varepsilon$ ($\delta = 10^{-5}$)",
                     r"empirical $\varepsilon$")
    # One legend below the panels: inside, its five entries covered the diagonal and the
    # points of the first panel.
    _legend_below(fig, axes, panels, ncols=2)
    return save_figure(fig, path_stem)

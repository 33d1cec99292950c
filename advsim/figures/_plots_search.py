"""Machine-found against hand-made, in one picture (`machine_found`)."""

from __future__ import annotations

import numpy as np

from advsim._plot_style import styled_pyplot
from advsim.plotting import save_figure

__all__ = ["plot_machine_found"]

_MARKS = (
    ("composition", "composition (all iterates)", dict(marker="v", color="0.35", ls="none")),
    ("search_exact_epsilon", "search (exact)", dict(marker="o", color="C3", ls="none")),
    ("random_exact_epsilon", "random search, same budget (exact)",
     dict(marker="+", color="C2", ls="none", ms=8)),
    ("paper_exact_epsilon", "best paper construction (exact)",
     dict(marker="s", mfc="none", color="C0", ls="none")),
    ("heuristic", "last-iterate heuristic (no guarantee)",
     dict(marker="_", color="C1", ls="none", ms=10)),
)  # fmt: skip


def plot_machine_found(fig, rows, tables):
    """One column per cell: the exact epsilon of the search's construction, of the random
    arm's and of the best paper construction, with the heuristic and composition; the
    heatmap's cells labelled (sigma, B), the Poisson cells (T, q)."""
    del rows
    table = tables["machine_found"]
    plt = styled_pyplot()
    figure, ax = plt.subplots(figsize=(max(5.0, 0.42 * len(table) + 1.5), 3.4))
    x = np.arange(len(table))
    for key, label, style in _MARKS:
        ax.plot(x, [r[key] for r in table], label=label, **style)
    ax.set_xticks(x)
    ax.set_xticklabels([
        f"σ={r['noise_multiplier']:g}\nB={r['batch_size']}" if r["batch_size"] else
        f"T={r['steps']}\nq={r['sampling_prob']:g}"
        for r in table
    ], fontsize=6)  # fmt: skip
    ax.set_ylabel(r"$\varepsilon$ of the last model at $\delta = 10^{-5}$")
    ax.set_yscale("log")
    ax.set_title("Machine-found against hand-made constructions", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=7,
              frameon=False)  # fmt: skip
    return save_figure(figure, fig.out / "machine_found")

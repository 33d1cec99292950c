"""Machine-found against hand-made, in pictures (`machine_found`): every cell's epsilons, and
one cell's construction (its fields and its last model's law)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np

from advsim._plot_style import as_number, dodged, fit_data_limits, styled_pyplot, tex_number
from advsim.mechanisms import PiecewiseConstruction
from advsim.plotting import save_figure
from advsim.search import plot_fields

__all__ = ["best_construction", "plot_machine_found", "plot_table"]

_MARKS = (
    ("composition", "composition (all iterates)", dict(marker="v", color="0.35", ls="none")),
    ("search_exact_epsilon", "search (exact)", dict(marker="o", color="C3", ls="none", zorder=5)),
    ("random_exact_epsilon", "random search, same budget (exact)",
     dict(marker="+", color="C2", ls="none", ms=8, zorder=6)),
    ("paper_exact_epsilon", "best paper construction (exact)",
     dict(marker="s", mfc="none", color="C0", ls="none")),
    ("heuristic", "last-iterate heuristic (no guarantee)",
     dict(marker="_", color="C1", ls="none", ms=10, mew=1.6)),
)  # fmt: skip
#: Drawn where the rows carry it: the heuristic at one learning rate, beside the heuristic
#: at the run's step sizes (then the `heuristic` column).
_CONSTANT_RATE = (
    "heuristic_constant_rate", "last-iterate heuristic, one constant rate (no guarantee)",
    dict(marker="x", color="C1", ls="none", ms=4.5),
)
_AUDIT_STYLES = (
    dict(marker="D", color="C4", ls="none", ms=4.5),
    dict(marker="D", mfc="none", color="C5", ls="none", ms=4.5),
)
#: Where the certified cells' stars sit on the ratio panel (above composition's 1).
_STAR_Y = 1.12
#: The printed values: small, on white, so the line at 1 does not cross them.
_VALUE_TEXT = dict(textcoords="offset points", xytext=(9, 0), fontsize=5.5, color="C3",
                   va="center", bbox=dict(fc="white", ec="none", pad=0.4, alpha=0.85))


def best_construction(folder: str | Path) -> PiecewiseConstruction:
    """The best construction of the search in `folder` (`advsim.search.search` saves it as
    `best.json`, a `PiecewiseConstruction` file whose metadata holds its exact epsilon)."""
    return PiecewiseConstruction.load(Path(folder) / "best.json")


def _certified(row) -> bool:
    return str(row.get("heuristic_violation_certified")).lower() == "true"


def _runs(row) -> str:
    runs = as_number(row.get("confirm_runs"))
    if not math.isfinite(runs):
        return ""
    return f", ${tex_number(runs)}$ runs" if runs >= 1e4 else f", {runs:g} runs"


def _tick(row) -> str:
    if row.get("batch_size"):
        return f"σ={as_number(row['noise_multiplier']):g}\nB={row['batch_size']}"
    return (f"T={row['steps']}\nq={as_number(row['sampling_prob']):g}\n"
            f"σ={as_number(row['noise_multiplier']):g}")  # fmt: skip


def _title(table, delta: float) -> str:
    heat = sorted({int(r["steps"]) for r in table if r.get("batch_size")})
    parts = []
    if heat:
        steps = ", ".join(map(str, heat))
        parts.append(f"heatmap cells T = {steps} (a fixed batch of B, the canary at step 1)")
    if any(not r.get("batch_size") for r in table):
        parts.append("Poisson cells: T and q under them")
    return (
        f"Machine-found against hand-made constructions, $\\delta = {tex_number(delta)}$\n"
        + "\n".join(parts)
    )


def _audits(table) -> list[tuple[str, list[float]]]:
    """(label, eps_lower per row) of each guarantee the rows' eps_lower carry."""
    rows = [r for r in table if math.isfinite(as_number(r.get("eps_lower")))]
    out = []
    for guarantee in dict.fromkeys(str(r.get("guarantee", "unlabelled")) for r in rows):
        runs = {_runs(r) for r in rows if str(r.get("guarantee", "unlabelled")) == guarantee}
        label = f"black-box eps_lower ({guarantee} audit{runs.pop() if len(runs) == 1 else ''})"
        values = [
            as_number(r.get("eps_lower"))
            if str(r.get("guarantee", "unlabelled")) == guarantee else math.nan
            for r in table
        ]  # fmt: skip
        out.append((label, values))
    return out


def _ratio_text(r: float) -> str:
    """Two decimals, three where two would round a ratio below 1 up to 1.00."""
    return f"{r:.3f}" if 0.995 <= r < 1.0 else f"{r:.2f}"


def plot_table(table, path_stem: str | Path, *, delta: float) -> list[Path]:
    """Two panels, one column per cell: the exact epsilon of the search's construction, of
    the random arm's and of the best paper construction, with the heuristic, composition
    and, where the rows carry one, the audit's eps_lower (top, log scale, the search's value
    printed beside its marker); the same values divided by the cell's composition epsilon
    (bottom, the search's ratio printed beside its marker), with a star over each cell whose
    heuristic violation the confirmation certified. The heatmap's cells are labelled (sigma,
    B), the Poisson cells (T, q, sigma)."""
    plt = styled_pyplot()
    from matplotlib.ticker import FuncFormatter

    n = len(table)
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(max(6.0, 0.62 * n + 1.8), 6.4), sharex=True, height_ratios=[1.15, 1.0],
        layout="constrained",
    )  # fmt: skip
    x = np.arange(n)
    composition = np.array([as_number(r["composition"]) for r in table])
    marks = list(_MARKS)
    if any(math.isfinite(as_number(r.get(_CONSTANT_RATE[0]))) for r in table):
        key, _, style = marks[-1]
        marks[-1] = (key, "last-iterate heuristic, the run's step sizes (no guarantee)", style)
        marks.append(_CONSTANT_RATE)
    series = [(key, label, style, np.array([as_number(r.get(key)) for r in table]))
              for key, label, style in marks]  # fmt: skip
    for (label, values), style in zip(_audits(table), itertools.cycle(_AUDIT_STYLES)):
        series.append(("eps_lower", label, style, np.array(values)))
    # Each series a little to the side within its cell's column: the search, the random
    # arm and composition often coincide, and their markers would merge.
    step, many = 5.0, len(series)
    for k, (key, label, style, values) in enumerate(series):
        top.plot(x, values, label=label, transform=dodged(top, k, many, step), **style)
        if key == "composition":
            continue
        bottom.plot(x, values / composition, transform=dodged(bottom, k, many, step), **style)
    fit_data_limits(top)
    beside = (many - 1) / 2 * step + 6.0  # the printed values: right of the column's markers
    bottom.axhline(1.0, color="0.35", lw=0.8, ls="--", zorder=1)
    search = np.array([as_number(r["search_exact_epsilon"]) for r in table])
    for i, (eps, comp) in enumerate(zip(search, composition, strict=True)):
        if not math.isfinite(eps):
            continue
        top.annotate(f"{eps:.2f}", (i, eps), **{**_VALUE_TEXT, "xytext": (beside, 0)})
        ratio = eps / comp
        below = -7 if ratio > 0.97 else 0  # off the line at 1
        bottom.annotate(_ratio_text(ratio), (i, ratio),
                        **{**_VALUE_TEXT, "xytext": (beside, below)})
    certified = [i for i, r in enumerate(table) if _certified(r)]
    if certified:
        runs = {_runs(r) for r in table if _certified(r)}
        bottom.plot(certified, [_STAR_Y] * len(certified), ls="none", marker="*", ms=8,
                    color="C3", label="heuristic's violation certified by simulation"
                    + (runs.pop() if len(runs) == 1 else ""))  # fmt: skip
    top.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    top.yaxis.set_major_formatter(plain)
    shown = np.concatenate([v for *_, v in series])
    shown = shown[np.isfinite(shown) & (shown > 0)]
    if shown.size and shown.max() / shown.min() < 10:
        top.yaxis.set_minor_formatter(plain)  # less than a decade: label the minor ticks
    top.set_ylabel(rf"$\varepsilon$ of the last model at $\delta = {tex_number(delta)}$",
                   fontsize=8)  # fmt: skip
    ratios = np.concatenate([v / composition for key, *_, v in series if key != "composition"])
    ratios = ratios[np.isfinite(ratios)]  # any above the stars' row stays in view
    bottom.set_ylim(0.0, max([_STAR_Y + 0.08] + [1.05 * r for r in ratios]))
    bottom.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
    bottom.set_ylabel(r"$\varepsilon$ / composition's $\varepsilon$", fontsize=8)
    bottom.set_xticks(x)
    bottom.set_xticklabels([_tick(r) for r in table], fontsize=6)
    bottom.set_xlim(-0.6, n - 0.4)
    top.set_title(_title(table, delta), fontsize=8)
    handles, labels = top.get_legend_handles_labels()
    extra, extra_labels = bottom.get_legend_handles_labels()
    figure.legend(handles + extra, labels + extra_labels, loc="outside lower center",
                  ncols=2 if n < 6 else 3, fontsize=7, frameon=False)  # fmt: skip
    return save_figure(figure, path_stem)


def _fields_title(row) -> str:
    """The representative cell's line: its epsilons, how it was found, its confirmation."""
    num = {k: as_number(row.get(k)) for k in ("search_exact_epsilon", "search_error",
                                              "paper_exact_epsilon", "heuristic", "composition",
                                              "eps_lower")}  # fmt: skip
    text = (
        f"{row['cell']}, found by {row.get('found_by', '?')}: exact eps "
        f"{num['search_exact_epsilon']:.3f} (error {num['search_error']:.0e}); best paper "
        f"{num['paper_exact_epsilon']:.3f}, heuristic {num['heuristic']:.3f}, composition "
        f"{num['composition']:.3f}"
    )
    if math.isfinite(num["eps_lower"]):
        guarantee = row.get("guarantee", "unlabelled")
        text += (f"\nsimulated: black-box eps_lower {num['eps_lower']:.3f} ({guarantee} audit"
                 f"{_runs(row)})")  # fmt: skip
        if _certified(row):
            text += ", the heuristic's violation certified"
    return text


def plot_machine_found(fig, rows, tables):
    """`machine_found.png/.pdf` (`plot_table`), and `machine_found_fields.png/.pdf`: the
    fields and last-model law (`advsim.search.plot_fields`) of the best construction of the
    cell `params.fields_cell` (the first cell when it is not among the rows), read back from
    the cell's search folder `OUT/<cell>/best.json`."""
    del rows
    table = tables["machine_found"]
    delta = float(fig.params.get("delta", 1e-5))
    paths = plot_table(table, fig.out / "machine_found", delta=delta)
    if not table:
        return paths
    wanted = fig.params.get("fields_cell")
    row = next((r for r in table if r["cell"] == wanted), table[0])
    if wanted is not None and row["cell"] != wanted:
        print(f"machine_found_fields: no cell {wanted!r} in this run; drawing {row['cell']}")
    mech = best_construction(fig.out / row["cell"])
    try:
        paths += plot_fields(mech, fig.out / "machine_found_fields", title=_fields_title(row),
                             delta=delta)  # fmt: skip
    except (FloatingPointError, ValueError) as err:  # the engine refuses its law's grid
        print(f"machine_found_fields: not drawn, the exact engine refused {row['cell']}: {err}")
    return paths

r"""Truth, audit and bounds for every 1-D construction, in one picture (`exact_truth`).

For each construction whose last model is a scalar Markov chain (`advsim.AbstractScalarLaw`:
the linear process, the zeroing and quadratic regularizers of Sections 4.1-4.2 of
arXiv:2410.06186, the threshold landscape of Section 6 of arXiv:2405.14457, the projected
linear canary of the shifted-interpolation setting), one row of four kinds of number at
the same $\delta$, each certifying something different:

- **exact**: $\varepsilon(\delta)$ of the last model from its law in both worlds
  (`advsim.exact.last_iterate_epsilon`, three grids), with its error: a refinement
  estimate of the discretisation error, not a bound;
- **audit**: `eps_lower` of the assumption-free (eps, delta) audit of simulated runs
  (`advsim.simulate`, the row's adversary, `audit(scores, "eps_delta")`: held-out threshold,
  Clopper-Pearson at `confidence`): with that confidence, the last model is not
  $(\varepsilon, \delta)$-DP for any $\varepsilon$ below it;
- **upper bounds**: composition (every iterate released; a theorem for the last model
  too), and for the projected canary the shifted-interpolation bound (a hidden-state
  theorem under convexity, smoothness and a bounded domain, all met exactly);
- **the heuristic** of Theorem 1 of arXiv:2410.06186: no guarantee for these
  constructions; exact for linear losses, beaten by a regularizer or a landscape.

So on every row: audit <= exact <= every upper bound, the exact value says how tight the
audit and the bounds are, and where the heuristic lies below it, it is violated.
"""

from __future__ import annotations

import math
import time

import numpy as np

import advsim
from advsim._plot_style import styled_pyplot, tex_number
from advsim.audits import audit
from advsim.bounds import bounds_for
from advsim.exact import last_iterate_epsilons
from advsim.mechanisms import ProjectedLinearCanary
from advsim.plotting import save_figure
from advsim.sweep import resolve

__all__ = ["compute_exact_truth", "plot_exact_truth"]

#: The adversary of a row that names none: the last model's displacement along the
#: canary's direction (the Neyman-Pearson statistic wherever the likelihood ratio is
#: monotone in it, as for every construction here).
DEFAULT_ADVERSARY = "advsim.adversaries:ProjectionScore"


#: Short names of the constructions' own parameters in the `parameters` column.
SHORT_NAMES = {"batch_size": "B", "radius": "R"}


def _parameters(mech, spec) -> str:
    acc = mech.accounting()
    text = f"T={acc.steps}, q={acc.sampling_prob:g}, sigma={acc.noise_multiplier:g}"
    extra = {SHORT_NAMES.get(k, k): v for k, v in spec["params"].items()
             if k not in ("steps", "sampling_prob", "noise_multiplier")}  # fmt: skip
    return ", ".join([text, *(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in extra.items())])  # fmt: skip


def _exact_groups(specs, mechs):
    """Indices of rows computed in one batched call: same class, steps and delta (the
    batch must differ only in traced values; `last_iterate_epsilons` refuses otherwise)."""
    groups: dict[tuple, list[int]] = {}
    for i, (spec, mech) in enumerate(zip(specs, mechs, strict=True)):
        key = (spec["mechanism"], float(spec["delta"]), int(mech.steps))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _exact(specs, mechs, cells_per_sd: float, refinements: int):
    """Every row's `ExactEpsilon` and the wall time of the call that gave it (a batch's
    time is shared by its rows). Rows of one class, T and delta go in one batched call
    (one compilation per grid); if the batch is refused (a static field differs), or
    fails, each row gets its own call, which raises what is wrong with it."""
    results: list = [None] * len(mechs)
    seconds = [0.0] * len(mechs)

    def run(group):
        start = time.perf_counter()
        found = last_iterate_epsilons(
            [mechs[i] for i in group], float(specs[group[0]]["delta"]),
            cells_per_sd=cells_per_sd, refinements=refinements, progress=False,
        )  # fmt: skip
        elapsed = (time.perf_counter() - start) / len(group)
        for i, res in zip(group, found, strict=True):
            results[i], seconds[i] = res, elapsed

    for group in _exact_groups(specs, mechs):
        try:
            run(group)
        except ValueError:
            if len(group) == 1:
                raise
            for i in group:
                run([i])
    return results, seconds


def _grid_kind(cells_per_sd: float) -> str:
    """The label of one grid's epsilon beside the exact value (`exact_h`, ...)."""
    return (f"diagnostic: eps on the grid of {cells_per_sd:g} nodes per noise sd (exact: the "
            "finest grid's; exact_error: the change between the two finest)")


def compute_exact_truth(fig, rows):
    """One row per construction of `params.rows` (mechanism and adversary by class path,
    as in sweeps; `delta`; a short `label` for the picture): the exact epsilon of the last
    model with its error and the three grids' values, the assumption-free audit of
    `params.trials` simulated runs per world with its `guarantee`, and the bounds
    (heuristic, composition, full batch; shifted interpolation where the mechanism has
    one)."""
    del rows  # no sweeps: the runs are simulated here, one construction at a time
    p = fig.params
    trials, seed = int(p["trials"]), int(p.get("seed", 0))
    confidence = float(p.get("confidence", 0.95))
    specs = list(p["rows"])
    mechs = [resolve("mechanism", s["mechanism"]).build(**s["params"]) for s in specs]
    exact, exact_s = _exact(
        specs, mechs, float(p.get("cells_per_sd", 6.0)), int(p.get("refinements", 3))
    )
    table = []
    for spec, mech, res, ex_s in zip(specs, mechs, exact, exact_s, strict=True):
        delta = float(spec["delta"])
        adversary = resolve("adversary", spec.get("adversary", DEFAULT_ADVERSARY)).build()
        start = time.perf_counter()
        scores = advsim.simulate(mech, adversary, trials, key=seed, progress=False)
        simulate_s = time.perf_counter() - start
        start = time.perf_counter()
        result = audit(scores, "eps_delta", delta=delta, confidence=confidence)
        audit_s = time.perf_counter() - start
        bounds = bounds_for(mech.accounting(), delta)
        shifted = None
        if isinstance(mech, ProjectedLinearCanary):  # its assumptions hold exactly
            shifted = float(mech.shifted_interpolation_bound(delta).epsilon)
        eps_h = list(res.epsilons) + [math.nan] * (3 - len(res.epsilons))
        grids = [_grid_kind(c) for c in res.cells_per_sd] + [None] * (3 - len(res.epsilons))
        table.append(dict(
            construction=spec["construction"], label=spec.get("label", spec["construction"]),
            parameters=_parameters(mech, spec), delta=delta,
            exact=res.epsilon, exact_error=res.error, exact_error_kind=res.error_kind,
            exact_h=eps_h[-3], exact_h_kind=grids[-3], exact_h2=eps_h[-2],
            exact_h2_kind=grids[-2], exact_h4=eps_h[-1], exact_h4_kind=grids[-1],
            exact_order=res.observed_order, exact_nodes=res.nodes, exact_resolved=res.resolved,
            exact_lost_mass=max(res.lost_mass),
            eps_lower=result.eps_lower, eps_point=result.eps_point,
            eps_point_above_composition=result.eps_point is not None
            and result.eps_point > bounds["composition"],
            guarantee=result.guarantee.label, confidence=confidence, trials=trials,
            heuristic=bounds["heuristic"], composition=bounds["composition"],
            full_batch=bounds["full_batch"], shifted_interpolation=shifted,
            audit_gap=res.epsilon - result.eps_lower,
            heuristic_violated=bool(bounds["heuristic"] < res.epsilon - res.error),
            exact_s=ex_s, simulate_s=simulate_s, audit_s=audit_s,
        ))  # fmt: skip
    return {"exact_truth": table}


def _num(value) -> float:
    if value is None or value == "":
        return math.nan
    return float(value)


#: Marker, colour and legend text of each kind of number: what it certifies.
MARKERS = {
    "composition": dict(marker="<", color="0.0", ms=7, mfc="white", mew=1.3,
                        label="composition: upper bound (all iterates released)"),
    "shifted_interpolation": dict(marker="<", color="tab:green", ms=7, mfc="tab:green",
                                  mew=1.0, label="shifted interpolation: upper bound "
                                  "(projected, convex; hidden state)"),
    "heuristic": dict(marker="s", color="0.45", ms=11, mfc="white", mew=1.2,
                      label="last-iterate heuristic: no guarantee (exact for linear losses)"),
    "exact": dict(marker="o", color="tab:red", ms=6.5, mfc="tab:red", mew=1.0,
                  label=r"exact $\varepsilon$ of the last model (grid; bar: error estimate)"),
    "eps_lower": dict(marker=">", color="tab:blue", ms=7, mfc="tab:blue", mew=1.0,
                      label=r"audit $\varepsilon_{\mathrm{lower}}$: lower bound"),
}  # fmt: skip


#: Points above (+) or below (-) its row at which each kind of number is drawn: equal or
#: close numbers (an audit reaching the exact epsilon, a bound equal to another) stay
#: apart; the exact epsilon sits on the row, inside the heuristic's square where the two
#: agree (linear losses).
_ROW_OFFSET_PT = {"composition": 7.0, "shifted_interpolation": 7.0, "eps_lower": -7.0}


def _row_offset(ax, key):
    from matplotlib.transforms import offset_copy

    dy = _ROW_OFFSET_PT.get(key, 0.0)
    return offset_copy(ax.transData, fig=ax.get_figure(), x=0.0, y=dy, units="points")


def plot_exact_truth(fig, rows, tables):
    """One line per construction on a log epsilon axis: the range the audit and the
    upper bounds certify (grey), the exact epsilon with its error bar, the audit's
    lower bound (at the axis' left end, marked 0, when it is 0), the heuristic and the
    upper bounds; the exact value written above its marker."""
    del rows
    table = tables["exact_truth"]
    plt = styled_pyplot()
    from matplotlib.ticker import FixedLocator, NullFormatter

    figure, ax = plt.subplots(figsize=(6.6, 0.5 * len(table) + 1.6))
    ys = np.arange(len(table))[::-1].astype(float)
    keys = ("composition", "shifted_interpolation", "heuristic", "eps_lower", "exact")
    positive = [_num(r[k]) for r in table for k in keys if _num(r[k]) > 0]
    left, right = min(positive) / 1.6, max(positive) * 1.35
    for y, r in zip(ys, table, strict=True):
        exact, err = _num(r["exact"]), _num(r["exact_error"])
        lower = _num(r["eps_lower"])
        uppers = [v for v in (_num(r["composition"]), _num(r["shifted_interpolation"]))
                  if math.isfinite(v)]  # fmt: skip
        if math.isfinite(lower) and uppers:
            ax.plot([max(lower, left), min(uppers)], [y, y], color="0.86", lw=5,
                    solid_capstyle="butt", zorder=1)  # fmt: skip
        for key in ("heuristic", "composition", "shifted_interpolation", "eps_lower"):
            v = _num(r[key])
            if not math.isfinite(v):
                continue
            style = {k: w for k, w in MARKERS[key].items() if k != "label"}
            ax.plot([max(v, left)], [y], linestyle="none", zorder=3, clip_on=False,
                    transform=_row_offset(ax, key), **style)
            if v <= left:  # an audit that certifies nothing: eps_lower = 0
                ax.annotate("0", (left, y), xytext=(7, _ROW_OFFSET_PT[key]),
                            textcoords="offset points",
                            ha="left", va="center", fontsize=6.5, color="tab:blue")  # fmt: skip
        style = {k: w for k, w in MARKERS["exact"].items() if k != "label"}
        resolved = math.isfinite(err)  # inf: beyond the float64 grid's resolution
        if not resolved:
            style["mfc"], err = "white", 0.0
        ax.errorbar([exact], [y], xerr=[[err], [err]], linestyle="none", ecolor="tab:red",
                    capsize=2, zorder=4, **style)  # fmt: skip
        ax.annotate(f"{exact:.3f}" if resolved else "unresolved", (exact, y), xytext=(0, 12),
                    textcoords="offset points", ha="center", va="bottom", fontsize=6.5,
                    color="tab:red")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlim(left, right)
    ticks = [t for t in (0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 20, 30, 50, 100, 200)
             if left <= t <= right]  # fmt: skip
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(ys[-1] - 0.6, ys[0] + 0.75)
    ax.set_yticks(ys)
    ticks_text = [
        f"{r['label']}\n{r['parameters']}, $\\delta = {tex_number(_num(r['delta']))}$"
        .replace("sigma", r"$\sigma$").replace("alpha", r"$\alpha$")
        for r in table
    ]  # fmt: skip
    ax.set_yticklabels(ticks_text, fontsize=7)
    ax.set_xlabel(r"$\varepsilon$ at the row's $\delta$ (log scale); only the last model "
                  "is released")  # fmt: skip
    ax.grid(axis="x", which="major", color="0.92", lw=0.6)
    ax.set_axisbelow(True)
    first = table[0]
    conf, trials = _num(first["confidence"]), int(_num(first["trials"]))
    labels = dict(
        exact=MARKERS["exact"]["label"],
        eps_lower=MARKERS["eps_lower"]["label"] + f" ({first['guarantee']}: assumption-free, "
        f"{conf:.0%} confidence, {trials:,} runs per world)",
    )  # fmt: skip
    handles = [
        plt.Line2D([], [], linestyle="none",
                   **{k: v for k, v in MARKERS[key].items() if k != "label"},
                   label=labels.get(key, MARKERS[key]["label"]))
        for key in ("exact", "eps_lower", "composition", "shifted_interpolation", "heuristic")
    ]  # fmt: skip
    handles.append(plt.Line2D([], [], color="0.86", lw=5,
                              label="what the audit and the upper bounds certify "
                              "(without the exact engine)"))  # fmt: skip
    # Below the x label, in the room constrained layout makes for it (placed by hand under
    # the axes, its first line ran into the x label).
    figure.legend(handles=handles, loc="outside lower left", ncol=1, frameon=False,
                  fontsize=6.5)  # fmt: skip
    ax.set_title("The exact privacy of the last model beside a rigorous audit and the bounds:\n"
                 "every 1-D construction" + (" (quick run: few runs)" if fig.quick else ""),
                 fontsize=8.5)  # fmt: skip
    return save_figure(figure, fig.out / "exact_truth")

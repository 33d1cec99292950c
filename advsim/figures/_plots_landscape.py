r"""The threshold landscape's figures (arXiv:2405.14457): Figure 4 (a, b) and Figure 14.

The adversary $A_S^{h^*}$ of Section 6 (`advsim.mechanisms.ThresholdLandscape`, reinforcing
orientation, $h^* = C/2$, $C = 1$, scored by `advsim.adversaries.ThresholdAdversary`;
Figures 4 and 14) and Algorithm 5's threshold search at T = 2 (Appendix F; Figure 7 of the
ICLR 2025 version), audited with Gaussian-DP auditing at $\delta = 10^{-5}$. Beside the
audits, the exact $\varepsilon(\delta)$ of $\theta_T$ (grid-propagated laws,
`advsim.mechanisms.landscape_epsilon_curve`; dotted lines). The GDP conversion assumes a
Gaussian trade-off curve, which fails when B is small relative to sigma (sigma = 1, B = 1:
exact eps of theta_25 is 1.09, the GDP audit reports ~3.9): the GDP ratios are the paper's
quantity, the exact ratio is the true amplification.
"""

from __future__ import annotations

import math
import statistics

import jax
import numpy as np
import scipy.stats

from advsim._plot_style import dodged, fit_data_limits, styled_pyplot, tex_number
from advsim.adversaries import ThresholdSearch
from advsim.bounds import gdp_epsilon, two_step_epsilon, two_step_gdp_curve
from advsim.exact import ERROR_KIND
from advsim.experiment import run_threshold_search
from advsim.figures import TRAPEZOID_REFINEMENT, trapezoid_exact
from advsim.mechanisms import ThresholdLandscape, landscape_law
from advsim.plotting import plot_ratio_heatmap, save_figure

__all__ = [
    "compute_figure4", "compute_landscape_exact", "compute_threshold_search", "plot_figure4",
    "plot_figure14", "plot_threshold_search",
]


def _laws(fig, rows_list) -> dict:
    """`{(sigma, B): landscape_law}` of theta_T, T = 1..last (every step), over the rows'
    (sigma, B): `.epsilon_per_step` and its `.error_per_step`."""
    last = max(max(int(r["steps"]) for r in rows_list), int(fig.params.get("exact_steps", 1)))
    keys = sorted({(float(r["noise_multiplier"]), int(r["batch_size"])) for r in rows_list})
    delta = fig.params["delta"]
    return {(s, b): landscape_law(delta, last, s, b, every_step=True) for s, b in keys}


def _curves(laws: dict) -> dict:
    """`{(sigma, B): exact eps(delta) of theta_T, T = 1..last}`."""
    return {k: np.asarray(law.epsilon_per_step, np.float64) for k, law in laws.items()}


def compute_landscape_exact(fig, rows) -> dict:
    """Figure 14: the exact curves for every (sigma, B) of the sweep."""
    return {"_exact": _curves(_laws(fig, rows["sweep"]))}


def compute_figure4(fig, rows) -> dict:
    """Figure 4: the exact curves and panel (b)'s table, per (sigma, B): eps_hat at T = 1
    and 25 and their ratio for each replicate (the spread: min, mean, max), exact eps of
    theta_1 and theta_25 and their ratio."""
    laws = _laws(fig, rows["sweep_a"] + rows["sweep_b"])
    exact = _curves(laws)
    cells: dict = {}
    for r in rows["sweep_b"]:
        key = (float(r["noise_multiplier"]), int(r["batch_size"]))
        cells.setdefault(key, {}).setdefault(int(r.get("replicate", 0)), {})[int(r["steps"])] = r
    table = []
    for (sigma, b), reps in sorted(cells.items()):
        ratios = []
        for rep in sorted(reps):
            e1, e25 = reps[rep][1]["eps_lower"], reps[rep][25]["eps_lower"]
            ratios.append(e25 / e1 if e1 > 0 else float("nan"))
        one, last = reps[min(reps)][1], reps[min(reps)][25]
        p1, p25 = one["eps_point"], last["eps_point"]
        curve, error = exact[(sigma, b)], laws[(sigma, b)].error_per_step
        table.append({
            "noise_multiplier": sigma, "batch_size": b,
            "eps_lower_t1": one["eps_lower"], "eps_lower_t25": last["eps_lower"],
            "guarantee_t1": one["guarantee"], "guarantee_t25": last["guarantee"],
            "assumption_rejected_t1": one["assumption_rejected"],
            "assumption_rejected_t25": last["assumption_rejected"],
            "eps_point_t1": p1, "eps_point_t25": p25,
            "eps_point_t1_above_composition": one["eps_point_above_composition"],
            "eps_point_t25_above_composition": last["eps_point_above_composition"],
            "ratio": ratios[0],
            "ratio_point": p25 / p1 if p25 is not None and p1 else None,
            "ratio_mean": statistics.fmean(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "replicates": len(ratios),
            "composition": one["composition"], "trials": one["trials"],
            "exact_t1": float(curve[0]), "exact_t1_error": float(error[0]),
            "exact_t1_error_kind": ERROR_KIND, "exact_t25": float(curve[24]),
            "exact_t25_error": float(error[24]), "exact_t25_error_kind": ERROR_KIND,
            "exact_ratio": float(curve[24] / curve[0]),
        })
    return {"_exact": exact, "figure4_heatmap": table}


def _draw_curves(ax, rows, sigma, batches, exact, delta):
    """eps_hat over T, one line per B, the accounting's epsilon, and dotted the exact eps."""
    import matplotlib as mpl

    colors = mpl.colormaps["viridis"].resampled(len(batches) + 1)
    sel = [r for r in rows if float(r["noise_multiplier"]) == float(sigma)]
    comp = sel[0]["composition"]
    ax.axhline(comp, color="0.0", linestyle="--", linewidth=1.2, label="accounting")
    labelled = False  # the rejections' legend entry, once
    for i, b in enumerate(batches):
        rb = sorted((r for r in sel if int(r["batch_size"]) == b), key=lambda r: r["steps"])
        # Each B's markers a little to the side: where two B audit alike they stay apart.
        shift = dodged(ax, i, len(batches), 4.0)
        # Unclipped: an audit at eps = 0 sits on the axes' bottom edge, drawn whole.
        ax.plot([r["steps"] for r in rb], [r["eps_lower"] for r in rb], marker=".", ms=3,
                color=colors(i), label=f"B = {b}", transform=shift, clip_on=False)
        rejected = [r for r in rb if str(r.get("assumption_rejected")).lower() == "true"]
        if rejected:  # never an empty series unclipped: its extent is the figure's corner
            ax.plot([r["steps"] for r in rejected], [r["eps_lower"] for r in rejected], "x",
                    ms=6, mew=0.8, color="tab:red", linestyle="none", transform=shift,
                    clip_on=False, label=None if labelled else "Gaussian assumption rejected")
            labelled = True
        curve = exact[(float(sigma), b)]
        ax.plot(range(1, len(curve) + 1), curve, linestyle=":", linewidth=1.0, color=colors(i),
                label=r"exact $\varepsilon(\delta)$ of $\theta_T$" if i == 0 else None)
    ax.set_xlabel("steps $T$")
    exponent = round(math.log10(delta))
    ax.set_ylabel(rf"$\varepsilon$ at $\delta = 10^{{{exponent}}}$" "\n"
                  "(lines: GDP audit, assumes Gaussian)")
    fit_data_limits(ax)
    # Up to the accounting's epsilon, or higher where a GDP audit (which assumes Gaussian
    # scores, and may pass the accounting where they are not) or the exact curve does.
    top = max([comp] + [r["eps_lower"] for r in sel if r["eps_lower"] is not None]
              + [float(max(exact[(float(sigma), b)])) for b in batches])  # fmt: skip
    ax.set_ylim(0, 1.08 * top)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(rf"$\sigma = {sigma:g}$", fontsize=8)


def _curve_panels(fig, rows, exact, path_stem, title, ncols):
    """One panel per sigma of `rows` (at most `ncols` a row), legend below."""
    plt = styled_pyplot()
    sigmas = sorted({float(r["noise_multiplier"]) for r in rows})
    batches = sorted({int(r["batch_size"]) for r in rows})
    ncols = min(ncols, len(sigmas))
    nrows = math.ceil(len(sigmas) / ncols)
    figure, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols + 0.4, 2.6 * nrows + 0.7),
                                squeeze=False)
    for i, (ax, sigma) in enumerate(zip(axes.flat, sigmas, strict=False)):
        _draw_curves(ax, rows, sigma, batches, exact, fig.params["delta"])
        if i % ncols:
            ax.set_ylabel("")
    for ax in list(axes.flat)[len(sigmas):]:
        ax.set_visible(False)
    entries = {}  # every panel's entries, each label once (a panel may have no rejection)
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    figure.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=4,
                  frameon=False, fontsize=7)
    figure.suptitle(title, fontsize=8)
    return save_figure(figure, path_stem)


def plot_figure14(fig, rows, tables):
    """Figure 14: eps_hat over T for every sigma (one panel each) and B."""
    trials = rows["sweep"][0]["trials"]
    title = rf"$A_S^{{h^*}}$ over $T$, GDP audit, {trials:,} runs/world"
    return _curve_panels(fig, rows["sweep"], tables["_exact"], fig.out / "figure14", title, 4)


def plot_figure4(fig, rows, tables):
    """Figure 4: (a) eps_hat over T at sigma in {1, 8}; (b) the amplification rate
    eps_hat(T=25) / eps_hat(T=1) over (sigma, B), replicate 0."""
    trials = rows["sweep_a"][0]["trials"]
    title = rf"(a) $A_S^{{h^*}}$, $h^* = C/2$, last model only; {trials:,} runs/world"
    paths = _curve_panels(fig, rows["sweep_a"], tables["_exact"], fig.out / "figure4a", title, 2)
    return paths + plot_ratio_heatmap(
        tables["figure4_heatmap"], "batch_size", "noise_multiplier", "eps_lower_t25",
        fig.out / "figure4b", denominator="eps_lower_t1",
        title=f"(b) amplification rate\nGDP audit, {trials:,} runs/world",
        colorbar_label=r"$\hat\varepsilon(T=25) / \hat\varepsilon(T=1)$",
    )


def _gdp_eps(thresholds, sigma, b, delta, points):
    """The exact GDP value on theta_2 at each threshold (`two_step_gdp_curve`, rates down
    to 1e-9)."""
    return two_step_gdp_curve(thresholds, sigma, b, delta=delta, min_rate=1e-9,
                              points=points)["eps"]  # fmt: skip


def compute_threshold_search(fig, rows):
    """Algorithm 5 (Appendix F) at T = 2, per (sigma, B): `ThresholdSearch` over the Type I
    error grid `params.alphas` plus h* = C/2 itself, GDP-audited on the same runs' keys,
    beside the exact GDP value (`two_step_gdp_curve`) and exact eps(delta) of theta_2
    (`two_step_epsilon`) at each threshold, each on 20,001 points with its change from
    10,001 as its error (`trapezoid_exact`; a maximum over thresholds has the largest
    error among them). Tables: threshold_search (one row per (sigma, B, h)) and
    threshold_search_summary (one row per (sigma, B))."""
    p = fig.params
    delta, trials = p["delta"], p["trials"]
    table, summary = [], []
    for sigma in p["sigmas"]:
        for b in p["batches"]:
            alpha_star = float(scipy.stats.norm.sf(0.5 / sigma))  # h* = C/2
            grid = sorted(set(p["alphas"]) | {alpha_star})
            res = run_threshold_search(ThresholdSearch(grid), ThresholdLandscape(2, sigma, b),
                                       trials, jax.random.key(p["seed"]), delta=delta,
                                       method="gdp", threshold_selection="split")  # the
            # paper's audit (a threshold chosen on half of the runs), labelled in every row
            hs = res.threshold
            exact_gdp, gdp_error = trapezoid_exact(_gdp_eps, hs, sigma, b, delta, points=20_001)
            pairs = [trapezoid_exact(two_step_epsilon, delta, sigma, b, threshold=h,
                                     points=20_001) for h in hs]  # fmt: skip
            exact, error = (np.array([float(pair[j]) for pair in pairs]) for j in (0, 1))
            i_star = grid.index(alpha_star)
            kind = TRAPEZOID_REFINEMENT
            table += [{"noise_multiplier": sigma, "batch_size": b, **row, "is_h_star": i == i_star,
                       "exact_gdp": float(exact_gdp[i]), "exact_gdp_error": float(gdp_error[i]),
                       "exact_gdp_error_kind": kind, "exact_eps": float(exact[i]),
                       "exact_error": float(error[i]), "exact_error_kind": kind}
                      for i, row in enumerate(res.rows())]  # fmt: skip
            summary.append({
                "noise_multiplier": sigma, "batch_size": b,
                "composition": gdp_epsilon(delta, 1.0 / sigma),
                "h_star_eps_lower": float(res.eps_lower[i_star]),
                "h_star_guarantee": res.results[i_star].guarantee.label,
                "h_star_assumption_rejected": res.results[i_star].assumption_rejected,
                "search_eps_lower": res.best_eps,
                "search_guarantee": res.results[res.best].guarantee.label,
                "search_assumption_rejected": res.results[res.best].assumption_rejected,
                "search_best_threshold": res.best_threshold,
                "exact_gdp_h_star": float(exact_gdp[i_star]),
                "exact_gdp_h_star_error": float(gdp_error[i_star]),
                "exact_gdp_h_star_error_kind": kind,
                "exact_gdp_max": float(np.max(exact_gdp)),
                "exact_gdp_max_error": float(np.max(gdp_error)), "exact_gdp_max_error_kind": kind,
                "exact_gdp_argmax": float(hs[int(np.argmax(exact_gdp))]),
                "exact_eps_h_star": float(exact[i_star]),
                "exact_eps_h_star_error": float(error[i_star]),
                "exact_eps_h_star_error_kind": kind, "exact_eps_max": float(np.max(exact)),
                "exact_eps_max_error": float(np.max(error)), "exact_eps_max_error_kind": kind,
                "thresholds": len(hs), "trials": trials,
            })
    return {"threshold_search": table, "threshold_search_summary": summary}


def plot_threshold_search(fig, rows, tables):
    """One panel per (sigma, B): eps over the threshold h, the audit, the exact GDP value and
    exact eps(delta) of theta_2, the accounting, h* = C/2 marked."""
    table, summary = tables["threshold_search"], tables["threshold_search_summary"]
    plt = styled_pyplot()
    ncols = min(4, len(summary))
    nrows = -(-len(summary) // ncols)
    figure, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols + 0.4, 2.2 * nrows + 0.6),
                                squeeze=False)
    for ax, s in zip(axes.flat, summary, strict=True):
        sigma, b = s["noise_multiplier"], s["batch_size"]
        sel = sorted((r for r in table if (r["noise_multiplier"], r["batch_size"]) == (sigma, b)),
                     key=lambda r: r["threshold"])
        h = [r["threshold"] for r in sel]
        # Widths and layers so that lines that coincide (B large: all three) all show: a
        # wide blue band, a green core, black dashes on top.
        ax.axhline(s["composition"], color="0.0", linestyle="--", lw=1, zorder=3,
                   label="accounting")
        ax.plot(h, [r["exact_gdp"] for r in sel], color="C0", lw=3, alpha=0.6, zorder=1,
                label="exact, GDP value")
        ax.plot(h, [r["exact_eps"] for r in sel], color="C2", lw=1.2, zorder=2,
                label="exact eps(delta)")
        ax.plot(h, [r["eps_lower"] for r in sel], "v", color="0.0", ms=3,
                label="GDP audit (assumes Gaussian)", clip_on=False)
        rejected = [r for r in sel if r["assumption_rejected"]]
        ax.plot([r["threshold"] for r in rejected], [r["eps_lower"] for r in rejected], "x",
                color="tab:red", ms=6, label="Gaussian assumption rejected")
        ax.axvline(0.5, color="C3", lw=0.8, linestyle=":", label="$h^* = C/2$")
        ax.set_title(rf"$\sigma = {sigma:g}$, $B = {b}$", fontsize=8)
        ax.set_xlabel("threshold $h$")
        # Headroom: where B is large the exact GDP value equals the accounting's epsilon,
        # and both lines would lie on the axes' top edge.
        top = max([s["composition"]]
                  + [r[k] for r in sel for k in ("exact_gdp", "exact_eps", "eps_lower")])
        ax.set_ylim(0, 1.08 * top)
        ax.grid(True, color="0.9", lw=0.5)
    delta = tex_number(fig.params["delta"])
    for row in axes:
        row[0].set_ylabel(rf"$\varepsilon$ at $\delta = {delta}$, $T = 2$")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False,
                  fontsize=7)
    figure.suptitle(rf"Algorithm 5 threshold search at $T = 2$, $\delta = {delta}$ (GDP audit, "
                    f"{summary[0]['trials']:,} runs/world)", fontsize=8)
    return save_figure(figure, fig.out / "threshold_search")

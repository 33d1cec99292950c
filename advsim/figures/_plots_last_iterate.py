"""The last-iterate paper's figures (Steinke et al., arXiv:2410.06186).

- Figure 1: epsilon at delta = 1e-6 of the heuristic (Theorem 1), composition and full-batch
  DP-GD (Appendix B) against T, one panel per (q, sigma) regime of the sweep's `[[cases]]`.
- history_vs_v: the history-encoding regularizer of Section 4.3 against its scale v: the
  exact epsilon of the last model (`advsim.mechanisms.history_epsilon`: from one step's
  epsilon at v -> 0 up to composition at v -> inf), the reference bounds, and the
  empirical lower bound and point estimate at each v.
- Figure 5: the quadratic regularizer's exact epsilon over the heuristic's maximum over
  t <= T, one heat map per one-step epsilon (bounds only: a compute hook, no sweep).
- Figure 6: the malicious dataset ("repeaters", Appendix C) over T, both encodings: the
  bounds, the exact epsilon of the release and the empirical lower bounds.
- counterexamples: one audit per counterexample of Section 4 / Appendix C, a table.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import brentq

from advsim._plot_style import dodged, fit_data_limits, guarantee_text, styled_pyplot
from advsim.bounds import (
    composition_epsilon,
    heuristic_epsilon,
    heuristic_epsilon_max_over_steps,
    quadratic_law,
)
from advsim.experiment import run_audit
from advsim.figures import exact_with_error, pld_exact
from advsim.mechanisms import history_epsilon, quadratic_exact_epsilon, repeaters_epsilon
from advsim.plotting import (
    BOUND_STYLES,
    plot_eps_vs_steps_panels,
    plot_ratio_heatmap,
    save_figure,
)
from advsim.sweep import resolve

__all__ = [
    "compute_counterexamples", "compute_figure5", "compute_figure6", "compute_history_vs_v",
    "one_step_sigma", "plot_figure1", "plot_figure5", "plot_figure6", "plot_history_vs_v",
]


def plot_figure1(fig, rows, tables):
    """One eps-vs-T panel per `[[cases]]` regime (q, sigma) of the sweep."""
    panels = []
    for case in fig.sweeps["sweep"]["cases"]:
        q, sigma = case["sampling_prob"], case["noise_multiplier"]
        rs = [r for r in rows["sweep"] if (r["sampling_prob"], r["noise_multiplier"]) == (q, sigma)]
        panels.append((rf"$q = {q:g}$, $\sigma = {sigma:g}$", rs))
    return plot_eps_vs_steps_panels(panels, fig.out / "figure1")


def _setting(fig):
    mech = fig.sweeps["sweep"]["mechanism"]
    return (fig.sweeps["sweep"]["sweep"]["delta"], mech["steps"], mech["sampling_prob"],
            mech["noise_multiplier"])


def compute_history_vs_v(fig, rows):
    """The derived column `exact` (history_epsilon at each v, with its error: `pld_exact`),
    the reference bounds
    (table history_vs_v_refs) and the exact curve on a fine grid of v (`_curve`)."""
    delta, steps, q, sigma = _setting(fig)
    grid = 1e-3  # PLD value discretization of the exact epsilon

    def exact(v):
        return history_epsilon(delta, steps, q, sigma, float(v), value_discretization_interval=grid)

    for r in rows["sweep"]:
        r.update(pld_exact(history_epsilon, delta, steps, q, sigma, float(r["v"]), interval=grid))
    refs = dict(
        composition=composition_epsilon(delta, steps, q, sigma),
        heuristic=heuristic_epsilon(delta, steps, q, sigma),
        heuristic_max=heuristic_epsilon_max_over_steps(delta, steps, q, sigma),
        one_step=heuristic_epsilon(delta, 1, q, sigma),
    )
    vs_fine = np.geomspace(*fig.params["fine_v"])
    return {"history_vs_v_refs": [refs], "_curve": (vs_fine, [exact(v) for v in vs_fine])}


def plot_history_vs_v(fig, rows, tables):
    """Epsilon against v: exact (thick grey), composition, heuristic, one step, and the
    empirical point estimate (circles) and lower bound (triangles)."""
    delta, steps, q, sigma = _setting(fig)
    refs = tables["history_vs_v_refs"][0]
    plt = styled_pyplot()
    figure, ax = plt.subplots(figsize=(4.4, 4.0))
    ax.axhline(refs["composition"], **BOUND_STYLES["composition"])
    ax.axhline(refs["heuristic"], **BOUND_STYLES["heuristic"])
    same = abs(refs["one_step"] - refs["heuristic_max"]) < 1e-9
    ax.axhline(refs["one_step"], color="0.55", linestyle=":",
               label=r"one step, $\varepsilon_1$"
               + (r" = $\max_{t \leq T}$ heuristic" if same else ""))
    ax.plot(*tables["_curve"], color="0.6", linewidth=2.5, zorder=0, label="exact, last model")
    sweep = sorted(rows["sweep"], key=lambda r: float(r["v"]))
    vs = [float(r["v"]) for r in sweep]
    points = [float("nan") if r["eps_point"] is None else r["eps_point"] for r in sweep]
    # Side by side at each v: the two are close where the audit is tight.
    ax.plot(vs, points, linestyle="none", marker="o", mfc="white", mec="0.0", ms=4.5,
            label="empirical (point estimate, not a bound)", clip_on=False,
            transform=dodged(ax, 0, 2))
    ax.plot(vs, [r["eps_lower"] for r in sweep], linestyle="none", marker="v", color="0.0",
            ms=5, label=f"empirical (lower bound; {guarantee_text(sweep)})", clip_on=False,
            transform=dodged(ax, 1, 2))
    fit_data_limits(ax)
    ax.set_xscale("log")
    ax.set_xlabel("scale $v$ of the history-encoding regularizer")
    ax.set_ylabel(rf"$\varepsilon$ at $\delta = 10^{{{round(math.log10(delta))}}}$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(rf"$T = {steps}$, $q = {q:g}$, $\sigma = {sigma:g}$, last model only, "
                 f"{sweep[0]['trials']:,} runs/world", fontsize=8)
    figure.legend(frameon=False, loc="outside lower center", ncols=2)
    return save_figure(figure, fig.out / "history_vs_v")


def compute_figure6(fig, rows):
    """Derived columns of each (encoding, T): `exact` (repeaters_epsilon, with its error:
    `pld_exact`) and
    `heuristic_max` (the heuristic maximised over t <= T)."""
    mech = fig.sweeps["sweep"]["mechanism"]
    delta, q, sigma = fig.sweeps["sweep"]["sweep"]["delta"], mech["sampling_prob"], mech[
        "noise_multiplier"]
    for r in rows["sweep"]:
        t = int(r["steps"])
        r.update(pld_exact(repeaters_epsilon, delta, t, q, sigma, encoding=r["encoding"],
                           interval=1e-3))
        r["heuristic_max"] = heuristic_epsilon_max_over_steps(delta, t, q, sigma)
    return {}


def plot_figure6(fig, rows, tables):
    """Epsilon over T for both encodings: composition, heuristic (and its max over t <= T
    where it differs), exact epsilon (lines) and empirical lower bounds (triangles)."""
    mech = fig.sweeps["sweep"]["mechanism"]
    by = {e: sorted((r for r in rows["sweep"] if r["encoding"] == e), key=lambda r: r["steps"])
          for e in ("threshold", "amplify")}
    thr, amp = by["threshold"], by["amplify"]
    ts = [r["steps"] for r in thr]
    plt = styled_pyplot()
    figure, ax = plt.subplots(figsize=(4.4, 4.0))
    for key in ("composition", "heuristic"):
        ax.plot(ts, [r[key] for r in thr], **BOUND_STYLES[key])
    if any(r["heuristic_max"] > r["heuristic"] + 1e-9 for r in thr):
        ax.plot(ts, [r["heuristic_max"] for r in thr], color="0.35", linestyle="-.",
                label=r"heuristic, $\max_{t \leq T}$")
    ax.plot(ts, [r["exact"] for r in thr], color="0.55", linestyle=":", marker="o", ms=3,
            label="exact, thresholded (paper)")
    # Rings: the amplified encoding's exact epsilon can equal composition, whose line
    # would hide a line of its own.
    ax.plot([r["steps"] for r in amp], [r["exact"] for r in amp], color="0.6", linestyle="-",
            linewidth=2.5, marker="o", ms=8, mfc="none", mew=1.4, zorder=1.5,
            label="exact, amplified")
    # Markers unclipped: an audit that certifies nothing sits at eps = 0, the axes' edge,
    # which would cut its marker in half; the two encodings' side by side at each T.
    ax.plot(ts, [r["eps_lower"] for r in thr], linestyle="none", marker="v", color="0.0",
            ms=5, label=f"empirical lower bound, thresholded (paper; {guarantee_text(thr)})",
            clip_on=False, transform=dodged(ax, 0, 2))
    ax.plot([r["steps"] for r in amp], [r["eps_lower"] for r in amp], linestyle="none",
            marker="^", mfc="white", mec="0.0", ms=5,
            label=f"empirical lower bound, amplified ({guarantee_text(amp)})", clip_on=False,
            transform=dodged(ax, 1, 2))
    fit_data_limits(ax)
    ax.set_xscale("log")
    ax.set_xticks(ts, [str(t) for t in ts])
    ax.minorticks_off()
    ax.set_xlabel("steps $T$")
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(rf"repeaters, last model only: $q = {mech['sampling_prob']:g}$, "
                 rf"$\sigma = {mech['noise_multiplier']:g}$, {thr[0]['trials']:,} runs/world",
                 fontsize=8)
    figure.legend(frameon=False, fontsize=7, loc="outside lower center", ncols=2)
    return save_figure(figure, fig.out / "figure6")


#: What the column `eps_1` of Figure 5 is.
EPS_1_KIND = ("target: one step's epsilon (the heuristic at T = 1), the noise multiplier "
              "calibrated to it")


def one_step_sigma(eps_1: float, q: float, delta: float) -> float:
    """sigma with heuristic_epsilon(delta, 1, q, sigma) = eps_1 (one step of DP-SGD)."""

    def gap(log_sigma):
        return heuristic_epsilon(delta, 1, q, math.exp(log_sigma)) - eps_1

    lo, hi = -3.0, 3.0
    while gap(lo) < 0:
        lo -= 2.0
    while gap(hi) > 0:
        hi += 2.0
    return math.exp(brentq(gap, lo, hi, xtol=1e-13, rtol=1e-13))


def compute_figure5(fig, rows):
    """Figure 5 (bounds only, no sweep): for every (eps_1, q, T), sigma making one step
    (eps_1, delta)-DP, the quadratic regularizer's exact epsilon (`quadratic_exact_epsilon`;
    `rounded`: the support was rounded up, an upper bound) over the heuristic's maximum
    over t <= T."""
    p = fig.params
    delta, alpha, rounding = p["delta"], p["alpha"], p["rounding"]
    table = []
    for eps_1 in p["eps_1"]:
        for q in p["sampling_probs"]:
            sigma = one_step_sigma(eps_1, q, delta)
            for t in p["steps"]:
                start = time.perf_counter()
                quad = quadratic_exact_epsilon(delta, t, q, sigma, alpha, rounding=rounding)
                heur = heuristic_epsilon_max_over_steps(delta, t, q, sigma)
                table.append(dict(
                    eps_1=eps_1, eps_1_kind=EPS_1_KIND, steps=t, sampling_prob=q,
                    noise_multiplier=sigma, alpha=alpha,
                    delta=delta, quadratic=quad, heuristic_max=heur, ratio=quad / heur,
                    rounded=quadratic_law(t, q, sigma, alpha, rounding=rounding)[3],
                    wall_time_s=time.perf_counter() - start,
                ))
    return {"figure5_quadratic": table}


def plot_figure5(fig, rows, tables):
    """One ratio heat map (q by T) per eps_1, panels (a), (b), ..."""
    paths = []
    table = tables["figure5_quadratic"]
    for i, eps_1 in enumerate(fig.params["eps_1"]):
        panel = chr(ord("a") + i)
        sub = [r for r in table if r["eps_1"] == eps_1]
        rounded = sorted({r["steps"] for r in sub if r["rounded"]})
        how = "fine grid" if fig.params["rounding"] == "fine" else "rounded up as in the paper"
        note = f"\nsupport {how} for T >= {rounded[0]} (an upper bound)" if rounded else ""
        paths += plot_ratio_heatmap(
            sub, "steps", "sampling_prob", "quadratic", fig.out / f"figure5{panel}",
            denominator="heuristic_max", fmt=".3f",
            title=(f"({panel}) one step is ({eps_1:g}, $10^{{-6}}$)-DP; quadratic regularizer, "
                   r"$\alpha = 1/2$, over $\max_{t \leq T} \varepsilon_t$" + note),
            colorbar_label=r"$\varepsilon_{quadratic} / \max_{t \leq T} \varepsilon_t$"
            r" at $\delta = 10^{-6}$",
        )
    return paths


def compute_counterexamples(fig, rows):
    """One assumption-free audit per construction of `params.rows` (mechanism and
    adversary by class path, as in sweeps) beside the heuristic, its maximum over t <= T,
    composition and the exact epsilon of the last model with its error and the error's
    kind (`exact_with_error`).

    With `params.exact_discretization` (the quick mode), a row that names its exact law's
    function (`exact = "module:function"`, called as `function(delta, **row.params,
    value_discretization_interval=...)`, the function behind that mechanism's
    `exact_epsilon`) gets it on that coarser PLD grid (1e-3 is 8x faster than the default
    1e-4; the quick rows agree to 1e-5). Otherwise `exact_epsilon` as is."""
    trials, table = fig.params["trials"], []
    grid = fig.params.get("exact_discretization")
    for spec in fig.params["rows"]:
        mech = resolve("mechanism", spec["mechanism"]).build(**spec["params"])
        adversary = resolve("adversary", spec["adversary"]).build()
        delta, acc = spec["delta"], mech.accounting()
        start = time.perf_counter()
        rec = run_audit(mech, adversary, trials=trials, method="eps_delta", delta=delta)
        exact = exact_with_error(spec, mech, delta, grid)
        table.append(dict(
            construction=spec["construction"],
            parameters=f"T={acc.steps}, q={acc.sampling_prob:g}, sigma={acc.noise_multiplier:g}",
            delta=delta, eps_lower=rec.eps_lower, guarantee=rec.guarantee,
            eps_point=rec.eps_point, eps_point_above_composition=rec.eps_point_above_composition,
            heuristic=rec.heuristic,
            heuristic_max=heuristic_epsilon_max_over_steps(
                delta, acc.steps, acc.sampling_prob, acc.noise_multiplier),
            composition=rec.composition, **exact, trials=trials,
            wall_time_s=time.perf_counter() - start,
        ))
    return {"counterexamples": table}

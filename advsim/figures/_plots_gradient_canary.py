"""Gradient canaries every k-th step (Cebere, Bellet & Papernot, arXiv:2405.14457).

Their Algorithm 4 inserts a crafted gradient of norm C in one coordinate at the steps with
t mod k = 0 (always, not Poisson-sampled) and keeps the number of insertions n fixed
(T = n k), so the accountant's bound, which counts only the insertion steps, is the same for
every k. Part (a) is their Figure 2 with `advsim.mechanisms.GradientCanary` and no other
gradients (their worst case): the biased coordinate is eta (n C + N(0, T sigma^2 C^2)) in
and eta N(0, T sigma^2 C^2) out, i.e. mu_last = n / (sqrt(T) sigma)-GDP, against
sqrt(n) / sigma for composition over the insertions; for k > 1 the audit falls to that
exact last-model epsilon (mu ratio 1 / sqrt(k)). Part (b) is the low-dimensional regime of
their Section 5.2 (Figure 1c): a logistic-regression dataset whose feature scales span
`spread` = 100x, Poisson-sampled, audited with A_GC-R on every coordinate (Algorithm 2
picks one uniformly, so its expected result is the mean), the random direction of
Algorithms 7-8 and A_GC-S (Algorithm 3).

Every audit: Clopper-Pearson 95%, threshold chosen on held-out runs. `eps_gdp` converts
mu_lower to epsilon *assuming* a Gaussian trade-off curve (Remark 3 there; exact in part
(a)), with `gdp_assumption_rejected` saying whether the data rejected that curve;
`eps_delta_lower` assumes nothing.
"""

from __future__ import annotations

import math
import time
import warnings

import jax
import numpy as np

import advsim
from advsim import CanarySchedule
from advsim._plot_style import guarantee_text, styled_pyplot
from advsim.adversaries import BiasedCoordinate, RandomDirection, SimulatedBiasedDimension
from advsim.audits import AssumptionRejectedWarning, audit
from advsim.bounds import composition_epsilon, gdp_epsilon, heuristic_epsilon
from advsim.figures import CLOSED_FORM
from advsim.mechanisms import GradientCanary
from advsim.plotting import BOUND_STYLES, save_figure

__all__ = ["compute_gradient_canary", "plot_gradient_canary"]


def _audits(scores, delta: float) -> dict:
    with warnings.catch_warnings():  # the verdict is the gdp_assumption_rejected column
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        gdp = audit(scores, "gdp", delta=delta)
    free = audit(scores, "eps_delta", delta=delta)
    return {
        "eps_gdp": gdp.eps_lower,
        "eps_gdp_guarantee": gdp.guarantee.label,
        "mu_lower": gdp.extras.get("mu_lower"),
        "gdp_assumption_rejected": gdp.assumption_rejected,
        "eps_gdp_point": gdp.eps_point,  # the GDP audit's estimate: eps_gdp's label
        "eps_delta_lower": free.eps_lower,
        "eps_delta_lower_guarantee": free.guarantee.label,
    }


def _flag_above_composition(row: dict) -> dict:
    """`eps_gdp_point_above_composition`: the GDP audit's estimate above the row's
    composition bound."""
    point = row.get("eps_gdp_point")
    row["eps_gdp_point_above_composition"] = point is not None and point > row["composition"]
    return row


def _periodicity(p: dict, progress: bool) -> list[dict]:
    """Part (a): zero other gradients, A_GC-R, k in `ks`, T = n k, sigma = sqrt(n) / mu."""
    n, delta, seed, trials = p["insertions"], p["delta"], p["seed"], p["trials"]
    sigma = math.sqrt(n) / p["mu_composition"]
    adversary = BiasedCoordinate.random(p["dim"], seed=seed)
    variants = [("inserted", 1.0, False)]
    if p.get("poisson_q"):
        variants.append(("poisson", p["poisson_q"], True))
    rows = []
    for variant, q, sampled in variants:
        for k in p["ks"]:
            steps, start = n * k, time.perf_counter()
            schedule = CanarySchedule.every(k, first=k, sampled=sampled)
            mech = GradientCanary(steps, q, sigma, dim=p["dim"], canary_schedule=schedule)
            scores = advsim.simulate(
                mech, adversary, trials, seed + 1000 * k, chunk_size=trials, progress=progress
            )
            heuristic = heuristic_epsilon(delta, steps, q, sigma, canary_steps=n)
            # Deterministic insertion: N(n, T s^2) vs N(0, T s^2) in closed form; Poisson:
            # the heuristic's mixture, exact for zero other gradients (Theorem 1 there).
            exact = heuristic if sampled else gdp_epsilon(delta, n / (math.sqrt(steps) * sigma))
            rows.append(
                dict(
                    part="a", adversary="A_GC-R", variant=variant, k=k, steps=steps,
                    insertions=n, dim=p["dim"], sampling_prob=q, noise_multiplier=sigma,
                    coordinate=int(adversary.coordinate), **_audits(scores, delta),
                    exact_last_model=exact, exact_last_model_error=0.0,
                    exact_last_model_error_kind=CLOSED_FORM, heuristic=heuristic,
                    composition=composition_epsilon(delta, steps, q, sigma, canary_steps=n),
                    trials=trials, wall_time_s=time.perf_counter() - start,
                )
            )  # fmt: skip
    return rows


def _logistic(p: dict, quick: bool, progress: bool) -> tuple[list[dict], list[dict]]:
    """Part (b): logistic data, every coordinate, random direction, A_GC-S variants."""
    n, k, delta, seed, trials = p["insertions"], p["k"], p["delta"], p["seed"], p["trials"]
    sigma, steps = math.sqrt(n) / p["mu_composition"], n * k
    mech = GradientCanary(
        steps, p["sampling_prob"], sigma, dim=p["dim"], learning_rate=p["learning_rate"],
        data="logistic", data_seed=seed, num_examples=p["num_examples"], copies=p["copies"],
        spread=p["spread"], scale=p["scale"],
        canary_schedule=CanarySchedule.every(k, first=k, sampled=False),
    )  # fmt: skip
    scales = np.sqrt(np.mean(np.square(mech.features.astype(np.float64)), axis=0))
    common = dict(
        part="b", k=k, steps=steps, insertions=n, dim=p["dim"], noise_multiplier=sigma,
        sampling_prob=p["sampling_prob"], trials=trials,
        # Without data the biased coordinate would be exactly this (k = 1: composition).
        exact_last_model=gdp_epsilon(delta, n / (math.sqrt(steps) * sigma)),
        exact_last_model_error=0.0, exact_last_model_error_kind=CLOSED_FORM,
        composition=composition_epsilon(delta, steps, 1.0, sigma, canary_steps=n),
    )  # fmt: skip
    key, rows, picks = jax.random.key(seed + 7), [], []

    def run(adversary, name, variant, coordinate=None):
        start = time.perf_counter()
        scores = advsim.simulate(mech, adversary, trials, key, chunk_size=trials, progress=progress)
        scale = None if coordinate is None else float(scales[coordinate])
        rows.append(
            dict(
                adversary=name, variant=variant, coordinate=coordinate, feature_scale=scale,
                **_audits(scores, delta), wall_time_s=time.perf_counter() - start, **common,
            )
        )  # fmt: skip

    for j in range(p["dim"]):
        run(BiasedCoordinate(j), "A_GC-R", f"coordinate {j}", j)
    # Quick mode skips the random direction (one compilation less); the full run has both.
    for statistic in () if quick else ("cosine", "projection"):
        run(RandomDirection(seed, statistic), "random direction", statistic)
    simulations = [("noiseless", "per_step")]
    if not quick:
        simulations += [("noiseless", "final_model"), ("noisy", "per_step")]
        simulations += [("noisy", "final_model")]
    for simulation, rank in simulations:
        adversary = SimulatedBiasedDimension(simulation, rank, runs=4, seed=seed)
        picked = int(np.argmin(adversary.statistic(mech)))
        scale = float(scales[picked])
        picks.append(dict(variant=f"{simulation}/{rank}", picked=picked, scale=scale))
        run(adversary, "A_GC-S", f"sim {simulation}/{rank}", picked)
    return rows, picks


def compute_gradient_canary(fig, rows):
    """Both parts, from `params.periodicity` and `params.logistic` (see the module)."""
    progress = True
    part_a = _periodicity(fig.params["periodicity"], progress)
    part_b, picks = _logistic(fig.params["logistic"], fig.quick, progress)
    coordinates = [r for r in part_b if r["adversary"] == "A_GC-R"]
    summary = [dict(
        adversary="A_GC-R over a uniform coordinate (Algorithm 2)",
        eps_gdp=float(np.mean([r["eps_gdp"] for r in coordinates])),
        eps_gdp_guarantee="/".join(sorted({r["eps_gdp_guarantee"] for r in coordinates})),
        gdp_assumption_rejected=f"{sum(bool(r['gdp_assumption_rejected']) for r in coordinates)}"
        f" of {len(coordinates)} coordinates",
    )]  # fmt: skip
    table = [_flag_above_composition(r) for r in part_a + part_b]
    return {"gradient_canary": table, "picks": picks, "summary": summary}


def _panel_periodicity(ax, rows):
    ins = sorted((r for r in rows if r["variant"] == "inserted"), key=lambda r: r["k"])
    ks = [r["k"] for r in ins]
    ax.plot(ks, [r["composition"] for r in ins], **BOUND_STYLES["composition"])
    # Rings: at k = 1 the exact epsilon is composition's, on its line.
    ax.plot(ks, [r["exact_last_model"] for r in ins], color="0.55", linestyle=":", marker="o",
            mfc="none", ms=6, label="exact last model (= heuristic, q = 1)")  # fmt: skip
    poi = sorted((r for r in rows if r["variant"] == "poisson"), key=lambda r: r["k"])
    if poi:
        q = poi[0]["sampling_prob"]
        ax.plot(ks, [r["composition"] for r in poi], color="0.0", linewidth=0.7,
                label=f"composition, Poisson q = {q:g}")  # fmt: skip
        ax.plot(ks, [r["heuristic"] for r in poi], color="0.35", linestyle="--",
                label=f"heuristic = exact last model, Poisson q = {q:g}")  # fmt: skip
    for group, suffix, color in ((ins, "", "0.0"), (poi, ", Poisson", "0.4")):
        if not group:
            continue
        _gdp_markers(ax, [r["k"] for r in group], group, f"audit{suffix}", color, "v")
        ax.plot([r["k"] for r in group], [r["eps_delta_lower"] for r in group], "^", ms=6,
                mfc="white", mec=color, label=f"audit{suffix}, (eps, delta) bound "
                f"({guarantee_text(group, 'eps_delta_lower_guarantee')})")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_xlabel("insertion period $k$ ($T = nk$)")
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
    ax.set_ylim(0, 1.1 * max(r["composition"] for r in rows))
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(f"(a) zero data, $n = {ins[0]['insertions']}$ insertions, "
                 f"{ins[0]['trials']:,} runs/world", fontsize=8)  # fmt: skip


def _gdp_markers(ax, xs, rows, label, color, marker):
    """GDP audits: filled where the Gaussian curve was not rejected, × where it was."""
    kept = [(x, r["eps_gdp"]) for x, r in zip(xs, rows, strict=True)
            if not r["gdp_assumption_rejected"]]  # fmt: skip
    rejected = [(x, r["eps_gdp"]) for x, r in zip(xs, rows, strict=True)
                if r["gdp_assumption_rejected"]]  # fmt: skip
    if kept:
        ax.plot(*zip(*kept, strict=True), marker, color=color, ms=6, linestyle="none",
                label=f"{label}, GDP (assumes a Gaussian trade-off)")  # fmt: skip
    if rejected:
        ax.plot(*zip(*rejected, strict=True), "x", color=color, ms=6, linestyle="none",
                label=f"{label}, GDP (Gaussian trade-off rejected)")  # fmt: skip


def _panel_logistic(bx, rows):
    coords = sorted((r for r in rows if r["adversary"] == "A_GC-R"),
                    key=lambda r: r["feature_scale"])  # fmt: skip
    x = np.arange(len(coords))
    bx.bar(x, [r["eps_gdp"] for r in coords], color="0.8",
           label="A_GC-R, each coordinate (GDP, assumes a Gaussian trade-off)")  # fmt: skip
    bx.set_xticks(x, [f"{r['coordinate']}\n{r['feature_scale']:.2g}" for r in coords], fontsize=6)
    bx.axhline(coords[0]["composition"], **BOUND_STYLES["composition"])
    bx.axhline(np.mean([r["eps_gdp"] for r in coords]), color="0.5", linestyle="--",
               label="A_GC-R, mean (Algorithm 2)")  # fmt: skip
    position = {c["coordinate"]: i for i, c in enumerate(coords)}
    markers = iter("ovsD")
    for r in rows:
        if r["adversary"] == "A_GC-S":
            bx.plot(position[r["coordinate"]], r["eps_gdp"], next(markers), mfc="none", mec="0.0",
                    ms=7, label=f"A_GC-S {r['variant'][4:]} (coord {r['coordinate']}; GDP, "
                    f"{r['eps_gdp_guarantee']})")  # fmt: skip
    directions = [r for r in rows if r["adversary"] == "random direction"]
    for r, style in zip(directions, (":", "-."), strict=False):
        bx.axhline(r["eps_gdp"], color="0.3", linestyle=style, linewidth=0.8,
                   label=f"random direction, {r['variant']} (GDP, {r['eps_gdp_guarantee']})")
    bx.set_xlabel("coordinate / feature scale (sorted)")
    bx.set_ylabel(r"GDP audit $\varepsilon$ at $\delta = 10^{-5}$")
    bx.set_ylim(0, 1.1 * coords[0]["composition"])
    bx.set_title(f"(b) logistic data, k = {coords[0]['k']}, $n = {coords[0]['insertions']}$, "
                 f"{coords[0]['trials']:,} runs/world", fontsize=8)  # fmt: skip


def plot_gradient_canary(fig, rows, tables):
    """(a) epsilon over the insertion period k; (b) the GDP audit per coordinate."""
    table = tables["gradient_canary"]
    plt = styled_pyplot()
    figure, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 4.0))
    _panel_periodicity(ax, [r for r in table if r["part"] == "a"])
    _panel_logistic(bx, [r for r in table if r["part"] == "b"])
    # Each panel's legend below the panels, on its side: inside the axes they covered the
    # top tick labels (and needed the top third of each panel kept empty).
    for axes, where in ((ax, "outside lower left"), (bx, "outside lower right")):
        handles, labels = axes.get_legend_handles_labels()
        figure.legend(handles, labels, loc=where, frameon=False, fontsize=6, ncols=2)
    return save_figure(figure, fig.out / "gradient_canary")

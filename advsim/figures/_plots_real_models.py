"""The papers' qualitative results on real models: audits of an MLP trained with DP-SGD.

Part (a), Section 5 of arXiv:2410.06186: an equinox MLP (30-32-1) trained with DP-SGD on
breast_cancer, the canary Poisson-sampled at every step with rate q. A crafted gradient
canary (`RealModelGradientCanary`, a sampled schedule; coordinate chosen by A_GC-S,
Algorithm 3 of arXiv:2405.14457: the one simulated training moves least) read by its
displacement audits near the last-iterate heuristic, while input-space canaries
(`RealModelInputCanary`: a mislabeled held-out example, an out-of-range input) read by
their loss at the last model audit far below it.

Part (b), Cebere, Bellet & Papernot (arXiv:2405.14457, Figure 2 on a real model): the
gradient canary inserted at every k-th step (Algorithm 4: t mod k = 0, always), n
insertions, T = n k, so composition over the insertions is the same for every k: k = 1
audits near composition and the audit falls with k.

Audits (delta from the params, Clopper-Pearson 95%, threshold held out): `eps_family`
(the heuristic family's fit, Section 3.1 of arXiv:2410.06186: assumes the run is in the
family), `eps_gdp` (assumes a Gaussian trade-off curve; exact for deterministic
insertion with zero data), `eps_delta_lower` (assumes nothing). Each row also carries the
test accuracy of the trained models (private and non-private), so a reader sees that the
audited models learn.

Where the held-out runs reject an audit's assumption (the table's
`family_assumption_rejected`, `gdp_assumption_rejected`: `check_heuristic_family`,
`check_gaussian_tradeoff` of `advsim.audits`), the figure draws that number hollow (a
white, outlined bar in (a), a hollow triangle in (b); every other mark is filled), with a
legend entry saying "assumption rejected": that epsilon rests on an assumption the runs
contradict.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

import advsim
from advsim import CanarySchedule
from advsim._plot_style import styled_pyplot
from advsim.adversaries import BiasedCoordinate, CanaryLoss, SimulatedBiasedDimension
from advsim.audits import audit
from advsim.bounds import composition_epsilon, heuristic_epsilon
from advsim.mechanisms import RealModelGradientCanary, RealModelInputCanary, accuracy_report
from advsim.plotting import BOUND_STYLES, save_figure

__all__ = ["compute_real_models", "plot_real_models"]


def _audits(scores, delta: float, accounting) -> dict:
    with warnings.catch_warnings():  # a rejected assumption is a column, not an error
        warnings.simplefilter("ignore")
        family = audit(scores, "family", delta=delta, accounting=accounting)
        gdp = audit(scores, "gdp", delta=delta)
        free = audit(scores, "eps_delta", delta=delta)
    return {
        "eps_family": family.eps_lower,
        "eps_family_guarantee": family.guarantee.label,
        "family_assumption_rejected": family.assumption_rejected,
        "eps_family_point": family.eps_point,
        "eps_gdp": gdp.eps_lower,
        "eps_gdp_guarantee": gdp.guarantee.label,
        "gdp_assumption_rejected": gdp.assumption_rejected,
        "eps_delta_lower": free.eps_lower,
        "eps_delta_lower_guarantee": free.guarantee.label,
    }


def _accuracy(mech, p: dict) -> dict:
    """Test accuracy of `accuracy_runs` private and non-private models (0: not measured)."""
    if not p["accuracy_runs"]:
        return {"private_mean": None, "nonprivate_mean": None}
    return accuracy_report(mech, runs=p["accuracy_runs"], seed=p["seed"])


def _common(p: dict) -> dict:
    return dict(
        dataset=p["dataset"], model=p["model"], width=p["width"],
        num_examples=p["num_examples"], learning_rate=p["learning_rate"],
    )  # fmt: skip


def _canaries(p: dict, progress: bool) -> list[dict]:
    """Part (a): gradient canary (A_GC-S) vs input-space canaries, all Poisson-sampled."""
    steps, q, sigma, delta, trials, seed = (p[k] for k in
                                            ("steps", "sampling_prob", "noise_multiplier",
                                             "delta", "trials", "seed"))  # fmt: skip
    every = CanarySchedule.every_step(sampled=True)
    gradient = RealModelGradientCanary(steps, q, sigma, canary_schedule=every, **_common(p))
    picker = SimulatedBiasedDimension("noiseless", "per_step", runs=4, seed=seed)
    coordinate = picker.select(gradient)
    cases = [("gradient canary (A_GC-S)", gradient, BiasedCoordinate(coordinate))]
    for kind in p["input_canaries"]:
        mech = RealModelInputCanary(steps, q, sigma, canary=kind, **_common(p))
        cases.append((f"input canary, {kind.replace('_', ' ')}", mech, CanaryLoss("loss")))
    accuracy = _accuracy(gradient, p)
    heuristic = heuristic_epsilon(delta, steps, q, sigma)
    composition = composition_epsilon(delta, steps, q, sigma)
    rows = []
    for i, (name, mech, adversary) in enumerate(cases):
        start = time.perf_counter()
        scores = advsim.simulate(mech, adversary, trials, seed + i, progress=progress)
        rows.append(
            dict(
                part="a", canary=name, model=p["model"], k=1, steps=steps, insertions=steps,
                sampling_prob=q, noise_multiplier=sigma, coordinate=coordinate if i == 0 else None,
                **_audits(scores, delta, mech.accounting()), heuristic=heuristic,
                composition=composition, test_accuracy_private=accuracy["private_mean"],
                test_accuracy_nonprivate=accuracy["nonprivate_mean"], trials=trials,
                wall_time_s=time.perf_counter() - start,
            )
        )  # fmt: skip
    return rows


def _periodicity(p: dict, progress: bool) -> list[dict]:
    """Part (b): the gradient canary every k-th step, n insertions, sigma = sqrt(n) / mu."""
    n, delta, trials, seed = p["insertions"], p["delta"], p["trials"], p["seed"]
    sigma = math.sqrt(n) / p["mu_composition"]
    rows = []
    for k in p["ks"]:
        steps, start = n * k, time.perf_counter()
        schedule = CanarySchedule.every(k, first=k, sampled=False)
        mech = RealModelGradientCanary(
            steps, p["sampling_prob"], sigma, canary_schedule=schedule, **_common(p)
        )
        coordinate = SimulatedBiasedDimension("noiseless", "per_step", seed=seed).select(mech)
        scores = advsim.simulate(mech, BiasedCoordinate(coordinate), trials, seed + 100 * k,
                                 progress=progress)  # fmt: skip
        accuracy = _accuracy(mech, p)
        rows.append(
            dict(
                part="b", canary="gradient canary (A_GC-S)", model=p["model"], k=k, steps=steps,
                insertions=n, sampling_prob=p["sampling_prob"], noise_multiplier=sigma,
                coordinate=coordinate,
                **_audits(scores, delta, mech.accounting()),
                heuristic=heuristic_epsilon(delta, steps, 1.0, sigma, canary_steps=n),
                composition=composition_epsilon(delta, steps, 1.0, sigma, canary_steps=n),
                test_accuracy_private=accuracy["private_mean"],
                test_accuracy_nonprivate=accuracy["nonprivate_mean"], trials=trials,
                wall_time_s=time.perf_counter() - start,
            )
        )  # fmt: skip
    return rows


def compute_real_models(fig, rows):
    """Both parts, from `params.canaries` and `params.periodicity` (see the module)."""
    del rows  # no sweeps: every cell needs its own adversary's craft
    part_a = _canaries(fig.params["canaries"], progress=False)
    part_b = _periodicity(fig.params["periodicity"], progress=False)
    for r in part_a + part_b:  # the family audit's estimate above composition (`!`)
        point = r["eps_family_point"]
        r["eps_family_point_above_composition"] = point is not None and point > r["composition"]
    return {"real_models": part_a + part_b}


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


def _rejected(row, column: str) -> bool:
    """The table's verdict `column` (True, or "True" read back from a CSV)."""
    return str(row.get(column)).lower() == "true"


#: The legend text of a number whose assumption the held-out runs reject (drawn hollow).
REJECTED = "assumption rejected by the held-out runs"


def _plot_canaries(ax, a: list) -> None:
    """(a): per canary, the family audit and the assumption-free bound, as bars."""
    from matplotlib.patches import Patch

    x = np.arange(len(a))
    rejected = [_rejected(r, "family_assumption_rejected") for r in a]
    ax.bar(x - 0.2, [_nan(r["eps_family"]) for r in a], 0.4,
           color=["white" if rej else "0.75" for rej in rejected],
           edgecolor=["0.0" if rej else "0.75" for rej in rejected], linewidth=0.8,
           label="audit, heuristic family (assumes the family)")  # fmt: skip
    ax.bar(x + 0.2, [_nan(r["eps_delta_lower"]) for r in a], 0.4, color="0.35",
           label="audit, (eps, delta) lower bound (assumes nothing)")  # fmt: skip
    ax.axhline(a[0]["heuristic"], **BOUND_STYLES["heuristic"])
    ax.axhline(a[0]["composition"], **BOUND_STYLES["composition"])
    ax.set_xticks(x, [r["canary"].replace(", ", "\n") for r in a], fontsize=6)
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
    ax.set_title(f"(a) breast_cancer, T = {a[0]['steps']}, q = {a[0]['sampling_prob']:.2g}"
                 f", {a[0]['model']}", fontsize=8)  # fmt: skip
    # Room above composition for the legend, which then covers no bar nor line.
    ax.set_ylim(0, 1.6 * a[0]["composition"])
    handles, labels = ax.get_legend_handles_labels()
    if any(rejected):  # the legend entry of the hollow bars, after the family's
        at = labels.index("audit, heuristic family (assumes the family)") + 1
        handles.insert(at, Patch(facecolor="white", edgecolor="0.0", linewidth=0.8))
        labels.insert(at, f"audit, heuristic family: {REJECTED}")
    ax.legend(handles, labels, frameon=False, fontsize=6, loc="upper left")


def _plot_periodicity(bx, b: list) -> None:
    """(b): the GDP audit and the assumption-free bound over the insertion period k."""
    ks = np.array([r["k"] for r in b], dtype=float)
    rejected = np.array([_rejected(r, "gdp_assumption_rejected") for r in b], dtype=bool)
    gdp = np.array([_nan(r["eps_gdp"]) for r in b])
    bx.plot(ks, [r["composition"] for r in b], marker=".", **BOUND_STYLES["composition"])
    bx.plot(ks[~rejected], gdp[~rejected], "v", linestyle="none", color="0.0", ms=6,
            label="audit, GDP (assumes a Gaussian trade-off)")  # fmt: skip
    if rejected.any():
        bx.plot(ks[rejected], gdp[rejected], "v", linestyle="none", mfc="white", mec="0.0",
                mew=1.0, ms=6, label=f"audit, GDP: {REJECTED}")  # fmt: skip
    bx.plot(ks, [_nan(r["eps_delta_lower"]) for r in b], "^", linestyle="none", color="0.55",
            ms=6, label="audit, (eps, delta) lower bound (assumes nothing)")  # fmt: skip
    bx.set_xscale("log")
    bx.set_xticks(ks, [str(int(k)) for k in ks])
    bx.minorticks_off()
    bx.set_xlim(ks.min() / 1.6, ks.max() * 1.6)
    bx.set_xlabel("insertion period $k$ ($T = nk$)")
    bx.set_ylim(0, 1.6 * max(r["composition"] for r in b))
    bx.set_title(f"(b) gradient canary every k-th step, n = {b[0]['insertions']}", fontsize=8)
    bx.legend(frameon=False, fontsize=6, loc="upper right")


def plot_real_models(fig, rows, tables):
    """(a) each canary's audits beside the heuristic and composition; (b) eps over k.
    A number whose assumption the held-out runs reject is drawn hollow (module)."""
    table = tables["real_models"]
    plt = styled_pyplot()
    figure, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    _plot_canaries(ax, [r for r in table if r["part"] == "a"])
    _plot_periodicity(bx, sorted((r for r in table if r["part"] == "b"), key=lambda r: r["k"]))
    return save_figure(figure, fig.out / "real_models")

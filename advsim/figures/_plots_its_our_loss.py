"""Annamalai (2024), "It's Our Loss": Figures 1 (FPR-FNR curves) and 2 (eps_emp vs eps).

DP-SGD with the likelihood-encoding loss (`advsim.mechanisms.LikelihoodEncodingLoss`), only
the last model released, scored by the decoder of Section 4.3
(`advsim.adversaries.LikelihoodSumDecoder`), for settings (sigma, q, T): the observed
FPR-FNR curve of thresholding the score (Algorithm 2, lines 10-15;
`advsim.audits.observed_tradeoff`), the composition trade-off curve (every iterate
released; `advsim.bounds.composition_tradeoff_curve`) and the exact last-iterate curve of
a linear loss (`advsim.bounds.linear_loss_tradeoff`, Theorem 1 of arXiv:2410.06186), with
the audit of each setting (`advsim.audits.TradeoffAudit`). Figure 2: Algorithm 2's
estimate, the held-out eps_emp, the rigorous eps_lower and the composition index the
held-out boxes violate, against the eps sigma is calibrated to. Needs float64: the
compute hooks enable jax_enable_x64 while they run.
"""

from __future__ import annotations

import json
import time

import jax
import numpy as np

import advsim
from advsim._plot_style import tex_number
from advsim.adversaries import LikelihoodSumDecoder
from advsim.audits import TradeoffAudit, observed_tradeoff
from advsim.bounds import (
    calibrate_noise_multiplier,
    composition_epsilon,
    composition_tradeoff,
    heuristic_epsilon,
    linear_loss_tradeoff,
)
from advsim.mechanisms import LikelihoodEncodingLoss
from advsim.plotting import plot_eps_emp_vs_eps, plot_tradeoff_panels

__all__ = ["compute_figure1", "compute_figure2", "plot_figure1", "plot_figure2"]


def _setting(sigma, q, steps, trials, seed, delta) -> dict:
    mech = LikelihoodEncodingLoss(steps, q, sigma)
    start = time.perf_counter()
    scores = advsim.simulate(mech, LikelihoodSumDecoder(), trials, jax.random.key(seed))
    sim_s = time.perf_counter() - start
    alpha, beta, _ = observed_tradeoff(scores.canary_in, scores.canary_out)
    grid = np.concatenate([np.geomspace(1e-6, 1e-2, 200), np.linspace(0.01, 1.0, 300)])
    result = TradeoffAudit()(scores, delta=delta, accounting=mech.accounting())
    return dict(
        sigma=sigma, q=q, steps=steps, trials=trials, seed=seed, alpha=alpha, beta=beta,
        grid=grid, composition=composition_tradeoff(grid, steps, q, sigma),
        linear=linear_loss_tradeoff(grid, steps, q, sigma),
        eps_composition=composition_epsilon(delta, steps, q, sigma),
        eps_heuristic=heuristic_epsilon(delta, steps, q, sigma),
        eps_point=result.extras["eps_algorithm2"],
        eps_held_out=float("nan") if result.eps_point is None else result.eps_point,
        eps_lower=result.eps_lower,
        eps_composition_violated=result.extras["eps_composition_violated"],
        simulate_s=sim_s, **_labels(result, composition_epsilon(delta, steps, q, sigma)),
    )


#: What the estimates of `TradeoffAudit` rest on (their labels in the tables).
_POINT_LABEL = "estimate, optimistic (every threshold)"
_HELD_OUT_LABEL = "estimate (threshold held out)"
#: What the column `eps` of Figure 2 is (its x-axis).
EPS_KIND = ("target: composition's epsilon at (delta, q, T), the noise multiplier calibrated "
            "to it (an upper bound if every iterate is released)")


def _labels(result, composition: float) -> dict:
    """The label columns of an audit's three numbers (the rule of `advsim.figures`):
    Algorithm 2's estimate over every threshold (optimistic), the same rule at a held-out
    threshold (an estimate, not a bound), eps_lower (the result's guarantee), and whether
    each estimate lies above composition (printed as `!`)."""
    point, held = result.extras["eps_algorithm2"], result.eps_point
    return dict(
        eps_point_guarantee=_POINT_LABEL,
        eps_point_above_composition=point is not None and point > composition,
        eps_held_out_guarantee=_HELD_OUT_LABEL,
        eps_held_out_above_composition=held is not None and held > composition,
        guarantee=result.guarantee.label,
    )


def compute_figure1(fig, rows):
    """One simulation and audit per `params.settings` entry (seed `params.seed` + its
    index); tables its_our_loss_figure1 (the audits) and its_our_loss_figure1_curves (the
    theory curves on the FPR grid)."""
    p = fig.params
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        results = [
            _setting(s["sigma"], s["q"], s["steps"], p["trials"], p["seed"] + i, p["delta"])
            for i, s in enumerate(p["settings"])
        ]
    finally:
        jax.config.update("jax_enable_x64", previous)
    curves = [
        dict(sigma=r["sigma"], q=r["q"], steps=r["steps"], fpr=float(x),
             composition=float(c), linear=float(ln))
        for r in results
        for x, c, ln in zip(r["grid"], r["composition"], r["linear"], strict=True)
    ]
    return {"its_our_loss_figure1": results, "its_our_loss_figure1_curves": curves}


def plot_figure1(fig, rows, tables):
    """One trade-off panel per setting, linear axes and a log FPR axis (`_log`)."""
    paths = []
    for log, stem in ((False, "its_our_loss_figure1"), (True, "its_our_loss_figure1_log")):
        panels = [
            dict(
                title=(rf"$\sigma = {r['sigma']:g}$, $q = {r['q']:g}$, $T = {r['steps']}$, "
                       rf"$\delta = {tex_number(fig.params['delta'])}$" "\n"
                       rf"composition $\varepsilon = {r['eps_composition']:.2f}$, "
                       f"heuristic {r['eps_heuristic']:.2f}"),
                curves=[
                    ("PLD (composition)", r["grid"], r["composition"],
                     dict(color="0.0", linestyle="-")),
                    ("linear loss amplification", r["grid"], r["linear"],
                     dict(color="0.45", linestyle="--")),
                    (f"observations ({r['trials']:,} runs/world)", r["alpha"], r["beta"],
                     dict(color="tab:red", linestyle="-", linewidth=0.9, alpha=0.8)),
                ],
            )
            for r in tables["its_our_loss_figure1"]
        ]
        paths += plot_tradeoff_panels(panels, fig.out / stem, log=log)
    return paths


def _cell(q, steps, eps, rep, sigma, fig) -> dict:
    """One repetition: simulate (kept as cells/<stem>.npz, so the audit can be redone) and
    audit (cells/<stem>.json, reused on --resume)."""
    p = fig.params
    trials, delta, scale = p["trials"], p["delta"], p["scale"]
    stem = f"q{q:g}_T{steps}_eps{eps:g}_rep{rep}_n{trials}"
    stem += "" if scale == "paper" else f"_{scale}"
    path, npz = fig.out / "cells" / f"{stem}.json", fig.out / "cells" / f"{stem}.npz"
    if fig.resume and path.exists():
        return json.loads(path.read_text())
    mech = LikelihoodEncodingLoss(steps, q, sigma, scale=scale)
    seed = int(1000 * q) * 10**6 + steps * 1000 + int(10 * eps) * 10 + rep
    if npz.exists():
        saved = np.load(npz)
        scores = advsim.Scores(saved["canary_in"], saved["canary_out"])
        sim_s = float(saved["simulate_s"])
    else:
        start = time.perf_counter()
        scores = advsim.simulate(mech, LikelihoodSumDecoder(), trials, jax.random.key(seed))
        sim_s = time.perf_counter() - start
        npz.parent.mkdir(parents=True, exist_ok=True)
        np.savez(npz, canary_in=scores.canary_in, canary_out=scores.canary_out, simulate_s=sim_s)
    start = time.perf_counter()
    result = TradeoffAudit(seed=rep)(scores, delta=delta, accounting=mech.accounting())
    x = result.extras
    row = dict(
        sampling_prob=q, steps=steps, eps=eps, eps_kind=EPS_KIND, rep=rep, seed=seed,
        trials=trials,
        noise_multiplier=sigma, scale=float(mech.scale), eps_point=x["eps_algorithm2"],
        eps_point_boundary=x["eps_algorithm2_boundary"],
        eps_held_out=float("nan") if result.eps_point is None else result.eps_point,
        eps_lower=result.eps_lower, eps_composition_violated=x["eps_composition_violated"],
        eps_composition_violated_boundary=x["eps_composition_violated_boundary"],
        heuristic=heuristic_epsilon(delta, steps, q, sigma), simulate_s=sim_s,
        audit_s=time.perf_counter() - start, mean_in=float(scores.canary_in.mean()),
        mean_out=float(scores.canary_out.mean()),
        **_labels(result, composition_epsilon(delta, steps, q, sigma)),
    )
    path.write_text(json.dumps(row))  # NaN stays a float on --resume
    return row


def _summary(rs) -> dict:
    pts, held = np.array([r["eps_point"] for r in rs]), np.array([r["eps_held_out"] for r in rs])
    low = np.array([r["eps_lower"] for r in rs])
    sd = (lambda a: float(a.std(ddof=1))) if len(rs) > 1 else (lambda a: 0.0)
    return dict(
        sampling_prob=rs[0]["sampling_prob"], steps=rs[0]["steps"], eps=rs[0]["eps"],
        eps_kind=EPS_KIND,
        noise_multiplier=rs[0]["noise_multiplier"], reps=len(rs), trials=rs[0]["trials"],
        eps_point_mean=float(pts.mean()), eps_point_sd=sd(pts),
        eps_point_boundary_mean=float(np.mean([r["eps_point_boundary"] for r in rs])),
        eps_held_out_mean=float(held.mean()), eps_held_out_sd=sd(held),
        eps_lower_mean=float(low.mean()), eps_lower_min=float(low.min()),
        eps_composition_violated_mean=float(
            np.mean([r.get("eps_composition_violated", np.nan) for r in rs])),
        heuristic=rs[0]["heuristic"],
        eps_point_guarantee=_POINT_LABEL, eps_held_out_guarantee=_HELD_OUT_LABEL,
        guarantee="/".join(sorted({r["guarantee"] for r in rs})),
        # sigma is calibrated so that composition's epsilon is `eps` (the `!` rule)
        eps_point_mean_above_composition=bool(pts.mean() > rs[0]["eps"]),
        eps_held_out_mean_above_composition=bool(held.mean() > rs[0]["eps"]),
        wall_s_per_rep=float(np.mean([r["simulate_s"] + r["audit_s"] for r in rs])),
    )


def compute_figure2(fig, rows):
    """Figure 2: per (q, T) of `params.settings` (with its `reps`) and eps of
    `params.epsilons` (sigma calibrated by PLD), repetitions with their own seeds, run
    repetition-major (every cell's first repetition before any second, so a stopped run
    covers the whole figure); each repetition is a file in OUT/cells/. Tables
    its_our_loss_figure2 (mean and spread per (q, T, eps)) and its_our_loss_figure2_reps."""
    p = fig.params
    settings = [(s["q"], s["steps"], s["reps"]) for s in p["settings"]]
    sigmas = {(q, t, e): calibrate_noise_multiplier(e, p["delta"], t, q)
              for q, t, _ in settings for e in p["epsilons"]}
    jobs = [(q, t, e, rep) for rep in range(max(s[2] for s in settings))
            for q, t, reps in settings if rep < reps for e in p["epsilons"]]
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        reps = [_cell(q, t, e, rep, sigmas[(q, t, e)], fig) for q, t, e, rep in jobs]
    finally:
        jax.config.update("jax_enable_x64", previous)
    groups: dict = {}
    for r in reps:
        groups.setdefault((r["sampling_prob"], r["steps"], r["eps"]), []).append(r)
    table = [_summary(rs) for _, rs in sorted(groups.items())]
    return {"its_our_loss_figure2": table, "its_our_loss_figure2_reps": reps}


def plot_figure2(fig, rows, tables):
    """eps_emp against eps, one panel per (q, T) (`advsim.plotting.plot_eps_emp_vs_eps`)."""
    table = tables["its_our_loss_figure2"]
    panels = [
        dict(title=f"$q = {s['q']:g}$, $T = {s['steps']}$, "
             rf"$\delta = {tex_number(fig.params['delta'])}$ ({s['reps']} reps of "
             f"{fig.params['trials']:,} runs/world)",
             rows=[r for r in table if (r["sampling_prob"], r["steps"]) == (s["q"], s["steps"])])
        for s in fig.params["settings"]
    ]
    return plot_eps_emp_vs_eps(panels, fig.out / "its_our_loss_figure2")

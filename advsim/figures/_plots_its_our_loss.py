"""Annamalai (2024), "It's Our Loss": Figure 1, observed FPR-FNR curves against theory.

DP-SGD with the likelihood-encoding loss (`advsim.mechanisms.LikelihoodEncodingLoss`), only
the last model released, scored by the decoder of Section 4.3
(`advsim.adversaries.LikelihoodSumDecoder`), for settings (sigma, q, T): the observed
FPR-FNR curve of thresholding the score (Algorithm 2, lines 10-15;
`advsim.audits.observed_tradeoff`), the composition trade-off curve (every iterate
released; `advsim.bounds.composition_tradeoff_curve`) and the exact last-iterate curve of
a linear loss (`advsim.bounds.linear_loss_tradeoff`, Theorem 1 of arXiv:2410.06186), with
the audit of each setting (`advsim.audits.TradeoffAudit`). Needs float64: the compute
hook enables jax_enable_x64 while it runs.
"""

from __future__ import annotations

import time

import jax
import numpy as np

import advsim
from advsim.adversaries import LikelihoodSumDecoder
from advsim.audits import TradeoffAudit, observed_tradeoff
from advsim.bounds import (
    composition_epsilon,
    composition_tradeoff,
    heuristic_epsilon,
    linear_loss_tradeoff,
)
from advsim.mechanisms import LikelihoodEncodingLoss
from advsim.plotting import plot_tradeoff_panels

__all__ = ["compute_figure1", "plot_figure1"]


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
        simulate_s=sim_s,
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
                title=(rf"$\sigma = {r['sigma']:g}$, $q = {r['q']:g}$, $T = {r['steps']}$" "\n"
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

"""Figure 1 of Annamalai (2024), "It's Our Loss": observed FPR-FNR curves against theory.

DP-SGD with the likelihood-encoding loss (`advsim.mechanisms.LikelihoodEncodingLoss`),
only the last model released, scored by the decoder of Section 4.3
(`advsim.adversaries.LikelihoodSumDecoder`). For three settings (sigma, q, T) the figure
shows, as the paper's Figure 1,

- the observed FPR-FNR curve of thresholding the decoded score (Algorithm 2, lines
  10-15; `advsim.audits.observed_tradeoff`), `--trials` runs per world (the paper: 5000);
- the trade-off curve of DP-SGD with composition, every iterate released (dp-accounting's
  PLD, symmetric; `advsim.bounds.composition_tradeoff_curve`);
- the exact trade-off curve of the last iterate with a linear loss, the "linear loss
  amplification" (`advsim.bounds.linear_loss_tradeoff`, Theorem 1 of arXiv:2410.06186).

The paper names one setting (sigma = 0.5, q = 0.01, T = 1024); the other two are ours,
chosen to cover its range of sigma, q and T. Linear axes as in the paper (figure1.png) and
a log FPR axis for the small-FPR region (figure1_log.png).

Usage: python scripts/its_our_loss_figure1.py [--quick] [--out DIR] [--trials N]
Writes DIR/figure1.json (curves summarised, the audit of each setting, provenance),
DIR/figure1.csv and DIR/figure1{,_log}.png/.pdf.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DELTA = 1e-5
#: (sigma, q, T): the paper's sigma = 0.5, q = 0.01, T = 1024, and two of ours.
SETTINGS = ((0.5, 0.01, 1024), (1.0, 0.1, 100), (0.6, 0.01, 100))


def run_setting(sigma, q, steps, trials, seed) -> dict:
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

    mech = LikelihoodEncodingLoss(steps, q, sigma)
    start = time.perf_counter()
    scores = advsim.simulate(mech, LikelihoodSumDecoder(), trials, jax.random.key(seed))
    sim_s = time.perf_counter() - start
    alpha, beta, _ = observed_tradeoff(scores.canary_in, scores.canary_out)
    grid = np.concatenate([np.geomspace(1e-6, 1e-2, 200), np.linspace(0.01, 1.0, 300)])
    result = TradeoffAudit()(scores, delta=DELTA, accounting=mech.accounting())
    return dict(
        sigma=sigma,
        q=q,
        steps=steps,
        trials=trials,
        seed=seed,
        alpha=alpha,
        beta=beta,
        grid=grid,
        composition=composition_tradeoff(grid, steps, q, sigma),
        linear=linear_loss_tradeoff(grid, steps, q, sigma),
        eps_composition=composition_epsilon(DELTA, steps, q, sigma),
        eps_heuristic=heuristic_epsilon(DELTA, steps, q, sigma),
        eps_point=result.extras["eps_algorithm2"],
        eps_held_out=float("nan") if result.eps_point is None else result.eps_point,
        eps_lower=result.eps_lower,
        eps_composition_violated=result.extras["eps_composition_violated"],
        simulate_s=sim_s,
    )


def plot(results, out: Path) -> list:
    from advsim.plotting import plot_tradeoff_panels

    paths = []
    for log, stem in ((False, "figure1"), (True, "figure1_log")):
        panels = []
        for r in results:
            panels.append(
                dict(
                    title=(
                        rf"$\sigma = {r['sigma']:g}$, $q = {r['q']:g}$, $T = {r['steps']}$"
                        "\n"
                        rf"composition $\varepsilon = {r['eps_composition']:.2f}$, "
                        f"heuristic {r['eps_heuristic']:.2f}"
                    ),
                    curves=[
                        (
                            "PLD (composition)",
                            r["grid"],
                            r["composition"],
                            dict(color="0.0", linestyle="-"),
                        ),
                        (
                            "linear loss amplification",
                            r["grid"],
                            r["linear"],
                            dict(color="0.45", linestyle="--"),
                        ),
                        (
                            f"observations ({r['trials']:,} runs/world)",
                            r["alpha"],
                            r["beta"],
                            dict(color="tab:red", linestyle="-", linewidth=0.9, alpha=0.8),
                        ),
                    ],
                )
            )
        paths += plot_tradeoff_panels(panels, out / stem, log=log)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="the two T = 100 settings, 1000 runs per world"
    )
    parser.add_argument("--out", default="advsim-results/its_our_loss_figure1")
    parser.add_argument("--trials", type=int, default=None, help="runs per world (5000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)
    from tqdm.auto import tqdm

    from advsim._io import provenance, write_csv, write_json

    trials = args.trials or (1000 if args.quick else 5000)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    settings = [s for s in SETTINGS if s[2] <= 100] if args.quick else SETTINGS
    results = [
        run_setting(sigma, q, steps, trials, args.seed + i)
        for i, (sigma, q, steps) in enumerate(tqdm(settings, desc="settings"))
    ]
    paths = plot(results, out)
    keys = [
        "sigma",
        "q",
        "steps",
        "trials",
        "seed",
        "eps_composition",
        "eps_heuristic",
        "eps_point",
        "eps_held_out",
        "eps_lower",
        "eps_composition_violated",
        "simulate_s",
    ]
    table = [{k: r[k] for k in keys} for r in results]
    write_csv(out / "figure1.csv", table, keys)
    write_json(
        out / "figure1.json",
        {
            "provenance": provenance(dict(settings=settings, trials=trials, delta=DELTA)),
            "rows": table,
            "curves": [
                {k: r[k].tolist() for k in ("grid", "composition", "linear")} for r in results
            ],
        },
    )
    print(f"\ndelta = {DELTA}, {trials} runs per world")
    print(
        f"{'sigma':>5} {'q':>5} {'T':>5} {'eps':>6} {'heur':>6} {'point':>6} {'held':>6} "
        f"{'lower':>6} {'viol.':>6} {'sim s':>6}"
    )
    for r in table:
        print(
            f"{r['sigma']:5g} {r['q']:5g} {r['steps']:5d} {r['eps_composition']:6.2f} "
            f"{r['eps_heuristic']:6.2f} {r['eps_point']:6.2f} {r['eps_held_out']:6.2f} "
            f"{r['eps_lower']:6.2f} {r['eps_composition_violated']:6.2f} {r['simulate_s']:6.0f}"
        )
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

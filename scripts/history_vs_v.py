"""The history-encoding regularizer's epsilon against its scale v (Section 4.3).

DP-SGD with the regularizer whose step maps m to (0, v m_0, ..., v m_{d-2})
(`advsim.mechanisms.HistoryRegularizer`, Section 4.3 of arXiv:2410.06186), T = 20 steps,
q = 0.01, sigma = 0.7, delta = 1e-5, only the last model released, audited with the
optimal score (`advsim.adversaries.CoordinateLikelihoodRatio`) and the assumption-free
(eps, delta) audit. The figure shows, against v,

- the exact epsilon of the last model (`history_epsilon`: the coordinates are independent
  subsampled Gaussians with noise sigma sqrt(sum_{k<=i} v^(-2k)), composed by PLD): from
  one step's epsilon (v -> 0, as the zeroing regularizer) up to composition (v -> inf);
- composition (every iterate released), the heuristic eps_T and one step's epsilon eps_1;
- the empirical lower bound at each v (rising towards what an optimal attack on all
  iterates certifies with this many runs).

The simulations run through the sweep runner (`advsim.sweep.run_sweep`, one cell per v; v
is a traced field, so all cells share one compilation).

Usage: python scripts/history_vs_v.py [--quick] [--out DIR] [--trials N] [--resume]
Writes DIR/sweep/, DIR/history_vs_v.csv/.json and DIR/history_vs_v.png/.pdf.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

T, Q, SIGMA, DELTA = 20, 0.01, 0.7, 1e-5
VS = (0.1, 0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
QUICK_VS = (0.1, 1.0, 3.0, 30.0)


def _history(steps: int, sampling_prob: float, noise_multiplier: float, *, v: float = 1.0):
    from advsim.mechanisms import HistoryRegularizer

    return HistoryRegularizer(steps, sampling_prob, noise_multiplier, v=v)


def _llr():
    from advsim.adversaries import CoordinateLikelihoodRatio

    return CoordinateLikelihoodRatio()


def run(vs, trials: int, out: Path, resume: bool) -> list[dict]:
    from advsim.mechanisms import history_epsilon
    from advsim.sweep import register_adversary, register_mechanism, run_sweep

    register_mechanism("history-vs-v", _history, replace=True)
    register_adversary("history-llr", _llr, replace=True)
    config = {
        "sweep": {
            "mode": "audit",
            "seed": 0,
            "trials": trials,
            "delta": DELTA,
            "method": "eps_delta",
            "name": "history_vs_v",
        },
        "mechanism": {
            "name": "history-vs-v",
            "steps": T,
            "sampling_prob": Q,
            "noise_multiplier": SIGMA,
        },
        "adversary": {"name": "history-llr"},
        "grid": {"v": list(vs)},
    }
    rows = run_sweep(config, out / "sweep", resume=resume, progress=True)
    for r in rows:
        r["exact"] = history_epsilon(
            DELTA, T, Q, SIGMA, float(r["v"]), value_discretization_interval=1e-3
        )
    return rows


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 9,
            "legend.fontsize": 7,
            "savefig.dpi": 200,
            "figure.constrained_layout.use": True,
        }
    )
    return plt


def plot(rows, curve, refs, path_stem, trials: int):
    from advsim.plotting import BOUND_STYLES, save_figure

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 4.0))
    vs_fine, eps_fine = curve
    ax.axhline(refs["composition"], **BOUND_STYLES["composition"])
    ax.axhline(refs["heuristic"], **BOUND_STYLES["heuristic"])
    same = abs(refs["one_step"] - refs["heuristic_max"]) < 1e-9
    label = r"one step, $\varepsilon_1$"
    ax.axhline(
        refs["one_step"],
        color="0.55",
        linestyle=":",
        label=label + (r" = $\max_{t \leq T}$ heuristic" if same else ""),
    )
    ax.plot(vs_fine, eps_fine, color="0.6", linewidth=2.5, zorder=0, label="exact, last model")
    rows = sorted(rows, key=lambda r: float(r["v"]))
    vs = [float(r["v"]) for r in rows]
    ax.plot(
        vs,
        [float("nan") if r["eps_point"] is None else r["eps_point"] for r in rows],
        linestyle="none",
        marker="o",
        mfc="white",
        mec="0.0",
        ms=4.5,
        label="empirical (point estimate)",
    )
    ax.plot(
        vs,
        [r["eps_lower"] for r in rows],
        linestyle="none",
        marker="v",
        color="0.0",
        ms=5,
        label="empirical (lower bound)",
    )
    ax.set_xscale("log")
    ax.set_xlabel("scale $v$ of the history-encoding regularizer")
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(
        rf"$T = {T}$, $q = {Q:g}$, $\sigma = {SIGMA:g}$, last model only, "
        f"{trials:,} runs/world",
        fontsize=8,
    )
    fig.legend(frameon=False, loc="outside lower center", ncols=2)
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 values of v, 10^5 runs")
    parser.add_argument("--out", default="advsim-results/history_vs_v", help="output folder")
    parser.add_argument("--trials", type=int, default=None, help="runs per world")
    parser.add_argument("--resume", action="store_true", help="continue a sweep in --out")
    args = parser.parse_args(argv)

    from advsim._io import write_csv, write_json
    from advsim.bounds import (
        composition_epsilon,
        heuristic_epsilon,
        heuristic_epsilon_max_over_steps,
    )
    from advsim.mechanisms import history_epsilon

    vs = QUICK_VS if args.quick else VS
    trials = args.trials or (100_000 if args.quick else 1_000_000)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = run(vs, trials, out, args.resume)
    refs = dict(
        composition=composition_epsilon(DELTA, T, Q, SIGMA),
        heuristic=heuristic_epsilon(DELTA, T, Q, SIGMA),
        heuristic_max=heuristic_epsilon_max_over_steps(DELTA, T, Q, SIGMA),
        one_step=heuristic_epsilon(DELTA, 1, Q, SIGMA),
    )
    vs_fine = np.geomspace(0.07, 35.0, 12 if args.quick else 30)
    eps_fine = [
        history_epsilon(DELTA, T, Q, SIGMA, v, value_discretization_interval=1e-3) for v in vs_fine
    ]
    columns = ["v", "eps_lower", "eps_point", "exact", "heuristic", "composition", "trials", "seed"]
    table = [{k: r[k] for k in columns} for r in rows]
    write_csv(out / "history_vs_v.csv", table, columns)
    write_json(out / "history_vs_v.json", {"columns": columns, "rows": table, **refs})
    paths = plot(rows, (vs_fine, eps_fine), refs, out / "history_vs_v", trials)
    print(f"\nT = {T}, q = {Q}, sigma = {SIGMA}, delta = {DELTA}, {trials} runs per world")
    print(" ".join(f"{k} {v:.3f}" for k, v in refs.items()))
    print(f"{'v':>7} {'eps_lower':>9} {'eps_point':>9} {'exact':>7}")
    for r in sorted(rows, key=lambda r: float(r["v"])):
        point = "n/a" if r["eps_point"] is None else f"{r['eps_point']:.3f}"
        print(f"{float(r['v']):7g} {r['eps_lower']:9.3f} {point:>9} {r['exact']:7.3f}")
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

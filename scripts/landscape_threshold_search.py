"""Algorithm 5 of arXiv:2405.14457 (Appendix F; Figure 7 of the ICLR 2025 version, Figure 6
on arXiv): is h* = C/2 the best threshold of the landscape at T = 2?

For each (sigma, B), `advsim.adversaries.ThresholdSearch` builds one
`advsim.mechanisms.ThresholdLandscape` per Type I error rate alpha_i (a grid of d points
in (0, 1); h_i = the (1 - alpha_i) quantile of theta_1's out-world law N(0, sigma^2 C^2)),
audits each at T = 2 with Gaussian-DP auditing (`eps_lower`, 95%, delta = 1e-5) on the
same runs' keys, and keeps the best. Beside it: the audit of A_S^{h*} itself, the
accounting (mu = 1/sigma GDP), and two exact references from the closed-form law of
theta_2 (`advsim.mechanisms.landscape`):

- `exact_gdp`: the population value of the GDP audit (the best test's mu over all
  thresholds tau, converted as GDP) for each h: symmetric about C/2 and largest there,
  but nearly flat in h;
- `exact_eps`: the true eps(delta) of theta_2 for each h: *smallest* at C/2 (a far
  threshold makes a rare, very informative tail event), and below the GDP numbers when
  B is small (the GDP conversion's Gaussian assumption fails there).

Usage: python scripts/landscape_threshold_search.py [--quick] [--out DIR] [--trials N]
Writes DIR/threshold_search.csv/.json (one row per (sigma, B, h)),
DIR/threshold_search_summary.csv/.json (one row per (sigma, B)) and
DIR/threshold_search.png/.pdf.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

DELTA = 1e-5
SIGMAS = (1, 2, 4, 8)
BATCHES = (1, 16)
ALPHAS = tuple(np.round(np.linspace(0.0, 1.0, 21)[1:-1], 4))


def run(sigmas, batches, alphas, trials, seed=0):
    import jax
    import scipy.stats
    from tqdm.auto import tqdm

    from advsim.adversaries import ThresholdSearch
    from advsim.bounds import gdp_epsilon
    from advsim.mechanisms import ThresholdLandscape, two_step_gdp_curve
    from advsim.mechanisms.landscape import two_step_epsilon

    rows, summary = [], []
    combos = [(s, b) for s in sigmas for b in batches]
    for sigma, b in tqdm(combos, desc="(sigma, B)"):
        # The grid, plus h* = C/2 itself (alpha* = sf(C / (2 sigma C))).
        alpha_star = float(scipy.stats.norm.sf(0.5 / sigma))
        grid = sorted(set(alphas) | {alpha_star})
        mech = ThresholdLandscape(2, sigma, b)
        res = ThresholdSearch(grid).run(mech, trials, jax.random.key(seed), delta=DELTA)
        hs = res.threshold
        exact_gdp = two_step_gdp_curve(hs, sigma, b, delta=DELTA, min_rate=1e-9)["eps"]
        exact = [two_step_epsilon(DELTA, sigma, b, threshold=h, points=20_001) for h in hs]
        i_star = grid.index(alpha_star)
        for i, row in enumerate(res.rows()):
            rows.append(
                {
                    "noise_multiplier": sigma,
                    "batch_size": b,
                    **row,
                    "is_h_star": i == i_star,
                    "exact_gdp": float(exact_gdp[i]),
                    "exact_eps": float(exact[i]),
                }
            )
        summary.append(
            {
                "noise_multiplier": sigma,
                "batch_size": b,
                "accounting": gdp_epsilon(DELTA, 1.0 / sigma),
                "h_star_eps_lower": float(res.eps_lower[i_star]),
                "search_eps_lower": res.best_eps,
                "search_best_threshold": res.best_threshold,
                "exact_gdp_h_star": float(exact_gdp[i_star]),
                "exact_gdp_max": float(np.max(exact_gdp)),
                "exact_gdp_argmax": float(hs[int(np.argmax(exact_gdp))]),
                "exact_eps_h_star": float(exact[i_star]),
                "exact_eps_max": float(np.max(exact)),
                "thresholds": len(hs),
                "trials": trials,
            }
        )
    return rows, summary


def plot(rows, summary, path_stem, trials):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from advsim.plotting import save_figure

    plt.rcParams.update({"font.size": 8, "savefig.dpi": 200})
    combos = [(s["noise_multiplier"], s["batch_size"]) for s in summary]
    ncols = min(4, len(combos))
    nrows = -(-len(combos) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(2.4 * ncols + 0.4, 2.2 * nrows + 0.6),
        squeeze=False,
        layout="constrained",
    )
    for ax, (sigma, b) in zip(axes.flat, combos, strict=True):
        sel = sorted(
            (r for r in rows if r["noise_multiplier"] == sigma and r["batch_size"] == b),
            key=lambda r: r["threshold"],
        )
        h = [r["threshold"] for r in sel]
        s = next(x for x in summary if x["noise_multiplier"] == sigma and x["batch_size"] == b)
        ax.axhline(s["accounting"], color="0.0", linestyle="--", lw=1, label="accounting")
        ax.plot(h, [r["exact_gdp"] for r in sel], color="C0", lw=1, label="exact, GDP value")
        ax.plot(h, [r["exact_eps"] for r in sel], color="C2", lw=1, label="exact eps(delta)")
        ax.plot(h, [r["eps_lower"] for r in sel], "v", color="0.0", ms=3, label="audit")
        ax.axvline(0.5, color="C3", lw=0.8, linestyle=":", label="$h^* = C/2$")
        ax.set_title(rf"$\sigma = {sigma:g}$, $B = {b}$", fontsize=8)
        ax.set_xlabel("threshold $h$")
        ax.set_ylim(bottom=0)
        ax.grid(True, color="0.9", lw=0.5)
    for row in axes:
        row[0].set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$, $T = 2$")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    fig.suptitle(f"Algorithm 5 threshold search at T = 2 (GDP audit, {trials:,} runs/world)")
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 sigmas, 9 alphas, 2e4 runs")
    parser.add_argument("--out", default="advsim-results/threshold_search", help="output folder")
    parser.add_argument("--trials", type=int, default=None, help="runs per world (default 1e6)")
    args = parser.parse_args(argv)

    from advsim._io import provenance, write_csv, write_json

    if args.quick:
        sigmas, batches, alphas = (1, 4), (1, 16), ALPHAS[1::2]
        trials = args.trials or 20_000
    else:
        sigmas, batches, alphas, trials = SIGMAS, BATCHES, ALPHAS, args.trials or 1_000_000
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows, summary = run(sigmas, batches, alphas, trials)
    meta = provenance(
        {
            "sigmas": list(sigmas),
            "batches": list(batches),
            "alphas": list(alphas),
            "trials": trials,
            "delta": DELTA,
            "steps": 2,
            "method": "gdp",
            "seed": 0,
        }
    )
    for name, table in (("threshold_search", rows), ("threshold_search_summary", summary)):
        cols = list(table[0])
        write_csv(out / f"{name}.csv", table, cols)
        write_json(out / f"{name}.json", {"columns": cols, "rows": table, "provenance": meta})
    paths = plot(rows, summary, out / "threshold_search", trials)
    print(f"\nT = 2, GDP audit at delta = {DELTA}, {trials} runs per world")
    print(
        f"{'sigma':>5} {'B':>3} {'acct':>6} {'h*':>6} {'search':>6} {'best h':>7} "
        f"{'GDP(h*)':>7} {'GDPmax':>7} {'argmax':>6} {'eps(h*)':>7} {'eps max':>7}"
    )
    for s in summary:
        print(
            f"{s['noise_multiplier']:5g} {s['batch_size']:3d} {s['accounting']:6.3f} "
            f"{s['h_star_eps_lower']:6.3f} {s['search_eps_lower']:6.3f} "
            f"{s['search_best_threshold']:7.3f} {s['exact_gdp_h_star']:7.3f} "
            f"{s['exact_gdp_max']:7.3f} {s['exact_gdp_argmax']:6.3f} "
            f"{s['exact_eps_h_star']:7.3f} {s['exact_eps_max']:7.3f}"
        )
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

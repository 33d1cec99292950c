"""Figure 4 of arXiv:2405.14457 (ICLR 2025 version; Figure 3 on arXiv): the threshold landscape.

The adversary A_S^{h*} of Section 6 (`advsim.mechanisms.ThresholdLandscape` with the
reinforcing orientation, h* = C/2, C = 1; score theta_T, `advsim.adversaries.
ThresholdAdversary`): a crafted gradient at step 1 only, then T - 1 steps of a fixed
batch of B examples whose gradients push the model further to the side of h it is on.
Audited, as in the paper, with Gaussian-DP auditing (Nasr et al. 2023; `method="gdp"`:
eps_hat = the split-threshold Clopper-Pearson lower bound `eps_lower`, 95%, at
delta = 1e-5; `eps_point` is the point estimate).

- Panel (a): eps_hat over T = 1..25 for sigma in {1, 8} and B in {1, 2, 4, 8, 16}, with
  the accounting's epsilon (one Gaussian mechanism, mu = 1/sigma: the canary is used
  once).
- Panel (b): the privacy amplification rate eps_hat(T=25) / eps_hat(T=1) over
  sigma in {1, ..., 8} and B in {1, 2, 4, 8, 16}. Every cell is run `--replicates` times
  with independent seeds (the sweep's `replicate` key); the figure shows replicate 0 and
  the table the spread, because the ratio of two lower bounds is noisy when both are
  small (sigma = 8).

Both panels are sweeps (`advsim.sweep.run_sweep`, resumable, with provenance) of the
registered mechanism "landscape" and adversary "landscape-threshold"; T is a grid axis,
so each T compiles once and every (sigma, B) reuses it.

Beside the audits, the exact eps(delta) of the release theta_T (the laws propagated on a
grid, `advsim.mechanisms.landscape.landscape_epsilon_curve`; dotted lines in panel (a),
columns exact_t1/exact_t25/exact_ratio in the table). Caveat: the GDP conversion assumes
a Gaussian trade-off curve, which fails when B is small relative to sigma: at sigma = 1,
B = 1 the exact eps(1e-5) of theta_25 is 1.09, while the GDP audit reports ~3.9. The GDP
ratios are the paper's quantity, not bounds on the true epsilon; the exact ratio is the
true amplification of this landscape.

Usage: python scripts/figure4_landscape.py [--quick] [--out DIR] [--trials N]
       [--replicates K] [--resume]
Writes DIR/sweep_a/, DIR/sweep_b/ (sweep folders), DIR/figure4a.png/.pdf,
DIR/figure4b.png/.pdf, DIR/figure4_heatmap.csv/.json and DIR/figure4_curves.csv/.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

DELTA = 1e-5
SIGMAS = (1, 2, 3, 4, 5, 6, 7, 8)
BATCHES = (1, 2, 4, 8, 16)
STEPS = tuple(range(1, 26))
CURVE_SIGMAS = (1, 8)
QUICK = {
    "sigmas": (1, 2, 4, 8),
    "batches": (1, 4, 16),
    "steps": (1, 5, 25),
    "trials": 20_000,
}


def _config(name, trials, grid):
    return {
        "sweep": {
            "mode": "audit",
            "seed": 0,
            "trials": trials,
            "delta": DELTA,
            "method": "gdp",
            "name": name,
        },
        "mechanism": {"name": "landscape", "clip_norm": 1.0},
        "adversary": {"name": "landscape-threshold"},
        "grid": grid,
    }


def run_curves(sigmas, batches, steps, trials, out: Path, resume: bool) -> list[dict]:
    """Panel (a): one cell per (sigma, B, T)."""
    from advsim.sweep import run_sweep

    grid = {
        "noise_multiplier": [float(s) for s in sigmas],
        "batch_size": list(batches),
        "steps": list(steps),
    }
    return run_sweep(_config("figure4a", trials, grid), out, resume=resume, progress=True)


def run_heatmap(sigmas, batches, trials, replicates, out: Path, resume: bool) -> list[dict]:
    """Panel (b): one cell per (replicate, sigma, B, T in {1, 25})."""
    from advsim.sweep import run_sweep

    grid = {
        "replicate": list(range(replicates)),
        "noise_multiplier": [float(s) for s in sigmas],
        "batch_size": list(batches),
        "steps": [1, 25],
    }
    return run_sweep(_config("figure4b", trials, grid), out, resume=resume, progress=True)


def heatmap_table(rows, exact=None) -> list[dict]:
    """Per (sigma, B): eps_hat at T = 1 and 25 and their ratio, for each replicate; with
    `exact` (from `exact_curves`), the exact eps of theta_1 and theta_25 and their ratio."""
    cells: dict = {}
    for r in rows:
        key = (float(r["noise_multiplier"]), int(r["batch_size"]))
        cells.setdefault(key, {}).setdefault(int(r.get("replicate", 0)), {})[int(r["steps"])] = r
    table = []
    for (sigma, b), reps in sorted(cells.items()):
        ratios = []
        for rep in sorted(reps):
            e1, e25 = reps[rep][1]["eps_lower"], reps[rep][25]["eps_lower"]
            ratios.append(e25 / e1 if e1 > 0 else float("nan"))
        first = reps[min(reps)]
        table.append(
            {
                "noise_multiplier": sigma,
                "batch_size": b,
                "eps_lower_t1": first[1]["eps_lower"],
                "eps_lower_t25": first[25]["eps_lower"],
                "eps_point_t1": first[1]["eps_point"],
                "eps_point_t25": first[25]["eps_point"],
                "ratio": ratios[0],
                "ratio_point": (
                    first[25]["eps_point"] / first[1]["eps_point"]
                    if first[25]["eps_point"] is not None and first[1]["eps_point"]
                    else None
                ),
                "ratio_mean": statistics.fmean(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "replicates": len(ratios),
                "composition": first[1]["composition"],
                "trials": first[1]["trials"],
            }
        )
        if exact is not None:
            curve = exact[(sigma, b)]
            table[-1]["exact_t1"] = float(curve[0])
            table[-1]["exact_t25"] = float(curve[24])
            table[-1]["exact_ratio"] = float(curve[24] / curve[0])
    return table


def exact_curves(sigmas, batches, last_step) -> dict:
    """The exact eps(delta) of theta_T, T = 1..last_step, per (sigma, B)
    (`advsim.mechanisms.landscape.landscape_epsilon_curve`: the grid-propagated laws)."""
    from advsim.mechanisms.landscape import landscape_epsilon_curve

    return {
        (float(s), int(b)): landscape_epsilon_curve(DELTA, last_step, float(s), int(b))
        for s in sigmas
        for b in batches
    }


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


def draw_curves(ax, rows, sigma, batches, *, exact=None, legend=True):
    """eps_hat over T, one line per B, and the accounting's epsilon, on `ax`; with
    `exact` (from `exact_curves`), the exact eps of theta_T as a dotted line per B."""
    import matplotlib as mpl

    colors = mpl.colormaps["viridis"].resampled(len(batches) + 1)
    sel = [r for r in rows if float(r["noise_multiplier"]) == float(sigma)]
    comp = sel[0]["composition"]
    ax.axhline(comp, color="0.0", linestyle="--", linewidth=1.2, label="accounting")
    for i, b in enumerate(batches):
        rb = sorted((r for r in sel if int(r["batch_size"]) == b), key=lambda r: r["steps"])
        ax.plot(
            [r["steps"] for r in rb],
            [r["eps_lower"] for r in rb],
            marker=".",
            ms=3,
            color=colors(i),
            label=f"B = {b}",
        )
        if exact is not None and (float(sigma), b) in exact:
            curve = exact[(float(sigma), b)]
            ax.plot(
                range(1, len(curve) + 1),
                curve,
                linestyle=":",
                linewidth=1.0,
                color=colors(i),
                label="exact $\\varepsilon(\\delta)$ of $\\theta_T$" if i == 0 else None,
            )
    ax.set_xlabel("steps $T$")
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$ (lines: GDP audit)")
    ax.set_ylim(0, 1.08 * comp)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(rf"$\sigma = {sigma:g}$", fontsize=8)
    if legend:
        ax.legend(frameon=False, fontsize=6, loc="best")


def plot_curves(rows, sigmas, batches, path_stem, trials, exact=None):
    from advsim.plotting import save_figure

    plt = _pyplot()
    fig, axes = plt.subplots(1, len(sigmas), figsize=(3.0 * len(sigmas) + 0.4, 3.3), squeeze=False)
    axes = axes[0]
    for ax, sigma in zip(list(axes), sigmas, strict=True):
        draw_curves(ax, rows, sigma, batches, exact=exact, legend=False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, frameon=False)
    fig.suptitle(
        rf"(a) $A_S^{{h^*}}$, $h^* = C/2$, last model only; {trials:,} runs/world",
        fontsize=8,
    )
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths


def plot_heatmap(table, path_stem, trials):
    from advsim.plotting import plot_ratio_heatmap

    return plot_ratio_heatmap(
        table,
        "batch_size",
        "noise_multiplier",
        "eps_lower_t25",
        path_stem,
        denominator="eps_lower_t1",
        title=f"(b) amplification rate\nGDP audit, {trials:,} runs/world",
        colorbar_label=r"$\hat\varepsilon(T=25) / \hat\varepsilon(T=1)$",
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a coarse grid, 2e4 runs (~1 min)")
    parser.add_argument("--out", default="advsim-results/figure4", help="output folder")
    parser.add_argument("--trials", type=int, default=None, help="runs per world (default 1e6)")
    parser.add_argument(
        "--replicates", type=int, default=None, help="seeds per heatmap cell (default 3)"
    )
    parser.add_argument("--resume", action="store_true", help="continue the sweeps in --out")
    args = parser.parse_args(argv)

    from advsim._io import write_csv, write_json

    if args.quick:
        sigmas, batches, steps = QUICK["sigmas"], QUICK["batches"], QUICK["steps"]
        trials, replicates = args.trials or QUICK["trials"], args.replicates or 1
    else:
        sigmas, batches, steps = SIGMAS, BATCHES, STEPS
        trials, replicates = args.trials or 1_000_000, args.replicates or 3
    curve_sigmas = tuple(s for s in CURVE_SIGMAS if s in sigmas)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    curves = run_curves(curve_sigmas, batches, steps, trials, out / "sweep_a", args.resume)
    cols = ["noise_multiplier", "batch_size", "steps", "eps_lower", "eps_point", "composition"]
    cols += ["trials", "seed"]
    ctable = [{k: r[k] for k in cols} for r in curves]
    write_csv(out / "figure4_curves.csv", ctable, cols)
    write_json(out / "figure4_curves.json", {"columns": cols, "rows": ctable})
    exact = exact_curves(sigmas, batches, max(max(steps), 25))
    paths = plot_curves(curves, curve_sigmas, batches, out / "figure4a", trials, exact)

    rows = run_heatmap(sigmas, batches, trials, replicates, out / "sweep_b", args.resume)
    table = heatmap_table(rows, exact)
    hcols = list(table[0])
    write_csv(out / "figure4_heatmap.csv", table, hcols)
    write_json(out / "figure4_heatmap.json", {"columns": hcols, "rows": table})
    paths += plot_heatmap(table, out / "figure4b", trials)

    print(f"\nGDP audit, delta = {DELTA}, {trials} runs per world, {replicates} replicate(s)")
    print(
        f"{'sigma':>5} {'B':>3} {'eps(T=1)':>9} {'eps(T=25)':>9} {'ratio':>6} "
        f"{'ratio range':>13} {'accounting':>10} {'exact(25)':>9} {'exact ratio':>11}"
    )
    for r in table:
        print(
            f"{r['noise_multiplier']:5g} {r['batch_size']:3d} {r['eps_lower_t1']:9.3f} "
            f"{r['eps_lower_t25']:9.3f} {r['ratio']:6.3f} "
            f"{r['ratio_min']:6.3f}-{r['ratio_max']:<6.3f} {r['composition']:10.3f} "
            f"{r['exact_t25']:9.3f} {r['exact_ratio']:11.3f}"
        )
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

"""Figure 14 of arXiv:2405.14457: A_S^{h*} over T for every sigma in 1..8 and B in {1..16}.

The per-cell curves behind the amplification-rate heatmap (Figure 4b of the ICLR 2025
version, Figure 3b on arXiv; `scripts/figure4_landscape.py`): one panel per
sigma in {1, ..., 8}, the Gaussian-DP audit's eps_hat (`eps_lower`, 95%, delta = 1e-5)
of the last model over T = 1..25 for each batch size B in {1, 2, 4, 8, 16}, and the
accounting's epsilon (the canary is used once, unsampled: mu = 1/sigma GDP) as the
theoretical line, and dotted, the exact eps(delta) of theta_T (grid-propagated laws,
`advsim.mechanisms.landscape.landscape_epsilon_curve`), which the GDP audit exceeds when
B is small (its Gaussian trade-off assumption fails there; for B >= 4 the exact value is
that of a constant gradient with step 1/B). `advsim.mechanisms.ThresholdLandscape`
(reinforcing orientation, h* = C/2, C = 1) with `advsim.adversaries.ThresholdAdversary`,
as one resumable sweep (`advsim.sweep.run_sweep`) with T as a grid axis: each T compiles
once.

A cell here has the same id, hence the same seed and numbers, as the cell with the same
(sigma, B, T) and runs in the Figure 4 panel (a) sweep (a sweep cell's seed depends only
on its parameters), so the two figures agree where they overlap.

Usage: python scripts/figure14_landscape_curves.py [--quick] [--out DIR] [--trials N]
       [--resume]
Writes DIR/sweep/ (the sweep folder), DIR/figure14.csv/.json and DIR/figure14.png/.pdf.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path

SIGMAS = (1, 2, 3, 4, 5, 6, 7, 8)
BATCHES = (1, 2, 4, 8, 16)
STEPS = tuple(range(1, 26))
QUICK = {"sigmas": (1, 4, 8), "batches": (1, 4, 16), "steps": (1, 5, 25)}


def _figure4():
    """The Figure 4 script's sweep config and curve drawing (one definition of both)."""
    path = Path(__file__).with_name("figure4_landscape.py")
    spec = importlib.util.spec_from_file_location("figure4_landscape", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(sigmas, batches, steps, trials, out: Path, resume: bool) -> list[dict]:
    from advsim.sweep import run_sweep

    fig4 = _figure4()
    grid = {
        "noise_multiplier": [float(s) for s in sigmas],
        "batch_size": list(batches),
        "steps": list(steps),
    }
    config = fig4._config("figure14", trials, grid)
    return run_sweep(config, out, resume=resume, progress=True)


def plot(rows, sigmas, batches, path_stem, trials):
    from advsim.plotting import save_figure

    fig4 = _figure4()
    plt = fig4._pyplot()
    ncols = min(4, len(sigmas))
    nrows = math.ceil(len(sigmas) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(2.7 * ncols + 0.3, 2.4 * nrows + 0.6), squeeze=False
    )
    exact = fig4.exact_curves(sigmas, batches, max(r["steps"] for r in rows))
    for i, (ax, sigma) in enumerate(zip(axes.flat, sigmas, strict=False)):
        fig4.draw_curves(ax, rows, sigma, batches, exact=exact, legend=False)
        if i % ncols:
            ax.set_ylabel("")
    for ax in list(axes.flat)[len(sigmas) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    fig.suptitle(
        rf"$A_S^{{h^*}}$ over $T$, GDP audit ($\delta = 10^{{-5}}$), {trials:,} runs/world",
        fontsize=9,
    )
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 sigmas, 3 B, 3 T, 2e4 runs")
    parser.add_argument("--out", default="advsim-results/figure14", help="output folder")
    parser.add_argument("--trials", type=int, default=None, help="runs per world (default 1e6)")
    parser.add_argument("--resume", action="store_true", help="continue a sweep in --out")
    args = parser.parse_args(argv)

    from advsim._io import write_csv, write_json

    if args.quick:
        sigmas, batches, steps = QUICK["sigmas"], QUICK["batches"], QUICK["steps"]
        trials = args.trials or 20_000
    else:
        sigmas, batches, steps = SIGMAS, BATCHES, STEPS
        trials = args.trials or 1_000_000
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = run(sigmas, batches, steps, trials, out / "sweep", args.resume)
    cols = ["noise_multiplier", "batch_size", "steps", "eps_lower", "eps_point", "composition"]
    cols += ["trials", "seed"]
    table = [{k: r[k] for k in cols} for r in rows]
    write_csv(out / "figure14.csv", table, cols)
    write_json(out / "figure14.json", {"columns": cols, "rows": table})
    paths = plot(rows, sigmas, batches, out / "figure14", trials)
    last = max(steps)
    print(f"\neps_lower at T = 1 and T = {last} (GDP audit, {trials} runs per world)")
    print(f"{'sigma':>5} {'B':>3} {'T=1':>7} {f'T={last}':>7} {'accounting':>10}")
    for r1 in (r for r in rows if r["steps"] == 1):
        rt = next(
            r
            for r in rows
            if r["steps"] == last
            and r["noise_multiplier"] == r1["noise_multiplier"]
            and r["batch_size"] == r1["batch_size"]
        )
        print(
            f"{r1['noise_multiplier']:5g} {r1['batch_size']:3d} {r1['eps_lower']:7.3f} "
            f"{rt['eps_lower']:7.3f} {r1['composition']:10.3f}"
        )
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

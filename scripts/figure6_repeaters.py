"""Figure 6 of arXiv:2410.06186: the malicious dataset ("repeaters") against the bounds.

DP-SGD with Poisson sampling (q = 0.01, sigma = 0.7, delta = 1e-5) on the repeaters'
dataset (`advsim.mechanisms.MaliciousRepeaters`, Appendix C there), only the last model
released, audited with the optimal decoder (`advsim.adversaries.RepeaterDecoder`) and the
assumption-free (eps, delta) audit (Clopper-Pearson, 95%, threshold chosen on held-out
runs). For each T the figure shows

- the composition bound (every iterate released) and the last-iterate heuristic (Theorem
  1; its maximum over t <= T where that differs);
- the exact epsilon of the release: the paper's thresholded encoding (T - 1 decoded bits +
  the raw last step; below composition since thresholding loses information) and the
  amplifying encoding (every step's Gaussian kept; equal to composition up to 1/V^2);
- the empirical lower bounds of both encodings: above the heuristic (even maximised over
  t <= T) and about as high as an optimal attack on all iterates certifies with this many
  runs (an audit with 10^6 runs per world cannot certify the composition epsilon itself
  at delta = 1e-5: the privacy loss that sets it lives in events of probability ~1e-5).

The threshold is the default tau = 1 + 3 sigma = 3.1 (in units of eta C).

The simulations run through the sweep runner (`advsim.sweep.run_sweep`, resumable, one
cell per (encoding, T)); the exact epsilons are added afterwards.

Usage: python scripts/figure6_repeaters.py [--quick] [--out DIR] [--trials N] [--resume]
Writes DIR/sweep/ (the sweep folder), DIR/figure6.csv/.json and DIR/figure6.png/.pdf.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

Q, SIGMA, DELTA = 0.01, 0.7, 1e-5
STEPS = (1, 2, 5, 10, 20, 30)
QUICK_STEPS = (1, 5, 10, 20)
ENCODINGS = ("threshold", "amplify")


def _repeaters(
    steps: int,
    sampling_prob: float,
    noise_multiplier: float,
    *,
    encoding: str = "threshold",
    threshold: float | None = None,
    amplification: float = 1000.0,
):
    from advsim.mechanisms import MaliciousRepeaters

    return MaliciousRepeaters(
        steps,
        sampling_prob,
        noise_multiplier,
        encoding=encoding,
        threshold=threshold,
        amplification=amplification,
    )


def _decoder():
    from advsim.adversaries import RepeaterDecoder

    return RepeaterDecoder()


def run(steps, trials: int, out: Path, resume: bool) -> list[dict]:
    from advsim.bounds import heuristic_epsilon_max_over_steps
    from advsim.mechanisms import repeaters_epsilon
    from advsim.sweep import register_adversary, register_mechanism, run_sweep

    register_mechanism("figure6-repeaters", _repeaters, replace=True)
    register_adversary("figure6-decoder", _decoder, replace=True)
    config = {
        "sweep": {
            "mode": "audit",
            "seed": 0,
            "trials": trials,
            "delta": DELTA,
            "method": "eps_delta",
            "name": "figure6",
        },
        "mechanism": {"name": "figure6-repeaters", "sampling_prob": Q, "noise_multiplier": SIGMA},
        "adversary": {"name": "figure6-decoder"},
        "grid": {"encoding": list(ENCODINGS), "steps": list(steps)},
    }
    rows = run_sweep(config, out / "sweep", resume=resume, progress=True)
    for r in rows:
        t = int(r["steps"])
        r["exact"] = repeaters_epsilon(
            DELTA, t, Q, SIGMA, encoding=r["encoding"], value_discretization_interval=1e-3
        )
        r["heuristic_max"] = heuristic_epsilon_max_over_steps(DELTA, t, Q, SIGMA)
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


def plot(rows, path_stem, trials: int):
    from advsim.plotting import BOUND_STYLES, save_figure

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 4.0))
    thr = sorted((r for r in rows if r["encoding"] == "threshold"), key=lambda r: r["steps"])
    amp = sorted((r for r in rows if r["encoding"] == "amplify"), key=lambda r: r["steps"])
    ts = [r["steps"] for r in thr]
    for key in ("composition", "heuristic"):
        ax.plot(ts, [r[key] for r in thr], **BOUND_STYLES[key])
    if any(r["heuristic_max"] > r["heuristic"] + 1e-9 for r in thr):
        ax.plot(
            ts,
            [r["heuristic_max"] for r in thr],
            color="0.35",
            linestyle="-.",
            label=r"heuristic, $\max_{t \leq T}$",
        )
    ax.plot(
        ts,
        [r["exact"] for r in thr],
        color="0.55",
        linestyle=":",
        marker=".",
        label="exact, thresholded (paper)",
    )
    ax.plot(
        [r["steps"] for r in amp],
        [r["exact"] for r in amp],
        color="0.75",
        linestyle="-",
        linewidth=3,
        zorder=0,
        label="exact, amplified",
    )
    ax.plot(
        ts,
        [r["eps_lower"] for r in thr],
        linestyle="none",
        marker="v",
        color="0.0",
        ms=5,
        label="empirical, thresholded (paper)",
    )
    ax.plot(
        [r["steps"] for r in amp],
        [r["eps_lower"] for r in amp],
        linestyle="none",
        marker="^",
        mfc="white",
        mec="0.0",
        ms=5,
        label="empirical, amplified",
    )
    ax.set_xscale("log")
    ax.set_xticks(ts, [str(t) for t in ts])
    ax.minorticks_off()
    ax.set_xlabel("steps $T$")
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_title(
        rf"repeaters, last model only: $q = {Q:g}$, $\sigma = {SIGMA:g}$, "
        f"{trials:,} runs/world",
        fontsize=8,
    )
    fig.legend(frameon=False, fontsize=7, loc="outside lower center", ncols=2)
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="T <= 20, 10^5 runs (~2 min)")
    parser.add_argument("--out", default="advsim-results/figure6", help="output folder")
    parser.add_argument("--trials", type=int, default=None, help="runs per world")
    parser.add_argument("--resume", action="store_true", help="continue a sweep in --out")
    args = parser.parse_args(argv)

    from advsim._io import write_csv, write_json

    steps = QUICK_STEPS if args.quick else STEPS
    trials = args.trials or (100_000 if args.quick else 1_000_000)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = run(steps, trials, out, args.resume)
    columns = [
        "encoding",
        "steps",
        "eps_lower",
        "eps_point",
        "exact",
        "heuristic",
        "heuristic_max",
        "composition",
        "trials",
        "seed",
    ]
    table = [{k: r[k] for k in columns} for r in rows]
    write_csv(out / "figure6.csv", table, columns)
    write_json(out / "figure6.json", {"columns": columns, "rows": table})
    paths = plot(rows, out / "figure6", trials)
    print(f"\nq = {Q}, sigma = {SIGMA}, delta = {DELTA}, {trials} runs per world, eps_delta audit")
    print(
        f"{'encoding':<10} {'T':>4} {'eps_lower':>9} {'exact':>7} {'heuristic':>9} "
        f"{'max_t heur':>10} {'composition':>11}"
    )
    for r in rows:
        print(
            f"{r['encoding']:<10} {int(r['steps']):>4} {r['eps_lower']:9.3f} "
            f"{r['exact']:7.3f} {r['heuristic']:9.3f} {r['heuristic_max']:10.3f} "
            f"{r['composition']:11.3f}"
        )
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

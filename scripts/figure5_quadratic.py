"""Figure 5 of arXiv:2410.06186: the quadratic regularizer against the heuristic.

For every (T, q) of a grid, sigma is set so that one step of DP-SGD (Bernoulli(q) +
N(0, sigma^2) against N(0, sigma^2)) is (eps_1, 1e-6)-DP, eps_1 = 1 (panel a) and 2
(panel b). Each cell shows

    eps of the linear loss + quadratic regularizer with alpha = 1/2 (last model only)
    -----------------------------------------------------------------------------------
    max_{t <= T} heuristic eps_t  (linear loss, Theorem 1)

at delta = 1e-6: above 1 the quadratic regularizer beats the heuristic even maximised over
the horizon. The numerator is `quadratic_exact_epsilon`: exact enumeration while the
support has at most 2^16 atoms (T <= 16 for alpha = 1/2), beyond that the paper's rounding
(atoms raised to 0.0005, then to powers of 1.05: an upper bound, a few percent high; those
cells carry a "*" in the table printed). `--rounding fine` uses the fine grid instead (an
upper bound within ~1e-4), `--rounding paper` rounds every cell.

The cells are bounds only (no simulation), so the script loops over the grid itself; the
sweep runner's bounds mode computes only the heuristic / composition / full-batch columns.
The heat maps are drawn by `advsim.plotting.plot_ratio_heatmap`.

Usage: python scripts/figure5_quadratic.py [--quick] [--out DIR] [--rounding auto|fine|paper]
Writes DIR/figure5_quadratic.csv and .json, DIR/figure5a.png/.pdf, DIR/figure5b.png/.pdf.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from scipy.optimize import brentq

DELTA = 1e-6
ALPHA = 0.5
STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 100)
SAMPLING_PROBS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
QUICK_STEPS = (1, 2, 3, 5, 10, 20)
QUICK_SAMPLING_PROBS = (0.01, 0.1, 1.0)


def one_step_sigma(eps_1: float, q: float, delta: float = DELTA) -> float:
    """sigma with heuristic_epsilon(delta, 1, q, sigma) = eps_1 (one step of DP-SGD)."""
    from advsim.bounds import heuristic_epsilon

    def gap(log_sigma):
        return heuristic_epsilon(delta, 1, q, math.exp(log_sigma)) - eps_1

    lo, hi = -3.0, 3.0
    while gap(lo) < 0:
        lo -= 2.0
    while gap(hi) > 0:
        hi += 2.0
    return math.exp(brentq(gap, lo, hi, xtol=1e-13, rtol=1e-13))


def compute(steps, sampling_probs, eps_1_values, rounding: str) -> list[dict]:
    from advsim.bounds import heuristic_epsilon_max_over_steps
    from advsim.mechanisms._quadratic_bound import quadratic_law
    from advsim.mechanisms.regularizers import quadratic_exact_epsilon

    rows = []
    for eps_1 in eps_1_values:
        for q in sampling_probs:
            sigma = one_step_sigma(eps_1, q)
            for t in steps:
                start = time.perf_counter()
                quad = quadratic_exact_epsilon(DELTA, t, q, sigma, ALPHA, rounding=rounding)
                rounded = quadratic_law(t, q, sigma, ALPHA, rounding=rounding)[3]
                heur = heuristic_epsilon_max_over_steps(DELTA, t, q, sigma)
                rows.append(
                    dict(
                        eps_1=eps_1,
                        steps=t,
                        sampling_prob=q,
                        noise_multiplier=sigma,
                        alpha=ALPHA,
                        delta=DELTA,
                        quadratic=quad,
                        heuristic_max=heur,
                        ratio=quad / heur,
                        rounded=rounded,
                        wall_time_s=time.perf_counter() - start,
                    )
                )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small grid (seconds)")
    parser.add_argument("--out", default="advsim-results/figure5", help="output folder")
    parser.add_argument("--rounding", default="auto", choices=("auto", "fine", "paper"))
    args = parser.parse_args(argv)

    from advsim._io import write_csv, write_json
    from advsim.plotting import plot_ratio_heatmap

    steps = QUICK_STEPS if args.quick else STEPS
    probs = QUICK_SAMPLING_PROBS if args.quick else SAMPLING_PROBS
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = compute(steps, probs, (1.0, 2.0), args.rounding)
    columns = list(rows[0])
    write_csv(out / "figure5_quadratic.csv", rows, columns)
    write_json(out / "figure5_quadratic.json", {"columns": columns, "rows": rows})

    for eps_1, panel in ((1.0, "a"), (2.0, "b")):
        sub = [r for r in rows if r["eps_1"] == eps_1]
        rounded = sorted({r["steps"] for r in sub if r["rounded"]})
        note = ""
        if rounded:
            how = "fine grid" if args.rounding == "fine" else "rounded up as in the paper"
            note = f"\nsupport {how} for T >= {rounded[0]} (an upper bound)"
        paths = plot_ratio_heatmap(
            sub,
            "steps",
            "sampling_prob",
            "quadratic",
            out / f"figure5{panel}",
            denominator="heuristic_max",
            title=(
                f"({panel}) one step is ({eps_1:g}, $10^{{-6}}$)-DP; quadratic regularizer, "
                r"$\alpha = 1/2$, over $\max_{t \leq T} \varepsilon_t$" + note
            ),
            fmt=".3f",
            colorbar_label=r"$\varepsilon_{quadratic} / \max_{t \leq T} \varepsilon_t$"
            r" at $\delta = 10^{-6}$",
        )
        print(f"\nPanel ({panel}): eps_1 = {eps_1:g}; ratio (* = rounded support)")
        print("q \\ T   " + " ".join(f"{t:>7d}" for t in steps))
        for q in probs:
            cells = [r for r in sub if r["sampling_prob"] == q]
            print(
                f"{q:<7g} "
                + " ".join(f"{r['ratio']:6.3f}{'*' if r['rounded'] else ' '}" for r in cells)
            )
        print("wrote", ", ".join(str(p) for p in paths))
    worst = max(rows, key=lambda r: r["ratio"])
    print(
        f"\nlargest ratio {worst['ratio']:.4f} at eps_1 = {worst['eps_1']:g}, T = "
        f"{worst['steps']}, q = {worst['sampling_prob']:g} (sigma = "
        f"{worst['noise_multiplier']:.4f}); {time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    main()

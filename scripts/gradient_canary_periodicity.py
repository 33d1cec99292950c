"""Figure 2 of arXiv:2405.14457 simulated: gradient canaries inserted every k-th step.

Cebere, Bellet & Papernot insert a crafted gradient of norm C in one coordinate at every
k-th step of DP-SGD (Algorithm 4: at the steps t with t mod k = 0, always, not
Poisson-sampled), keep the number of insertions n fixed (T = n k) so that the accountant's
bound, which counts only the insertion steps, is the same for every k, and audit the last
model with Gaussian-DP auditing. Part (a) reproduces that experiment with
`advsim.mechanisms.GradientCanary` and no other gradients (their worst case), where the
last model is known in closed form: the biased coordinate is
eta (n C + N(0, T sigma^2 C^2)) in and eta N(0, T sigma^2 C^2) out, i.e.
mu_last = n / (sqrt(T) sigma)-GDP, while composition over the n insertions is
sqrt(n) / sigma-GDP. So for k = 1 the audit matches composition and for k > 1 it falls
to the exact last-model epsilon (mu ratio 1 / sqrt(k)), which the audit reaches; the
last-iterate heuristic with q = 1 *is* that exact value here.

Part (b) is the low-dimensional regime of Section 5.2 there (Figure 1c): the other
examples are a logistic-regression dataset (`data="logistic"`) whose feature scales span
`spread` = 100x, Poisson-sampled, so the data add batch-sampling variance to the loud
coordinates. It audits A_GC-R on every coordinate (Algorithm 2 picks one uniformly, so
its expected result is the mean over coordinates), the random direction of Algorithms 7-8
(cosine and projection scores) and A_GC-S (Algorithm 3, the four noisy/noiseless x
PerStep/FinalModel variants), beside composition.

All audits: delta = 1e-5, Clopper-Pearson 95%, threshold chosen on held-out runs
("split"); "gdp" converts mu_lower to epsilon assuming a Gaussian trade-off curve (Remark 3
there; exact in part (a)), "eps_delta" assumes nothing.

Usage: python scripts/gradient_canary_periodicity.py [--quick] [--out DIR] [--trials N]
    [--logistic-trials N] [--poisson Q]
Writes DIR/gradient_canary.csv/.json (with provenance) and DIR/gradient_canary.png/.pdf.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

DELTA = 1e-5
MU_COMP = 2.0  # sigma = sqrt(n) / MU_COMP: composition over the n insertions is 2-GDP
KS = (1, 5, 25)
# Part (b): 16 distinct points x 256 copies (4096 examples), q = 0.1 (~410 per batch).
LOGISTIC = dict(num_examples=16, copies=256, spread=100.0, scale=1.0)
Q_LOGISTIC, LR_LOGISTIC = 0.1, 0.002

COLUMNS = (
    "part",
    "adversary",
    "variant",
    "k",
    "steps",
    "insertions",
    "dim",
    "sampling_prob",
    "noise_multiplier",
    "coordinate",
    "feature_scale",
    "eps_gdp",
    "mu_lower",
    "eps_point",
    "eps_delta_lower",
    "exact_last_model",
    "heuristic",
    "composition",
    "trials",
    "wall_time_s",
)


def _audits(scores) -> dict:
    from advsim.audits import audit

    gdp = audit(scores, "gdp", delta=DELTA)
    free = audit(scores, "eps_delta", delta=DELTA)
    return {
        "eps_gdp": gdp.eps_lower,
        "mu_lower": gdp.extras.get("mu_lower"),
        "eps_point": gdp.eps_point,
        "eps_delta_lower": free.eps_lower,
    }


def _row(**kw) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(kw)
    return row


def periodicity(n: int, ks, dim: int, trials: int, seed: int, poisson_q: float | None):
    """Part (a): zero other gradients, A_GC-R, k in `ks`, T = n k."""
    import advsim
    from advsim import CanarySchedule
    from advsim.adversaries import BiasedCoordinate
    from advsim.bounds import composition_epsilon, gdp_epsilon, heuristic_epsilon
    from advsim.mechanisms import GradientCanary

    sigma = math.sqrt(n) / MU_COMP
    adversary = BiasedCoordinate.random(dim, seed=seed)
    rows = []
    variants = [("inserted", 1.0, False)]
    if poisson_q is not None:
        variants.append(("poisson", poisson_q, True))
    for variant, q, sampled in variants:
        for k in ks:
            steps = n * k
            start = time.perf_counter()
            mech = GradientCanary(
                steps,
                q,
                sigma,
                dim=dim,
                canary_schedule=CanarySchedule.every(k, first=k, sampled=sampled),
            )
            # chunk = trials: compute only the runs asked for (the default chunk is 16 blocks).
            scores = advsim.simulate(
                mech, adversary, trials, seed + 1000 * k, chunk_size=trials, progress=True
            )
            acc = mech.accounting()
            assert acc.num_canary_steps == n
            heur = heuristic_epsilon(DELTA, steps, q, sigma, canary_steps=n)
            rows.append(
                _row(
                    part="a",
                    adversary="A_GC-R",
                    variant=variant,
                    k=k,
                    steps=steps,
                    insertions=n,
                    dim=dim,
                    sampling_prob=q,
                    noise_multiplier=sigma,
                    coordinate=int(adversary.coordinate),
                    **_audits(scores),
                    # Deterministic insertion: N(n, T s^2) vs N(0, T s^2) (closed form);
                    # Poisson: the heuristic's mixture, exact for zero other gradients.
                    exact_last_model=(
                        gdp_epsilon(DELTA, n / (math.sqrt(steps) * sigma)) if not sampled else heur
                    ),
                    heuristic=heur,
                    composition=composition_epsilon(DELTA, steps, q, sigma, canary_steps=n),
                    trials=trials,
                    wall_time_s=time.perf_counter() - start,
                )
            )
    return rows


def logistic_adversaries(n: int, k: int, dim: int, trials: int, seed: int, quick: bool):
    """Part (b): logistic data, every coordinate, random direction, A_GC-S variants."""
    import jax
    import numpy as np

    import advsim
    from advsim import CanarySchedule
    from advsim.adversaries import BiasedCoordinate, RandomDirection, SimulatedBiasedDimension
    from advsim.bounds import composition_epsilon, gdp_epsilon
    from advsim.mechanisms import GradientCanary

    sigma = math.sqrt(n) / MU_COMP
    steps = n * k
    mech = GradientCanary(
        steps,
        Q_LOGISTIC,
        sigma,
        dim=dim,
        learning_rate=LR_LOGISTIC,
        data="logistic",
        data_seed=seed,
        canary_schedule=CanarySchedule.every(k, first=k, sampled=False),
        **LOGISTIC,
    )
    scales = np.sqrt(np.mean(np.square(mech.features.astype(np.float64)), axis=0))
    common = dict(
        part="b",
        k=k,
        steps=steps,
        insertions=n,
        dim=dim,
        sampling_prob=Q_LOGISTIC,
        noise_multiplier=sigma,
        trials=trials,
        # Without data the biased coordinate would be exactly this (k = 1: composition).
        exact_last_model=gdp_epsilon(DELTA, n / (math.sqrt(steps) * sigma)),
        composition=composition_epsilon(DELTA, steps, 1.0, sigma, canary_steps=n),
    )
    key = jax.random.key(seed + 7)
    rows = []

    def run(adversary, name, variant, coordinate=None):
        start = time.perf_counter()
        crafted = adversary.craft(mech)
        j = coordinate
        if j is None and variant.startswith("sim"):
            j = int(np.argmax(crafted.canary_direction))
        scores = advsim.simulate(mech, adversary, trials, key, chunk_size=trials, progress=True)
        rows.append(
            _row(
                adversary=name,
                variant=variant,
                coordinate=j,
                feature_scale=None if j is None else float(scales[j]),
                **_audits(scores),
                wall_time_s=time.perf_counter() - start,
                **common,
            )
        )

    for j in range(dim):
        run(BiasedCoordinate(j), "A_GC-R", f"coordinate {j}", j)
    # --quick skips the random direction (one compilation less); the full run has both.
    for statistic in () if quick else ("cosine", "projection"):
        run(RandomDirection(seed, statistic), "random direction", statistic)
    sims = [("noiseless", "per_step")]
    if not quick:
        sims += [("noiseless", "final_model"), ("noisy", "per_step"), ("noisy", "final_model")]
    picks = {}
    for simulation, rank in sims:
        adv = SimulatedBiasedDimension(simulation, rank, runs=4, seed=seed)
        stat = adv.statistic(mech)
        picks[f"{simulation}/{rank}"] = {
            "picked": int(np.argmin(stat)),
            "statistic": [float(s) for s in stat],
        }
        run(adv, "A_GC-S", f"sim {simulation}/{rank}")
    return rows, picks, [float(s) for s in scales]


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


def plot(rows_a, rows_b, path_stem, trials, logistic_trials):
    import numpy as np

    from advsim.plotting import BOUND_STYLES, save_figure

    plt = _pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 4.0))
    ins = sorted((r for r in rows_a if r["variant"] == "inserted"), key=lambda r: r["k"])
    ks = [r["k"] for r in ins]
    ax.plot(ks, [r["composition"] for r in ins], marker=".", **BOUND_STYLES["composition"])
    ax.plot(
        ks,
        [r["exact_last_model"] for r in ins],
        color="0.55",
        linestyle=":",
        marker=".",
        label="exact last model (= heuristic, q = 1)",
    )
    ax.plot(ks, [r["eps_gdp"] for r in ins], "v", color="0.0", ms=6, label="audit, GDP")
    ax.plot(
        ks,
        [r["eps_delta_lower"] for r in ins],
        "^",
        mfc="white",
        mec="0.0",
        ms=6,
        label="audit, (eps, delta)",
    )
    poi = sorted((r for r in rows_a if r["variant"] == "poisson"), key=lambda r: r["k"])
    if poi:
        qp = poi[0]["sampling_prob"]
        ax.plot(
            ks,
            [r["composition"] for r in poi],
            color="0.0",
            linewidth=0.7,
            label=f"composition, Poisson q = {qp:g}",
        )
        ax.plot(
            ks,
            [r["heuristic"] for r in poi],
            color="0.35",
            linestyle="--",
            label=f"heuristic = exact last model, Poisson q = {qp:g}",
        )
        ax.plot(
            ks,
            [r["eps_gdp"] for r in poi],
            "s",
            color="0.4",
            ms=4,
            label=f"audit, Poisson q = {qp:g}, GDP (estimate)",
        )
        ax.plot(
            ks,
            [r["eps_delta_lower"] for r in poi],
            "s",
            mfc="white",
            mec="0.4",
            ms=5,
            label=f"audit, Poisson q = {qp:g}, (eps, delta)",
        )
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_xlabel("insertion period $k$ ($T = nk$)")
    ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", linewidth=0.6)
    n = ins[0]["insertions"]
    ax.set_title(f"(a) zero data, $n = {n}$ insertions, {trials:,} runs/world", fontsize=8)
    ax.set_ylim(top=1.6 * max(r["composition"] for r in rows_a))
    ax.legend(frameon=False, fontsize=6, loc="upper right", ncols=2)

    coords = sorted(
        (r for r in rows_b if r["adversary"] == "A_GC-R"), key=lambda r: r["feature_scale"]
    )
    x = np.arange(len(coords))
    bx.bar(x, [r["eps_gdp"] for r in coords], color="0.8", label="A_GC-R, each coordinate")
    bx.set_xticks(x, [f"{r['coordinate']}\n{r['feature_scale']:.2g}" for r in coords], fontsize=6)
    bx.axhline(coords[0]["composition"], **BOUND_STYLES["composition"])
    bx.axhline(
        np.mean([r["eps_gdp"] for r in coords]),
        color="0.5",
        linestyle="--",
        label="A_GC-R, mean (Algorithm 2)",
    )
    markers = iter("ovsD")
    for r in rows_b:
        if r["adversary"] == "A_GC-S":
            pos = [i for i, c in enumerate(coords) if c["coordinate"] == r["coordinate"]][0]
            bx.plot(
                pos,
                r["eps_gdp"],
                next(markers),
                mfc="none",
                mec="0.0",
                ms=7,
                label=f"A_GC-S {r['variant'][4:]} (coord {r['coordinate']})",
            )
    for r, ls in zip(
        (r for r in rows_b if r["adversary"] == "random direction"), (":", "-."), strict=False
    ):
        bx.axhline(
            r["eps_gdp"],
            color="0.3",
            linestyle=ls,
            linewidth=0.8,
            label=f"random direction, {r['variant']}",
        )
    bx.set_xlabel("coordinate / feature scale (sorted)")
    bx.set_ylabel(r"GDP audit $\varepsilon$ at $\delta = 10^{-5}$")
    bx.set_ylim(0, 1.6 * coords[0]["composition"])
    kb = coords[0]["k"]
    bx.set_title(
        f"(b) logistic data, k = {kb}, $n = {coords[0]['insertions']}$, "
        f"{logistic_trials:,} runs/world",
        fontsize=8,
    )
    bx.legend(frameon=False, fontsize=6, loc="upper right", ncols=2)
    paths = save_figure(fig, path_stem)
    plt.close(fig)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 10, 5000 runs (about a minute)")
    parser.add_argument("--out", default="advsim-results/gradient_canary", help="output folder")
    parser.add_argument("--trials", type=int, default=None, help="runs per world, part (a)")
    parser.add_argument("--logistic-trials", type=int, default=None, help="runs, part (b)")
    parser.add_argument("--insertions", type=int, default=None, help="n (default 250)")
    parser.add_argument("--dim", type=int, default=4, help="model dimension, part (a)")
    parser.add_argument("--logistic-k", type=int, default=1, help="period k, part (b)")
    parser.add_argument(
        "--poisson",
        type=float,
        default=None,
        help="also run Poisson-sampled canaries with this q (part a)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from advsim._io import provenance, write_csv, write_json

    quick = args.quick
    n = args.insertions or (10 if quick else 250)
    trials = args.trials or (5_000 if quick else 100_000)
    logistic_trials = args.logistic_trials or (1_024 if quick else 20_000)
    n_logistic = 25
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows_a = periodicity(n, KS, args.dim, trials, args.seed, args.poisson)
    rows_b, picks, scales = logistic_adversaries(
        n_logistic, args.logistic_k, 10, logistic_trials, args.seed, quick
    )
    rows = rows_a + rows_b
    write_csv(out / "gradient_canary.csv", rows, COLUMNS)
    config = dict(
        vars(args),
        insertions=n,
        trials=trials,
        logistic_trials=logistic_trials,
        delta=DELTA,
        mu_composition=MU_COMP,
        logistic=LOGISTIC,
        q_logistic=Q_LOGISTIC,
        lr_logistic=LR_LOGISTIC,
        n_logistic=n_logistic,
    )
    write_json(
        out / "gradient_canary.json",
        {
            "provenance": provenance(config),
            "columns": list(COLUMNS),
            "rows": rows,
            "simulated_biased_dimension": picks,
            "logistic_feature_scales": scales,
        },
    )
    paths = plot(rows_a, rows_b, out / "gradient_canary", trials, logistic_trials)

    print(f"\n(a) zero other gradients, n = {n} insertions, delta = {DELTA}, {trials} runs/world")
    print(
        f"{'variant':<9} {'k':>3} {'T':>6} {'eps_gdp':>8} {'mu_low':>7} {'eps_dlt':>8} "
        f"{'exact':>7} {'heur':>7} {'comp':>7} {'s':>5}"
    )
    for r in rows_a:
        print(
            f"{r['variant']:<9} {r['k']:>3} {r['steps']:>6} {r['eps_gdp']:8.3f} "
            f"{r['mu_lower']:7.3f} {r['eps_delta_lower']:8.3f} {r['exact_last_model']:7.3f} "
            f"{r['heuristic']:7.3f} {r['composition']:7.3f} {r['wall_time_s']:5.0f}"
        )
    print(
        f"\n(b) logistic data (feature scales {', '.join(f'{s:.3g}' for s in scales)}), "
        f"k = {args.logistic_k}, n = {n_logistic}, {logistic_trials} runs/world"
    )
    print(
        f"{'adversary':<17} {'variant':<26} {'coord':>5} {'scale':>6} {'eps_gdp':>8} "
        f"{'eps_dlt':>8} {'comp':>7}"
    )
    for r in rows_b:
        coord = "" if r["coordinate"] is None else r["coordinate"]
        scale = "" if r["feature_scale"] is None else f"{r['feature_scale']:.3g}"
        print(
            f"{r['adversary']:<17} {r['variant']:<26} {coord:>5} {scale:>6} "
            f"{r['eps_gdp']:8.3f} {r['eps_delta_lower']:8.3f} {r['composition']:7.3f}"
        )
    mean_r = sum(r["eps_gdp"] for r in rows_b if r["adversary"] == "A_GC-R") / 10
    print(f"A_GC-R expected over a uniform coordinate (Algorithm 2): {mean_r:.3f}")
    for name, p in picks.items():
        print(f"A_GC-S {name}: picked coordinate {p['picked']} (scale {scales[p['picked']]:.3g})")
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

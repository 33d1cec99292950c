"""Figure 2 of Annamalai (2024), "It's Our Loss": eps_emp of the last model against eps.

DP-SGD with the likelihood-encoding loss (`advsim.mechanisms.LikelihoodEncodingLoss`,
Algorithm 1 there: |D| = 10^10 zeros, the canary x = 1, Poisson sampling, eta = C = 1),
only the last model released, scored by the decoder of Section 4.3
(`advsim.adversaries.LikelihoodSumDecoder`) and audited with Algorithm 2
(`advsim.audits.TradeoffAudit`): the observed FPR-FNR curve against the composition
trade-off curves of the grid eps in {0.5, 0.6, ..., 20}. For (q, T) in {(0.1, 100),
(0.01, 1024)} and eps in {1, 2, 4, 10} (delta = 1e-5; sigma calibrated by dp-accounting's
PLD accountant), each repetition simulates `--trials` runs per world with its own seed:

- Algorithm 2 (columns `eps_point_*`): the paper's estimate, raw rates at every threshold
  (optimistic; mean +- 2 sd over reps); biased upwards by the maximum over thresholds
  (the audit's `extras["eps_algorithm2"]`);
- eps_emp (held-out, columns `eps_held_out_*`): the audit's `eps_point`, the same rule on
  raw rates counted on held-out runs at thresholds chosen on the other half (no maximum
  over thresholds);
- eps_lower: the audit's rigorous (eps, delta) lower bound (held-out Clopper-Pearson,
  95%, no assumption);
- eps_composition_violated (column `comp.viol.`): the largest grid eps whose composition
  curve the held-out boxes certifiably violate: a composition-equivalent index, not a
  bound on the release's eps at delta (it was this script's `eps_lower` before the
  audits said what they certify);
- heuristic: the last-iterate heuristic eps of the same (T, q, sigma) (Theorem 1 of
  arXiv:2410.06186), what a linear loss would leak.

Each (q, T, eps, rep) is written to DIR/cells/ as soon as it is done; `--resume` reuses
them, so a long run can be stopped and continued. Needs float64 (jax_enable_x64, set here).

Usage: python scripts/its_our_loss_figure2.py [--quick] [--out DIR] [--trials N]
    [--reps R] [--reps-large R] [--resume]
Writes DIR/figure2.csv/.json (rows per (q, T, eps) and per repetition, provenance) and
DIR/figure2.png/.pdf.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

DELTA = 1e-5
SETTINGS = ((0.1, 100), (0.01, 1024))
EPSILONS = (1.0, 2.0, 4.0, 10.0)


def _cell(
    q, steps, eps, rep, trials, out: Path, resume: bool, sigma: float, scale: str = "paper"
) -> dict:
    import jax
    import numpy as np

    import advsim
    from advsim.adversaries import LikelihoodSumDecoder
    from advsim.audits import TradeoffAudit
    from advsim.bounds import heuristic_epsilon
    from advsim.mechanisms import LikelihoodEncodingLoss

    stem = f"q{q:g}_T{steps}_eps{eps:g}_rep{rep}_n{trials}"
    if scale != "paper":
        stem += f"_{scale}"
    path, npz = out / "cells" / f"{stem}.json", out / "cells" / f"{stem}.npz"
    if resume and path.exists():
        return json.loads(path.read_text())
    mech = LikelihoodEncodingLoss(steps, q, sigma, scale=scale)
    seed = int(1000 * q) * 10**6 + steps * 1000 + int(10 * eps) * 10 + rep
    if npz.exists():  # the simulation is kept, so the audit can be redone (--reaudit)
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
    result = TradeoffAudit(seed=rep)(scores, delta=DELTA, accounting=mech.accounting())
    audit_s = time.perf_counter() - start
    row = dict(
        sampling_prob=q,
        steps=steps,
        eps=eps,
        rep=rep,
        seed=seed,
        trials=trials,
        noise_multiplier=sigma,
        scale=float(mech.scale),
        eps_point=result.extras["eps_algorithm2"],
        eps_point_boundary=result.extras["eps_algorithm2_boundary"],
        eps_held_out=float("nan") if result.eps_point is None else result.eps_point,
        eps_lower=result.eps_lower,
        eps_composition_violated=result.extras["eps_composition_violated"],
        eps_composition_violated_boundary=result.extras["eps_composition_violated_boundary"],
        heuristic=heuristic_epsilon(DELTA, steps, q, sigma),
        simulate_s=sim_s,
        audit_s=audit_s,
        mean_in=float(scores.canary_in.mean()),
        mean_out=float(scores.canary_out.mean()),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row))
    return row


def run(
    settings, epsilons, trials, reps, reps_large, out: Path, resume: bool, scale: str = "wrap_free"
) -> list[dict]:
    from tqdm.auto import tqdm

    from advsim.bounds import calibrate_noise_multiplier

    sigmas = {}
    for q, steps in settings:
        for eps in epsilons:
            sigmas[(q, steps, eps)] = calibrate_noise_multiplier(eps, DELTA, steps, q)
    # Repetition-major order: every (q, T, eps) gets its first repetition before any its
    # second, so a stopped run still covers the whole figure.
    jobs = []
    n_reps = {s: (reps if s[1] <= 100 else reps_large) for s in settings}
    for rep in range(max(n_reps.values())):
        for q, steps in settings:
            if rep < n_reps[(q, steps)]:
                jobs += [(q, steps, eps, rep) for eps in epsilons]
    rows = []
    for q, steps, eps, rep in tqdm(jobs, desc="cells", unit="cell"):
        sigma = sigmas[(q, steps, eps)]
        rows.append(_cell(q, steps, eps, rep, trials, out, resume, sigma, scale))
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    import numpy as np

    groups: dict = {}
    for r in rows:
        groups.setdefault((r["sampling_prob"], r["steps"], r["eps"]), []).append(r)
    table = []
    for (q, steps, eps), rs in sorted(groups.items()):
        pts = np.array([r["eps_point"] for r in rs])
        low = np.array([r["eps_lower"] for r in rs])
        viol = np.array([r.get("eps_composition_violated", np.nan) for r in rs])
        held = np.array([r["eps_held_out"] for r in rs])
        table.append(
            dict(
                sampling_prob=q,
                steps=steps,
                eps=eps,
                noise_multiplier=rs[0]["noise_multiplier"],
                reps=len(rs),
                trials=rs[0]["trials"],
                eps_point_mean=float(pts.mean()),
                eps_point_sd=float(pts.std(ddof=1)) if len(rs) > 1 else 0.0,
                eps_point_boundary_mean=float(np.mean([r["eps_point_boundary"] for r in rs])),
                eps_held_out_mean=float(held.mean()),
                eps_held_out_sd=float(held.std(ddof=1)) if len(rs) > 1 else 0.0,
                eps_lower_mean=float(low.mean()),
                eps_lower_min=float(low.min()),
                eps_composition_violated_mean=float(viol.mean()),
                heuristic=rs[0]["heuristic"],
                wall_s_per_rep=float(np.mean([r["simulate_s"] + r["audit_s"] for r in rs])),
            )
        )
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="q=0.1, T=100, 4000 runs, 2 reps")
    parser.add_argument("--out", default="advsim-results/its_our_loss_figure2")
    parser.add_argument("--trials", type=int, default=None, help="runs per world (10^5)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (5)")
    parser.add_argument(
        "--reps-large", type=int, default=None, help="repetitions at T = 1024 (default --reps)"
    )
    parser.add_argument("--resume", action="store_true", help="reuse finished cells in --out")
    parser.add_argument(
        "--reaudit", action="store_true", help="redo the audits of the saved simulations"
    )
    parser.add_argument(
        "--scale",
        choices=("paper", "wrap_free"),
        default="wrap_free",
        help="encoding-scale rule (see advsim.mechanisms.likelihood_encoding.encoding_scale)",
    )
    parser.add_argument(
        "--settings",
        choices=("both", "small", "large"),
        default="both",
        help="(q, T) = (0.1, 100) 'small', (0.01, 1024) 'large', or both",
    )
    args = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)
    from advsim._io import provenance, write_csv, write_json
    from advsim.plotting import plot_eps_emp_vs_eps

    settings = {"both": SETTINGS, "small": SETTINGS[:1], "large": SETTINGS[1:]}[args.settings]
    if args.quick:
        settings = SETTINGS[:1]
    trials = args.trials or (4000 if args.quick else 100_000)
    reps = args.reps or (2 if args.quick else 5)
    reps_large = args.reps_large or reps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    resume = args.resume and not args.reaudit
    rows = run(settings, EPSILONS, trials, reps, reps_large, out, resume, args.scale)
    table = summarise(rows)
    columns = list(table[0])
    write_csv(out / "figure2.csv", table, columns)
    write_csv(out / "figure2_reps.csv", rows, list(rows[0]))
    config = dict(
        delta=DELTA,
        settings=settings,
        epsilons=EPSILONS,
        trials=trials,
        reps=reps,
        reps_large=reps_large,
        scale_rule=args.scale,
        audit="TradeoffAudit(confidence=0.95, min_count=1, grid 0.5..20)",
    )
    write_json(
        out / "figure2.json",
        {"provenance": provenance(config), "columns": columns, "rows": table, "reps": rows},
    )
    panels = [
        dict(
            title=f"$q = {q:g}$, $T = {steps}$ ({reps if steps <= 100 else reps_large} reps "
            f"of {trials:,} runs/world)",
            rows=[r for r in table if (r["sampling_prob"], r["steps"]) == (q, steps)],
        )
        for q, steps in settings
    ]
    paths = plot_eps_emp_vs_eps(panels, out / "figure2")
    print(f"\ndelta = {DELTA}, {trials} runs per world")
    print(
        f"{'q':>5} {'T':>5} {'eps':>5} {'sigma':>7} {'reps':>4} {'Alg.2 (mean+-2sd)':>20} "
        f"{'boundary':>8} {'held-out':>14} {'eps_lower':>9} {'comp.viol.':>10} {'heuristic':>9} "
        f"{'s/rep':>6}"
    )
    for r in table:
        print(
            f"{r['sampling_prob']:5g} {r['steps']:5d} {r['eps']:5g} {r['noise_multiplier']:7.4f} "
            f"{r['reps']:4d} {r['eps_point_mean']:11.2f} +- {2 * r['eps_point_sd']:5.2f} "
            f"{r['eps_point_boundary_mean']:8.3f} "
            f"{r['eps_held_out_mean']:6.2f} +- {2 * r['eps_held_out_sd']:4.2f} "
            f"{r['eps_lower_mean']:9.2f} {r['eps_composition_violated_mean']:10.2f} "
            f"{r['heuristic']:9.3f} {r['wall_s_per_rep']:6.0f}"
        )
    print("wrote", ", ".join(str(p) for p in paths), f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

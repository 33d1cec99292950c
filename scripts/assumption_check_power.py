"""Power and false alarms of the audits' assumption checks (`advsim.audits._assumption`).

Issue 12, point 2. Each repeat simulates `--trials` runs per world (independent keys),
splits each world in halves exactly as the audits' default split does
(`split_halves` with `np.random.default_rng(0)`, in then out) and runs the check on the
held-out half (what the audits see), and also on all runs.

- Power: the threshold landscape (`advsim.mechanisms.ThresholdLandscape`, adversary
  `advsim.adversaries.ThresholdAdversary`, as in `advsim figure figure4`) at
  sigma = 1, T = 25, B in {1, 4, 16}, 40 repeats: the GDP check, and the family check
  with the landscape's accounting (one unsampled canary step, so the family is
  G_{1/(sqrt(T) sigma)}: the same null, solved by bisection instead of in closed form).
  Rejections with a two-sided 95% Clopper-Pearson interval on the power.
- False alarms, where the null holds exactly, 100 repeats: the GDP check on numpy
  N(1, 1) vs N(0, 1) scores and on the linear process with q = 1 (T in {1, 10}); the family
  check on the linear process (`LinearProcess`, `ProjectionScore`), T in {1, 10},
  q in {0.1, 1}, sigma = 1. Rejections must not exceed the 0.999-quantile of
  Binomial(repeats, level) (13 of 100 at level 0.05), the rule of
  tests/properties/test_audit_calibration.py.

Measured (level 0.05, 10^5 runs per world, seeds 0.., 2 CPU cores shared with other
jobs; 305-340 s wall for the whole run, per case: landscape 15-31 s per B, numpy Gaussian
12-19 s, linear process 32-82 s; `--quick` about 30 s):

    case                         check  held-out all runs  power CI95 / allowed
    ---------------------------------------------------------------------------
    landscape sigma=1 T=25 B=1   gdp      40/40    40/40   [0.912, 1.000]
    landscape sigma=1 T=25 B=1   family   40/40    40/40   [0.912, 1.000]
    landscape sigma=1 T=25 B=4   gdp      40/40    40/40   [0.912, 1.000]
    landscape sigma=1 T=25 B=4   family   40/40    40/40   [0.912, 1.000]
    landscape sigma=1 T=25 B=16  gdp       0/40     0/40   [0.000, 0.088]
    landscape sigma=1 T=25 B=16  family    0/40     0/40   [0.000, 0.088]
    gaussian numpy mu=1          gdp       0/100    0/100  allowed 13 (ok)
    linear T=1 q=1 sigma=1       gdp       0/100    0/100  allowed 13 (ok)
    linear T=1 q=1 sigma=1       family    0/100    0/100  allowed 13 (ok)
    linear T=10 q=1 sigma=1      gdp       0/100    0/100  allowed 13 (ok)
    linear T=10 q=1 sigma=1      family    0/100    0/100  allowed 13 (ok)
    linear T=1 q=0.1 sigma=1     family    0/100    0/100  allowed 13 (ok)
    linear T=10 q=0.1 sigma=1    family    0/100    0/100  allowed 13 (ok)

"held-out": the check on the audits' counting half (5 x 10^4 per world); "all runs": on
all 10^5. B = 16 departs from a Gaussian ROC only by a local bump (the mu one test
implies is 0.955 +- 0.005 from FPR 1e-3 to 0.99 but 0.995 at FPR 0.3): undetectable at
this size, rejected in 10/10 repeats at 10^6 runs per world (held-out 5 x 10^5; 36 s,
measured separately with the same functions).

Usage: python scripts/assumption_check_power.py [--quick] [--repeats N] [--null-repeats N]
       [--trials N] [--level A] [--out DIR]
Writes DIR/assumption_check_power.json (rows, per-repeat outcomes, provenance) and
DIR/assumption_check_power.csv.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.stats

POWER_STEPS, POWER_SIGMA, POWER_BATCHES = 25, 1.0, (1, 4, 16)
NULL_LINEAR = ((1, 1.0), (10, 1.0), (1, 0.1), (10, 0.1))  # (T, q), sigma = 1
NULL_SIGMA = 1.0
GAUSSIAN_MU = 1.0
QUICK = {"trials": 20_000, "repeats": 8, "null_repeats": 20}


def _held_out(cin: np.ndarray, cout: np.ndarray) -> tuple:
    """The counting halves of the audits' default split (seed 0: in first, then out)."""
    from advsim.audits._threshold import split_halves

    rng = np.random.default_rng(0)
    _, cnt_in = split_halves(cin, rng)
    _, cnt_out = split_halves(cout, rng)
    return cnt_in, cnt_out


def _checks(cin, cout, checks: dict, level: float) -> dict:
    """{check name: (rejected on held-out half, rejected on all runs, held-out result)}."""
    h_in, h_out = _held_out(cin, cout)
    out = {}
    for name, fn in checks.items():
        held = fn(h_in, h_out, level)
        full = fn(cin, cout, level)
        out[name] = (held.rejected, full.rejected, held)
    return out


def _gdp(cin, cout, level):
    from advsim.audits._assumption import check_gaussian_tradeoff

    return check_gaussian_tradeoff(cin, cout, level=level)


def _family(accounting):
    from advsim.audits._assumption import check_heuristic_family

    def fn(cin, cout, level):
        return check_heuristic_family(cin, cout, accounting, level=level)

    return fn


def _cases(trials: int):
    """(label, kind, repeats key, sampler(seed) -> (cin, cout), {check name: fn})."""
    import advsim
    from advsim.adversaries import ProjectionScore, ThresholdAdversary
    from advsim.mechanisms import LinearProcess, ThresholdLandscape

    def simulated(mech, adversary):
        def sample(seed):
            s = advsim.simulate(mech, adversary, trials, seed, progress=False)
            return np.asarray(s.canary_in, np.float64), np.asarray(s.canary_out, np.float64)

        return sample

    cases = []
    for b in POWER_BATCHES:
        mech = ThresholdLandscape(steps=POWER_STEPS, noise_multiplier=POWER_SIGMA, batch_size=b)
        label = f"landscape sigma={POWER_SIGMA:g} T={POWER_STEPS} B={b}"
        checks = {"gdp": _gdp, "family": _family(mech.accounting())}
        cases.append((label, "power", simulated(mech, ThresholdAdversary()), checks))

    def gaussian(seed):
        rng = np.random.default_rng(seed)
        return rng.normal(GAUSSIAN_MU, 1.0, trials), rng.normal(0.0, 1.0, trials)

    cases.append((f"gaussian numpy mu={GAUSSIAN_MU:g}", "null", gaussian, {"gdp": _gdp}))
    for steps, q in NULL_LINEAR:
        mech = LinearProcess(steps=steps, sampling_prob=q, noise_multiplier=NULL_SIGMA)
        checks = {"family": _family(mech.accounting())}
        if q == 1.0:  # P = T + N(0, T sigma^2) vs N(0, T sigma^2): G_mu, mu = sqrt(T)/sigma
            checks = {"gdp": _gdp, **checks}
        label = f"linear T={steps} q={q:g} sigma={NULL_SIGMA:g}"
        cases.append((label, "null", simulated(mech, ProjectionScore()), checks))
    return cases


def run(trials: int, repeats: int, null_repeats: int, level: float, seed: int) -> tuple:
    from advsim.testing import clopper_pearson_interval

    rows, outcomes = [], []
    for case_id, (label, kind, sample, checks) in enumerate(_cases(trials)):
        n_rep = repeats if kind == "power" else null_repeats
        counts = {name: [0, 0] for name in checks}
        start = time.perf_counter()
        for r in range(n_rep):
            rep_seed = seed + 10_000 * case_id + r
            cin, cout = sample(rep_seed)
            for name, (held, full, res) in _checks(cin, cout, checks, level).items():
                counts[name][0] += held
                counts[name][1] += full
                outcomes.append(
                    {
                        "case": label,
                        "check": name,
                        "seed": rep_seed,
                        "rejected_held_out": held,
                        "rejected_all": full,
                        "param_interval": res.param_interval,
                        "worst_threshold": res.worst["threshold"],
                    }
                )
        wall = time.perf_counter() - start
        allowed = int(scipy.stats.binom.ppf(0.999, n_rep, level))
        for name, (held, full) in counts.items():
            lo, hi = clopper_pearson_interval(held, n_rep, 0.95)
            lo_all, hi_all = clopper_pearson_interval(full, n_rep, 0.95)
            rows.append(
                {
                    "case": label,
                    "kind": kind,
                    "check": name,
                    "repeats": n_rep,
                    "trials_per_world": trials,
                    "held_out_per_world": trials - trials // 2,
                    "rejected_held_out": held,
                    "rate_held_out": held / n_rep,
                    "ci95_lo_held_out": lo,
                    "ci95_hi_held_out": hi,
                    "rejected_all": full,
                    "ci95_lo_all": lo_all,
                    "ci95_hi_all": hi_all,
                    "allowed_false_alarms": allowed if kind == "null" else None,
                    "ok": (held <= allowed and full <= allowed) if kind == "null" else None,
                    "level": level,
                    "wall_s_case": wall,
                }
            )
        print(f"  {label}: {n_rep} repeats in {wall:.1f} s", flush=True)
    return rows, outcomes


def _table(rows) -> str:
    head = f"{'case':28} {'check':6} {'held-out':>8} {'all runs':>8}  power CI95 / allowed"
    lines = [head, "-" * len(head)]
    for r in rows:
        n = r["repeats"]
        tail = (
            f"[{r['ci95_lo_held_out']:.3f}, {r['ci95_hi_held_out']:.3f}]"
            if r["kind"] == "power"
            else f"allowed {r['allowed_false_alarms']} ({'ok' if r['ok'] else 'EXCEEDED'})"
        )
        lines.append(
            f"{r['case']:28} {r['check']:6} {r['rejected_held_out']:>4}/{n:<3} "
            f"{r['rejected_all']:>4}/{n:<3}  {tail}"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2e4 runs, 8/20 repeats (~35 s)")
    parser.add_argument("--trials", type=int, default=None, help="runs per world (1e5)")
    parser.add_argument("--repeats", type=int, default=None, help="power repeats (40)")
    parser.add_argument("--null-repeats", type=int, default=None, help="null repeats (100)")
    parser.add_argument("--level", type=float, default=0.05, help="the checks' level")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the repeats")
    parser.add_argument(
        "--out", default="advsim-results/assumption_check_power", help="output folder"
    )
    args = parser.parse_args(argv)

    from advsim._io import provenance, write_csv, write_json

    trials = args.trials or (QUICK["trials"] if args.quick else 100_000)
    repeats = args.repeats or (QUICK["repeats"] if args.quick else 40)
    null_repeats = args.null_repeats or (QUICK["null_repeats"] if args.quick else 100)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = dict(
        trials=trials,
        repeats=repeats,
        null_repeats=null_repeats,
        level=args.level,
        seed=args.seed,
        quick=args.quick,
    )
    start = time.perf_counter()
    rows, outcomes = run(trials, repeats, null_repeats, args.level, args.seed)
    wall = time.perf_counter() - start
    write_csv(out / "assumption_check_power.csv", rows)
    write_json(
        out / "assumption_check_power.json",
        {
            "rows": rows,
            "outcomes": outcomes,
            "wall_s": wall,
            "provenance": provenance(config),
        },
    )
    print(
        f"\nlevel {args.level:g}, {trials} runs per world (check on the held-out "
        f"{trials - trials // 2} per world, and on all)"
    )
    print(_table(rows))
    print(f"wrote {out}/assumption_check_power.{{json,csv}} ({wall:.0f} s)")


if __name__ == "__main__":
    main()

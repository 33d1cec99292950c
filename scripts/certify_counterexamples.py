"""Certified counterexamples to the last-iterate heuristic, with the trials they need.

Issue 12, point 3. For each construction of Section 4 / Appendix C of arXiv:2410.06186 the
script simulates the last model with the construction's adversary (`advsim.simulate`) and
asks `advsim.audits.certify_violation(scores, "heuristic", accounting)` whether the
release's trade-off curve certifiably lies below the heuristic's curve at the run's own
noise multiplier (confidence 0.95, held-out Clopper-Pearson, assumption-free):

- zeroing regularizer, README settings T = 10, q = 0.01, sigma = 0.5 (`ProjectionScore`);
- history-encoding regularizer, v = 30, T = 20, q = 0.01, sigma = 0.7
  (`CoordinateLikelihoodRatio`);
- malicious repeaters (Appendix C, threshold encoding), T = 30, q = 0.01, sigma = 0.7
  (`RepeaterDecoder`).

"Trials needed" is the smallest number of runs per world in the doubling grid
1000 * 2^k (k = 0, 1, ...) at which the certificate holds, on nested prefixes of one
simulation (run i of a world is the same run at every size); the table also says whether
every larger grid size certifies too. `sigma*` is the smallest noise multiplier whose
heuristic curve is certifiably violated, its "heuristic-equivalent epsilon" the epsilon
the heuristic would report at sigma* (an index of the violated curve, not the release's
epsilon).

The quadratic regularizer (alpha = 1/2, T = 3, q = 0.1, sigma = 1, delta = 1e-6; exact
eps 2.2749 vs heuristic 2.222) is not simulated: its exact law (`quadratic_law`,
N(X, s^2) vs N(0, s^2) with X enumerated exactly) gives its true curve
(`mixture_tradeoff`, one orientation, and its inverse for the other), and the trials a
held-out certificate needs are computed at every type-I error alpha as the smallest
held-out size h with CP_up(round(h beta(alpha)), h) < f_H(CP_up(round(h alpha), h)) (f_H the
heuristic's lower curve, CP at level (1 - c) / 2 each, expected counts); a world then needs
about 2h runs (the other half chooses the threshold; the choice itself is assumed perfect,
so this is optimistic by that much).

Finally the linear process (`LinearProcess` + `ProjectionScore`, T = 10, q = 0.1,
sigma = 1: the heuristic's tight case, Theorem 1) is certified against its own heuristic
in 100 independent repeats; the count of (false) certifications must not exceed the
0.999-quantile of Binomial(100, 0.05), the rule of tests/properties.

Measured (2026-11-23, 2 CPU cores shared with other jobs, JAX on CPU; full run 165 s
(245 s under heavier load): simulation 10 + 18 + 47 s, certificates 1-4 s per
construction for all 10-11 grid sizes, 2-3 s for each max-over-t certificate, 39 s for
the 100 linear repeats (simulation included); `--quick` (1/8 of the trials, 90 s) gives
the same "trials needed" for the first two rows and, capped at 64,000, none for the
repeaters):

    | construction | parameters | trials/world | certified | trials needed | sigma* |
    |   heur.-equiv. eps | heuristic eps | max-over-t: certified (sigma*) | max_t eps_t |
    |   exact eps |
    | zeroing (4.1)    | T=10, q=0.01, sigma=0.5 | 1,024,000 | True | 64,000  | 0.380 |
    |   1.642 | 0.770 | False (0.545) | 3.025 | 3.025 |
    | history, v=30    | T=20, q=0.01, sigma=0.7 |   512,000 | True | 32,000  | 0.422 |
    |   1.098 | 0.388 | True (0.439)  | 0.852 | 1.728 |
    | repeaters (C)    | T=30, q=0.01, sigma=0.7 |   512,000 | True | 256,000 | 0.475 |
    |   0.874 | 0.432 | True (0.628)  | 0.852 | 1.329 |

    (delta = 1e-5; every grid size from "trials needed" up certifies too. The zeroing
    regularizer is, correctly, not certified against the max-over-t heuristic: its truth
    is the t = 1 curve, one of those the maximum takes.)

    quadratic regularizer, alpha = 1/2, T = 3, q = 0.1, sigma = 1, delta = 1e-6 (exact eps
    2.2749 vs heuristic 2.2224): the release's curve dips below the heuristic's by at
    most 7.4e-6 in beta (at alpha = 1.5e-4, beta = 0.9994); a held-out certificate needs
    ~2.4e8 held-out runs per world at the best test (alpha = 6.3e-5, beta = 0.99970), i.e.
    ~4.9e8 runs per world (the normal approximation of the same condition gives 4.8e8);
    the other orientation needs the same.

    linear process, T = 10, q = 0.1, sigma = 1, 100 repeats of 10^5 runs per world:
    0 certifications against its own heuristic (allowed 13); sigma* min 1.023, median 1.078
    (every sigma* > the true 1.0).

Usage: python scripts/certify_counterexamples.py [--quick] [--out DIR]
Writes DIR/certify_counterexamples.json (rows, linear repeats, quadratic analysis,
provenance) and DIR/certify_counterexamples.csv.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import scipy.stats

CONFIDENCE = 0.95
GRID_START = 1000


def _constructions():
    from advsim.adversaries import CoordinateLikelihoodRatio, ProjectionScore, RepeaterDecoder
    from advsim.mechanisms import HistoryRegularizer, MaliciousRepeaters, ZeroingRegularizer

    return [
        ("zeroing regularizer (4.1)", ZeroingRegularizer(10, 0.01, 0.5), ProjectionScore(), 1e-5),
        (
            "history regularizer, v=30 (4.3)",
            HistoryRegularizer(20, 0.01, 0.7, v=30.0),
            CoordinateLikelihoodRatio(),
            1e-5,
        ),
        (
            "malicious repeaters (App. C)",
            MaliciousRepeaters(30, 0.01, 0.7),
            RepeaterDecoder(),
            1e-5,
        ),
    ]


def _params(acc) -> str:
    return f"T={acc.steps}, q={acc.sampling_prob:g}, sigma={acc.noise_multiplier:g}"


def _certify_grid(name, mech, adversary, delta, max_trials, seed) -> dict:
    import advsim
    from advsim.audits import certify_violation
    from advsim.bounds import heuristic_epsilon, heuristic_epsilon_max_over_steps

    acc = mech.accounting()
    start = time.perf_counter()
    scores = advsim.simulate(mech, adversary, max_trials, key=seed)
    sim_s = time.perf_counter() - start
    grid = [GRID_START * 2**k for k in range(64) if GRID_START * 2**k <= max_trials]
    per_size = []
    start = time.perf_counter()
    for n in grid:
        sub = advsim.Scores(scores.canary_in[:n], scores.canary_out[:n])
        cert = certify_violation(sub, "heuristic", acc, delta=delta, confidence=CONFIDENCE)
        per_size.append((n, cert))
    cert_s = time.perf_counter() - start
    # The same runs against the heuristic's maximum over horizons (Section 4.1).
    start_max = time.perf_counter()
    cert_max = certify_violation(
        scores, "heuristic_max_over_steps", acc, delta=delta, confidence=CONFIDENCE
    )
    max_s = time.perf_counter() - start_max
    ok = [n for n, c in per_size if c.certified]
    needed = ok[0] if ok else None
    stable = needed is not None and all(c.certified for n, c in per_size if n >= needed)
    final = per_size[-1][1]
    return dict(
        construction=name,
        parameters=_params(acc),
        delta=delta,
        max_trials=max_trials,
        certified=final.certified,
        trials_needed=needed,
        certified_at_every_larger_size=stable,
        sigma_star=final.sigma_star,
        heuristic_equivalent_eps=final.eps_equivalent,
        heuristic_eps=heuristic_epsilon(
            delta,
            acc.steps,
            acc.sampling_prob,
            acc.noise_multiplier,
            canary_steps=acc.num_canary_steps,
        ),
        exact_eps=float(mech.exact_epsilon(delta)),
        grid=[n for n, _ in per_size],
        certified_by_size=[bool(c.certified) for _, c in per_size],
        sigma_star_by_size=[c.sigma_star for _, c in per_size],
        certified_max_over_steps=cert_max.certified,
        sigma_star_max_over_steps=cert_max.sigma_star,
        heuristic_max_eps=heuristic_epsilon_max_over_steps(
            delta, acc.steps, acc.sampling_prob, acc.noise_multiplier
        ),
        statement=final.statement,
        statement_max_over_steps=cert_max.statement,
        certificate=final.to_dict(),
        simulate_s=sim_s,
        certify_s=cert_s,
        certify_max_over_steps_s=max_s,
    )


def _held_out_size_needed(alpha, beta, curve, level) -> float:
    """Smallest held-out size h (runs per world) with the expected-count test certified."""
    from advsim.audits._threshold import clopper_pearson_upper

    def ok(h):
        h = int(h)
        a_up = clopper_pearson_upper(np.rint(alpha * h).astype(np.int64), h, level)
        b_up = clopper_pearson_upper(np.rint(beta * h).astype(np.int64), h, level)
        return bool(b_up < curve(a_up))

    lo, hi = 10.0, 10.0
    while not ok(hi):
        lo, hi = hi, hi * 4
        if hi > 1e18:
            return math.inf
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _quadratic_analysis() -> dict:
    """Trials the quadratic regularizer (alpha = 1/2, T = 3, q = 0.1, sigma = 1) needs."""
    from advsim.bounds import heuristic_epsilon, mixture_tradeoff
    from advsim.bounds._violation_curves import heuristic_curve_lower
    from advsim.mechanisms import quadratic_exact_epsilon
    from advsim.mechanisms._quadratic_bound import quadratic_law

    steps, q, sigma, a_reg, delta = 3, 0.1, 1.0, 0.5, 1e-6
    support, probs, scale, rounded = quadratic_law(steps, q, sigma, a_reg, rounding="exact")
    assert not rounded
    curve = heuristic_curve_lower(steps, q, sigma)
    alpha = np.unique(
        np.concatenate([np.geomspace(1e-9, 0.5, 4000), 1 - np.geomspace(1e-9, 0.5, 400)])
    )
    beta = mixture_tradeoff(alpha, support, probs, scale)  # the release's exact curve
    level = (1.0 - CONFIDENCE) / 2.0
    out = dict(
        parameters=f"alpha=0.5, T={steps}, q={q:g}, sigma={sigma:g}",
        delta=delta,
        exact_eps=quadratic_exact_epsilon(delta, steps, q, sigma, a_reg),
        heuristic_eps=heuristic_epsilon(delta, steps, q, sigma),
    )
    for orient, (a, b) in {
        "canary_out_null": (alpha, beta),
        "canary_in_null": (beta, alpha),
    }.items():
        gap = curve(a) - b
        i = int(np.argmax(gap))
        best = (math.inf, None)
        if gap[i] > 0:
            # Only where the gap is within a factor 10 of its largest: elsewhere it is
            # smaller and the needed size (~ 1 / gap^2) larger.
            for j in np.flatnonzero(gap > gap[i] / 10):
                h = _held_out_size_needed(a[j], b[j], curve, level)
                if h < best[0]:
                    best = (h, j)
        h, j = best
        out[orient] = dict(
            max_gap=float(gap[i]),
            alpha_at_max_gap=float(a[i]),
            beta_at_max_gap=float(b[i]),
            held_out_runs_needed=None if j is None else float(h),
            trials_per_world_needed=None if j is None else float(2 * h),
            alpha_best=None if j is None else float(a[j]),
            beta_best=None if j is None else float(b[j]),
        )
    return out


def _linear_repeats(repeats, trials) -> dict:
    import advsim
    from advsim.adversaries import ProjectionScore
    from advsim.audits import certify_violation
    from advsim.mechanisms import LinearProcess

    mech = LinearProcess(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
    acc = mech.accounting()
    start = time.perf_counter()
    certified, stars = 0, []
    for r in range(repeats):
        s = advsim.simulate(mech, ProjectionScore(), trials, key=10_000 + r)
        cert = certify_violation(s, "heuristic", acc, confidence=CONFIDENCE, seed=r)
        certified += cert.certified
        stars.append(cert.sigma_star)
    allowed = int(scipy.stats.binom.ppf(0.999, repeats, 1 - CONFIDENCE))
    finite = [x for x in stars if x is not None]
    return dict(
        parameters=_params(acc),
        repeats=repeats,
        trials=trials,
        false_certifications=int(certified),
        allowed=allowed,
        passed=bool(certified <= allowed),
        sigma_star_min=min(finite) if finite else None,
        sigma_star_median=float(np.median(finite)) if finite else None,
        wall_s=time.perf_counter() - start,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/8 of the trials")
    parser.add_argument("--out", default="advsim-results/certify", help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="simulation key")
    parser.add_argument("--repeats", type=int, default=100, help="linear-process repeats")
    args = parser.parse_args(argv)

    from advsim._io import provenance, write_csv, write_json

    t0 = time.perf_counter()
    scale = 8 if args.quick else 1
    max_trials = {
        "zeroing regularizer (4.1)": 1_024_000,
        "history regularizer, v=30 (4.3)": 512_000,
        "malicious repeaters (App. C)": 512_000,
    }
    rows = []
    for name, mech, adversary, delta in _constructions():
        row = _certify_grid(name, mech, adversary, delta, max_trials[name] // scale, args.seed)
        rows.append(row)
        print(
            f"{name}: certified {row['certified']}, needed {row['trials_needed']} "
            f"({row['simulate_s']:.0f} s simulate, {row['certify_s']:.0f} s certify)",
            flush=True,
        )
    quad = _quadratic_analysis()
    linear = _linear_repeats(args.repeats, 100_000 // scale)
    total = time.perf_counter() - t0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    columns = [
        "construction",
        "parameters",
        "delta",
        "max_trials",
        "certified",
        "trials_needed",
        "certified_at_every_larger_size",
        "sigma_star",
        "heuristic_equivalent_eps",
        "heuristic_eps",
        "certified_max_over_steps",
        "sigma_star_max_over_steps",
        "heuristic_max_eps",
        "exact_eps",
        "simulate_s",
        "certify_s",
    ]
    write_csv(out / "certify_counterexamples.csv", rows, columns)
    write_json(
        out / "certify_counterexamples.json",
        {
            "rows": rows,
            "quadratic": quad,
            "linear_process": linear,
            "confidence": CONFIDENCE,
            "wall_s": total,
            "provenance": provenance(vars(args)),
        },
    )

    print(f"\nCertified against the heuristic at the run's own sigma (confidence {CONFIDENCE})")
    head = (
        "construction",
        "parameters",
        "trials/world",
        "certified",
        "trials needed",
        "sigma*",
        "heur.-equiv. eps",
        "heuristic eps",
        "max-over-t: certified (sigma*)",
        "max_t eps_t",
        "exact eps",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        needed = "-" if r["trials_needed"] is None else f"{r['trials_needed']:,}"
        if r["trials_needed"] is not None and not r["certified_at_every_larger_size"]:
            needed += " (not at every larger size)"
        star = "-" if r["sigma_star"] is None else f"{r['sigma_star']:.3f}"
        smax = r["sigma_star_max_over_steps"]
        star_max = "-" if smax is None else f"{smax:.3f}"
        eq = (
            "-" if r["heuristic_equivalent_eps"] is None else f"{r['heuristic_equivalent_eps']:.3f}"
        )
        print(
            f"| {r['construction']} | {r['parameters']} | {r['max_trials']:,} | "
            f"{r['certified']} | {needed} | {star} | {eq} | {r['heuristic_eps']:.3f} | "
            f"{r['certified_max_over_steps']} ({star_max}) | {r['heuristic_max_eps']:.3f} | "
            f"{r['exact_eps']:.3f} |"
        )
    print(
        f"\nquadratic regularizer ({quad['parameters']}, delta {quad['delta']:g}): exact eps "
        f"{quad['exact_eps']:.4f} vs heuristic {quad['heuristic_eps']:.4f}"
    )
    for orient in ("canary_out_null", "canary_in_null"):
        o = quad[orient]
        need = o["trials_per_world_needed"]
        print(
            f"  {orient}: largest gap f_H - beta = {o['max_gap']:.3g} at alpha = "
            f"{o['alpha_at_max_gap']:.3g}, beta = {o['beta_at_max_gap']:.4g}; trials per world "
            f"needed ~ {need:.3g}"
            if need is not None
            else f"  {orient}: no gap (not violated)"
        )
    print(
        f"\nlinear process ({linear['parameters']}), {linear['repeats']} repeats of "
        f"{linear['trials']:,} runs: {linear['false_certifications']} false certifications "
        f"(allowed {linear['allowed']}); sigma* median {linear['sigma_star_median']}"
    )
    print(f"\ntotal {total:.0f} s; wrote {out}/certify_counterexamples.json and .csv")


if __name__ == "__main__":
    main()

"""Certified counterexamples to the last-iterate heuristic, with the trials they need.

For each construction of `params.constructions` (Section 4 / Appendix C of
arXiv:2410.06186, mechanism and adversary by class path as in sweeps) the last model is
simulated and `advsim.audits.certify_violation(scores, "heuristic", accounting)` asks
whether the release's trade-off curve certifiably lies below the heuristic's curve at the
run's own noise multiplier (held-out Clopper-Pearson, assumption-free). Whether one
simulation certifies is a random event, so the table states power, not one draw: each
construction is simulated with `seeds` independent seeds (`seed`, `seed + 1`, ...) of
`max_trials` runs per world, each certified on nested prefixes of sizes in the doubling
grid `grid_start * 2^k` (run i of a world is the same run at every size), and
`trials_needed` is the smallest size at which at least `power` (90%) of the seeds certify
(None when no size in the grid reaches it), printed with that fraction
(`certified_fraction_at_needed`) and the fraction at `max_trials`
(`certified_fraction`); the table `certificates_power` has the fraction of seeds certified
at every size (`certified_at_<n>`, blank beyond a construction's `max_trials`).
`sigma_star_median` is the median over the seeds (at `max_trials`) of the smallest noise
multiplier whose heuristic curve is certifiably violated (a seed that finds none counts as
+inf), and `heuristic_curve_index_eps_equiv` the median over the seeds of the certificates'
`eps_equivalent`, the epsilon the heuristic reports at their sigma*: an index of the
violated curve on the heuristic's epsilon scale, NOT an epsilon of the release (beside
`exact_eps` it would read as one). An uncertified seed has no index and counts as below
every index, so the column is blank (None) unless more than half of the seeds certify.
The max-over-steps columns (`certified_fraction_max_over_steps`, its median sigma*) come
from the first `seeds_max_over_steps` seeds at `max_trials` (all seeds unless the figure
file says fewer, at least one: each certificate evaluates T horizons' curves, a few
seconds of CPU apiece).

The quadratic regularizer (`params.quadratic`; Section 4.2's example, exact eps 2.2749 vs
heuristic 2.222) is not simulated: its exact law (`quadratic_law`) gives its true curve
(`mixture_tradeoff`), and the trials a held-out certificate needs are the smallest held-out
size h with CP_up(round(h beta(alpha)), h) < f_H(CP_up(round(h alpha), h)) at the best type-I
error alpha (f_H the heuristic's lower curve, expected counts); a world then needs about 2h
runs (the other half chooses the threshold, assumed perfect here: optimistic by that much).

The linear process (`params.linear`: the heuristic's tight case, Theorem 1) is certified
against its own heuristic in independent repeats: the count of (false) certifications must
not exceed the 0.999-quantile of Binomial(repeats, 1 - confidence).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.stats

import advsim
from advsim.adversaries import ProjectionScore
from advsim.audits import certify_violation, clopper_pearson_upper
from advsim.bounds import (
    heuristic_epsilon,
    heuristic_epsilon_max_over_steps,
    mixture_tradeoff,
    quadratic_law,
)
from advsim.bounds._violation_curves import heuristic_curve_lower
from advsim.figures import CLOSED_FORM, exact_with_error
from advsim.mechanisms import LinearProcess, quadratic_exact_epsilon
from advsim.sweep import resolve

__all__ = ["compute_certificates"]


def _parameters(acc) -> str:
    return f"T={acc.steps}, q={acc.sampling_prob:g}, sigma={acc.noise_multiplier:g}"


def _certify_grid(
    spec: dict,
    confidence: float,
    grid_start: int,
    seed: int,
    exact_grid: float | None = None,
    *,
    seeds: int = 1,
    power: float = 0.9,
    seeds_max_over_steps: int | None = None,
) -> dict:
    mech = resolve("mechanism", spec["mechanism"]).build(**spec["params"])
    adversary = resolve("adversary", spec["adversary"]).build()
    acc, delta, max_trials = mech.accounting(), spec["delta"], spec["max_trials"]
    grid = [grid_start * 2**k for k in range(64) if grid_start * 2**k <= max_trials]
    simulate_s = certify_s = 0.0
    certified, at_max, over_steps = [], [], []
    n_over = seeds if seeds_max_over_steps is None else max(1, min(seeds, seeds_max_over_steps))
    for s in range(seeds):
        start = time.perf_counter()
        scores = advsim.simulate(mech, adversary, max_trials, key=seed + s)
        simulate_s, start = simulate_s + time.perf_counter() - start, time.perf_counter()
        certificates = [
            certify_violation(
                advsim.Scores(scores.canary_in[:n], scores.canary_out[:n]), "heuristic", acc,
                delta=delta, confidence=confidence,
            )
            for n in grid
        ]  # fmt: skip
        certified.append([c.certified for c in certificates])
        # The same runs against the heuristic's maximum over horizons (Section 4.1).
        if s < n_over:
            over_steps.append(
                certify_violation(
                    scores, "heuristic_max_over_steps", acc, delta=delta, confidence=confidence
                )
            )
        certify_s += time.perf_counter() - start
        at_max.append(certificates[-1])
    first = at_max[0]
    fractions = np.mean(np.asarray(certified, dtype=float), axis=0)
    reached = [i for i, f in enumerate(fractions) if f >= power]
    needed = grid[reached[0]] if reached else None
    args = (delta, acc.steps, acc.sampling_prob, acc.noise_multiplier)
    return dict(
        construction=spec["construction"], parameters=_parameters(acc), delta=delta,
        max_trials=max_trials, seeds=seeds, power=power, trials_needed=needed,
        certified_fraction_at_needed=float(fractions[reached[0]]) if reached else None,
        certified_fraction=float(fractions[-1]),
        certified_fractions={n: float(f) for n, f in zip(grid, fractions, strict=True)},
        sigma_star_median=_median_sigma_star(at_max),
        heuristic_curve_index_eps_equiv=_median_index(at_max),
        heuristic_eps=heuristic_epsilon(*args, canary_steps=acc.num_canary_steps),
        seeds_max_over_steps=len(over_steps),
        certified_fraction_max_over_steps=float(np.mean([c.certified for c in over_steps])),
        sigma_star_median_max_over_steps=_median_sigma_star(over_steps),
        heuristic_max_eps=heuristic_epsilon_max_over_steps(*args),
        **_exact_eps(exact_with_error(spec, mech, delta, exact_grid)),
        statement=first.statement,
        statement_max_over_steps=over_steps[0].statement, simulate_s=simulate_s,
        certify_s=certify_s,
    )  # fmt: skip


def _exact_eps(exact: dict) -> dict:
    """`exact_with_error`'s columns as this table names them (`exact_eps`)."""
    return {"exact_eps": exact["exact"], "exact_error": exact["exact_error"],
            "exact_error_kind": exact["exact_error_kind"]}  # fmt: skip


def _median_sigma_star(certificates) -> float | None:
    """Median sigma* over seeds; a seed whose search found none counts as +inf."""
    stars = [math.inf if c.sigma_star is None else c.sigma_star for c in certificates]
    median = float(np.median(stars))
    return median if math.isfinite(median) else None


def _median_index(certificates) -> float | None:
    """Median curve index eps_equiv over seeds; an uncertified seed has none (-inf), so
    None unless more than half of the seeds certify."""
    index = [
        c.eps_equivalent if c.certified and c.eps_equivalent is not None else -math.inf
        for c in certificates
    ]
    median = float(np.median(index))
    return median if math.isfinite(median) else None


def _power_rows(certificates: list[dict]) -> list[dict]:
    """One row per construction: the fraction of seeds certified at every size of the
    grid (`certified_at_<n>`, None beyond the construction's `max_trials`)."""
    sizes = sorted({n for row in certificates for n in row["certified_fractions"]})
    return [
        {
            "construction": row["construction"],
            "seeds": row["seeds"],
            **{f"certified_at_{n}": row["certified_fractions"].get(n) for n in sizes},
        }
        for row in certificates
    ]


def _held_out_size_needed(alpha, beta, curve, level) -> float:
    """Smallest held-out size h (runs per world) with the expected-count test certified."""

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


def _quadratic(p: dict, confidence: float) -> list[dict]:
    """The trials a held-out certificate of the quadratic regularizer needs, per orientation."""
    steps, q, sigma, reg, delta = p["steps"], p["sampling_prob"], p["noise_multiplier"], p[
        "alpha"], p["delta"]  # fmt: skip
    support, probs, scale, rounded = quadratic_law(steps, q, sigma, reg, rounding="exact")
    assert not rounded
    curve = heuristic_curve_lower(steps, q, sigma)
    alpha = np.unique(
        np.concatenate([np.geomspace(1e-9, 0.5, 4000), 1 - np.geomspace(1e-9, 0.5, 400)])
    )
    beta = mixture_tradeoff(alpha, support, probs, scale)  # the release's exact curve
    level, rows = (1.0 - confidence) / 2.0, []
    common = dict(
        parameters=f"alpha={reg:g}, T={steps}, q={q:g}, sigma={sigma:g}", delta=delta,
        exact_eps=quadratic_exact_epsilon(delta, steps, q, sigma, reg), exact_error=0.0,
        exact_error_kind=CLOSED_FORM,
        heuristic_eps=heuristic_epsilon(delta, steps, q, sigma),
    )  # fmt: skip
    for orientation, (a, b) in (("canary_out_null", (alpha, beta)),
                                ("canary_in_null", (beta, alpha))):  # fmt: skip
        gap = curve(a) - b
        i = int(np.argmax(gap))
        best_h, best_j = math.inf, None
        # Only where the gap is within a factor 10 of its largest: elsewhere it is smaller
        # and the needed size (~ 1 / gap^2) larger.
        for j in np.flatnonzero(gap > gap[i] / 10) if gap[i] > 0 else ():
            h = _held_out_size_needed(a[j], b[j], curve, level)
            best_h, best_j = (h, j) if h < best_h else (best_h, best_j)
        found = best_j is not None
        rows.append(
            dict(
                orientation=orientation, **common, max_gap=float(gap[i]),
                alpha_at_max_gap=float(a[i]), beta_at_max_gap=float(b[i]),
                held_out_runs_needed=float(best_h) if found else None,
                trials_per_world_needed=float(2 * best_h) if found else None,
                alpha_best=float(a[best_j]) if found else None,
                beta_best=float(b[best_j]) if found else None,
            )
        )  # fmt: skip
    return rows


def _linear(p: dict, confidence: float, divisor: int) -> dict:
    """False certifications of the linear process against its own (tight) heuristic."""
    mech = LinearProcess(p["steps"], p["sampling_prob"], p["noise_multiplier"])
    acc, start, certified, stars = mech.accounting(), time.perf_counter(), 0, []
    trials = p["trials"] // divisor
    for r in range(p["repeats"]):
        scores = advsim.simulate(mech, ProjectionScore(), trials, key=10_000 + r)
        cert = certify_violation(scores, "heuristic", acc, confidence=confidence, seed=r)
        certified += cert.certified
        stars.append(cert.sigma_star)
    allowed = int(scipy.stats.binom.ppf(0.999, p["repeats"], 1 - confidence))
    finite = [x for x in stars if x is not None]
    return dict(
        parameters=_parameters(acc), repeats=p["repeats"], trials=trials,
        false_certifications=int(certified), allowed=allowed, passed=certified <= allowed,
        sigma_star_min=min(finite) if finite else None,
        sigma_star_median=float(np.median(finite)) if finite else None,
        wall_time_s=time.perf_counter() - start,
    )  # fmt: skip


def compute_certificates(fig, rows):
    """The three tables: `certificates`, `quadratic` and `linear_process` (see the module)."""
    p = fig.params
    certificates = []
    for spec in p["constructions"]:
        spec = dict(spec, max_trials=spec["max_trials"] // p["trials_divisor"])
        row = _certify_grid(
            spec,
            p["confidence"],
            p["grid_start"],
            p["seed"],
            p.get("exact_discretization"),
            seeds=p.get("seeds", 1),
            power=p.get("power", 0.9),
            seeds_max_over_steps=p.get("seeds_max_over_steps"),
        )
        note = f"needed {row['trials_needed']} ({row['simulate_s']:.0f} s simulate)"
        print(
            f"{row['construction']}: certified by {row['certified_fraction']:.0%} of "
            f"{row['seeds']} seeds at {row['max_trials']}, {note}",
            flush=True,
        )
        certificates.append(row)
    return {
        "certificates": certificates,
        "certificates_power": _power_rows(certificates),
        "quadratic": _quadratic(p["quadratic"], p["confidence"]),
        "linear_process": [_linear(p["linear"], p["confidence"], p["trials_divisor"])],
    }

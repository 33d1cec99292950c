"""Auditing with few runs: one-run audits against the exact epsilon, as a table.

For the separate-coordinate mechanism (`OneRunGradientCanaries`, m gradient canaries on
their own coordinates, each in the one run with probability 1/2), whose per-canary eps is
known exactly (mu-GDP with mu = sqrt(T) / sigma for a fixed batch), each row repeats one
audit `repeats` times on independent simulations and reports the median `eps_lower` (and
its share of the exact eps, `exact_share`), how
many repeats exceed the exact eps, and the allowance: the 0.999-quantile of
Binomial(repeats, 1 - confidence) (the rule of `advsim.testing.Calibration`). Rows per m:

- `one_run` (Steinke, Nasr & Jagielski 2023, `audits.one_run_audit`, k+/k- Bonferroni
  over the default grid, a bound that assumes nothing): 1 training run of m canaries;
- `one_run_split`: the same with k+/k- chosen on a held-out half of the canaries;
- `one_run_fdp` (Mahloujifar, Melis & Chaudhuri 2024, `audits.one_run_fdp_audit`): the
  Gaussian trade-off claim rejected on the same guesses (k- = 0, Bonferroni over k+), its
  mu_lower read as eps: an (eps, delta) bound because this run's curve is exactly G_mu;
- `one_run_order` (Xiang et al. 2025, arXiv:2509.08704, `audits.one_run_order_audit`):
  the order-statistics tail of the mistakes among all m guesses (sign of the score
  centred at the median of the run's scores) against the Gaussian channels, mu_lower read
  as eps (an (eps, delta) bound because this run's curve is exactly G_mu);
- `one_run_fdp_heuristic`, `one_run_fdp_composition`: the same guesses against the
  heuristic's and composition's curves at the run's T and q (`bound=`, `accounting=`):
  the smallest noise multiplier sigma* whose curve is rejected, read as that bound's eps
  at delta (an (eps, delta) bound because this run's curve is exactly the bound's at its
  sigma; at q = 1 both curves are G_{sqrt(T)/sigma}, so these rows check the numerical
  curves against the closed-form row above: they may only be lower);
- `eps_delta` (`audits.EpsDeltaAudit`, threshold chosen on a held-out half): the ordinary
  audit of one canary (`GradientCanary`, the same T, sigma, C, fixed batch) with m runs
  per world, i.e. 2m training runs.

The simulations run the engine (`advsim.one_run.simulate_one_run`, `advsim.simulate`).
Its inclusion bits are fair coins drawn by the simulation itself, so the audits' balance
test of the bits is skipped (`coin_level=None`; `OneRunScores.audit` does the same).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.stats

import advsim
from advsim.adversaries import ProjectionScore
from advsim.audits import EpsDeltaAudit, one_run_fdp_audit, one_run_order_audit
from advsim.figures import CLOSED_FORM
from advsim.mechanisms import GradientCanary, OneRunGradientCanaries
from advsim.one_run import simulate_one_run

__all__ = ["compute_one_run"]


def _row(m, method, runs, truth, results, confidence, start) -> dict:
    """One table row from the repeats' results (their eps_lower, and what it certifies)."""
    labels = sorted({r.guarantee.label for r in results})
    eps = np.asarray([r.eps_lower for r in results], float)
    over = int(np.sum(eps > truth * (1 + 1e-9)))
    allowed = int(scipy.stats.binom.ppf(0.999, eps.size, 1 - confidence))
    return dict(
        m=m,
        method=method,
        guarantee="/".join(labels),
        # no one-run audit checks its assumption (the f-DP rows assume their curve): n/a
        assumption_rejected=None,
        training_runs=runs,
        exact_eps=truth,
        # mu-GDP's eps (fixed batch): a closed form, solved to float64 precision
        exact_error=0.0,
        exact_error_kind=CLOSED_FORM,
        median_eps_lower=float(np.median(eps)),
        exact_share=float(np.median(eps)) / truth,
        max_eps_lower=float(np.max(eps)),
        over=over,
        allowed=allowed,
        repeats=int(eps.size),
        check="pass" if over <= allowed else "FAIL",
        wall_time_s=round(time.perf_counter() - start, 1),
    )


def compute_one_run(figure, rows) -> dict:
    """`{"one_run": rows}`: per m, the one-run audits and the ordinary audit (module doc)."""
    p = figure.params
    delta, confidence, repeats = p["delta"], p["confidence"], p["repeats"]
    steps, sigma, seed = p["steps"], p["noise_multiplier"], p.get("seed", 0)
    out = []
    for m in p["num_canaries"]:
        # a fixed batch (the default): each canary's eps is mu-GDP's, mu = sqrt(T) / sigma
        mech = OneRunGradientCanaries(steps=steps, noise_multiplier=sigma, num_canaries=m)
        truth = mech.epsilon(delta)
        acc = mech.accounting()
        start = time.perf_counter()
        sims = simulate_one_run(mech, repeats, key=seed + m, batch=p.get("batch", 64))
        for method, selection in (("one_run", "bonferroni"), ("one_run_split", "split")):
            t0 = time.perf_counter()
            results = sims.audit(delta=delta, confidence=confidence, k_selection=selection)
            row = _row(m, method, 1, truth, results, confidence, start)
            row["wall_time_s"] = round(row["wall_time_s"] + time.perf_counter() - t0, 1)
            out.append(row)
            start = time.perf_counter()
        t0 = time.perf_counter()
        results = [
            one_run_fdp_audit(a, b, delta=delta, confidence=confidence, coin_level=None)
            for a, b in zip(sims.scores, sims.included, strict=True)
        ]
        out.append(_row(m, "one_run_fdp", 1, truth, results, confidence, t0))
        # Xiang et al.'s order statistics on all m guesses, the sign of the score centred at
        # the median of all scores (a function of the run's output, not of the bits).
        t0 = time.perf_counter()
        results = [
            one_run_order_audit(a - np.median(a), b, delta=delta, confidence=confidence)
            for a, b in zip(sims.scores, sims.included, strict=True)
        ]
        out.append(_row(m, "one_run_order", 1, truth, results, confidence, t0))
        # The same guesses against the bounds' curves at the run's T, q (sigma* searched):
        # each canary's curve is the heuristic's (and composition's, at q = 1) at sigma.
        for bound in ("heuristic", "composition"):
            t0 = time.perf_counter()
            results = [
                one_run_fdp_audit(
                    a,
                    b,
                    delta=delta,
                    confidence=confidence,
                    bound=bound,
                    accounting=acc,
                    coin_level=None,
                )
                for a, b in zip(sims.scores, sims.included, strict=True)
            ]
            out.append(_row(m, f"one_run_fdp_{bound}", 1, truth, results, confidence, t0))
        # The ordinary audit: one canary, m runs per world, repeat i from runs
        # [i m, (i + 1) m) of one simulation (run i depends on its index alone).
        start = time.perf_counter()
        single = GradientCanary(
            steps=steps,
            sampling_prob=1.0,
            noise_multiplier=sigma,
            dim=1,
            batching="fixed",
        )
        scores = advsim.simulate(single, ProjectionScore(), m * repeats, key=seed + 7 * m)
        cin = np.asarray(scores.canary_in).reshape(repeats, m)
        cout = np.asarray(scores.canary_out).reshape(repeats, m)
        auditor = EpsDeltaAudit(confidence=confidence)
        results = [
            auditor(advsim.Scores(a, b), delta=delta) for a, b in zip(cin, cout, strict=True)
        ]
        out.append(_row(m, "eps_delta", 2 * m, truth, results, confidence, start))
    return {"one_run": out}

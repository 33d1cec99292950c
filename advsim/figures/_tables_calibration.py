"""Calibration of the audits where CI cannot afford it, and the overshoot of assumption-based ones.

Each row repeats one audit on independent simulated score sets of a mechanism whose exact
epsilon is known and counts the repeats whose `eps_lower` exceeds it. An audit whose
`eps_lower` is an (eps, delta) lower bound at confidence c exceeds the truth with
probability at most 1 - c, so the count must stay within the 0.999-quantile of
Binomial(repeats, 1 - c) (the rule of `advsim.testing.Calibration`); `check` is "pass" or
"FAIL" for those rows (`claimed` True). Rows:

- "tradeoff" at its default configuration (Algorithm 2's grid 0.5, ..., 20; too slow for
  CI, which calibrates it with a one-point grid in tests/properties/test_audit_calibration.py)
  on the threshold landscape (`params.landscape`) and on the linear process
  (`params.linear`; before its eps_lower became an (eps, delta) bound it exceeded the truth
  in 30 of 30 and 9 of 10 repeats there);
- measurements, not claims: "gdp" and "family" on the landscape, where their assumptions
  (a Gaussian trade-off curve; the heuristic's family) do not hold and their eps_lower is
  known to exceed the exact epsilon. `check` is "measured" for these rows, with the
  fraction over the truth, the median ratio to it and how often the audit's assumption
  check rejected. "family" is measured at B = 1 only: for B > 1 the landscape's steps
  after the first are 1/B of the first (`Accounting.step_sizes`), a learning-rate
  schedule, which the family audit refuses (its family has a constant rate); those rows
  are left out and the run prints which, with the audit's reason.

Exact references (`truth`, with its error and the kind of that error beside it):
`advsim.mechanisms.landscape_law` (the landscape's exact grid law; a refinement estimate)
and `heuristic_epsilon` (Theorem 1 of arXiv:2410.06186: exact for the linear process; a
closed form). `eps_cap` is the largest eps_lower the (eps, delta) inequalities can give
at that sample size and confidence (zero errors on the held-out half, Clopper-Pearson at
(1 - c) / 4 for "tradeoff"'s up to 2 held-out thresholds): a truth below it can be
exceeded, so the row can fail. Each row is a file in OUT/cells/, reused with --resume.

`compute_point_estimate_bias` measures the point estimate the same way: `eps_point` is the
audit's own rule read from raw (not bounded) rates at the threshold chosen for `eps_lower`,
counted on the same held-out runs (None when a count there is below `min_count`); per case
the median and the 10%/90% quantiles of eps_point / truth, how often it is undefined, and
how often it lies above the composition bound (an estimate outside the possible range).
"""

from __future__ import annotations

import json
import math
import time
import warnings

import numpy as np
import scipy.stats

import advsim
from advsim import Scores
from advsim._io import write_json
from advsim.adversaries import ProjectionScore, ThresholdAdversary
from advsim.audits import AssumptionRejectedWarning, audit, get_audit
from advsim.bounds import composition_epsilon, gdp_epsilon, heuristic_epsilon
from advsim.exact import ERROR_KIND
from advsim.figures import CLOSED_FORM
from advsim.mechanisms import LinearProcess, ThresholdLandscape, landscape_law
from advsim.testing import simulation_sampler

__all__ = [
    "compute_calibration",
    "compute_point_estimate_bias",
    "eps_delta_cap",
    "linear_law_sampler",
]


def eps_delta_cap(trials: int, confidence: float, delta: float, tests: int = 1) -> float:
    """log((1 - delta - u) / u), u the Clopper-Pearson upper bound with 0 errors in the
    held-out n - n // 2 runs at level (1 - c) / (2 tests)."""
    m = trials - trials // 2
    u = float(scipy.stats.beta.ppf(1.0 - (1.0 - confidence) / (2.0 * tests), 1, m))
    return math.log((1.0 - delta - u) / u)


def linear_law_sampler(steps: int, q: float, sigma: float, trials: int):
    """Binomial(T, q) + N(0, T sigma^2) vs N(0, T sigma^2): the linear process's projection
    score (Theorem 1 of arXiv:2410.06186), drawn with numpy; `sample(seed) -> Scores`."""
    scale = math.sqrt(steps) * sigma

    def sample(seed: int) -> Scores:
        rng = np.random.default_rng(seed)
        cin = rng.binomial(steps, q, trials) + rng.normal(0.0, scale, trials)
        return Scores(cin, rng.normal(0.0, scale, trials))

    return sample


#: What `eps_cap` is (`eps_delta_cap`).
CAP_KIND = (
    "diagnostic: the largest eps_lower the audit can give at this sample size and "
    "confidence (zero errors on the held-out half), not an epsilon of the mechanism"
)


def _rows(p: dict) -> tuple[list[dict], list[str]]:
    """Each row (scenario, sampler factory, accounting, truth with its error and kind,
    trials, method, repeats, claim), and a line for each (scenario, method) left out
    because the method refuses the scenario's accounting, saying why."""
    rows, refused, land, lin, delta = [], [], p["landscape"], p["linear"], p["delta"]
    for b in land["batch_sizes"]:
        for t in land["steps"]:
            sigma, n = land["noise_multiplier"], land["trials"]
            mech = ThresholdLandscape(steps=t, noise_multiplier=sigma, batch_size=b)
            law = landscape_law(delta, t, sigma, b)
            base = dict(
                scenario=f"landscape_B{b}_T{t}", accounting=mech.accounting(),
                sampler=lambda m=mech, n=n: simulation_sampler(m, ThresholdAdversary(), n),
                truth=law.epsilon, truth_error=law.error, truth_error_kind=ERROR_KIND, trials=n,
            )  # fmt: skip
            for method, repeats in land["repeats"].items():
                why = _refusal(method, base["accounting"])
                if why is not None:
                    refused.append(f"{base['scenario']} {method}: not measured: {why}")
                    continue
                rows.append({**base, "method": method, "repeats": repeats,
                             "claim": method == "tradeoff"})  # fmt: skip
    steps, q, sigma, trials = lin["steps"], lin["sampling_prob"], lin["noise_multiplier"], lin[
        "trials"]  # fmt: skip
    rows.append(dict(
        scenario=f"linear_T{steps}_q{q:g}_{trials}",
        sampler=lambda: linear_law_sampler(steps, q, sigma, trials),
        accounting=LinearProcess(steps, q, sigma).accounting(),
        truth=heuristic_epsilon(delta, steps, q, sigma, canary_steps=steps), trials=trials,
        truth_error=0.0, truth_error_kind=CLOSED_FORM,
        method="tradeoff", repeats=lin["repeats"], claim=True,
    ))  # fmt: skip
    return rows, refused


def _refusal(method: str, accounting) -> str | None:
    """The audit's own reason to refuse a run of `accounting` (its `context` raising
    ValueError), or None."""
    try:
        get_audit(method).context(accounting)
    except ValueError as err:
        return str(err)
    return None


def _run(row: dict, confidence: float, delta: float) -> dict:
    sample = row["sampler"]()
    eps, rejected, failing, start = [], 0, 0, time.perf_counter()
    labels = set()
    for i in range(row["repeats"]):
        auditor = get_audit(row["method"], confidence=confidence, seed=i)
        with warnings.catch_warnings():
            # Measured here (assumption_rejected below), not an error.
            warnings.simplefilter("ignore", AssumptionRejectedWarning)
            r = auditor(sample(i), delta=delta, accounting=row["accounting"])
        e = 0.0 if r.eps_lower is None else float(r.eps_lower)
        eps.append(e)
        failing += e > row["truth"] * (1.0 + 1e-9)
        rejected += bool(r.assumption_rejected)
        labels.add(r.guarantee.label)
    repeats = row["repeats"]
    allowed = int(scipy.stats.binom.ppf(1.0 - 1e-3, repeats, 1.0 - confidence))
    tests = 2 if row["method"] == "tradeoff" else 1
    cap = eps_delta_cap(row["trials"], confidence, delta, tests)
    # A 95% Clopper-Pearson interval for the probability of exceeding the truth.
    low = 0.0 if failing == 0 else scipy.stats.beta.ppf(0.025, failing, repeats - failing + 1)
    high = 1.0
    if failing < repeats:
        high = scipy.stats.beta.ppf(0.975, failing + 1, repeats - failing)
    median = float(np.median(eps))
    check = ("pass" if failing <= allowed and row["truth"] < cap else "FAIL") if row[
        "claim"] else "measured"  # fmt: skip
    return dict(
        scenario=row["scenario"], method=row["method"], claimed=row["claim"],
        delta=delta, confidence=confidence, trials=row["trials"], repeats=repeats,
        truth=row["truth"], truth_error=row["truth_error"],
        truth_error_kind=row["truth_error_kind"],
        eps_cap=cap if row["method"] in ("tradeoff", "eps_delta") else None, eps_cap_kind=CAP_KIND,
        failures=failing, allowed=allowed, failure_ci_low=float(low),
        failure_ci_high=float(high), median_eps_lower=median, guarantee="/".join(sorted(labels)),
        median_over_truth=median / row["truth"], max_eps_lower=float(np.max(eps)),
        assumption_rejected=rejected, check=check, wall_time_s=time.perf_counter() - start,
    )  # fmt: skip


def compute_calibration(fig, rows):
    """The `calibration` table, one row per (scenario, method), each kept in OUT/cells/
    (written atomically; reused with --resume). A row whose `check` is "FAIL" (an audit
    claiming an (eps, delta) bound exceeded the truth more often than allowed) is also
    printed as such at the end."""
    p, table = fig.params, []
    cells = fig.out / "cells"
    cells.mkdir(parents=True, exist_ok=True)
    todo, refused = _rows(p)
    for row in todo:
        path = cells / f"{row['scenario']}-{row['method']}.json"
        if fig.resume and path.exists():
            table.append(json.loads(path.read_text()))
            continue
        rec = _run(row, p["confidence"], p["delta"])
        write_json(path, rec)
        table.append(rec)
        print(f"{rec['scenario']} {rec['method']}: {rec['failures']}/{rec['repeats']} over "
              f"{rec['truth']:.3f} (allowed {rec['allowed']}), median "
              f"{rec['median_eps_lower']:.3f} [{rec['check']}] ({rec['wall_time_s']:.0f} s)",
              flush=True)  # fmt: skip
    for line in refused:
        print(line, flush=True)
    for rec in table:
        if rec["check"] == "FAIL":
            times = f"{rec['failures']}/{rec['repeats']} times (allowed {rec['allowed']})"
            print(f"FAIL: {rec['scenario']} {rec['method']} exceeded the truth {times}")
    return {"calibration": table}


def _point_estimates(case: dict, delta: float):
    """(truth, composition, eps_point of each repeat or None) of one case."""
    if case["scores"] == "gaussian":  # N(mu, 1) vs N(0, 1): exactly mu-GDP
        truth = comp = gdp_epsilon(delta, case["mu"])
        accounting = None
    else:  # the linear process: exactly the heuristic (Theorem 1 of arXiv:2410.06186)
        mech = LinearProcess(case["steps"], case["sampling_prob"], case["noise_multiplier"])
        accounting = mech.accounting()
        args = (delta, accounting.steps, accounting.sampling_prob, accounting.noise_multiplier)
        truth, comp = heuristic_epsilon(*args), composition_epsilon(*args)
    points = []
    for rep in range(case["repeats"]):
        if accounting is None:
            rng = np.random.default_rng(rep)
            n = case["trials"]
            scores = Scores(rng.normal(case["mu"], 1.0, n), rng.normal(0.0, 1.0, n))
        else:
            scores = advsim.simulate(mech, ProjectionScore(), case["trials"], rep, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AssumptionRejectedWarning)  # measured elsewhere
            r = audit(scores, case["method"], delta=delta, seed=rep, accounting=accounting)
        points.append(r.eps_point)
    return truth, comp, points


def compute_point_estimate_bias(fig, rows):
    """The `point_estimate_bias` table, one row per case of `params.cases`."""
    table, delta = [], fig.params["delta"]
    for case in fig.params["cases"]:
        start = time.perf_counter()
        truth, comp, points = _point_estimates(case, delta)
        ratios = [e / truth for e in points if e is not None]
        q10, median, q90 = np.quantile(ratios, [0.1, 0.5, 0.9]) if ratios else [math.nan] * 3
        table.append(dict(
            method=case["method"], case=case["name"], trials=case["trials"],
            repeats=case["repeats"], truth=truth, truth_error=0.0,
            truth_error_kind=CLOSED_FORM, composition=comp, ratio_q10=float(q10),
            ratio_median=float(median), ratio_q90=float(q90),
            undefined=sum(e is None for e in points),
            above_composition=sum(e is not None and e > comp for e in points),
            wall_time_s=time.perf_counter() - start,
        ))  # fmt: skip
    return {"point_estimate_bias": table}

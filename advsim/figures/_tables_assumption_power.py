"""Power and false alarms of the audits' assumption checks (`advsim.audits.check_tradeoff_fit`).

Each repeat simulates `trials` runs per world (independent keys), splits each world in
halves exactly as the audits' default split does (`split_halves` with
`np.random.default_rng(0)`, in then out) and runs the check on the held-out half (what the
audits see), and also on all runs.

- Power (`params.power`): the threshold landscape (`ThresholdLandscape`,
  `ThresholdAdversary`, as in `advsim figure figure4`) for each batch size: the GDP check,
  and the family check with the landscape's accounting (one unsampled canary step, so the
  family is G_{1/(sqrt(T) sigma)}: the same null, solved by bisection instead of in closed
  form), with a two-sided 95% Clopper-Pearson interval on the power.
- Power on discrete scores (`params.discrete`), the GDP check: binary scores, 1 with
  probability 0.99 in and 0.01 out (the pair's exact eps is log 99 = 4.595 for any
  delta < 0.01), and Binomial(20, 0.6) vs Binomial(20, 0.5) (exact eps 3.636 at
  delta = 1e-5, from the hockey-stick divergence of the two pmfs); numpy draws.
- False alarms, where the null holds exactly (`params.null`): the GDP check on numpy
  N(mu, 1) vs N(0, 1) scores (at each of `gaussian_trials` runs per world) and on the
  linear process with q = 1; the family check on the linear process (`LinearProcess`,
  `ProjectionScore`) at each (T, q). Rejections must not exceed the 0.999-quantile of
  Binomial(repeats, level), the rule of tests/properties/test_audit_calibration.py (`ok`).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.stats

import advsim
from advsim.adversaries import ProjectionScore, ThresholdAdversary
from advsim.audits import check_gaussian_tradeoff, check_heuristic_family, split_halves
from advsim.mechanisms import LinearProcess, ThresholdLandscape
from advsim.testing import clopper_pearson_interval

__all__ = ["compute_assumption_power"]


def _held_out(cin: np.ndarray, cout: np.ndarray) -> tuple:
    """The counting halves of the audits' default split (seed 0: in first, then out)."""
    rng = np.random.default_rng(0)
    _, counted_in = split_halves(cin, rng)
    _, counted_out = split_halves(cout, rng)
    return counted_in, counted_out


def _gdp(cin, cout, level):
    return check_gaussian_tradeoff(cin, cout, level=level)


def _family(accounting):
    return lambda cin, cout, level: check_heuristic_family(cin, cout, accounting, level=level)


def _simulated(mech, adversary, trials: int):
    def sample(seed):
        s = advsim.simulate(mech, adversary, trials, seed, progress=False)
        return np.asarray(s.canary_in, np.float64), np.asarray(s.canary_out, np.float64)

    return sample


def _discrete(name: str, trials: int):
    """numpy draws of the discrete pairs of the module docstring."""

    def sample(seed):
        rng = np.random.default_rng(seed)
        if name == "binary":
            cin, cout = rng.random(trials) < 0.99, rng.random(trials) < 0.01
        else:
            cin, cout = rng.binomial(20, 0.6, trials), rng.binomial(20, 0.5, trials)
        return cin.astype(np.float64), cout.astype(np.float64)

    return sample


_DISCRETE_LABELS = {
    "binary": "binary 0.99 vs 0.01",
    "binomial": "Binomial(20, .6) vs Binomial(20, .5)",
}


def _cases(p: dict) -> list[tuple]:
    """(label, kind, sampler(seed) -> (cin, cout), {check name: fn}, runs per world,
    repeats)."""
    trials, power, null, cases = p["trials"], p["power"], p["null"], []
    sigma, steps = power["noise_multiplier"], power["steps"]
    for b in power["batch_sizes"]:
        mech = ThresholdLandscape(steps=steps, noise_multiplier=sigma, batch_size=b)
        checks = {"gdp": _gdp, "family": _family(mech.accounting())}
        label = f"landscape sigma={sigma:g} T={steps} B={b}"
        sample = _simulated(mech, ThresholdAdversary(), trials)
        cases.append((label, "power", sample, checks, trials, power["repeats"]))
    discrete = p.get("discrete", {})
    for name in discrete.get("cases", []):
        sample = _discrete(name, trials)
        cases.append((_DISCRETE_LABELS[name], "power", sample, {"gdp": _gdp}, trials,
                      discrete["repeats"]))  # fmt: skip
    mu = null["gaussian_mu"]

    def gaussian(n):
        def sample(seed):
            rng = np.random.default_rng(seed)
            return rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)

        return sample

    for n in null.get("gaussian_trials", [trials]):
        label = f"gaussian numpy mu={mu:g}" + ("" if n == trials else f" n={n:g}")
        cases.append((label, "null", gaussian(n), {"gdp": _gdp}, n, null["repeats"]))
    for steps, q in null["linear"]:
        mech = LinearProcess(steps, q, null["noise_multiplier"])
        checks = {"family": _family(mech.accounting())}
        if q == 1.0:  # P = T + N(0, T sigma^2) vs N(0, T sigma^2): G_mu, mu = sqrt(T)/sigma
            checks = {"gdp": _gdp, **checks}
        label = f"linear T={steps} q={q:g} sigma={null['noise_multiplier']:g}"
        sample = _simulated(mech, ProjectionScore(), trials)
        cases.append((label, "null", sample, checks, trials, null["repeats"]))
    return cases


def _case_rows(case_id, case, p: dict, outcomes: list) -> list[dict]:
    label, kind, sample, checks, trials, n_rep = case
    level, counts, start = p["level"], {name: [0, 0] for name in checks}, time.perf_counter()
    for r in range(n_rep):
        seed = p["seed"] + 10_000 * case_id + r
        cin, cout = sample(seed)
        held_in, held_out = _held_out(cin, cout)
        for name, check in checks.items():
            held, full = check(held_in, held_out, level), check(cin, cout, level)
            counts[name][0] += held.rejected
            counts[name][1] += full.rejected
            outcomes.append(dict(
                case=label, check=name, seed=seed, rejected_held_out=held.rejected,
                rejected_all=full.rejected, param_interval=held.param_interval,
                worst_threshold=held.worst["threshold"],
            ))  # fmt: skip
    wall = time.perf_counter() - start
    print(f"  {label}: {n_rep} repeats in {wall:.1f} s", flush=True)
    allowed = int(scipy.stats.binom.ppf(0.999, n_rep, level))
    rows = []
    for name, (held, full) in counts.items():
        low, high = clopper_pearson_interval(held, n_rep, 0.95)
        low_all, high_all = clopper_pearson_interval(full, n_rep, 0.95)
        null = kind == "null"
        rows.append(dict(
            case=label, kind=kind, check=name, repeats=n_rep, trials_per_world=trials,
            held_out_per_world=trials - trials // 2, rejected_held_out=held,
            rate_held_out=held / n_rep, ci95_lo_held_out=low, ci95_hi_held_out=high,
            rejected_all=full, ci95_lo_all=low_all, ci95_hi_all=high_all,
            allowed_false_alarms=allowed if null else None,
            ok=(held <= allowed and full <= allowed) if null else None, level=level,
            wall_time_s=wall,
        ))  # fmt: skip
    return rows


def compute_assumption_power(fig, rows):
    """The tables `assumption_power` (one row per case and check) and
    `assumption_power_outcomes` (one row per repeat)."""
    table, outcomes = [], []
    for case_id, case in enumerate(_cases(fig.params)):
        table += _case_rows(case_id, case, fig.params, outcomes)
    return {"assumption_power": table, "assumption_power_outcomes": outcomes}

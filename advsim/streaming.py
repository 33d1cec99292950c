r"""Streaming audits of $10^8$-$10^9$ runs per world: a pilot plans, the main run counts.

`audit_streaming(mechanism, adversary, runs, key)` is the held-out (eps, delta) audit of
`advsim.audits` at a scale no score set fits in memory:

1. a **pilot** of `pilot_runs` runs per world, on its own key (`fold_in(key, 2)`), is
   simulated and held; `advsim.audits.plan_tests` chooses $K$ threshold tests on it
   (or the tests are given, `thresholds=`);
2. the **main run**, `runs` per world with `key` itself (the very runs of
   `advsim.simulate(mechanism, adversary, runs, key)`), is simulated chunk by chunk and
   only counted (`advsim.simulate_counts`): per world and test, the runs at or above its
   threshold; memory grows with $K$, not with `runs`;
3. `advsim.audits.counts_audit` turns the counts into `eps_lower`: the largest of the
   $K$ tests' Clopper-Pearson (eps, delta) bounds, Bonferroni over $K$. It is held out by
   construction (the thresholds never see the counted runs) and so rigorous: with
   probability at least `confidence` it is at most the run's true epsilon (proof:
   the streaming audits' guide in the docs).

With `checkpoint=PATH` the plan and the counts so far are written atomically as the run
goes; the same call with the same path resumes from them (the pilot is not redrawn), and
gives the counts, and so the result, of an uninterrupted run, whatever the chunk size.
"""

from __future__ import annotations

import os
import time

import jax

from advsim import audits
from advsim._counting import read_counts_checkpoint, simulate_counts
from advsim._limits import check_trials
from advsim._simulate import as_key, simulate
from advsim._validation import check_delta, check_in_interval, check_int

__all__ = ["PILOT_FRACTION", "audit_streaming", "default_pilot_runs"]

#: The pilot's default share of the main run (its runs are extra, on their own key).
PILOT_FRACTION = 0.1
#: The pilot's default size stays within [MIN_PILOT, MAX_PILOT] runs per world (it is held
#: in memory: 2 x 10^7 runs are 160 MB per world), and never exceeds the main run.
MIN_PILOT, MAX_PILOT = 10_000, 20_000_000
#: The key offset of the pilot: the main run's worlds use `fold_in(key, 1)` and `fold_in(key, 0)`.
PILOT_KEY = 2


def default_pilot_runs(runs: int) -> int:
    """The pilot's runs per world by default: 10% of `runs`, within [10^4, 2 x 10^7], at
    most `runs`.

    Example:
        >>> default_pilot_runs(10**8), default_pilot_runs(10**4), default_pilot_runs(5000)
        (10000000, 10000, 5000)
    """
    runs = check_trials("runs", runs)
    return int(min(runs, max(MIN_PILOT, min(MAX_PILOT, round(PILOT_FRACTION * runs)))))


def audit_streaming(
    mechanism,
    adversary,
    runs: int,
    key,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    pilot_runs: int | None = None,
    num_tests: int = audits.DEFAULT_NUM_TESTS,
    thresholds=None,
    checkpoint: str | os.PathLike | None = None,
    chunk_size: int | None = None,
    progress: bool | None = None,
) -> audits.AuditResult:
    r"""A rigorous held-out (eps, delta) audit of `runs` runs per world, holding no scores.

    Args:
        mechanism: the DP-SGD run.
        adversary: crafts it and scores the last model (higher means "canary in").
        runs: runs per world of the main run, in [2, 2**32 - 1].
        key: a `jax.random.key` or an integer seed; the main run's runs are those of
            `advsim.simulate(mechanism, adversary, runs, key)`, the pilot's come from
            `fold_in(key, 2)`.
        delta: the delta of the bound, in [0, 1) (default 1e-5, as `run_audit`, sweeps
            and the CLI; 0 states pure DP).
        confidence: c in (0.5, 1): `eps_lower` exceeds the true epsilon with probability
            at most 1 - c.
        pilot_runs: the pilot's runs per world, in [2, runs] (default
            `default_pilot_runs(runs)`); ignored with `thresholds`.
        num_tests: K >= 1, the tests planned on the pilot (default 6).
        thresholds: tests fixed before any run, instead of a pilot (a non-empty sequence
            of finite thresholds).
        checkpoint: a JSON file for the plan and the counts; an existing one written by
            the same call is resumed (see the module docstring).
        chunk_size: runs per compiled chunk (as `advsim.simulate`); the counts do not
            depend on it.
        progress: tqdm bars (runs/s and the time left); default: for jobs over 5e7
            run-steps.

    Returns:
        An `advsim.audits.AuditResult` with method "streaming", guarantee rigorous;
        `extras` holds every test (counts, rates, bounds), the plan, the pilot's size,
        the runs resumed from a checkpoint and the seconds spent planning and counting.

    Raises:
        ValueError: `runs` or `pilot_runs` out of range (a pilot larger than the run),
            `thresholds` that plan no test, a bad `delta`, `confidence` or `num_tests`, a
            checkpoint written for another run.

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> from advsim.adversaries import ProjectionScore
        >>> mech = LinearProcess(steps=1, sampling_prob=1.0, noise_multiplier=1.0)
        >>> r = audit_streaming(mech, ProjectionScore(), 20_000, 0, pilot_runs=5_000)
        >>> r.method, r.rigorous, 0.0 < r.eps_lower < 4.4
        ('streaming', True, True)
    """
    runs = check_trials("runs", runs)
    delta = check_delta("delta", delta, allow_zero=True)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    num_tests = check_int("num_tests", num_tests, minimum=1)
    if pilot_runs is not None:
        pilot_runs = check_int("pilot_runs", pilot_runs, minimum=2)
        if pilot_runs > runs:
            raise ValueError(
                f"pilot_runs must be at most runs ({runs}): the pilot plans the main run's "
                f"tests and is meant to be a fraction of it, got {pilot_runs}"
            )
    key = as_key(key)
    started = time.perf_counter()
    saved = None if checkpoint is None else read_counts_checkpoint(checkpoint)
    if saved is not None and "plan" in saved.get("metadata", {}):
        plan = audits.TestPlan.from_dict(saved["metadata"]["plan"])
        if thresholds is not None and tuple(audits.fixed_tests(thresholds).thresholds) != (
            plan.thresholds
        ):
            raise ValueError(
                f"checkpoint {str(checkpoint)!r} holds a run of other thresholds "
                f"({list(plan.thresholds)}): give another path, or drop thresholds= to resume it"
            )
    elif thresholds is not None:
        plan = audits.fixed_tests(thresholds)
    else:
        pilot_runs = default_pilot_runs(runs) if pilot_runs is None else pilot_runs
        pilot_key = jax.random.fold_in(key, PILOT_KEY)
        pilot = simulate(mechanism, adversary, pilot_runs, pilot_key, chunk_size=chunk_size,
                         progress=progress)  # fmt: skip
        plan = audits.plan_tests(
            pilot, runs, delta=delta, confidence=confidence, num_tests=num_tests,
            planned_on=f"a pilot of {pilot_runs} runs per world (key fold_in(key, {PILOT_KEY}))",
        )  # fmt: skip
        del pilot
    planned = time.perf_counter()
    counts = simulate_counts(
        mechanism, adversary, runs, key, plan.thresholds, chunk_size=chunk_size,
        checkpoint=checkpoint, metadata={"plan": plan.to_dict(), "delta": delta,
                                         "confidence": confidence},
        progress=progress,
    )  # fmt: skip
    counted = time.perf_counter()
    result = audits.counts_audit(
        plan, counts.in_at_or_above, counts.out_at_or_above, runs, runs, delta=delta,
        confidence=confidence,
    )  # fmt: skip
    result.extras.update(
        runs=runs,
        pilot_runs=plan.pilot_runs,
        resumed_from=counts.resumed_from,
        seconds={"plan": planned - started, "count": counted - planned},
    )
    return result

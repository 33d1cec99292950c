"""`run_audit`, one audit end to end, and what it decides on the way: the default method
(`default_audit_method`), the streaming options (`check_streaming_options`) and the exact
columns beside the audit. The package docstring (`advsim.experiment`) tells the whole."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from advsim._adversary import AbstractAdversary
from advsim._audit_record import (
    AuditRecord,
    _result_columns,
    _stopwatch,
    _time_columns,
)
from advsim._exact_columns import (
    EXACT_COLUMNS,
    EXACT_REFINEMENTS,
    timed_exact_columns,
)
from advsim._limits import check_trials
from advsim._mechanism import AbstractMechanism
from advsim._simulate import as_key, simulate
from advsim._validation import check_delta, check_in_interval
from advsim.audits import DEFAULT_THRESHOLD_SELECTION, audit
from advsim.bounds import bounds_for
from advsim.streaming import audit_streaming

DEFAULT_STEPS = (1, 5, 10, 50, 100, 500, 1000)
"""Steps of the built-in experiment (the last-iterate paper's gradient-canary setting, Figure 3
of arXiv:2410.06186: q = 0.01, sigma calibrated to composition eps = 8), whose config is
`advsim/sweep/audit.toml` (`advsim audit` reads its grid there; a test keeps the two equal).
"""


STREAMING = "streaming"
"""The `threshold_selection` of a record audited by `run_audit(..., streaming=True)`: its
tests were planned on a pilot of its own and counted on the `trials` runs per world
(`advsim.streaming.audit_streaming`); its `method` is "eps_delta", the statement it makes."""


def default_audit_method(mechanism: AbstractMechanism) -> str:
    """The audit method used when none is named, decided on the built mechanism:
    `"family"` where it is in the last-iterate heuristic's family
    (`mechanism.in_heuristic_family()`: a `LinearProcess` without data gradients), where
    the family audit's assumption is exact, and the assumption-free `"eps_delta"` for
    every other one. `run_audit`, each cell of a sweep (`advsim.sweep`) and `advsim audit`
    all follow it.

    Raises:
        TypeError: `mechanism` is not a built mechanism (a class, say).

    Example:
        >>> from advsim.mechanisms import LinearProcess, ThresholdLandscape
        >>> default_audit_method(LinearProcess(5, 0.1, 1.0))
        'family'
        >>> default_audit_method(ThresholdLandscape(5, 1.0, 4))
        'eps_delta'
    """
    if not isinstance(mechanism, AbstractMechanism):
        raise TypeError(
            f"default_audit_method takes a built mechanism (an advsim.AbstractMechanism "
            f"instance), got {mechanism!r}"
        )
    return "family" if mechanism.in_heuristic_family() else "eps_delta"


def run_audit(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    *,
    trials: int,
    seed: int = 0,
    method: str | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    threshold_selection: str = DEFAULT_THRESHOLD_SELECTION,
    strategy_options: Mapping[str, Any] | None = None,
    sides: str = "two",
    min_count: int = 50,
    audit_seed: int | None = None,
    chunk_size: int | None = None,
    progress: bool | None = None,
    exact: bool = False,
    exact_refinements: int = EXACT_REFINEMENTS,
    streaming: bool = False,
    pilot_runs: int | None = None,
) -> AuditRecord:
    """Simulates, audits and bounds one configuration (and, with `exact`, reads the exact
    epsilon of the last model where the mechanism has the capability).

    With `streaming`, the cell is audited by `advsim.streaming.audit_streaming(mechanism,
    adversary, trials, seed, delta=..., confidence=..., pilot_runs=..., chunk_size=...,
    progress=...)`: a pilot of `pilot_runs` runs per world, on a key of its own, plans up
    to 6 threshold tests; the `trials` runs per world (those `advsim.simulate` gives with
    this seed) are only counted, so memory does not grow with `trials`; `eps_lower` is the
    assumption-free (eps, delta) bound, rigorous (the tests never see the counted runs).
    It takes the method "eps_delta" (the default then) and no threshold strategy or audit
    option (`check_streaming_options`); the record's `threshold_selection` is
    "streaming".

    Args:
        mechanism: the DP-SGD run.
        adversary: crafts it and scores its releases.
        trials: runs per world.
        seed: the simulation key is `simulate`'s for this seed (`jax.random.key(seed)`
            for seeds below 2**32); the split of runs into
            threshold-choosing and counting halves also uses `seed` unless `audit_seed`
            is given.
        method: "eps_delta" or "tradeoff" (assumption-free), "family" (needs T and q: the
            last-iterate paper's audit; assumes the run is in the heuristic's family) or
            "gdp" (assumes a Gaussian trade-off); see `advsim.audits`. Default (None):
            `default_audit_method(mechanism)`, "family" for a mechanism in the
            heuristic's family (where its assumption is exact), else "eps_delta".
        delta: the delta at which every epsilon is reported, in (0, 1) (the bounds beside
            the audit are infinite at delta = 0).
        confidence: of the Clopper-Pearson intervals behind `eps_lower`.
        threshold_selection: how the audit chooses its threshold: an alias of
            `advsim.audits.THRESHOLD_SELECTIONS` (default "by_sample_size", `audit`'s
            default: the best rigorous strategy for the sample size, rank_split from 3
            runs per world; "split", one threshold chosen on half the runs and counted on
            the other half; "same" (optimistic, as in the papers), ...), a
            `ThresholdStrategy` value or a class path "module:Class" of one.
        strategy_options: the options that `threshold_selection` takes
            (`THRESHOLD_SELECTIONS[threshold_selection]`, e.g. `selection_fraction` of
            "projected_split"), passed to `advsim.audits.audit`.
        sides, min_count: passed to `advsim.audits.audit` ("two" or "one"; the point
            estimate's least count).
        audit_seed: the seed of the audit's split of the runs (default: `seed`).
        chunk_size: runs per compiled chunk (results do not depend on it).
        progress: tqdm bars (default: automatic for long simulations and exact runs).
        exact: also fill the record's `EXACT_COLUMNS` with `exact_columns` of the crafted
            mechanism (empty, with the reason, where it lacks the capability). Off by
            default here: a first call for a new shape compiles the engine (seconds).
        exact_refinements: the most grids of the exact engine (`exact_columns`: it stops
            earlier once its error estimate is within `EXACT_RTOL` of epsilon).
        streaming: audit by a pilot-planned, counted streaming audit (above).
        pilot_runs: with `streaming`, the pilot's runs per world, in [2, trials] (default
            `advsim.streaming.default_pilot_runs(trials)`: 10% of trials within
            [10^4, 2 x 10^7]); refused without `streaming`.

    Returns:
        An `AuditRecord`; besides `wall_time_s`, it says where the time went:
        `compile_time_s` (JAX tracing and compilation, measured by `jax.monitoring`),
        `simulate_time_s` (simulating, compilation excluded; with `streaming`, the pilot,
        its plan and the counting), `audit_time_s` and `bounds_time_s` (each without the
        compilation inside it), `exact_time_s` (the exact columns, their compilation
        included; 0 without `exact`).

    Raises:
        ValueError: a parameter out of range; with `streaming`, a method other than
            "eps_delta", a threshold strategy or audit option it does not take, or
            `pilot_runs` out of [2, trials]; `pilot_runs` without `streaming`.
    """
    trials = check_trials("trials", trials)
    delta = check_delta("delta", delta)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    if not isinstance(streaming, bool):
        raise TypeError(f"streaming must be True or False, got {streaming!r}")
    if streaming:
        method = "eps_delta" if method is None else method
        check_streaming_options(
            trials=trials, method=method, threshold_selection=threshold_selection,
            strategy_options=strategy_options, sides=sides, min_count=min_count,
            audit_seed=audit_seed, pilot_runs=pilot_runs,
        )  # fmt: skip
    elif pilot_runs is not None:
        raise ValueError(
            f"pilot_runs applies to streaming audits only (the pilot that plans their "
            f"tests), got pilot_runs={pilot_runs!r} without streaming"
        )
    method = default_audit_method(mechanism) if method is None else method
    start = time.perf_counter()
    crafted = adversary.craft(mechanism)
    accounting = crafted.accounting()
    # The bounds first: parameters out of their reach fail before a long simulation.
    with _stopwatch() as bounds_clock:
        bounds = bounds_for(accounting, delta)
    if streaming:
        result, sim_clock, audit_clock = _count_and_audit(
            mechanism, adversary, trials=trials, seed=seed, delta=delta,
            confidence=confidence, pilot_runs=pilot_runs, chunk_size=chunk_size,
            progress=progress,
        )  # fmt: skip
    else:
        result, sim_clock, audit_clock = _simulate_and_audit(
            mechanism,
            adversary,
            accounting,
            trials=trials,
            seed=seed,
            method=method,
            delta=delta,
            confidence=confidence,
            threshold_selection=threshold_selection,
            strategy_options=strategy_options,
            audit_options={
                "sides": sides,
                "min_count": min_count,
                "seed": seed if audit_seed is None else audit_seed,
            },
            chunk_size=chunk_size,
            progress=progress,
        )
    exact_cols, exact_time = _timed_exact_columns(
        crafted, delta, exact=exact, refinements=exact_refinements, progress=progress
    )
    return AuditRecord(
        mechanism=type(crafted).__name__,
        adversary=type(adversary).__name__,
        method=method,
        steps=accounting.steps,
        sampling_prob=accounting.sampling_prob,
        noise_multiplier=accounting.noise_multiplier,
        num_canary_steps=accounting.num_canary_steps,
        delta=delta,
        confidence=confidence,
        threshold_selection=STREAMING if streaming else threshold_selection,
        trials=trials,
        seed=seed,
        **_result_columns(result, bounds),
        **_time_columns(start, sim_clock, audit_clock, bounds_clock),
        **exact_cols,
        exact_time_s=exact_time,
    )


def _simulate_and_audit(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    accounting,
    *,
    trials: int,
    seed: int,
    method: str,
    delta: float,
    confidence: float,
    threshold_selection: str,
    strategy_options: Mapping[str, Any] | None,
    audit_options: Mapping[str, Any],
    chunk_size: int | None,
    progress: bool | None,
) -> tuple[Any, dict, dict]:
    """`run_audit`'s simulation and audit: `(the audit's result, the simulation's
    stopwatch, the audit's stopwatch)`."""
    with _stopwatch() as sim_clock:
        scores = simulate(
            mechanism,
            adversary,
            trials,
            as_key(seed),
            chunk_size=chunk_size,
            progress=progress,
        )
    with _stopwatch() as audit_clock:
        result = audit(
            scores,
            method,
            delta=delta,
            accounting=accounting,
            confidence=confidence,
            threshold_selection=threshold_selection,
            **audit_options,
            **(strategy_options or {}),
        )
    return result, sim_clock, audit_clock


def check_streaming_options(
    *,
    trials: int,
    method: str | None = "eps_delta",
    threshold_selection: str | None = DEFAULT_THRESHOLD_SELECTION,
    strategy_options: Mapping[str, Any] | None = None,
    sides: str = "two",
    min_count: int = 50,
    audit_seed: int | None = None,
    pilot_runs: int | None = None,
) -> None:
    """Refuses what a streaming audit (`run_audit(..., streaming=True)`, a sweep's
    `streaming = true`) does not take, in one line naming the value and what is valid.

    A streaming audit states the assumption-free (eps, delta) bound (method "eps_delta";
    None is that), plans its tests on a pilot of its own (threshold_selection unset: the
    default "by_sample_size", "split" or None; no strategy option), bounds both orders of
    the pair (sides "two"), has no split of the runs to seed (audit_seed None) and no
    least count for its point estimate (min_count 50, the default); its pilot has
    `pilot_runs` in [2, trials] runs per world (None: the default size).

    Raises:
        ValueError: naming the first setting it does not take.
    """
    if method not in (None, "eps_delta"):
        raise ValueError(
            "a streaming audit's bound is assumption-free (eps_delta, held out by "
            f"construction): method must be 'eps_delta' or unset, got {method!r}"
        )
    if threshold_selection not in (None, "split", DEFAULT_THRESHOLD_SELECTION):
        raise ValueError(
            "a streaming audit plans its threshold tests on a pilot of its own: "
            f"threshold_selection must be unset (or the default {DEFAULT_THRESHOLD_SELECTION!r}, "
            f"or 'split'), got {threshold_selection!r}"
        )
    if strategy_options:
        raise ValueError(
            "a streaming audit takes no threshold strategy option (its tests are planned on "
            f"a pilot), got {', '.join(f'{k}={v!r}' for k, v in strategy_options.items())}"
        )
    if sides != "two":
        raise ValueError(
            f"a streaming audit bounds both orders of the pair: sides must be 'two', got {sides!r}"
        )
    if audit_seed is not None:
        raise ValueError(
            "a streaming audit has no split of the runs to seed (its pilot has a key of its "
            f"own): audit_seed must be unset, got {audit_seed!r}"
        )
    if isinstance(min_count, bool) or min_count != 50:
        raise ValueError(
            "a streaming audit's eps_point is its best test's plug-in estimate, with no least "
            f"count: min_count must be 50 (the default), got {min_count!r}"
        )
    if pilot_runs is not None and (
        isinstance(pilot_runs, bool)
        or not isinstance(pilot_runs, int | np.integer)
        or not 2 <= pilot_runs <= trials
    ):
        raise ValueError(
            f"pilot_runs must be an integer in [2, trials] = [2, {trials}] (the pilot's runs "
            f"per world, which plan the tests of the counted runs), got {pilot_runs!r}"
        )


def _count_and_audit(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    *,
    trials: int,
    seed: int,
    delta: float,
    confidence: float,
    pilot_runs: int | None,
    chunk_size: int | None,
    progress: bool | None,
) -> tuple[Any, dict, dict]:
    """`run_audit`'s streaming audit (`advsim.streaming.audit_streaming`): `(its result,
    the simulation's stopwatch, the audit's stopwatch)`. The simulation's holds the pilot,
    its plan and the counting, and all the compilation; the audit's, the bound from the
    counts (the rest of the call)."""
    with _stopwatch() as clock:
        result = audit_streaming(
            mechanism,
            adversary,
            trials,
            as_key(seed),
            delta=delta,
            confidence=confidence,
            pilot_runs=pilot_runs,
            chunk_size=chunk_size,
            progress=progress,
        )
    seconds = result.extras["seconds"]
    simulating = min(seconds["plan"] + seconds["count"], clock["wall"])
    sim_clock = {"wall": simulating, "compile": min(clock["compile"], simulating)}
    audit_clock = {"wall": clock["wall"] - simulating, "compile": 0.0}
    return result, sim_clock, audit_clock


def _timed_exact_columns(
    crafted: AbstractMechanism, delta: float, *, exact: bool, refinements: int, progress
) -> tuple[dict, float]:
    """`(the EXACT_COLUMNS, seconds they took)`: `exact_columns` of the crafted mechanism
    with `exact`, else empty columns and 0 s. Where a sweep's `ExactBeside` computed them
    beside the simulation, the seconds are those the computation took there."""
    if not exact:
        return dict.fromkeys(EXACT_COLUMNS), 0.0
    with _stopwatch() as exact_clock:
        exact_cols, seconds = timed_exact_columns(
            crafted,
            delta,
            refinements=refinements,
            progress=False if progress is False else None,
        )
    return exact_cols, exact_clock["wall"] if seconds is None else seconds

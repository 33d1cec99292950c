"""One audited configuration's record (`AuditRecord`, its columns in table order), and the
stopwatch that fills its time columns."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Iterator, Mapping

import jax

from advsim._exact_columns import BESIDE_THREAD

__all__ = ["AuditRecord", "record_columns"]


def _column(role: str, *, bounds: bool = False, default=dataclasses.MISSING):
    """A field of `AuditRecord`: its `role` ("parameter": what the cell was configured with;
    "result"; "time": a part of the wall time) and whether a bounds-only cell has it."""
    return dataclasses.field(default=default, metadata={"role": role, "bounds": bounds})


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One audited configuration: parameters, empirical epsilon and the three bounds.

    Besides the numbers, the record says what `eps_lower` certifies (`guarantee`: the
    audit's `Guarantee.label`, "rigorous" only for an assumption-free held-out bound;
    `assumption`: what it rests on; `assumption_rejected`: the verdict of the audit's
    check of that assumption on the held-out runs, None where it assumes nothing), why
    an epsilon is missing (`eps_lower_note`, `eps_point_note`), and whether the point
    estimate lies above the composition bound (`eps_point_above_composition`: no
    DP-SGD run can have such an eps, so it is an estimate outside the possible range).

    With `run_audit(..., exact=True)` and a mechanism that has the capability, the
    `EXACT_COLUMNS` hold the exact epsilon of the last model and its refinement-estimated
    error (`exact_columns`); otherwise they are None (`exact_note` says why, unless exact
    was not asked for). `exact_time_s` is what computing them took, compilation included.
    `calibrate_time_s` is 0 here: a driver that calibrates sigma first (a sweep with
    `target_epsilon`) fills it in.

    A streaming audit (`run_audit(..., streaming=True)`) has `method` "eps_delta" and
    `threshold_selection` "streaming" (`STREAMING`): its tests were planned on a pilot of
    extra runs per world, on a key of its own, and `trials` is the runs per world it
    counted; `threshold`, `fpr` and `fnr` are those of its best test, `simulate_time_s`
    includes the pilot, the planning and the counting, and `audit_time_s` is the bound.

    The fields are the columns of a sweep's table, in its order (`record_columns`); each
    says whether it is a parameter, a result or a part of the wall time, and whether a
    bounds-only cell has it.
    """

    mechanism: str = _column("parameter", bounds=True)
    adversary: str = _column("parameter")
    method: str = _column("parameter")
    steps: int = _column("parameter", bounds=True)
    sampling_prob: float = _column("parameter", bounds=True)
    noise_multiplier: float = _column("parameter", bounds=True)
    num_canary_steps: int = _column("result", bounds=True)
    delta: float = _column("parameter", bounds=True)
    confidence: float = _column("parameter")
    threshold_selection: str = _column("parameter")
    eps_lower: float | None = _column("result")
    eps_point: float | None = _column("result")
    heuristic: float = _column("result", bounds=True)
    composition: float = _column("result", bounds=True)
    full_batch: float = _column("result", bounds=True)
    exact_epsilon: float | None = _column("result", bounds=True, default=None)
    exact_error: float | None = _column("result", bounds=True, default=None)
    exact_error_kind: str | None = _column("result", bounds=True, default=None)
    rigorous: bool = _column("result")
    guarantee: str = _column("result")
    assumption: str = _column("result")
    assumption_rejected: bool | None = _column("result")
    eps_point_above_composition: bool = _column("result")
    eps_lower_note: str | None = _column("result")
    eps_point_note: str | None = _column("result")
    exact_note: str | None = _column("result", bounds=True, default=None)
    threshold: float = _column("result")
    fpr: float = _column("result")
    fnr: float = _column("result")
    trials: int = _column("parameter")
    seed: int = _column("result")
    wall_time_s: float = _column("result", bounds=True)
    calibrate_time_s: float = _column("time", default=0.0)
    compile_time_s: float = _column("time")
    simulate_time_s: float = _column("time")
    audit_time_s: float = _column("time")
    bounds_time_s: float = _column("time")
    exact_time_s: float = _column("time", bounds=True, default=0.0)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def record_columns(role: str | None = None, *, bounds: bool = False) -> tuple[str, ...]:
    """`AuditRecord`'s fields in table order: all of them, or those of one `role`
    ("parameter", "result", "time"); with `bounds`, only those a bounds-only cell has.

    Example:
        >>> record_columns("time")[:2]
        ('calibrate_time_s', 'compile_time_s')
    """
    if role not in (None, "parameter", "result", "time"):
        raise ValueError(f"role must be 'parameter', 'result', 'time' or None, got {role!r}")
    return tuple(
        f.name
        for f in dataclasses.fields(AuditRecord)
        if role in (None, f.metadata["role"]) and (f.metadata["bounds"] or not bounds)
    )


#: JAX's compilation events (`jax.monitoring`): tracing, lowering, XLA compilation.
_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


@contextlib.contextmanager
def _stopwatch() -> Iterator[dict]:
    """Yields `{"wall": s, "compile": s}`, filled on exit: the block's wall time and the
    part of it JAX spent compiling: the union of the intervals of `jax.monitoring`'s
    duration events (tracing, lowering, compiling), so that a nested trace (a jitted
    function called inside a traced one) is not counted twice, and without those of a
    sweep's `ExactBeside` thread (`BESIDE_THREAD`: not this block's work)."""
    clock = {"wall": 0.0, "compile": 0.0}
    spans = []

    def listener(event: str, seconds: float, **_) -> None:
        if event in _COMPILE_EVENTS and threading.current_thread().name != BESIDE_THREAD:
            end = time.perf_counter()  # the event is recorded as its interval ends
            spans.append((end - seconds, end))

    jax.monitoring.register_event_duration_secs_listener(listener)
    start = time.perf_counter()
    try:
        yield clock
    finally:
        clock["wall"] = time.perf_counter() - start
        jax.monitoring.unregister_event_duration_listener(listener)
        clock["compile"] = _covered(spans)


def _covered(spans) -> float:
    """The length of the union of intervals `(start, end)`."""
    total, reach = 0.0, -math.inf
    for lo, hi in sorted(spans):
        if hi > reach:
            total += hi - max(lo, reach)
            reach = hi
    return total


def _result_columns(result, bounds: Mapping) -> dict:
    """A record's result columns: the audit's `result` and the `bounds`."""
    composition = float(bounds["composition"])
    return dict(
        eps_lower=result.eps_lower,
        eps_point=result.eps_point,
        heuristic=float(bounds["heuristic"]),
        composition=composition,
        full_batch=float(bounds["full_batch"]),
        rigorous=bool(result.rigorous),
        guarantee=result.guarantee.label,
        assumption=result.guarantee.assumption,
        assumption_rejected=result.assumption_rejected,
        eps_point_above_composition=result.eps_point is not None
        and result.eps_point > composition * (1 + 1e-9),
        eps_lower_note=result.eps_lower_note,
        eps_point_note=result.eps_point_note,
        threshold=float(result.threshold),
        fpr=float(result.fpr),
        fnr=float(result.fnr),
    )


def _time_columns(start: float, sim_clock: dict, audit_clock: dict, bounds_clock: dict) -> dict:
    """A record's time columns (but the exact one): the wall time since `start` and the
    stopwatches' parts, each without the compilation inside it, which has its own."""
    clocks = (sim_clock, audit_clock, bounds_clock)
    return dict(
        wall_time_s=time.perf_counter() - start,
        compile_time_s=sum(c["compile"] for c in clocks),
        simulate_time_s=sim_clock["wall"] - sim_clock["compile"],
        audit_time_s=audit_clock["wall"] - audit_clock["compile"],
        bounds_time_s=bounds_clock["wall"] - bounds_clock["compile"],
    )

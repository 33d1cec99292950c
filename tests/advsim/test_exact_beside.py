"""The exact columns computed on a thread of their own (`advsim._exact_columns.ExactBeside`).

Where the expected values come from:

- A value computed beside is the very value `exact_columns` computes in the foreground
  (the engine's value depends on its arguments only): compared for equality with a
  foreground computation from an empty cache.
- The linear process's exact epsilon is `heuristic_epsilon` (Theorem 1 of
  arXiv:2410.06186): the value computed beside is checked against it to the engine's
  own error estimate, an independent reference.
- "Computed once", "stopped at the next chunk of steps" and "not counted as the audit's
  compilation" are counted (engine calls, wall time, `jax.monitoring` events).
"""

from __future__ import annotations

import threading
import time

import jax
import pytest

import advsim._exact_columns as ec
from advsim._audit_record import _stopwatch
from advsim.bounds import heuristic_epsilon
from advsim.experiment import exact_columns
from advsim.mechanisms import LinearProcess
from advsim.sweep import run_sweep

DELTA = 1e-5


@pytest.fixture
def fresh(monkeypatch):
    """An empty per-process cache, and the engine's calls counted (by thread name)."""
    calls = []
    engine = ec.last_iterate_epsilon

    def counted(mechanism, delta, **kwargs):
        calls.append((mechanism.steps, threading.current_thread().name))
        return engine(mechanism, delta, **kwargs)

    monkeypatch.setattr(ec, "_EXACT_CACHE", type(ec._EXACT_CACHE)())
    monkeypatch.setattr(ec, "_SECONDS_BESIDE", {})
    monkeypatch.setattr(ec, "last_iterate_epsilon", counted)
    return calls


def _linear(steps: int, sigma: float = 1.0) -> LinearProcess:
    return LinearProcess(steps=steps, sampling_prob=0.1, noise_multiplier=sigma)


def test_values_beside_are_the_foreground_values(fresh, monkeypatch):
    mechs = [_linear(3), _linear(7, 0.8)]
    foreground = [exact_columns(m, DELTA, refinements=2) for m in mechs]
    monkeypatch.setattr(ec, "_EXACT_CACHE", type(ec._EXACT_CACHE)())
    fresh.clear()
    beside = ec.ExactBeside([(lambda m=m: (m, DELTA, {"refinements": 2})) for m in mechs])
    beside.stop(finish=True)
    assert [name for _, name in fresh] == [ec.BESIDE_THREAD] * 2
    for m, expected in zip(mechs, foreground, strict=True):
        cols, seconds = ec.timed_exact_columns(m, DELTA, refinements=2)
        assert seconds is not None and seconds > 0  # what the thread's computation took
        assert ec.timed_exact_columns(m, DELTA, refinements=2)[1] is None  # read once
        assert cols == expected  # equal, not close
        assert exact_columns(m, DELTA, refinements=2) == expected
        truth = heuristic_epsilon(DELTA, m.accounting())  # Theorem 1, arXiv:2410.06186
        err = max(expected["exact_error"], 1e-9)
        assert abs(expected["exact_epsilon"] - truth) < 10 * err + 1e-3 * truth
    assert len(fresh) == 2  # the foreground reads found them


def test_a_value_both_threads_ask_for_is_computed_once(fresh, monkeypatch):
    engine = ec.last_iterate_epsilon
    started = threading.Event()

    def slow(mechanism, delta, **kwargs):
        started.set()
        time.sleep(0.5)  # the foreground asks while this runs
        return engine(mechanism, delta, **kwargs)

    monkeypatch.setattr(ec, "last_iterate_epsilon", slow)
    mech = _linear(4)
    beside = ec.ExactBeside([lambda: (mech, DELTA, {"refinements": 2})])
    assert started.wait(30)
    cols = exact_columns(mech, DELTA, refinements=2)  # waits for the thread's value
    beside.stop(finish=True)
    assert fresh == [(4, ec.BESIDE_THREAD)]
    assert cols["exact_note"] is None and cols["exact_epsilon"] > 0
    assert not ec._EXACT_RUNNING


def test_stop_abandons_a_long_computation_at_its_next_chunk(fresh, monkeypatch):
    import advsim.exact._api as api

    stepping, chunks = threading.Event(), []
    propagate = api.advance

    def advance(*args):
        chunks.append(1)
        if len(chunks) > 1:  # the first chunk compiles
            stepping.set()
        return propagate(*args)

    monkeypatch.setattr(api, "advance", advance)
    # About 20 s of engine in chunks of 100 steps of 0.45 s each (measured, 2 CPU cores).
    long = LinearProcess(steps=3_000, sampling_prob=0.01, noise_multiplier=0.6)
    beside = ec.ExactBeside([lambda: (long, DELTA, {"max_work": None})])
    assert stepping.wait(120)  # planned and compiled: among the engine's steps
    time.sleep(0.3)
    tic = time.perf_counter()
    beside.stop()
    assert time.perf_counter() - tic < 2.0  # the chunk under way, not the whole run
    assert fresh == [(3_000, ec.BESIDE_THREAD)]
    assert not ec._EXACT_CACHE and not ec._EXACT_RUNNING  # nothing half-made kept


def test_a_failing_job_is_left_to_the_foreground(fresh):
    def broken():
        raise RuntimeError("a bug in building the cell")

    mech = _linear(2)
    beside = ec.ExactBeside([broken, lambda: None, lambda: (mech, DELTA, {"refinements": 2})])
    beside.stop(finish=True)
    assert fresh == [(2, ec.BESIDE_THREAD)]  # the jobs after the failure ran


def test_the_audits_stopwatch_leaves_the_threads_compilation_out(fresh):
    mech = _linear(6, 0.9)
    jax.clear_caches()  # so that the engine traces and compiles again
    with _stopwatch() as clock:
        ec.ExactBeside([lambda: (mech, DELTA, {"refinements": 2})]).stop(finish=True)
    assert clock["compile"] == 0.0 and clock["wall"] > 0
    jax.clear_caches()
    with _stopwatch() as clock:  # the control: the same work on this thread is counted
        exact_columns(_linear(6, 0.91), DELTA, refinements=2)
    assert clock["compile"] > 0


def test_an_audit_sweeps_exact_columns_are_computed_beside_once_each(fresh, tmp_path):
    config = {
        "sweep": {"mode": "audit", "trials": 400, "delta": DELTA, "exact_refinements": 2},
        "mechanism": {"name": "linear", "sampling_prob": 0.1, "noise_multiplier": 1.0},
        "adversary": {"name": "projection"},
        "grid": {"steps": [2, 3, 5]},
    }
    rows = run_sweep(config, tmp_path / "s", progress=False)
    # The first cell in the foreground (it compiles alone), the others on the thread.
    assert sorted(fresh) == [(2, "MainThread"), (3, ec.BESIDE_THREAD), (5, ec.BESIDE_THREAD)]
    for row in rows:
        mech = _linear(row["steps"])
        # From an empty cache, in the foreground: the same columns.
        ec._EXACT_CACHE.clear()
        expected = exact_columns(mech, DELTA, refinements=2)
        assert {k: row[k] for k in ec.EXACT_COLUMNS} == expected
        assert row["exact_time_s"] > 0  # what its computation took, wherever it ran

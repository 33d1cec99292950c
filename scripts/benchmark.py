"""Benchmark: simulation throughput against the raw sampler, and the speed of the bounds.

Prints, in one run on this machine:
  1. the engine against honest references (`scripts/benchmark_engine.py`, which it runs):
     the generator's best rate over samples per call, the 1-D linear process through
     `advsim.simulate` against a hand-written jitted `lax.scan` and a numpy loop (T in
     {100, 1000}, q in {0.01, 1}, 10^6 runs per world), one host device against every
     core, and the wait to start (`advsim --help`, the first and second run's compile
     time and the wall time of `advsim audit`),
  4. the time of one `heuristic_epsilon` at T = 10^5 (target: < 50 ms), beside
     dp-accounting's mixture-of-Gaussians PLD for the same T where that finishes in time,
  5. noise calibration (`calibrate_noise_multiplier`, the README audit's defaults: target
     eps 8, delta 1e-5, q 0.01, grid 1e-4) per T against the reference method, kept below
     as `_reference_calibrate` (dp_accounting.calibrate_dp_mechanism with its
     PLDAccountant, a coarse then a fine Brent search): cold (caches cleared; target
     >= 2.5x), one audit row (calibration, then `bounds_for`'s composition epsilon,
     which the reference method recomputes; target >= 5x), and two sweep cells at the same
     T (each calibrates and asks `bounds_for`),
  6. `heuristic_epsilon_max_over_steps` at T = 10^4 and 10^5 (targets < 0.5 s and < 5 s)
     against the reference method, every t through `heuristic_epsilon_curve` (at 10^5 in
     a subprocess, stopped after --reference-max-timeout seconds).
  7. the exact engine (`advsim.exact`), each row timed in a fresh process (imports
     excluded, JAX compilation included), with the load average and CPU time beside the
     wall time: "exact linear T=1000", the README audit's process (target eps 8, delta
     1e-5, q 0.01) on the coarsest grid of a short ladder of cells per sd whose error
     estimate and distance to `heuristic_epsilon` (exact for this process, Theorem 1 of
     arXiv:2410.06186) are both below 1e-3 relative (first call, target < 10 s, and a
     second identical call); "exact landscape heatmap", the 4 x 3 heatmap of Cebere et
     al.'s Fig. 4 (ThresholdLandscape, T = 25, sigma in {1, 2, 4, 8} x B in {1, 4, 16},
     delta 1e-5; target < 30 s), in the fastest grouping of the cells into batched calls
     (`--exact-groupings all` times every grouping, each in its own fresh process).
  8. the counterexample search (`advsim.search`) of one heatmap cell, the largest grid of
     the heatmap (sigma 1, B 16, T 25; the budget of `advsim figure machine_found`:
     100 Adam steps from 4 starts, 1200 random members, the exact recomputation on three
     grids), in a fresh process with the load and CPU time (target < 5 min wall).

A run that measures the rows of the speed guide's table (`docs/guide/speed.md`: the
sampling rows, the bounds' rows and `heuristic_epsilon`) ends by printing that table in
Markdown, from its own measurements (`--only table` measures just those rows); the guide
quotes it as printed.

Usage: python scripts/benchmark.py [--trials 1000000] [--quick]
           [--only {all,simulation,bounds,sampling,exact,exact-linear,exact-heatmap,search,
                    table}]
           [--exact-groupings {one,by-B,separate,all} ...]
Figures are printed, never asserted: timings on shared machines are not tests.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import time
from pathlib import Path

import jax
import numpy as np

import advsim  # noqa: F401  (one host device per core, asked for before JAX starts)


def _best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _mixture_pld_eps(steps, q, sigma, delta, out):
    from dp_accounting.pld import privacy_loss_distribution as pld
    from scipy import stats

    k = np.arange(steps + 1)
    probs = stats.binom.pmf(k, steps, q)
    keep = probs > 1e-30
    start = time.perf_counter()
    dist = pld.from_mixture_gaussian_mechanism(
        standard_deviation=float(np.sqrt(steps) * sigma),
        sensitivities=[float(x) for x in k[keep]],
        sampling_probs=[float(p) for p in probs[keep] / probs[keep].sum()],
        value_discretization_interval=1e-3,
    )
    eps = dist.get_epsilon_for_delta(delta)
    out.put((eps, time.perf_counter() - start))


def _reference_calibrate(target, delta, steps, q, vdi=1e-4, tol=1e-6):
    """The direct calibration (without the coarse-to-fine search and the vectorised PLD),
    kept here as the benchmark's reference: Brent's method inside
    dp_accounting.calibrate_dp_mechanism, with its PLDAccountant, first on a coarse grid
    (1e-2), then on [0.93, 1.01] x the coarse answer at the requested grid."""
    import math

    import dp_accounting
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from scipy.optimize import brentq

    from advsim.bounds import gdp_mu, heuristic_epsilon

    n = steps
    sigma_hi = 1.05 * math.sqrt(n) / gdp_mu(target, delta)

    def heuristic_gap(log_sigma):
        return heuristic_epsilon(delta, steps, q, math.exp(log_sigma), canary_steps=n) - target

    hi = math.log(sigma_hi)
    lo = hi - 1.0
    while heuristic_gap(lo) < 0:
        lo -= 1.0
    sigma_lo = 0.999 * math.exp(brentq(heuristic_gap, lo, hi, xtol=1e-12, rtol=1e-12))

    def event(sigma):
        step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
        return dp_event.SelfComposedDpEvent(step, n)

    def calibrate(lower, upper, interval, tolerance):
        return float(
            dp_accounting.calibrate_dp_mechanism(
                lambda: pld_privacy_accountant.PLDAccountant(
                    value_discretization_interval=interval
                ),
                event,
                target,
                delta,
                bracket_interval=dp_accounting.ExplicitBracketInterval(lower, upper),
                tol=tolerance,
            )
        )

    sigma_c = calibrate(sigma_lo, sigma_hi, 1e-2, 1e-4 * sigma_hi)
    try:
        return calibrate(max(sigma_lo, 0.93 * sigma_c), min(sigma_hi, 1.01 * sigma_c), vdi, tol)
    except ValueError:
        return calibrate(sigma_lo, sigma_hi, vdi, tol)


def _reference_composition(delta, steps, q, sigma, vdi=1e-4):
    """The reference's composition epsilon after its calibration: a fresh PLDAccountant."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    acc.compose(dp_event.SelfComposedDpEvent(step, steps))
    return acc.get_epsilon(delta)


def _clear_bound_caches():
    from advsim.bounds import _composition

    for cache in (_composition._PLDS, _composition._EPSILONS, _composition._CALIBRATED):
        cache.clear()


def _timed(fn, *args):
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


#: What this run measured, by row of the speed guide's table (`summary_table`).
MEASURED: dict = {"calibration": {}, "max_over_steps": {}}


def calibration_rows(steps_list, target=8.0, delta=1e-5, q=0.01) -> None:
    from advsim import Accounting
    from advsim.bounds import bounds_for, calibrate_noise_multiplier, composition_epsilon

    print(
        f"noise calibration, target eps {target:g}, delta {delta:g}, q {q:g}, grid 1e-4 "
        "(ref = the reference method, advsim = this package; ratio ref / advsim):"
    )
    print(
        f"  {'T':>5} {'sigma ref':>10} {'sigma advsim':>12} {'cold ref':>9} {'cold advsim':>11} "
        f"{'ratio':>6} | {'row ref':>8} {'row advsim':>10} {'ratio':>6} | "
        f"{'2 cells ref':>11} {'advsim':>6} {'ratio':>6}"
    )

    def cell(steps):  # a sweep cell with target_epsilon: calibrate, then bounds_for
        sigma = calibrate_noise_multiplier(target, delta, steps, q)
        acc = Accounting(steps, q, sigma, tuple(range(1, steps + 1)))
        return bounds_for(acc, delta)["composition"], sigma

    for steps in steps_list:
        sigma_ref, cal_ref = _timed(_reference_calibrate, target, delta, steps, q)
        _, comp_ref = _timed(_reference_composition, delta, steps, q, sigma_ref)
        _clear_bound_caches()
        sigma_advsim, cal_advsim = _timed(calibrate_noise_multiplier, target, delta, steps, q)
        # the contract, on advsim's numbers (cached, so free)
        assert composition_epsilon(delta, steps, q, sigma_advsim) <= target
        _clear_bound_caches()
        _, row_advsim = _timed(cell, steps)  # one audit row or sweep cell, cold
        _, cell2_advsim = _timed(cell, steps)  # a second cell at the same T
        row_ref = cal_ref + comp_ref
        two_cells = row_advsim + cell2_advsim
        MEASURED["calibration"][steps] = {
            "cold": (cal_advsim, cal_ref), "row": (row_advsim, row_ref),
            "two cells": (two_cells, 2 * row_ref),
        }  # fmt: skip
        print(
            f"  {steps:>5} {sigma_ref:>10.6f} {sigma_advsim:>12.6f} {cal_ref:>8.2f}s "
            f"{cal_advsim:>10.2f}s {cal_ref / cal_advsim:>5.1f}x | {row_ref:>7.2f}s "
            f"{row_advsim:>9.2f}s {row_ref / row_advsim:>5.1f}x | {2 * row_ref:>10.2f}s "
            f"{two_cells:>5.2f}s {2 * row_ref / two_cells:>5.1f}x",
            flush=True,
        )
    print(
        "  (targets: cold >= 2.5x, row >= 5x; 'row' = calibration then bounds_for's "
        "composition epsilon, as an audit row or a sweep cell; '2 cells' = two sweep cells "
        "at the same T)"
    )


def _reference_max_over_steps(steps, q, sigma, delta, out):
    from advsim.bounds import heuristic_epsilon, heuristic_epsilon_curve

    start = time.perf_counter()
    curve = heuristic_epsilon_curve(delta, np.arange(1, steps + 1), q, sigma)
    best = max(float(np.max(curve)), heuristic_epsilon(delta, steps, q, sigma))
    out.put((best, time.perf_counter() - start))


def max_over_steps_rows(timeout: float, q=0.01, sigma=1.0, delta=1e-5) -> None:
    from advsim.bounds import heuristic_epsilon_max_over_steps

    heuristic_epsilon_max_over_steps(delta, 100, q, sigma)  # imports, warm caches
    print(f"heuristic_epsilon_max_over_steps, q {q:g}, sigma {sigma:g}, delta {delta:g}:")
    for steps, target in ((10_000, 0.5), (100_000, 5.0)):
        new, seconds = _timed(heuristic_epsilon_max_over_steps, delta, steps, q, sigma)
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        proc = ctx.Process(target=_reference_max_over_steps, args=(steps, q, sigma, delta, out))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.terminate()
            proc.join()
            ref_text = f"reference (every t) > {timeout:.0f} s (stopped)"
            ratio = f"> {timeout / seconds:.0f}x"
            MEASURED["max_over_steps"][steps] = (seconds, None, timeout)
        else:
            ref, ref_seconds = out.get()
            agree = abs(ref - new) / ref
            ref_text = f"reference (every t) {ref_seconds:.2f} s, relative difference {agree:.1e}"
            ratio = f"{ref_seconds / seconds:.0f}x"
            MEASURED["max_over_steps"][steps] = (seconds, ref_seconds, timeout)
        print(
            f"  T={steps:>6}: eps = {new:.10g} in {seconds:.3f} s (target < {target:g} s); "
            f"{ref_text}; ratio {ratio}",
            flush=True,
        )


# --- the exact engine (advsim.exact) --------------------------------------------------------

#: Cells per noise sd tried for "exact linear T=1000", coarsest first (the engine needs >= 2).
EXACT_LADDER = (2.0, 3.0, 4.0, 6.0)
#: The relative accuracy the exact rows ask for.
EXACT_RTOL = 1e-3
#: Cebere et al.'s Fig. 4 heatmap: T = 25, sigma x B.
HEATMAP_STEPS = 25
HEATMAP_SIGMAS = (1.0, 2.0, 4.0, 8.0)
HEATMAP_BATCHES = (1, 4, 16)
#: How the heatmap's 12 cells are split into `last_iterate_epsilons` calls; "one" (a single
#: batched call: 3 compilations, every cell on the largest grid) was the fastest measured.
HEATMAP_GROUPINGS = ("one", "by-B", "separate")


def _load() -> float:
    return os.getloadavg()[0]


def _timed_call(fn, *args, **kwargs):
    """(value, wall seconds, CPU seconds of this process, all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - wall, time.process_time() - cpu


def _exact_linear_worker(cells, steps, q, sigma, delta, out):
    """In a fresh process: the first call (compilation included) and a second one."""
    from advsim.exact import last_iterate_epsilon
    from advsim.mechanisms import LinearProcess

    mech = LinearProcess(steps, q, sigma)
    load = _load()
    kwargs = {"cells_per_sd": cells, "progress": False}
    first, wall1, cpu1 = _timed_call(last_iterate_epsilon, mech, delta, **kwargs)
    second, wall2, cpu2 = _timed_call(last_iterate_epsilon, mech, delta, **kwargs)
    assert second.epsilon == first.epsilon
    out.put({
        "epsilon": first.epsilon, "error": first.error, "nodes": first.nodes,
        "wall1": wall1, "cpu1": cpu1, "wall2": wall2, "cpu2": cpu2, "load": load,
    })  # fmt: skip


def _in_fresh_process(target, *args):
    """target(*args, queue) in a spawned process; what it puts (or an error if it died)."""
    import queue

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out))
    proc.start()
    while True:
        try:
            value = out.get(timeout=1.0)
            break
        except queue.Empty:
            if not proc.is_alive():
                raise RuntimeError(f"{target.__name__} died (exit code {proc.exitcode})") from None
    proc.join()
    return value


def exact_linear_rows(steps=1000, q=0.01, target=8.0, delta=1e-5) -> None:
    from advsim.bounds import calibrate_noise_multiplier, heuristic_epsilon

    sigma = calibrate_noise_multiplier(target, delta, steps, q)
    heuristic = heuristic_epsilon(delta, steps, q, sigma)
    print(
        f"exact linear T={steps}: LinearProcess({steps}, {q:g}, sigma {sigma:.6f} = calibrated "
        f"to eps {target:g}), delta {delta:g}; heuristic_epsilon (exact here, Thm 1 of "
        f"arXiv:2410.06186) = {heuristic:.6f}; each rung in a fresh process (imports "
        "excluded, compilation included):"
    )
    print(
        f"  {'cells/sd':>8} {'nodes':>6} {'epsilon':>9} {'rel. err':>9} {'err. est.':>9} "
        f"{'est./eps':>8} | {'1st wall':>8} {'CPU':>6} | {'2nd wall':>8} {'CPU':>6} | "
        f"{'load':>5}"
    )
    chosen = None
    for cells in EXACT_LADDER:
        r = _in_fresh_process(_exact_linear_worker, cells, steps, q, sigma, delta)
        rel = abs(r["epsilon"] / heuristic - 1)
        ok = r["error"] < EXACT_RTOL * r["epsilon"] and rel < EXACT_RTOL
        print(
            f"  {cells:>8g} {r['nodes']:>6} {r['epsilon']:>9.6f} {rel:>9.1e} "
            f"{r['error']:>9.1e} {r['error'] / r['epsilon']:>8.1e} | {r['wall1']:>7.2f}s "
            f"{r['cpu1']:>5.2f}s | {r['wall2']:>7.2f}s {r['cpu2']:>5.2f}s | {r['load']:>5.2f}"
            f"  {'<- both below 1e-3' if ok else '(not both below 1e-3)'}",
            flush=True,
        )
        if ok:
            chosen = (cells, r)
            break
    if chosen is None:
        print(f"  no rung of {EXACT_LADDER} reached {EXACT_RTOL:g} relative accuracy")
        return
    cells, r = chosen
    print(
        f"  exact linear T={steps} at {EXACT_RTOL:g} relative accuracy: cells_per_sd "
        f"{cells:g}, {r['nodes']} nodes, first call {r['wall1']:.2f} s wall (target < 10 s), "
        f"second {r['wall2']:.2f} s"
    )


def _heatmap_groups(grouping):
    cells = [(s, b) for s in HEATMAP_SIGMAS for b in HEATMAP_BATCHES]
    if grouping == "one":
        return [cells]
    if grouping == "by-B":  # the grid's nodes grow with B / sigma; sigma moves them less
        return [[c for c in cells if c[1] == b] for b in HEATMAP_BATCHES]
    if grouping == "separate":
        return [[c] for c in cells]
    raise ValueError(grouping)


def _exact_heatmap_worker(grouping, delta, out):
    """In a fresh process: every cell at the default accuracy, in `grouping`'s batched
    calls; then the cells whose error estimate is not below EXACT_RTOL x epsilon again, in
    one batched call at twice the cells per sd (up to twice), the time counted."""
    from advsim.exact import DEFAULT_CELLS_PER_SD, last_iterate_epsilons
    from advsim.mechanisms import ThresholdLandscape

    load = _load()
    results, calls = {}, []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for group in _heatmap_groups(grouping):
        mechs = [ThresholdLandscape(HEATMAP_STEPS, s, b) for s, b in group]
        res, wall, cpu = _timed_call(last_iterate_epsilons, mechs, delta, progress=False)
        calls.append((group, res[0].nodes, wall, cpu))
        for cell, r in zip(group, res, strict=True):
            results[cell] = (r.epsilon, r.error, r.nodes, DEFAULT_CELLS_PER_SD)
    default_wall, default_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    default = dict(results)
    cells_per_sd = DEFAULT_CELLS_PER_SD
    for _ in range(2):
        failing = [c for c, (e, err, _, _) in results.items() if not err < EXACT_RTOL * e]
        if not failing:
            break
        cells_per_sd *= 2
        mechs = [ThresholdLandscape(HEATMAP_STEPS, s, b) for s, b in failing]
        res, wall, cpu = _timed_call(
            last_iterate_epsilons, mechs, delta, cells_per_sd=cells_per_sd, progress=False
        )
        calls.append((failing, res[0].nodes, wall, cpu, cells_per_sd))
        for cell, r in zip(failing, res, strict=True):
            results[cell] = (r.epsilon, r.error, r.nodes, cells_per_sd)
    out.put({
        "results": results, "default": default, "calls": calls, "load": load,
        "default_wall": default_wall, "default_cpu": default_cpu,
        "wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0,
        "load_after": _load(),
    })  # fmt: skip


def exact_heatmap_rows(groupings, delta=1e-5) -> None:
    print(
        f"exact landscape heatmap: ThresholdLandscape(T={HEATMAP_STEPS}, sigma, B), sigma in "
        f"{HEATMAP_SIGMAS}, B in {HEATMAP_BATCHES}, delta {delta:g}, default accuracy (a cell "
        "whose error estimate is not below 1e-3 x eps is redone at twice the cells per sd, "
        "its time counted); each grouping in a fresh process (imports excluded, compilation "
        "included):"
    )
    runs = {}
    for grouping in groupings:
        r = runs[grouping] = _in_fresh_process(_exact_heatmap_worker, grouping, delta)
        calls = "; ".join(
            f"{len(c[0])} cell{'s' if len(c[0]) > 1 else ''}"
            f"{f' at {c[4]:g} cells/sd' if len(c) > 4 else ''}, {c[1]} nodes: "
            f"{c[2]:.2f} s wall, {c[3]:.2f} s CPU"
            for c in r["calls"]
        )
        print(
            f"  {grouping:>8}: total {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU (default "
            f"accuracy {r['default_wall']:.2f} s wall, {r['default_cpu']:.2f} s CPU); load "
            f"{r['load']:.2f} -> {r['load_after']:.2f}; calls: {calls}",
            flush=True,
        )
    best = min(runs, key=lambda g: runs[g]["wall"])
    r = runs[best]
    results, default = r["results"], r["default"]
    print(
        f"  exact landscape heatmap ({best}): {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU "
        "(target < 30 s); exact eps(delta), rows sigma, columns B:"
    )
    print("    " + f"{'sigma | B':>9}" + "".join(f"{b:>10}" for b in HEATMAP_BATCHES))
    for s in HEATMAP_SIGMAS:
        row = "".join(f"{results[(s, b)][0]:>10.5f}" for b in HEATMAP_BATCHES)
        print(f"    {s:>9g}{row}")
    print("    error estimate / epsilon at default accuracy (* : not below 1e-3, redone):")
    for s in HEATMAP_SIGMAS:
        row = ""
        for b in HEATMAP_BATCHES:
            e, err, _, _ = default[(s, b)]
            row += f"{err / e:>9.1e}{' ' if err < EXACT_RTOL * e else '*'}"
        print(f"    {s:>9g}{row}")
    redone = {c: v for c, v in results.items() if v[3] != default[c][3]}
    for (s, b), (e, err, nodes, cells) in redone.items():
        e0 = default[(s, b)][0]
        print(
            f"    sigma {s:g}, B {b}: at {cells:g} cells/sd eps {e:.6f}, error estimate "
            f"{err:.1e} ({err / e:.1e} relative; {nodes} nodes); the default grid's eps "
            f"{e0:.6f} differs by {abs(e0 / e - 1):.1e} relative"
        )
    worst = max(v[1] / v[0] for v in results.values())
    print(f"    largest error estimate / epsilon, final: {worst:.1e} (want < {EXACT_RTOL:g})")


def _search_worker(out):
    import tempfile

    from advsim.figures import load_figure
    from advsim.figures._tables_search import heatmap_cells
    from advsim.search import config_from_mapping, search

    params = load_figure("machine_found").params
    cells = dict(heatmap_cells(params["heatmap_steps"], [1.0], [16], params["search"]))
    cfg = config_from_mapping({**cells["heatmap-s1-b16"], "delta": params["delta"]})
    load = _load()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as folder:
        result = search(cfg, folder, progress=False)
    out.put({
        "wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0, "load": load,
        "load_after": _load(), "summary": result.summary(),
    })  # fmt: skip


def search_rows() -> None:
    r = _in_fresh_process(_search_worker)
    s = r["summary"]
    print(
        f"search of one heatmap cell (sigma 1, B 16, T 25; machine_found's budget): "
        f"{r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU (target < 300 s wall); load "
        f"{r['load']:.2f} -> {r['load_after']:.2f}; arms {s['seconds']['gradient']:.1f} s "
        f"gradient, {s['seconds']['random']:.1f} s random, {s['seconds']['exact']:.1f} s "
        f"exact; exact eps {s['exact_epsilon']:.4f} (best paper "
        f"{s['best_paper_exact_epsilon']:.4f}, composition {s['composition_epsilon']:.4f})"
    )


def _span(values, fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{lo:{fmt}}-{hi:{fmt}}"


def summary_table(sampling: dict) -> str:
    """The speed guide's table, in Markdown, from what this run measured (`MEASURED` here
    and `sampling`, benchmark_sampling's); a row this run did not measure is left out."""
    rows = ["| what | advsim | reference method | ratio | target |", "|---|---|---|---|---|"]
    h = MEASURED.get("heuristic")
    if h:
        seconds, pld, timeout = h
        ref = f"> {timeout:.0f} s" if pld is None else f"{pld:.1f} s"
        rows.append(
            f"| `heuristic_epsilon`, T = 10^5 | {1e3 * seconds:.1f} ms | dp-accounting mixture "
            f"PLD: {ref} | | < 50 ms |"
        )
    for steps, (seconds, ref, timeout) in sorted(MEASURED["max_over_steps"].items()):
        target = "< 0.5 s" if steps <= 10_000 else "< 5 s"
        ref_text = f"> {timeout:.0f} s (every t)" if ref is None else f"{ref:.1f} s (every t)"
        ratio = f"> {timeout / seconds:.0f}x" if ref is None else f"{ref / seconds:.0f}x"
        rows.append(
            f"| `heuristic_epsilon_max_over_steps`, T = 10^{len(str(steps)) - 1} | "
            f"{seconds:.2f} s | {ref_text} | {ratio} | {target} |"
        )
    cal = MEASURED["calibration"]
    names = {
        "cold": ("`calibrate_noise_multiplier`, cold, per T", ">= 2.5x"),
        "row": ("calibration + `bounds_for` (an audit row, a sweep cell)", ">= 5x"),
        "two cells": ("two sweep cells at the same T", ""),
    }
    for key, (what, target) in names.items() if cal else ():
        ours = [v[key][0] for v in cal.values()]
        refs = [v[key][1] for v in cal.values()]
        ratios = [v[key][1] / v[key][0] for v in cal.values()]
        rows.append(
            f"| {what} | {_span(ours, '.1f')} s | {_span(refs, '.1f')} s | "
            f"{_span(ratios, '.1f')}x | {target} |"
        )
    b = sampling.get("binomial", {})
    if b:
        qs = sorted(b)
        rows.append(
            "| Binomial(10^10, q) draws, exact table vs `jax.random.binomial` (q = "
            + "; ".join(f"{q:g}" for q in qs) + ") | "
            + "; ".join(f"{b[q][0]:.0f}" for q in qs) + " ns/draw | "
            + "; ".join(f"{b[q][1]:.0f}" for q in qs) + " ns/draw | "
            + "; ".join(f"{b[q][1] / b[q][0]:.1f}x" for q in qs) + " | |"
        )  # fmt: skip
    f2 = sampling.get("figure2")
    if f2:
        rows.append(
            f"| Annamalai's Figure 2 run, q = 0.01, T = 1024 | {f2[0]:.1f} s | "
            f"{f2[1]:.1f} s (`binomial=\"jax\"`) | {f2[1] / f2[0]:.1f}x | >= 2.5x |"
        )
    n = {d: v for d, v in sampling.get("normals", {}).items() if d >= 10}
    if n:
        ds = sorted(n)
        rows.append(
            "| d-dimensional process, normals/s over the raw sampler's (CPU time), d = "
            + "; ".join(str(d) for d in ds) + " | "
            + "; ".join(f"{n[d][0]:.2f}" for d in ds) + " | "
            + _span([n[d][1] for d in ds], ".2f") + " (lanes of a whole block) | | >= 0.8 |"
        )  # fmt: skip
    return "\n".join(rows)


def _sibling(name: str):
    """The script `name`.py beside this one, as a module (its `main` prints its rows)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trials", type=int, default=1_000_000, help="runs per world of the engine rows"
    )
    parser.add_argument("--pld-timeout", type=float, default=120.0)
    parser.add_argument(
        "--reference-max-timeout",
        type=float,
        default=300.0,
        help="seconds allowed to the reference max-over-steps method (every t) at T = 10^5",
    )
    parser.add_argument(
        "--calibration-steps",
        type=int,
        nargs="+",
        default=None,
        help="T values of the calibration rows (default: the README audit's DEFAULT_STEPS; "
        "--quick: 1 100 1000)",
    )
    parser.add_argument(
        "--only",
        choices=(
            "all",
            "simulation",
            "bounds",
            "sampling",
            "exact",
            "exact-linear",
            "exact-heatmap",
            "search",
            "table",
        ),
        default="all",
        help="which rows (sampling: scripts/benchmark_sampling.py's binomial, Figure 2 and "
        "d-dimensional rows; exact: the exact engine's two rows, or one of them; table: the "
        "rows of the speed guide's table, which every run that measures them ends with)",
    )
    parser.add_argument(
        "--exact-groupings",
        nargs="+",
        choices=(*HEATMAP_GROUPINGS, "all"),
        default=[HEATMAP_GROUPINGS[0]],
        help="how the exact heatmap's 12 cells are batched (each timed in a fresh process; "
        "default: 'one', the fastest measured; 'all': every grouping)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs, fewer repeats")
    return parser


def main(argv=None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    only = args.only
    part = {
        "sampling": only in ("all", "sampling", "table"),
        "exact-linear": only in ("all", "exact", "exact-linear"),
        "exact-heatmap": only in ("all", "exact", "exact-heatmap"),
        "search": only in ("all", "search"),
        "bounds": only in ("all", "bounds", "table"),
        "simulation": only in ("all", "simulation"),
        "heuristic": only in ("all", "simulation", "table"),
    }
    devices = jax.devices()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}: {len(devices)} x "
          f"{devices[0].device_kind}")  # fmt: skip
    sampling = {}
    if part["sampling"]:
        # The sampling rows (exact huge binomials, Figure 2 of Annamalai, throughput by
        # dimension) live in their own script, run here so one command prints every figure.
        module = _sibling("benchmark_sampling")
        module.main(["--quick"] if args.quick else [])
        sampling = module.MEASURED
    if part["exact-linear"]:
        exact_linear_rows()
    if part["exact-heatmap"]:
        groupings = args.exact_groupings
        exact_heatmap_rows(HEATMAP_GROUPINGS if "all" in groupings else groupings)
    if part["search"]:
        search_rows()
    if part["bounds"]:
        from advsim.experiment import DEFAULT_STEPS

        cal_steps = args.calibration_steps or ([1, 100, 1000] if args.quick else DEFAULT_STEPS)
        calibration_rows(cal_steps)
        max_over_steps_rows(args.reference_max_timeout)
    if part["simulation"]:
        engine = _sibling("benchmark_engine")
        engine.main((["--quick"] if args.quick else []) + ["--trials", str(args.trials)])
    if part["heuristic"]:
        heuristic_row(args.pld_timeout)
    if part["sampling"] or part["bounds"] or part["heuristic"]:
        print("\nThe speed guide's table (docs/guide/speed.md), from this run:\n")
        print(summary_table(sampling))


def heuristic_row(pld_timeout: float) -> None:
    """One `heuristic_epsilon` at T = 10^5 (best of 5), beside dp-accounting's mixture PLD
    for the same T where that finishes within `pld_timeout` seconds."""
    from advsim.bounds import heuristic_epsilon

    t_big, q, sigma, delta = 100_000, 0.01, 1.0, 1e-5
    heuristic_epsilon(delta, 1000, q, sigma)  # warm caches / imports
    eps_box = []
    seconds = _best_of(lambda: eps_box.append(heuristic_epsilon(delta, t_big, q, sigma)), 5)
    print(
        f"heuristic_epsilon(T={t_big}, q={q}, sigma={sigma}, delta={delta}) = {eps_box[-1]:.6f} "
        f"in {1e3 * seconds:.1f} ms  (target < 50 ms)"
    )
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_mixture_pld_eps, args=(t_big, q, sigma, delta, out))
    proc.start()
    proc.join(pld_timeout)
    pld_seconds = None
    if proc.is_alive():
        proc.terminate()
        print(f"dp-accounting mixture PLD, same T: did not finish in {pld_timeout:.0f} s")
    else:
        eps_pld, pld_seconds = out.get()
        print(
            f"dp-accounting mixture PLD, same T:   eps = {eps_pld:.6f} in {pld_seconds:.1f} s "
            "(value_discretization_interval=1e-3)"
        )
    MEASURED["heuristic"] = (seconds, pld_seconds, pld_timeout)


if __name__ == "__main__":
    main()

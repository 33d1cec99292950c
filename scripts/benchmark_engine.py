"""Benchmark of the engine against honest references, on every core, and of the wait to start.

Prints, in one run on this machine (device kind and count first):
  1. the generator's best rate: jitted `jax.random.normal` samples per second at 10^4 ...
     2.5 x 10^7 samples per call (in cache at the small sizes, through memory at the large);
  2. the 1-D linear process (`LinearProcess` + `ProjectionScore`, 10^6 runs per world by
     default) at T in {100, 1000} and q in {0.01, 1}, in a fresh process with advsim's
     default devices (one host device per core; the hand-written scan and numpy run as
     they would: XLA's own threads, one numpy thread), each round running back to back:
     `advsim.simulate`, a
     hand-written jitted `lax.scan` of the same process (the faster of two layouts: every
     run of a world as one vector per step, or 8192-run blocks mapped one after another;
     no coin drawn at q = 1), and a numpy loop; beside them, the vector scan drawing
     through the engine's fused hash (`scan_fused`: what is left of the engine's gain once
     a hand-written scan knows that trick); trial-steps per wall second, CPU/wall and
     the load for each, and the ratios engine / scan (target >= 1.1), engine / numpy and
     engine / generator's best;
  3. every core: `advsim.simulate` at T = 100, q = 0.01, 10^6 runs per world, in fresh
     processes, alternately: pinned to one core (`taskset`, one host device), one host
     device with every core free (XLA's own threads), and the default (one host device
     per core, `advsim._cores`); wall seconds and CPU/wall of each (targets: CPU/wall >=
     1.7 on 2 cores, wall <= 0.6 x the one-core run's); skipped, saying so, on an
     accelerator;
  4. the wait to start: `advsim --help` (best of 5 fresh processes; target < 0.5 s), and
     `advsim audit` run twice with a fresh persistent compilation cache, the first filling
     it: its wall time (target <= 45 s on 2 quiet cores, for the first run too) and the
     compile time it reports (target for the second run: < 1 s).

The medians are over --repeats rounds (one round at T = 1000 unless --repeats is given).
Usage: python scripts/benchmark_engine.py [--trials 1000000] [--repeats 3] [--quick]
           [--only {all,generator,rates,cores,startup} ...] [--layout {default,accelerator}]
Figures are printed, never asserted: timings on shared machines are not tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The hand-written scan's block of runs (its second layout).
SCAN_BLOCK = 8192


def _load() -> float:
    return os.getloadavg()[0]


def _seconds(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _env(devices: str | None, parallel_lanes: bool = False) -> dict:
    """This environment, with the host device count left to advsim (`devices` None) or
    set through `ADVSIM_CPU_DEVICES`, and the accelerator's layout forced with
    `parallel_lanes` (`ADVSIM_PARALLEL_LANES=1`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    env.pop("ADVSIM_CPU_DEVICES", None)
    env.pop("ADVSIM_PARALLEL_LANES", None)
    if devices is not None:
        env["ADVSIM_CPU_DEVICES"] = devices
    if parallel_lanes:
        env["ADVSIM_PARALLEL_LANES"] = "1"
    return env


def _worker(
    args: list[str], devices: str | None, one_core: bool = False, parallel_lanes: bool = False
) -> dict:
    """This script's `--worker ARGS` in a fresh process (pinned to one core by `taskset`
    with `one_core`, the accelerator's layout forced with `parallel_lanes`); the JSON it
    prints last."""
    cmd = [sys.executable, __file__, "--worker", *args]
    if one_core:
        cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0))), *cmd]
    env = _env(devices, parallel_lanes)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"worker {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- 1. the generator ------------------------------------------------------------------------


def generator_rates(quick: bool) -> float:
    import jax
    import jax.numpy as jnp

    sizes = (10**4, 10**5, 10**6, 10**7) if quick else (10**4, 10**5, 10**6, 10**7, 25 * 10**6)
    key, rates = jax.random.key(0), {}
    for n in sizes:
        draw = jax.jit(lambda k, n=n: jax.random.normal(k, (n,), jnp.float32))
        draw(key).block_until_ready()
        calls = max(1, 2 * 10**7 // n)

        def many(draw=draw, calls=calls):
            for _ in range(calls):
                draw(key).block_until_ready()

        wall = min(_seconds(many)[0] for _ in range(3))
        rates[n] = calls * n / wall
    best = max(rates, key=rates.get)
    row = ", ".join(f"{n:.0e}: {r:.3e}" for n, r in rates.items())
    print(f"generator, jax.random.normal float32 samples/s by samples per call: {row}")
    print(f"generator's best rate: {rates[best]:.3e} samples/s at {best:.0e} per call")
    return rates[best]


# --- 2. the engine against a hand-written scan and a numpy loop -------------------------------


def _hand_scan(steps: int, q: float, trials: int, block: int, fused: bool = False):
    """A hand-written jitted `lax.scan` of the linear process (units of eta * C, sigma = 1):
    m_t = m_{t-1} + coin_t + z_t, both worlds; the runs of a world as one vector per step
    (`block` = trials) or in blocks mapped one after another. With `fused`, the draws go
    through the engine's written-out hash (`advsim._streams`, which XLA fuses; JAX's own is
    a rolled loop on the CPU): the scan a researcher would write knowing that trick."""
    import jax
    import jax.numpy as jnp

    from advsim._streams import bits_range, normal_range

    def normal(k, n):
        return normal_range(k, 0, n, jnp.float32) if fused else jax.random.normal(k, (n,))

    def bits(k, n):
        return bits_range(k, 0, n) if fused else jax.random.bits(k, (n,), jnp.uint32)

    def world(key, canary: bool):
        def run_block(b):
            bkey = jax.random.fold_in(key, b)

            def body(m, t):
                k_noise, k_coin = jax.random.split(jax.random.fold_in(bkey, t))
                z = normal(k_noise, block)
                if canary and q < 1.0:
                    bits_ = bits(k_coin, block)
                    m = m + (bits_.astype(jnp.float32) < q * 4294967296.0)
                elif canary:
                    m = m + 1.0
                return m + z, None

            return jax.lax.scan(body, jnp.zeros((block,), jnp.float32), jnp.arange(steps))[0]

        return jax.lax.map(run_block, jnp.arange(trials // block)).reshape(-1)

    @jax.jit
    def both(key):
        return world(jax.random.fold_in(key, 1), True), world(jax.random.fold_in(key, 0), False)

    return lambda: jax.block_until_ready(both(jax.random.key(0)))


def _runs_scan(steps: int, q: float, trials: int):
    """The same process written the engine's way, the accelerator's layout: every run its
    own key (`fold_in(world key, i)`), its T normals and coin bits drawn up front, one
    `lax.scan` over the steps, all runs of a world side by side (`vmap`)."""
    import jax
    import jax.numpy as jnp

    def run(world_key, i, canary: bool):
        k_noise, k_coin = jax.random.split(jax.random.fold_in(world_key, i))
        z = jax.random.normal(k_noise, (steps,), jnp.float32)
        if canary and q < 1.0:
            bits = jax.random.bits(k_coin, (steps,), jnp.uint32)
            z = z + (bits.astype(jnp.float32) < q * 4294967296.0)
        elif canary:
            z = z + 1.0
        return jax.lax.scan(lambda m, x: (m + x, None), jnp.float32(0.0), z)[0]

    # Runs side by side in blocks whose up-front draws hold at most 2^26 floats (all of a
    # world's 10^6 runs at T = 100; 2^16 at a time at T = 1000, mapped one after another).
    block = min(trials, 2 ** max(0, 26 - math.ceil(math.log2(steps))))
    blocks = math.ceil(trials / block)

    @jax.jit
    def both(key):
        idx = jnp.arange(blocks * block, dtype=jnp.uint32).reshape(blocks, block)
        worlds = [
            jax.lax.map(jax.vmap(lambda i, w=w: run(jax.random.fold_in(key, w), i, w == 1)),
                        idx).reshape(-1)  # fmt: skip
            for w in (1, 0)
        ]
        return tuple(worlds)

    return lambda: jax.block_until_ready(both(jax.random.key(0)))


def _numpy_loop(steps: int, q: float, trials: int):
    import numpy as np

    def both():
        rng = np.random.default_rng(0)
        for canary in (True, False):
            m = np.zeros(trials, np.float32)
            for _ in range(steps):
                m += rng.standard_normal(trials, dtype=np.float32)
                if canary:
                    m += rng.random(trials, dtype=np.float32) < q if q < 1.0 else 1.0
        return m

    return both


def rates_worker(steps: int, q: float, trials: int, repeats: int) -> dict:
    """Median wall and CPU seconds of the engine, the scan (best layout) and numpy (and,
    in the accelerator's layout, the scan written the engine's way)."""
    import jax

    parallel_lanes = os.environ.get("ADVSIM_PARALLEL_LANES") == "1"

    from advsim import simulate
    from advsim.adversaries import ProjectionScore
    from advsim.mechanisms import LinearProcess

    mech = LinearProcess(steps=steps, sampling_prob=q, noise_multiplier=1.0)
    fns = {
        "engine": lambda: simulate(mech, ProjectionScore(), trials, key=1, progress=False),
        "scan_vector": _hand_scan(steps, q, trials, trials),
        "scan_blocks": _hand_scan(steps, q, trials, SCAN_BLOCK),
        "numpy": _numpy_loop(steps, q, trials),
        "scan_fused": _hand_scan(steps, q, trials, trials, fused=True),
    }
    if parallel_lanes:  # the accelerator's layout: the scan written the engine's way too
        fns["scan_runs"] = _runs_scan(steps, q, trials)
    # Compile: the same run count gives the same chunk shape (a smaller one may not).
    simulate(mech, ProjectionScore(), trials, key=0, progress=False)
    for name in fns:
        if name.startswith("scan"):
            fns[name]()  # compile
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append((*_seconds(fn), _load()))
    out = {k: [statistics.median(x) for x in zip(*ts, strict=True)] for k, ts in times.items()}
    return {"devices": len(jax.devices()), **out}


def rates_rows(
    trials: int, repeats: int | None, generator_best: float | None, layout: str = "default"
) -> None:
    import jax

    forced = layout == "accelerator" and jax.default_backend() == "cpu"
    where = ("every core (the engine: one host device per core; the others: XLA's threads)"
             if jax.default_backend() == "cpu" else f"on {jax.default_backend()} "
             f"({jax.devices()[0].device_kind}; numpy on one CPU core)")  # fmt: skip
    if forced:
        where += ("; the accelerator's layout forced (ADVSIM_PARALLEL_LANES=1: every run of "
                  "a device's chunk side by side), against the scan written the same way "
                  "(scan_runs: every run its own key, its T draws up front, all runs of a "
                  "world side by side)")  # fmt: skip
    print(f"1-D linear process, {trials:.0e} runs per world, {where}, trial-steps/s per wall "
          "second (CPU/wall, load):")  # fmt: skip
    on_accelerator = forced or jax.default_backend() != "cpu"
    target = 0.8 if on_accelerator else 1.1
    for steps in (100, 1000):
        rounds = repeats or (3 if steps <= 100 else 1)
        for q in (0.01, 1.0):
            args = ["rates", str(steps), str(q), str(trials), str(rounds)]
            res = _worker(args, None, parallel_lanes=forced)
            work = 2 * trials * steps
            rate = {k: work / v[0] for k, v in res.items() if k != "devices"}
            # The reference in the accelerator's layout: the scan written that way (forced
            # on a CPU: every run its own key, all side by side); on a GPU, the vector scan.
            scans = (("scan_runs",) if forced else ("scan_vector",)) if on_accelerator else (
                "scan_vector", "scan_blocks")  # fmt: skip
            scan = max(scans, key=rate.get)
            text = "  ".join(
                f"{k} {rate[k]:.3e} ({res[k][1] / res[k][0]:.2f}, {res[k][2]:.1f})" for k in rate
            )
            print(f"  T={steps} q={q} rounds={rounds}: {text}")
            ratios = f"engine/scan {rate['engine'] / rate[scan]:.2f} (target >= {target}; {scan})"
            if forced:
                ratios += f", engine/scan_vector {rate['engine'] / rate['scan_vector']:.2f}"
            ratios += (f", engine/scan_fused {rate['engine'] / rate['scan_fused']:.2f} (the "
                       "vector scan drawing through the engine's fused hash)")  # fmt: skip
            ratios += f", engine/numpy {rate['engine'] / rate['numpy']:.2f}"
            if generator_best:
                ratios += f", engine/generator's best {rate['engine'] / generator_best:.2f}"
            print(f"  T={steps} q={q}: {ratios}")


# --- 3. every core -----------------------------------------------------------------------------


def cores_worker(steps: int, q: float, trials: int) -> dict:
    import jax

    from advsim import simulate
    from advsim.adversaries import ProjectionScore
    from advsim.mechanisms import LinearProcess

    mech = LinearProcess(steps=steps, sampling_prob=q, noise_multiplier=1.0)
    simulate(mech, ProjectionScore(), trials, key=0, progress=False)  # compile every shape
    wall, cpu = _seconds(lambda: simulate(mech, ProjectionScore(), trials, key=1, progress=False))
    return {"devices": len(jax.devices()), "wall": wall, "cpu": cpu, "load": _load()}


def cores_rows(trials: int, repeats: int) -> None:
    pinned, one, every = [], [], []
    args = ["cores", "100", "0.01", str(trials)]
    for _ in range(repeats):
        pinned.append(_worker(args, "1", one_core=True))
        one.append(_worker(args, "1"))
        every.append(_worker(args, None))

    def summary(rows):
        wall = statistics.median(r["wall"] for r in rows)
        ratio = statistics.median(r["cpu"] / r["wall"] for r in rows)
        load = statistics.median(r["load"] for r in rows)
        return wall, ratio, load, rows[0]["devices"]

    (w0, c0, l0, _), (w1, c1, l1, d1) = summary(pinned), summary(one)
    wn, cn, ln, dn = summary(every)
    print(f"every core, T=100 q=0.01, {trials:.0e} runs per world, median of {repeats}:")
    print(
        f"  one core (taskset, 1 device) {w0:.2f} s (CPU/wall {c0:.2f}, load {l0:.1f}); "
        f"{d1} device, every core free {w1:.2f} s (CPU/wall {c1:.2f}, load {l1:.1f}); "
        f"default {dn} devices {wn:.2f} s (CPU/wall {cn:.2f}, load {ln:.1f}; target >= 1.7)"
    )
    print(f"  wall of the default over one core {wn / w0:.2f} (target <= 0.6), over one "
          f"device {wn / w1:.2f}")  # fmt: skip


# --- 4. the wait to start ------------------------------------------------------------------


def startup_rows(quick: bool) -> None:
    advsim = [sys.executable, "-m", "advsim.cli"]
    helps = [_seconds(lambda: subprocess.run([*advsim, "--help"], capture_output=True))[0]
             for _ in range(5)]  # fmt: skip
    print(f"advsim --help: best of 5 fresh processes {min(helps):.2f} s (target < 0.5 s)")
    args = ["audit", "--no-exact"] if quick else ["audit"]
    if quick:
        args += ["--steps", "10", "100", "--trials", "1e5"]
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(None) | {"JAX_COMPILATION_CACHE_DIR": str(Path(tmp) / "cache")}
        env.pop("ADVSIM_NO_COMPILE_CACHE", None)
        for run in ("first", "second"):
            out_dir = Path(tmp) / run
            cmd = [*advsim, *args, "--out", str(out_dir)]
            wall, _ = _seconds(lambda cmd=cmd: _run_audit(cmd, env))
            compile_s = re.search(r"compilation ([0-9.]+) s", _LAST[0])  # its time report
            report = re.search(r"^time: .*$", _LAST[0], flags=re.M)
            shown = f"{float(compile_s.group(1)):.1f} s" if compile_s else "(not reported)"
            print(f"advsim {' '.join(args)} ({run} run, load {_load():.1f}): wall {wall:.1f} s "
                  f"(target <= 45 s), compilation {shown}"
                  + (" (target < 1 s)" if run == "second" else ""))  # fmt: skip
            if report:
                print(f"  its own {report.group(0)}")


_LAST = [""]


def _run_audit(cmd, env) -> None:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    _LAST[0] = out.stdout + out.stderr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=float, default=1e6, help="runs per world (rows 2, 3)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 3; 1 at T=1000)")
    parser.add_argument("--only", choices=("all", "generator", "rates", "cores", "startup"),
                        nargs="+", default=["all"], help="which rows (one or more)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="10^5 runs, fewer rounds")
    parser.add_argument("--layout", choices=("default", "accelerator"), default="default",
                        help="rates: the accelerator's layout, forced on a CPU")  # fmt: skip
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> None:
    args = _parser().parse_args(argv)
    if args.worker:
        kind, *values = args.worker
        steps, q, trials = int(values[0]), float(values[1]), int(values[2])
        res = (rates_worker(steps, q, trials, int(values[3])) if kind == "rates"
               else cores_worker(steps, q, trials))  # fmt: skip
        print(json.dumps(res))
        return
    import jax

    import advsim  # noqa: F401  (one host device per core, before JAX starts)

    trials = int(1e5 if args.quick else args.trials)
    devices = jax.devices()
    print(f"jax {jax.__version__}: {len(devices)} x {devices[0].device_kind} "
          f"({jax.default_backend()}), {os.cpu_count()} CPUs, load {_load():.1f}")  # fmt: skip
    best = generator_rates(args.quick) if {"all", "generator"} & set(args.only) else None
    if {"all", "rates"} & set(args.only):
        rates_rows(trials, 1 if args.quick else args.repeats, best, args.layout)
    if {"all", "cores"} & set(args.only) and jax.default_backend() != "cpu":
        print(f"every core: not measured on {jax.default_backend()} (the runs are on the "
              "accelerator; host devices per core are the CPU's path)")  # fmt: skip
    elif {"all", "cores"} & set(args.only):
        cores_rows(trials, 1 if args.quick else (args.repeats or 3))
    if {"all", "startup"} & set(args.only):
        startup_rows(args.quick)


if __name__ == "__main__":
    main()

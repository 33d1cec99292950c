"""Benchmark of the engine's sampling (binomial draws and noise), as ratios measured in one run.

Prints:
  1. ns per draw of Binomial(10^10, q) by the exact inverse-CDF table (`advsim._binomial`)
     and by `jax.random.binomial`, and their ratio;
  2. the time of Annamalai's Figure 2 simulation at q = 0.01, T = 1024 (the
     likelihood-encoding loss, sigma calibrated to --epsilon at delta = 1e-5 as in
     `advsim/figures/defs/its_our_loss_figure2.toml`) through `advsim.simulate` with
     `binomial="jax"` and with the exact table (`binomial="table"`), and the speed-up
     (target >= 2.5);
  3. for d in {1, 10, 30, 100}: the engine's normals per second (LinearProcess, dim d,
     2 x trials x T x d normals) over raw `jax.random.normal` of the same total count
     (jitted), by wall clock and by this process's CPU time, with the vmapped width chosen
     by dimension and with the width of a whole block (the noise is drawn flat in both),
     target >= 0.8 for d in {10, 30, 100}.

Every figure is the median over --repeats rounds; in each round the compared paths run
back to back, so a ratio is taken between measurements made under the same load.

Usage: python scripts/benchmark_sampling.py [--trials 16384] [--repeats 5] [--quick] [--only ...]
Figures are printed, never asserted: timings on shared machines are not tests.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import jax
import jax.numpy as jnp

#: What this run measured, for `scripts/benchmark.py`'s summary table (the speed guide's):
#: "binomial" {q: (table ns, jax ns)}, "figure2" (table s, jax s), "normals" {d: (engine
#: CPU ratio, whole-block CPU ratio)}.
MEASURED: dict = {"binomial": {}, "normals": {}}


def _seconds(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _rounds(fns: dict, repeats: int, cpu: bool = False) -> dict:
    """Median seconds of each of `fns`, run back to back in each of `repeats` rounds:
    wall-clock, or with `cpu` this process's CPU time (less sensitive to other jobs)."""
    for fn in fns.values():
        fn()  # compile and warm up
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(_seconds(fn)[int(cpu)])
    return {name: statistics.median(ts) for name, ts in times.items()}


def binomial_draws(draws: int, q: float, repeats: int) -> None:
    from advsim._binomial import binomial_table

    n = 10**10
    table = binomial_table(n, q)
    key = jax.random.key(0)
    new = jax.jit(lambda k: table.sample((draws,), key=k))
    jax_binomial = jax.jit(lambda k: jax.random.binomial(k, float(n), q, (draws,), jnp.float64))
    t = _rounds(
        {
            "table": lambda: new(key).block_until_ready(),
            "jax.random.binomial": lambda: jax_binomial(key).block_until_ready(),
        },
        repeats,
    )
    ns = {k: 1e9 * v / draws for k, v in t.items()}
    ratio = ns["jax.random.binomial"] / ns["table"]
    MEASURED["binomial"][q] = (ns["table"], ns["jax.random.binomial"])
    print(f"1. Binomial(10^10, {q}), {draws} draws (table: {table.cdf.shape[0]} entries):")
    print(
        f"   table {ns['table']:.0f} ns/draw, jax.random.binomial "
        f"{ns['jax.random.binomial']:.0f} ns/draw: ratio {ratio:.2f}x"
    )


def figure2_run(trials: int, epsilon: float, repeats: int) -> None:
    import advsim
    from advsim.adversaries import LikelihoodSumDecoder
    from advsim.bounds import calibrate_noise_multiplier
    from advsim.mechanisms import LikelihoodEncodingLoss

    q, steps, delta = 0.01, 1024, 1e-5
    sigma = calibrate_noise_multiplier(epsilon, delta, steps, q)
    mech = LikelihoodEncodingLoss(steps, q, sigma, scale="wrap_free")
    adv = LikelihoodSumDecoder()

    def run(binomial):
        return lambda: advsim.simulate(mech, adv, trials, key=1, binomial=binomial, progress=False)

    t = _rounds({"jax": run("jax"), "table": run("table")}, repeats)
    MEASURED["figure2"] = (t["table"], t["jax"])
    print(
        f"2. Figure 2 run, q={q}, T={steps}, eps={epsilon} (sigma={sigma:.4f}), "
        f"{trials} runs per world:"
    )
    print(
        f"   binomial='jax' {t['jax']:.2f} s, binomial='table' (the default) {t['table']:.2f} s: "
        f"speed-up {t['jax'] / t['table']:.2f}x  (target >= 2.5)"
    )


@contextlib.contextmanager
def _vector_coordinates(value):
    import advsim._layout as layout_module

    previous = layout_module.VECTOR_COORDINATES
    layout_module.VECTOR_COORDINATES = value
    try:
        yield
    finally:
        layout_module.VECTOR_COORDINATES = previous


def normals_ratio(dims, steps: int, normals: int, repeats: int) -> None:
    import advsim
    from advsim.adversaries import ProjectionScore
    from advsim.mechanisms import LinearProcess

    print(f"3. engine normals/s over raw jax.random.normal normals/s (same count), T={steps}:")
    for d in dims:
        mech = LinearProcess(steps, 0.01, 1.0, dim=d)
        # Whole blocks in one chunk: no run is computed and dropped.
        block = advsim.block_size(mech)
        trials = block * max(1, round(normals / (2 * steps * d * block)))
        total = 2 * trials * steps * d
        raw = jax.jit(lambda k, total=total: jax.random.normal(k, (total,), jnp.float32))
        key = jax.random.key(0)

        def engine(mech=mech, trials=trials):
            advsim.simulate(
                mech, ProjectionScore(), trials, key=1, chunk_size=trials, progress=False
            )

        def whole_block_engine(mech=mech, trials=trials):
            with _vector_coordinates(2**62):  # lanes the width of a whole block
                engine(mech, trials)

        fns = {
            "raw": lambda raw=raw, key=key: raw(key).block_until_ready(),
            "engine": engine,
            "whole_block": whole_block_engine,
        }
        wall, cpu = _rounds(fns, repeats), _rounds(fns, repeats, cpu=True)
        ratio = {k: (wall["raw"] / wall[k], cpu["raw"] / cpu[k]) for k in ("engine", "whole_block")}
        MEASURED["normals"][d] = (ratio["engine"][1], ratio["whole_block"][1])
        width = advsim._layout.vector_width(mech)
        print(
            f"   d={d:4d}: wall {ratio['engine'][0]:.2f}, CPU {ratio['engine'][1]:.2f}"
            f" (width {width});  whole-block width {block}: wall "
            f"{ratio['whole_block'][0]:.2f}, CPU {ratio['whole_block'][1]:.2f};  "
            f"raw {total / wall['raw']:.3g} normals/s, {total} normals"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16384, help="Figure 2 runs per world")
    parser.add_argument("--epsilon", type=float, default=2.0, help="Figure 2's eps")
    parser.add_argument("--steps", type=int, default=100, help="T of the d-dim processes")
    parser.add_argument("--normals", type=int, default=8_000_000, help="per d-dim measurement")
    parser.add_argument("--draws", type=int, default=2**20, help="binomial draws per call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=["binomial", "figure2", "normals"], default=None)
    parser.add_argument("--quick", action="store_true", help="fewer runs and rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.repeats, args.normals = 4096, 3, 2_000_000
    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.devices()}; "
        f"medians of {args.repeats} interleaved rounds"
    )
    jax.config.update("jax_enable_x64", True)  # the likelihood encoding needs float64
    if args.only in (None, "binomial"):
        for q in (0.01, 0.5):
            binomial_draws(args.draws, q, args.repeats)
    if args.only in (None, "figure2"):
        figure2_run(args.trials, args.epsilon, args.repeats)
    jax.config.update("jax_enable_x64", False)  # the d-dim processes run in float32
    if args.only in (None, "normals"):
        normals_ratio((1, 10, 30, 100), args.steps, args.normals, args.repeats)


if __name__ == "__main__":
    main()

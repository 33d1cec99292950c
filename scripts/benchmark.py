"""Benchmark: simulation throughput against the raw sampler, and the speed of the bounds.

Prints, in one run on this machine:
  1. simulated trial-steps per second of the linear 1-D process at T = 1000 run step by
     step through the generic engine (`advsim.simulate`: Poisson coin, clipping, noise, one
     scan step per DP-SGD step; no closed-form shortcut),
  2. raw `jax.random.normal` samples per second (one jitted call drawing many samples),
  3. their ratio (target: >= 0.5),
  4. the time of one `heuristic_epsilon` at T = 10^5 (target: < 50 ms), beside
     dp-accounting's mixture-of-Gaussians PLD for the same T where that finishes in time.

Usage: python scripts/benchmark.py [--trials 200000] [--steps 1000] [--quick]
Figures are printed, never asserted: timings on shared machines are not tests.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import jax
import numpy as np


def _best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def simulation_rate(trials: int, steps: int, repeats: int) -> float:
    from advsim import simulate
    from advsim.adversaries import ProjectionScore
    from advsim.mechanisms import LinearProcess

    mech = LinearProcess(steps=steps, sampling_prob=0.01, noise_multiplier=1.0)
    adv = ProjectionScore()
    simulate(mech, adv, 2048, key=0, progress=False)  # compile
    seconds = _best_of(lambda: simulate(mech, adv, trials, key=1, progress=False), repeats)
    return 2 * trials * steps / seconds  # both worlds


def raw_normal_rate(samples: int, repeats: int) -> float:
    draw = jax.jit(lambda k: jax.random.normal(k, (samples,), jax.numpy.float32))
    key = jax.random.key(0)
    draw(key).block_until_ready()
    return samples / _best_of(lambda: draw(key).block_until_ready(), repeats)


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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000, help="runs per world")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--pld-timeout", type=float, default=120.0)
    parser.add_argument("--quick", action="store_true", help="fewer runs, fewer repeats")
    args = parser.parse_args(argv)
    trials, repeats = (20_000, 1) if args.quick else (args.trials, 3)

    from advsim.bounds import heuristic_epsilon

    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.devices()}")
    sim = simulation_rate(trials, args.steps, repeats)
    raw = raw_normal_rate(2 * trials * args.steps // 20, repeats)
    print(f"simulation, linear 1-D, T={args.steps}: {sim:.3e} trial-steps/s")
    print(f"raw jax.random.normal:              {raw:.3e} samples/s")
    print(f"ratio simulation / raw sampler:     {sim / raw:.2f}  (target >= 0.5)")

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
    proc.join(args.pld_timeout)
    if proc.is_alive():
        proc.terminate()
        print(f"dp-accounting mixture PLD, same T: did not finish in {args.pld_timeout:.0f} s")
    else:
        eps_pld, pld_seconds = out.get()
        print(
            f"dp-accounting mixture PLD, same T:   eps = {eps_pld:.6f} in {pld_seconds:.1f} s "
            "(value_discretization_interval=1e-3)"
        )


if __name__ == "__main__":
    main()

"""Speed of the real-model mechanisms, in models trained per second.

For logistic regression (30 -> 1, d = 31) and the MLP (30-32-1, d = 1025) on breast_cancer
(n = 427 training examples), T = 100 steps, Poisson rate q = 64/427 (batches of about 64),
the canary out and scored by `BiasedCoordinate`, compilation excluded (a first call of the
same shapes warms it), prints in one run:

1. models trained per second by `advsim.simulate` on both engine paths: "gathered" (the
   default: per-example gradients of the sampled examples only, gathered into blocks of
   B_max = `poisson_batch_bound(427, q)` = 112) and "all n" (`max_batch_size=427`: all 427
   per-example gradients every step, weighted by the memberships); wall-clock and CPU
   (process time summed over the cores) rates, since other processes may share the machine;
2. what a sampled batch larger than B_max costs: the gathered path with B_max = 16 (4 to 6
   blocks every step) against the default, and the largest difference of 64 final models
   from the all-n path on the same keys (same memberships, so only the order of float32
   additions differs);
3. the per-example-gradient throughput of one step's gradient work over a gathered batch
   of B_max (`vmap(grad)`, clipped, masked sum), against the same batch without clipping
   or per-example gradients (one `grad` of the summed masked loss): their ratio is the
   price of per-example clipping. Measured on as many models side by side as the engine
   vectorises (`advsim._layout.vector_width`: 64 for logistic regression, 4 for the
   MLP), since wider batches of models change both rates.

The load average is printed before and after.

    python scripts/benchmark_models.py [--trials 512] [--repeats 3]

(`--trials` runs per world for logistic regression; the MLP, about 15x slower per model on
the all-n path, runs a quarter of them.)
"""

from __future__ import annotations

import argparse
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import advsim
from advsim import poisson_batch_bound
from advsim._dpsgd import bernoulli_from_bits, clip_gradients, run_mechanism
from advsim._layout import vector_width
from advsim.adversaries import BiasedCoordinate
from advsim.mechanisms import RealModelGradientCanary

N_TRAIN, BATCH, STEPS, SMALL_B = 427, 64, 100, 16
Q = BATCH / N_TRAIN


def _best(fn, repeats: int) -> tuple[float, float]:
    """The fastest of `repeats` calls after a warm-up: (wall seconds, CPU seconds)."""
    fn()  # compile
    best = (np.inf, np.inf)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def _mechanism(model: str, max_batch_size: int | None) -> RealModelGradientCanary:
    return RealModelGradientCanary(
        STEPS, Q, 1.0, model=model, learning_rate=0.5 / BATCH, max_batch_size=max_batch_size
    )


def _models_per_second(mech, trials: int, repeats: int) -> tuple[float, float]:
    adversary = BiasedCoordinate(0)

    def run():
        advsim.simulate(mech, adversary, trials, 0, chunk_size=trials, progress=False)

    wall, cpu = _best(run, repeats)
    return 2 * trials / wall, 2 * trials / cpu  # both worlds


def _largest_difference(model: str, sizes: tuple[int, ...], runs: int = 64) -> float:
    """Max |m_T(B) - m_T(all n)| over `runs` keys, for each B in `sizes`."""
    keys = jax.random.split(jax.random.key(7), runs)

    def finals(mech):
        return jax.jit(jax.vmap(lambda k: run_mechanism(mech, False, key=k)))(keys)

    reference = np.asarray(finals(_mechanism(model, N_TRAIN)))
    return max(
        float(np.max(np.abs(np.asarray(finals(_mechanism(model, b))) - reference))) for b in sizes
    )


def _gradient_work(mech, models: int, repeats: int) -> dict:
    size = mech.max_batch_size
    keys = jax.random.split(jax.random.key(1), models)
    thetas = jax.vmap(lambda k: mech.init_model() + 0.1 * jax.random.normal(k, (mech.dim,)))(keys)
    masks = bernoulli_from_bits(jax.random.key(2), Q, (models, N_TRAIN))
    index = jnp.argsort(~masks, axis=1, stable=True)[:, :size]  # sampled first, then padding
    valid = jnp.take_along_axis(masks, index, axis=1)
    x, y = jnp.asarray(mech.features), jnp.asarray(mech.labels)

    @eqx.filter_jit
    def per_example(thetas, index, valid):
        def one(theta, idx, ok):
            grads = clip_gradients(mech.example_gradients(theta, idx, jnp.int32(1)), 1.0)
            return jnp.sum(jnp.where(ok[:, None], grads, 0.0), 0)

        return jax.vmap(one)(thetas, index, valid)

    @eqx.filter_jit
    def summed(thetas, index, valid):
        def one(theta, idx, ok):
            def total(th):
                losses = jax.vmap(mech.loss, in_axes=(None, 0, 0))(th, x[idx], y[idx])
                return jnp.sum(jnp.where(ok, losses, 0.0))

            return jax.grad(total)(theta)

        return jax.vmap(one)(thetas, index, valid)

    wall_pe, cpu_pe = _best(lambda: per_example(thetas, index, valid).block_until_ready(), repeats)
    wall_sum, cpu_sum = _best(lambda: summed(thetas, index, valid).block_until_ready(), repeats)
    return dict(
        grads_per_s=models * size / wall_pe,
        wall_ratio=wall_pe / wall_sum,
        cpu_ratio=cpu_pe / cpu_sum,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=512, help="runs per world")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    b_max = poisson_batch_bound(N_TRAIN, Q)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"devices: {jax.devices()}; CPU cores: {os.cpu_count()}")
    print(
        f"T = {STEPS}, q = {BATCH}/{N_TRAIN}, B_max = {b_max}: "
        f"P(Binomial({N_TRAIN}, q) > {b_max}) = {stats.binom.sf(b_max, N_TRAIN, Q):.1e} per "
        f"step; with B_max = {SMALL_B}, P(> {SMALL_B}) = {stats.binom.sf(SMALL_B, N_TRAIN, Q):.4f}"
    )
    print()
    print("models trained per second (both worlds; wall / per CPU-second)")
    print(
        f"{'model':>9} {'d':>5} {'gathered':>17} {'all n':>17} {'speed-up':>15} "
        f"{f'B_max = {SMALL_B}':>17} {'max |diff|':>10}"
    )
    for model in ("logistic", "mlp"):
        trials = args.trials if model == "logistic" else max(2, args.trials // 4)
        rates = {
            name: _models_per_second(_mechanism(model, b), trials, args.repeats)
            for name, b in (("gathered", None), ("all", N_TRAIN), ("small", SMALL_B))
        }
        diff = _largest_difference(model, (b_max, SMALL_B))
        g, a, s = rates["gathered"], rates["all"], rates["small"]
        print(
            f"{model:>9} {_mechanism(model, None).dim:>5} {g[0]:>8.1f} /{g[1]:>7.1f} "
            f"{a[0]:>8.1f} /{a[1]:>7.1f} {g[0] / a[0]:>6.2f} /{g[1] / a[1]:>6.2f}x "
            f"{s[0]:>8.1f} /{s[1]:>7.1f} {diff:>10.1e}"
        )
    print()
    print(f"one step's gradient work over a gathered batch of B_max = {b_max}")
    print(
        f"{'model':>9} {'models':>6} {'per-ex grads/s':>15} {'clip / summed (wall)':>21} "
        f"{'(CPU)':>6}"
    )
    for model in ("logistic", "mlp"):
        mech = _mechanism(model, None)
        lanes = vector_width(mech)
        work = _gradient_work(mech, lanes, max(args.repeats, 20))
        print(
            f"{model:>9} {lanes:>6} {work['grads_per_s']:>15.3g} {work['wall_ratio']:>21.2f} "
            f"{work['cpu_ratio']:>6.2f}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""Speed of the real-model mechanisms (issue 17, point 6).

Prints, for logistic regression (30 -> 1) and the MLP (30-32-1) on breast_cancer:

1. models trained per second by `advsim.simulate` (T = 100 steps, Poisson rate q = 64/427,
   so batches of about 64; the canary out, scored by `BiasedCoordinate`), compilation
   excluded (a first call of the same shapes warms it);
2. the per-example-gradient throughput of one DP-SGD step's gradient work, as the engine
   does it (`vmap(grad)` over all n = 427 examples, clipped, weighted by the 0/1 counts),
   against the same work without clipping or per-example gradients (one `grad` of the
   summed, masked loss): their ratio is the price of per-example clipping;
3. the same per-example work over a gathered batch of B_max = 128 examples (a fixed
   maximum batch with a mask; Binomial(427, 64/427) exceeds 128 with probability < 1e-12),
   against all n: what a sampled fixed-size batch would save over the engine's
   one-group-per-example form.

All ratios are measured within one run (other processes share the CPU).

    python scripts/benchmark_models.py [--trials 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
from scipy import stats

import advsim
from advsim._dpsgd import clip_gradients
from advsim.adversaries import BiasedCoordinate
from advsim.mechanisms import RealModelGradientCanary

N_TRAIN, BATCH, B_MAX, STEPS = 427, 64, 128, 100


def _best(fn, repeats: int) -> float:
    fn()  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _models_per_second(mech, trials: int, repeats: int) -> float:
    adversary = BiasedCoordinate(0)

    def run():
        advsim.simulate(mech, adversary, trials, 0, chunk_size=trials, progress=False)

    return 2 * trials / _best(run, repeats)  # both worlds


def _gradient_work(mech, models: int, repeats: int) -> dict:
    keys = jax.random.split(jax.random.key(1), models)
    thetas = jax.vmap(lambda k: mech.init_model() + 0.1 * jax.random.normal(k, (mech.dim,)))(keys)
    masks = jax.random.bernoulli(jax.random.key(2), BATCH / N_TRAIN, (models, N_TRAIN))
    x, y = jnp.asarray(mech.features), jnp.asarray(mech.labels)
    index = jnp.argsort(~masks, axis=1, stable=True)[:, :B_MAX]  # sampled first, then padding

    @eqx.filter_jit
    def per_example(thetas, masks):
        def one(theta, mask):
            grads = mech.data_gradients(theta, jnp.int32(1))
            return jnp.sum(mask[:, None] * clip_gradients(grads, 1.0), 0)

        return jax.vmap(one)(thetas, masks)

    @eqx.filter_jit
    def summed(thetas, masks):
        def one(theta, mask):
            def total(th):
                losses = jax.vmap(mech.loss, in_axes=(None, 0, 0))(th, x, y)
                return jnp.sum(mask * losses)

            return jax.grad(total)(theta)

        return jax.vmap(one)(thetas, masks)

    @eqx.filter_jit
    def gathered(thetas, masks, index):
        def one(theta, mask, idx):
            grads = jax.vmap(jax.grad(mech.loss), in_axes=(None, 0, 0))(theta, x[idx], y[idx])
            return jnp.sum(mask[idx][:, None] * clip_gradients(grads, 1.0), 0)

        return jax.vmap(one)(thetas, masks, index)

    t_pe = _best(lambda: per_example(thetas, masks).block_until_ready(), repeats)
    t_sum = _best(lambda: summed(thetas, masks).block_until_ready(), repeats)
    t_gat = _best(lambda: gathered(thetas, masks, index).block_until_ready(), repeats)
    return dict(
        per_example_grads_per_s=models * N_TRAIN / t_pe,
        clip_ratio=t_pe / t_sum,
        gathered_speedup=t_pe / t_gat,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=512, help="runs per world")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    overflow = stats.binom.sf(B_MAX, N_TRAIN, BATCH / N_TRAIN)
    print(f"P(Binomial({N_TRAIN}, {BATCH}/{N_TRAIN}) > B_max = {B_MAX}) = {overflow:.2e}")
    print(f"devices: {jax.devices()}")
    header = (f"{'model':>9} {'d':>5} {'models/s':>9} {'per-ex grads/s':>15} "
              f"{'clip ratio':>10} {'gathered B_max speed-up':>24}")  # fmt: skip
    print(header)
    for model in ("logistic", "mlp"):
        mech = RealModelGradientCanary(STEPS, BATCH / N_TRAIN, 1.0, model=model,
                                       learning_rate=0.5 / BATCH)  # fmt: skip
        assert mech.features.shape[0] == N_TRAIN
        rate = _models_per_second(mech, args.trials, args.repeats)
        work = _gradient_work(mech, 64, args.repeats)
        print(f"{model:>9} {mech.dim:>5} {rate:>9.1f} {work['per_example_grads_per_s']:>15.3g} "
              f"{work['clip_ratio']:>10.2f} {work['gathered_speedup']:>24.2f}")  # fmt: skip


if __name__ == "__main__":
    main()

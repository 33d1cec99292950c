"""`GradientCanary`: gradient canaries in d dimensions inserted every k-th step.

Where the expected values come from:

- The closed form of the zero-data run (Algorithm 4 of arXiv:2405.14457 with no other
  gradients; the linear case of the proof of Theorem 1 of arXiv:2410.06186): with the
  canary -C u inserted deterministically at the n steps of `CanarySchedule.every(k)` in
  [1, T] and noise N(0, sigma^2 C^2 I) at every step, the displacement along u is
  eta (n C + N(0, T sigma^2 C^2)) in and eta N(0, T sigma^2 C^2) out, and orthogonal to u it
  is eta N(0, T sigma^2 C^2 I) in both worlds. So the last model is
  mu_last = n / (sqrt(T) sigma)-GDP, and composition over the n insertion steps is
  mu = sqrt(n) / sigma-GDP (n-fold Gaussian mechanism, Corollary 3.3 of arXiv:1905.02383):
  equal for k = 1 (n = T), ratio sqrt(n / T) for k > 1. Moments within 5 standard errors,
  KS p-value > 1e-3 (fixed keys).
- With the canary Poisson-sampled (rate q) the displacement along u in units of eta C is
  Binomial(n, q) + N(0, T sigma^2): the last-iterate heuristic's pair (Theorem 1 there).
- The logistic gradients: `jax.grad` of the per-example loss log(1 + e^z) - y z, z = <x, m>.
- "gaussian" data: the same draws as `LinearProcess.with_data`, so with u = e_j the two
  mechanisms are the same run (bit-identical scores for one key).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import advsim
from advsim import CanarySchedule
from advsim.bounds import composition_epsilon, gdp_epsilon, heuristic_epsilon
from advsim.mechanisms import GradientCanary, LinearProcess, logistic_dataset

SIGMA, LR, C = 1.3, 0.5, 2.0
DELTA = 1e-5


def _every(k: int, *, sampled: bool = False) -> CanarySchedule:
    # Algorithm 4 of arXiv:2405.14457 inserts at the steps with t mod k = 0.
    return CanarySchedule.every(k, first=k, sampled=sampled)


def _check_normal(x: np.ndarray, mean: float, sd: float) -> None:
    n = x.size
    assert abs(x.mean() - mean) <= 5 * sd / math.sqrt(n), (x.mean(), mean)
    # Var of the sample variance of a normal: 2 sd^4 / (n - 1).
    assert abs(x.var(ddof=1) - sd**2) <= 5 * sd**2 * math.sqrt(2 / (n - 1)), (x.var(), sd**2)
    assert scipy.stats.kstest(x, scipy.stats.norm(mean, sd).cdf).pvalue > 1e-3


@pytest.mark.parametrize("k", [1, 5])
def test_zero_data_last_model_matches_closed_form(k):
    n = 8
    steps = n * k
    mech = GradientCanary(
        steps,
        0.1,
        SIGMA,
        clip_norm=C,
        learning_rate=LR,
        dim=3,
        canary_direction=[1.0, -2.0, 2.0],
        canary_schedule=_every(k),
    )
    u = np.array([1.0, -2.0, 2.0]) / 3.0
    ortho = np.array([2.0, 1.0, 0.0]) / math.sqrt(5.0)  # orthogonal to u
    sd = LR * math.sqrt(steps) * SIGMA * C
    for canary_in, mean in ((True, LR * n * C), (False, 0.0)):
        keys = jax.random.split(jax.random.key(10 + k + canary_in), 20_000)
        out = jax.vmap(lambda kk, b=canary_in: advsim.run_mechanism(mech, b, key=kk))(keys)
        out = np.asarray(out, np.float64)
        _check_normal(out @ u, mean, sd)
        _check_normal(out @ ortho, 0.0, sd)


@pytest.mark.slow
def test_poisson_sampled_canary_is_the_heuristic_mixture():
    n, k, q = 6, 3, 0.3
    mech = GradientCanary(
        n * k,
        q,
        SIGMA,
        clip_norm=C,
        learning_rate=LR,
        dim=2,
        canary_direction=1,
        canary_schedule=_every(k, sampled=True),
    )
    keys = jax.random.split(jax.random.key(3), 40_000)
    out = jax.vmap(lambda kk: advsim.run_mechanism(mech, True, key=kk))(keys)
    x = np.asarray(out[:, 1], np.float64) / (LR * C)  # units of eta C
    # Binomial(n, q) + N(0, T sigma^2): mean n q, variance n q (1 - q) + T sigma^2.
    var = n * q * (1 - q) + n * k * SIGMA**2
    assert abs(x.mean() - n * q) <= 5 * math.sqrt(var / x.size)
    assert abs(x.var(ddof=1) - var) <= 5 * var * math.sqrt(2.5 / x.size)
    grid = np.arange(n + 1)
    pmf = scipy.stats.binom.pmf(grid, n, q)
    s = math.sqrt(n * k) * SIGMA

    def cdf(v):
        return np.sum(pmf * scipy.stats.norm.cdf((np.asarray(v)[..., None] - grid) / s), -1)

    assert scipy.stats.kstest(x, cdf).pvalue > 1e-3
    acc = mech.accounting()
    assert acc.sampling_prob == q and acc.num_canary_steps == n


@pytest.mark.parametrize("k", [1, 5, 25])
def test_accounting_counts_only_insertion_steps(k):
    n = 10
    mech = GradientCanary(n * k, 0.1, SIGMA, canary_schedule=_every(k))
    acc = mech.accounting()
    assert acc.steps == n * k
    assert acc.canary_steps == tuple(range(k, n * k + 1, k))
    assert acc.sampling_prob == 1.0  # inserted deterministically: no amplification
    # Composition over the n insertion steps is sqrt(n)/sigma-GDP (n-fold Gaussian
    # mechanism); dp-accounting's PLD (inside composition_epsilon) agrees to 1e-3.
    comp = composition_epsilon(DELTA, acc.steps, 1.0, SIGMA, canary_steps=n)
    assert comp == pytest.approx(gdp_epsilon(DELTA, math.sqrt(n) / SIGMA), rel=1e-3)
    # The exact last model is the heuristic with q = 1: N(n, T sigma^2) vs N(0, T sigma^2),
    # i.e. n / (sqrt(T) sigma)-GDP; equal to composition iff k = 1.
    last = heuristic_epsilon(DELTA, acc.steps, 1.0, SIGMA, canary_steps=n)
    assert last == pytest.approx(gdp_epsilon(DELTA, n / (math.sqrt(n * k) * SIGMA)), rel=1e-6)
    if k == 1:
        assert last == pytest.approx(comp, rel=1e-3)
    else:
        assert last < 0.75 * comp


@pytest.mark.slow  # 3-6 s: the fast suite stays under 5 minutes
def test_gaussian_data_is_linear_process_with_data():
    kwargs = dict(dim=3, num_examples=10, scale=3.0, data_seed=7)
    ours = GradientCanary(12, 0.2, SIGMA, data="gaussian", canary_direction=2, **kwargs)
    ref = LinearProcess.with_data(
        12,
        0.2,
        SIGMA,
        canary_coordinate=2,
        **kwargs,
        canary_schedule=CanarySchedule.every_step(sampled=False),
    )
    np.testing.assert_array_equal(ours.features, ref.other_gradients)
    keys = jax.random.split(jax.random.key(5), 16)
    for canary_in in (True, False):
        a = jax.vmap(lambda kk, b=canary_in: advsim.run_mechanism(ours, b, key=kk))(keys)
        b = jax.vmap(lambda kk, b=canary_in: advsim.run_mechanism(ref, b, key=kk))(keys)
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("batching", ["fixed", "poisson"])
def test_gaussian_data_shift_is_public_and_variance_is_sampling(batching):
    # Constant per-example gradients g_i (clipped to C by the engine): per step the data add
    # sum_i b_i g_ij with b_i = 1 (fixed batch) or Bernoulli(q) (Poisson). So coordinate j
    # moves by -eta T q' sum_i g_ij in both worlds (q' = 1 or q: a public shift, which a
    # threshold test ignores) plus, under Poisson sampling, a variance
    # eta^2 T q (1 - q) sum_i g_ij^2 on top of the noise's eta^2 T sigma^2 C^2.
    steps, q, j = 6, 0.3, 1
    mech = GradientCanary(
        steps,
        q,
        SIGMA,
        clip_norm=C,
        learning_rate=LR,
        dim=3,
        canary_direction=j,
        data="gaussian",
        num_examples=8,
        scale=3.0,
        data_seed=4,
        batching=batching,
    )
    g = np.asarray(advsim.clip_gradients(jnp.asarray(mech.features), C), np.float64)[:, j]
    rate = 1.0 if batching == "fixed" else q
    shift = -LR * steps * rate * g.sum()
    var = LR**2 * steps * (SIGMA**2 * C**2 + rate * (1 - rate) * np.sum(g**2))
    for canary_in in (True, False):
        keys = jax.random.split(jax.random.key(30 + canary_in), 10_000)
        out = jax.vmap(lambda kk, b=canary_in: advsim.run_mechanism(mech, b, key=kk))(keys)
        x = np.asarray(out[:, j], np.float64)
        mean = shift + LR * steps * C * canary_in
        assert abs(x.mean() - mean) <= 5 * math.sqrt(var / x.size), (x.mean(), mean)
        # Poisson: Bernoulli sums are not normal, so the variance's SE gets a 1.5x margin.
        assert abs(x.var(ddof=1) - var) <= 5 * 1.5 * var * math.sqrt(2 / x.size)


def test_logistic_gradients_are_autodiff_gradients():
    mech = GradientCanary(5, 0.1, 1.0, dim=6, data="logistic", num_examples=40, data_seed=3)
    model = jax.random.normal(jax.random.key(0), (6,))
    x, y = jnp.asarray(mech.features), jnp.asarray(mech.labels)

    def loss(m, xi, yi):
        z = jnp.dot(xi, m)
        return jnp.logaddexp(0.0, z) - yi * z

    expected = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(model, x, y)
    np.testing.assert_allclose(
        mech.data_gradients(model, jnp.int32(1)), expected, rtol=1e-5, atol=1e-6
    )
    assert mech.data_counts().shape == (40,)


def test_logistic_dataset_scales_and_seed():
    x, y = logistic_dataset(4000, 5, data_seed=1, scale=2.0, spread=100.0)
    # Scales are 2 * 100^{-i/4}, i = 0..4, in a seeded order: sample sds within 5%.
    np.testing.assert_allclose(
        np.sort(x.std(0)), np.sort(2.0 * 100.0 ** -np.linspace(0, 1, 5)), rtol=0.05
    )
    assert set(np.unique(y)) == {0.0, 1.0}
    x2, y2 = logistic_dataset(4000, 5, data_seed=1, scale=2.0, spread=100.0)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)


def test_with_direction_normalises_and_keeps_the_rest():
    mech = GradientCanary(5, 0.1, 1.0, dim=3, data="logistic", num_examples=10)
    new = mech.with_direction([0.0, 3.0, 4.0])
    np.testing.assert_allclose(new.canary_direction, [0.0, 0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(new.features, mech.features)
    g = new.canary_gradient(new.init_model(), jnp.int32(1))
    assert float(jnp.linalg.norm(g)) == pytest.approx(1.0, rel=1e-6)  # norm C


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(data="mnist"), "data must be one of"),
        (dict(canary_direction=3), "canary_direction must be an integer in"),
        (dict(canary_direction=[0.0, 0.0, 0.0]), "canary_direction must be"),
        (dict(canary_direction=[1.0, 0.0]), "canary_direction must be"),
        (dict(copies=0), "copies"),
        (dict(num_examples=0), "num_examples"),
        (dict(dim=0), "dim"),
        (dict(data="logistic", spread=0.5), "spread must be >= 1"),
        (dict(noise_multiplier=0.0), "noise_multiplier"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    base = dict(steps=5, sampling_prob=0.1, noise_multiplier=1.0, dim=3)
    with pytest.raises(ValueError, match=match):
        GradientCanary(**{**base, **kwargs})

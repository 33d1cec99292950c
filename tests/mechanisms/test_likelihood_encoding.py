"""The likelihood-encoding loss (Algorithm 1 of Annamalai 2024, "It's Our Loss").

Expected values: L(v) = log(q N(v; 1, s^2)/N(v; 0, s^2) + 1 - q) from scipy's normal pdf
(Section 4.1 there); the update and decoding from an independent numpy reimplementation of
Algorithm 1 in the paper's own sign convention (it adds its gradient), fed the engine's
random draws; the scale rule "closest power of 10 above 3 sigma" (Section 4.2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import advsim
from advsim._dpsgd import bernoulli_from_bits, run_mechanism
from advsim.adversaries import LikelihoodSumDecoder
from advsim.mechanisms import LikelihoodEncodingLoss
from advsim.mechanisms.likelihood_encoding import encoding_scale, step_log_likelihood_ratio


def test_refuses_float32_with_the_reason():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(RuntimeError, match="needs float64.*jax_enable_x64"):
            LikelihoodEncodingLoss(10, 0.1, 1.0)
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_simulate_refuses_without_x64(x64):
    mech = LikelihoodEncodingLoss(5, 0.1, 1.0)
    jax.config.update("jax_enable_x64", False)
    with pytest.raises(RuntimeError, match="needs float64"):
        advsim.simulate(mech, LikelihoodSumDecoder(), 4, 0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(clip_norm=2.0), "clip_norm must be 1"),
        (dict(learning_rate=0.5), "learning_rate must be 1"),
        (dict(scale=3.0), "scale must be a positive power of ten"),
        (dict(dataset_size=10**4), "raise dataset_size"),
        (dict(decimals=-1), "decimals"),
    ],
)
def test_bad_parameters(x64, kwargs, match):
    with pytest.raises(ValueError, match=match):
        LikelihoodEncodingLoss(10, 0.1, 1.0, **kwargs)


def test_sampling_prob_one_rejected(x64):
    with pytest.raises(ValueError, match="sampling_prob must be in \\(0, 1\\)"):
        LikelihoodEncodingLoss(10, 1.0, 1.0)


def test_encoding_scale_rule():
    # Section 4.2: the closest power of ten above 3 sigma.
    assert encoding_scale(1.0) == 10.0  # 3 -> 10 (the paper's 1000 = 100 * 10)
    assert encoding_scale(2.25) == 10.0  # 6.75 -> 10
    assert encoding_scale(3.94) == 100.0  # 11.8 -> 100
    assert encoding_scale(0.2) == 1.0  # 0.6 -> 1
    # "wrap_free": the smallest power of ten with s/2 >= 1 + 4 sigma (|v| < s/2 but for
    # a 4-sigma tail); it differs from the paper's rule exactly where the latter wraps.
    assert encoding_scale(1.0, "wrap_free") == 10.0  # 2 (1 + 4) = 10
    assert encoding_scale(2.25, "wrap_free") == 100.0  # 20 -> 100
    assert encoding_scale(0.5, "wrap_free") == 10.0  # 6 -> 10
    with pytest.raises(ValueError, match="rule must be"):
        encoding_scale(1.0, "nearest")


def test_step_llr_against_scipy_and_no_overflow(x64):
    q, sigma = 0.1, 0.8
    v = np.linspace(-6, 6, 25)
    expected = np.log(q * norm.pdf(v, 1, sigma) / norm.pdf(v, 0, sigma) + 1 - q)
    np.testing.assert_allclose(
        step_log_likelihood_ratio(v, q, sigma), expected, rtol=1e-12, atol=1e-15
    )
    big = float(step_log_likelihood_ratio(1e4, 0.01, 0.5))
    assert np.isfinite(big) and big == pytest.approx(np.log(0.01) + (2e4 - 1) / 0.5, rel=1e-12)


def test_gradients_of_algorithm_1(x64):
    mech = LikelihoodEncodingLoss(10, 0.1, 0.8)
    n = 0.1 * 10**10
    t = jnp.asarray(1)
    # First step (theta = 0): the gradient is the example itself, negated for descent.
    zero = jnp.zeros((1,))
    assert float(mech.data_gradients(zero, t)[0, 0]) == 0.0
    assert float(mech.canary_gradient(zero, t)[0]) == -1.0
    # theta = -119.7: decoded sum -120 (= -0.12 in L), raw value v = 0.3.
    theta = jnp.array([-119.7])
    llr = np.log(0.1 * norm.pdf(0.3, 1, 0.8) / norm.pdf(0.3, 0, 0.8) + 0.9)
    enc = 10.0 * np.round(100 * llr)
    expected = (0.3 - enc) / n
    assert float(mech.data_gradients(theta, t)[0, 0]) == pytest.approx(expected, rel=1e-9)
    assert float(mech.canary_gradient(theta, t)[0]) == pytest.approx(expected - 1.0, rel=1e-12)
    # N g(0, theta) undoes v and writes enc: theta - N g = -120 + enc.
    assert float(mech.decoded_sum(theta)) == pytest.approx((-120.0 + enc) / 1000.0, abs=1e-12)


def _draws(mech, key):
    """The engine's random draws of one run (the split used by `run_mechanism`)."""
    steps, q = mech.steps, mech.sampling_prob
    k_noise, k_coin, k_count = jax.random.split(key, 3)
    noise = jax.random.normal(k_noise, (steps, 1), jnp.float64)
    coin = bernoulli_from_bits(k_coin, q, (steps,))
    counts = jax.random.binomial(
        k_count, jnp.asarray([float(mech.dataset_size)]), q, (steps, 1), jnp.float64
    ).astype(jnp.int64)
    return noise[:, 0], coin, counts[:, 0]


def _reference(noise, coin, counts, *, q, sigma, s, n, canary_in, dtype, ideal=False):
    """Algorithm 1 in numpy, the paper's sign (theta += sum of g~ + noise), vectorised
    over runs (rows). Returns (theta_T, decoded o, exact sum of round(L(v_k), 2) + wraps)."""
    f = np.dtype(dtype).type
    q_, sig, s_, n_ = f(q), f(sigma), f(s), f(n)
    runs, steps = noise.shape
    theta = np.zeros(runs, dtype)
    exact = np.zeros(runs)  # float64 bookkeeping of the same run
    first = True

    def llr(v):
        return np.logaddexp(np.log(q_) + (f(2) * v - f(1)) / (f(2) * sig**2), np.log1p(-q_))

    for k in range(steps):
        if first:
            g0 = np.zeros(runs, dtype)
            first = False
        else:
            high = s_ * np.round(theta / s_)
            v = theta - high
            enc = s_ * np.round(llr(v) * f(100))
            g0 = ((enc - v) / n_).astype(dtype)
            exact += np.round(100 * llr(v.astype(np.float64)))
        g1 = g0 + f(1)
        g1 = np.where(np.abs(g1) > 1, np.sign(g1), g1).astype(dtype)  # the engine's clip
        nk = np.full(runs, n_, dtype) if ideal else counts[:, k].astype(dtype)
        b = coin[:, k] & canary_in
        theta = (theta + nk * g0 + np.where(b, g1, f(0)) - sig * noise[:, k].astype(dtype)).astype(
            dtype
        )
    high = s_ * np.round(theta / s_)
    v = theta - high
    o = (high + s_ * np.round(llr(v) * f(100))) / (s_ * f(100))
    exact += np.round(100 * llr(v.astype(np.float64)))
    return theta, o.astype(np.float64), exact / 100


@pytest.fixture(scope="module")
def runs():
    """100 runs per world of T = 50, q = 0.1, sigma = 1 through the engine, with draws."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    mech = LikelihoodEncodingLoss(50, 0.1, 1.0)
    decoder = LikelihoodSumDecoder()

    @jax.jit
    def simulate(keys, canary_in):  # one compilation for both worlds
        traj = jax.vmap(lambda k: run_mechanism(mech, canary_in, key=k, release="all"))(keys)
        scores = jax.vmap(lambda m: decoder.score(mech, m))(traj)
        return traj[:, :, 0], scores, jax.vmap(lambda k: _draws(mech, k))(keys)

    out = {}
    for canary_in in (True, False):
        keys = jax.random.split(jax.random.key(7 + canary_in), 100)
        traj, score, (noise, coin, counts) = simulate(keys, jnp.asarray(canary_in))
        out[canary_in] = dict(
            traj=np.asarray(traj),
            score=np.asarray(score),
            noise=np.asarray(noise),
            coin=np.asarray(coin),
            counts=np.asarray(counts),
        )
    jax.config.update("jax_enable_x64", previous)
    return mech, out


@pytest.mark.slow
@pytest.mark.parametrize("canary_in", [True, False])
def test_engine_matches_numpy_reference_and_decodes_the_exact_sum(runs, canary_in):
    mech, out = runs
    d = out[canary_in]
    kw = dict(q=0.1, sigma=1.0, s=10.0, n=1e9, canary_in=canary_in)
    theta, o, exact = _reference(d["noise"], d["coin"], d["counts"], dtype=np.float64, **kw)
    np.testing.assert_allclose(d["traj"][:, -1], theta, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(d["score"], o, atol=1e-9)
    # sigma = 1, s = 10: a wrap needs |b + xi| > 5, probability ~1e-6 per step, so the
    # decoded o is exactly the sum of the T + 1 rounded tests (T steps + the final decode).
    assert np.mean(np.abs(d["score"] - exact) < 1e-9) == 1.0
    # int64 counts around N = q |D| = 1e9 (the engine's Binomial(10^10, q)).
    assert d["counts"].dtype == np.int64
    assert abs(d["counts"].mean() - 1e9) < 5 * np.sqrt(1e10 * 0.1 * 0.9 / d["counts"].size)


def _figure2_draws(seed: int):
    """One set of draws (noise, canary coins, Binomial(10^10, q) counts) of 400 runs at the
    eps = 10 setting of Figure 2 (q = 0.1, T = 100, sigma = 0.8369, s = 10), for
    `_reference`."""
    rng = np.random.default_rng(seed)
    q, steps, sigma, runs = 0.1, 100, 0.8369, 400
    noise = rng.normal(size=(runs, steps))
    coin = rng.random((runs, steps)) < q
    counts = rng.binomial(10**10, q, (runs, steps))
    return (noise, coin, counts), dict(q=q, sigma=sigma, s=10.0, n=q * 1e10, canary_in=True)


def test_float32_breaks_the_decoding():
    # The same draws through the same recursion in float64 and float32 at the eps = 10
    # setting of Figure 2 (q = 0.1, T = 100, sigma = 0.8369): float64 decodes the exact
    # sum of the rounded tests in every run; float32 (v known to ~5e-4 once |theta| ~ 1e4,
    # n_t g inexact) decodes a wrong sum in several percent of the runs (measured 5.5%),
    # and a wrong sum is a wrong score in the tail that sets eps.
    draws, kw = _figure2_draws(seed=0)
    _, o64, exact = _reference(*draws, dtype=np.float64, **kw)
    _, o32, _ = _reference(*draws, dtype=np.float32, **kw)
    assert np.all(np.abs(o64 - exact) < 1e-9)
    assert np.mean(np.abs(o32 - o64) > 5e-3) > 0.02


def test_batch_fluctuation_effect_is_small():
    # The real run (n_t ~ Binomial(10^10, q) zeros) against the idealised one (n_t = N),
    # same draws: the extra term (n_t/N - 1)(enc - v) shifts v by ~1e-4 |enc| and so
    # changes a rounded test now and then. Measured at q = 0.1, T = 100, sigma = 0.84:
    # the decoded sums differ in ~75% of runs, by 0.014 on average (max 0.12), against a
    # spread of the scores of ~2: a small extra noise, as the module docstring states.
    draws, kw = _figure2_draws(seed=1)
    _, real, _ = _reference(*draws, dtype=np.float64, **kw)
    _, ideal, _ = _reference(*draws, ideal=True, dtype=np.float64, **kw)
    diff = np.abs(real - ideal)
    assert diff.max() < 0.3
    assert diff.mean() < 0.01 * ideal.std()


def test_no_data_gradient_is_clipped(runs):
    mech, out = runs
    bound = mech.max_update() / float(mech.expected_batch)
    assert bound < 0.5
    for world in out.values():
        theta = world["traj"][:, 1:-1]
        s = 10.0
        v = theta - s * np.round(theta / s)
        assert np.all(np.abs(v) < s / 2)

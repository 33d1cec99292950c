"""Semantics of the DP-SGD engine: clipping, the update rule, Bernoulli coins, schedules,
block sizes.

Expected numbers come from the update rule documented in `AbstractMechanism` (Algorithm 1
of arXiv:2410.06186), recomputed by hand in float64 numpy, and from binomial tolerances.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import advsim
from advsim import AbstractMechanism, CanarySchedule, block_size, clip_gradients, dpsgd_update
from advsim._dpsgd import bernoulli_from_bits, run_mechanism
from advsim._mechanism import AbstractPerExampleData, poisson_batch_bound
from advsim._records import DPSGDParams
from advsim.mechanisms import LinearProcess

# --- clip_gradients ---------------------------------------------------------------------------


def _norms(x):
    return np.linalg.norm(np.asarray(x, np.float64), axis=-1)


@pytest.mark.parametrize("clip_norm", [0.1, 1.0, 7.5])
def test_clip_gradients_norm_at_most_c_and_direction_preserved(clip_norm):
    rng = np.random.default_rng(1)
    g = rng.normal(0.0, 5.0, (64, 6)).astype(np.float32)
    g[:8] *= 1e-3  # some rows well inside the ball
    g[8] *= 1e4  # one huge row
    out = np.asarray(clip_gradients(jnp.asarray(g), clip_norm), np.float64)
    n_in, n_out = _norms(g), _norms(out)
    # ||clip(g)|| = min(||g||, C) (float32 rounding: rtol 1e-6).
    np.testing.assert_allclose(n_out, np.minimum(n_in, clip_norm), rtol=1e-6)
    assert np.all(n_out <= clip_norm * (1 + 1e-6))
    # Direction preserved: clip(g) = g * s with one scalar s in (0, 1] per row.
    cos = np.sum(out * g, -1) / (n_out * n_in)
    np.testing.assert_allclose(cos, 1.0, rtol=1e-6)


def test_clip_gradients_leaves_small_gradients_unchanged_bitwise():
    g = jnp.asarray([[0.3, -0.4], [1e-20, 0.0], [0.6, 0.8]], jnp.float32)  # norms .5, 1e-20, 1
    np.testing.assert_array_equal(np.asarray(clip_gradients(g, 1.0)), np.asarray(g))


def test_clip_gradients_zero_stays_zero():
    out = clip_gradients(jnp.zeros((3, 4), jnp.float32), 1.0)
    assert np.all(np.asarray(out) == 0.0)
    out = clip_gradients(jnp.zeros(4, jnp.float32), 1e-30)
    assert np.all(np.asarray(out) == 0.0)


def test_clip_gradients_derivative_at_zero_is_finite():
    # d/dg clip(g) at g = 0 is the identity (clip is the identity near 0), so the
    # gradient of sum(clip(g)) is (1, 1, 1). Matters for adversaries that differentiate
    # through a simulated training run whose gradients can vanish.
    grad = jax.grad(lambda x: jnp.sum(clip_gradients(x, 2.0)))(jnp.zeros(3))
    np.testing.assert_allclose(np.asarray(grad), 1.0)


def test_clip_gradients_known_value():
    # (3, 4) has norm 5; clipped to C = 2 it is (1.2, 1.6).
    out = clip_gradients(jnp.asarray([3.0, 4.0]), 2.0)
    np.testing.assert_allclose(np.asarray(out), [1.2, 1.6], rtol=1e-6)


# --- dpsgd_update against a hand computation -------------------------------------------------


class _ToyMechanism(AbstractMechanism):
    """Fixed gradients chosen so that some are clipped, one is not, one is zero, and a
    regularizer alpha * m that is larger than C (it must not be clipped)."""

    params: DPSGDParams
    alpha: float = eqx.field(static=True)

    def __init__(self, *, alpha=10.0, batching="poisson", canary_schedule=None, steps=4):
        self.params = DPSGDParams(
            steps=steps,
            sampling_prob=0.5,
            noise_multiplier=0.7,
            clip_norm=2.0,
            learning_rate=0.3,
            batching=batching,
            canary_schedule=canary_schedule,
        )
        self.alpha = alpha

    def init_model(self):
        return jnp.asarray([0.5, -1.0], jnp.float32)

    def canary_gradient(self, model, t):
        return jnp.asarray([3.0, 4.0], jnp.float32)  # norm 5 -> (1.2, 1.6)

    def data_gradients(self, model, t):
        # norms 0.5 (kept), 10 (-> (1.2, -1.6)), 0 (stays 0)
        return jnp.asarray([[0.3, 0.4], [6.0, -8.0], [0.0, 0.0]], jnp.float32)

    def data_counts(self):
        return jnp.asarray([2, 3, 5], jnp.int32)

    def regularizer_gradient(self, model, t):
        return self.alpha * model


@pytest.mark.parametrize("present", [False, True])
@pytest.mark.parametrize("counts", [(2, 3, 5), (0, 1, 4), (0, 0, 0)])
def test_dpsgd_update_matches_hand_computation(present, counts):
    mech = _ToyMechanism()
    m = np.asarray([0.5, -1.0])
    xi = np.asarray([0.25, -1.5])
    # m_t = m - eta (sum_g n_g clip(g) + b clip(canary) + alpha m + sigma C xi), float64.
    clipped_data = np.asarray([[0.3, 0.4], [1.2, -1.6], [0.0, 0.0]])
    grad = np.asarray(counts) @ clipped_data + present * np.asarray([1.2, 1.6])
    expected = m - 0.3 * (grad + 10.0 * m + 0.7 * 2.0 * xi)
    out = dpsgd_update(
        mech,
        jnp.asarray(m, jnp.float32),
        jnp.int32(1),
        jnp.asarray(present),
        jnp.asarray(counts, jnp.int32),
        jnp.asarray(xi, jnp.float32),
    )
    np.testing.assert_allclose(np.asarray(out, np.float64), expected, rtol=1e-6, atol=1e-6)


def test_regularizer_is_not_clipped():
    # With alpha = 1000 the regularizer gradient (500, -1000) is far above C = 2; the
    # step must apply it in full: m - eta * alpha * m with no data, canary or noise.
    mech = _ToyMechanism(alpha=1000.0)
    m = jnp.asarray([0.5, -1.0], jnp.float32)
    out = dpsgd_update(
        mech,
        m,
        jnp.int32(1),
        jnp.asarray(False),
        jnp.zeros(3, jnp.int32),
        jnp.zeros(2, jnp.float32),
    )
    np.testing.assert_allclose(np.asarray(out), np.asarray(m) * (1 - 0.3 * 1000.0), rtol=1e-6)


_run_both_worlds = eqx.filter_jit(
    jax.vmap(
        lambda mech, key: (
            run_mechanism(mech, True, key=key),
            run_mechanism(mech, False, key=key),
        ),
        in_axes=(None, 0),
    )
)


def test_worlds_with_the_same_key_differ_only_by_the_canary():
    # Same run key: the noise (and coins) are identical, so for a linear loss
    # m_T(in) - m_T(out) = eta * C * (number of canary steps that drew the canary) * e_j.
    # With only(1, sampled=False) that number is 1; with Poisson sampling an integer in
    # [0, n] that varies between runs.
    keys = jax.random.split(jax.random.key(3), 32)
    det = LinearProcess(
        5,
        0.3,
        2.0,
        clip_norm=2.0,
        learning_rate=0.25,
        dim=3,
        canary_coordinate=1,
        canary_schedule=CanarySchedule.only(1, sampled=False),
    )
    m_in, m_out = _run_both_worlds(det, keys)
    diff = np.asarray(m_in, np.float64) - np.asarray(m_out, np.float64)
    np.testing.assert_allclose(diff, np.tile([0.0, 0.5, 0.0], (32, 1)), atol=1e-5)

    sampled = LinearProcess(12, 0.5, 1.0, clip_norm=2.0, learning_rate=0.25, dim=3)
    m_in, m_out = _run_both_worlds(sampled, keys)
    diff = np.asarray(m_in, np.float64) - np.asarray(m_out, np.float64)
    np.testing.assert_allclose(diff[:, 1:], 0.0, atol=1e-5)
    counts = diff[:, 0] / 0.5
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-4)
    assert counts.min() >= 0 and counts.max() <= 12
    assert len(set(np.round(counts))) > 3  # the coins vary between runs


def test_run_mechanism_release_all_ends_with_release_last():
    mech = _ToyMechanism(alpha=0.1, steps=6, batching="fixed")  # fixed: no binomial to compile
    run = eqx.filter_jit(run_mechanism)
    key = jax.random.key(11)
    traj = np.asarray(run(mech, True, key=key, release="all"))
    last = np.asarray(run(mech, True, key=key, release="last"))
    assert traj.shape == (7, 2)
    np.testing.assert_array_equal(traj[0], np.asarray(mech.init_model()))
    np.testing.assert_array_equal(traj[-1], last)


# --- bernoulli_from_bits ----------------------------------------------------------------------

_N_COINS = 2**21


@jax.jit
def _coin_stats(key, prob):
    draws = bernoulli_from_bits(key, prob, (_N_COINS,))
    return jnp.sum(draws.astype(jnp.int32)), jnp.all(draws)


@pytest.mark.parametrize("prob", [1e-3, 0.01, 0.5, 1.0])
def test_bernoulli_from_bits_frequency(prob):
    # Count ~ Binomial(N, p): accept within 5 standard deviations (two-sided failure
    # probability 6e-7 per case; the key is fixed anyway).
    count, _ = _coin_stats(jax.random.key(2024), prob)
    mean = _N_COINS * prob
    sd = math.sqrt(_N_COINS * prob * (1 - prob))
    assert abs(int(count) - mean) <= 5 * sd + 1e-9, (int(count), mean, sd)


def test_bernoulli_from_bits_prob_one_always_true():
    for seed in range(3):
        _, all_true = _coin_stats(jax.random.key(seed), 1.0)
        assert bool(all_true)


def test_bernoulli_from_bits_resolves_small_probabilities():
    # p = 1e-6 must not be rounded to float32 uniform granularity (2^-23 ~ 1.2e-7): draws
    # are exact to the 32-bit grid, so over 2^24 draws the count is ~ Binomial(2^24, 1e-6)
    # (mean 16.8); a uniform-based draw would give 9.5e-7 * 2^24 = 16 on average. This only
    # checks the order of magnitude (5 sd: [0, 37]) and that p > 0 gives some True.
    draws = jax.jit(lambda k: jnp.sum(bernoulli_from_bits(k, 1e-6, (2**24,)).astype(jnp.int32)))
    count = int(draws(jax.random.key(5)))
    assert 0 < count <= 37


# --- CanarySchedule ---------------------------------------------------------------------------

_T_MAX = 200
_T_GRID = jnp.arange(1, _T_MAX + 1, dtype=jnp.int32)


@st.composite
def _schedules(draw):
    period = draw(st.integers(1, 30))
    first = draw(st.integers(1, 60))
    last = draw(st.none() | st.integers(first, 250))
    return CanarySchedule(period=period, first=first, last=last, sampled=draw(st.booleans()))


@settings(derandomize=True, deadline=None, max_examples=150)
@given(schedule=_schedules(), num_steps=st.integers(1, _T_MAX))
def test_schedule_steps_and_mask_agree(schedule, num_steps):
    mask = np.asarray(schedule.mask(_T_GRID))
    from_mask = tuple(int(t) for t in np.asarray(_T_GRID)[mask] if t <= num_steps)
    steps = schedule.steps(num_steps)
    assert steps == from_mask
    # Independent description: first + k * period, k >= 0, bounded by last and T.
    hi = num_steps if schedule.last is None else min(schedule.last, num_steps)
    assert steps == tuple(
        t
        for t in range(1, num_steps + 1)
        if t >= schedule.first and (t - schedule.first) % schedule.period == 0 and t <= hi
    )


@pytest.mark.parametrize(
    ("schedule", "num_steps", "expected"),
    [
        (CanarySchedule.every_step(), 5, (1, 2, 3, 4, 5)),
        (CanarySchedule.every(3), 10, (1, 4, 7, 10)),
        (CanarySchedule.every(3, first=2), 10, (2, 5, 8)),
        (CanarySchedule.only(1, sampled=False), 10, (1,)),
        (CanarySchedule.only(7), 5, ()),
        (CanarySchedule(period=2, first=3, last=9), 100, (3, 5, 7, 9)),
    ],
)
def test_schedule_known_steps(schedule, num_steps, expected):
    assert schedule.steps(num_steps) == expected
    jitted = eqx.filter_jit(lambda s, t: s.mask(t))(schedule, _T_GRID[:num_steps])
    assert tuple(int(t) for t in np.flatnonzero(np.asarray(jitted)) + 1) == expected


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda: CanarySchedule.every(0),
            ValueError,
            r"period must be an integer in \[1, inf\), got 0",
        ),
        (
            lambda: CanarySchedule.only(0),
            ValueError,
            r"first must be an integer in \[1, inf\), got 0",
        ),
        (
            lambda: CanarySchedule(first=5, last=3),
            ValueError,
            r"last must be an integer in \[5, inf\), got 3",
        ),
        (lambda: CanarySchedule(period=1.5), TypeError, "period must be an integer, got 1.5"),
        (lambda: CanarySchedule(first=True), TypeError, "first must be an integer, got True"),
    ],
)
def test_schedule_validation(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_schedule_with_no_step_in_range_is_rejected_by_accounting():
    mech = LinearProcess(3, 0.5, 1.0, canary_schedule=CanarySchedule.only(5))
    with pytest.raises(ValueError, match="puts the canary in no step of steps=3"):
        mech.accounting()


# --- block_size -------------------------------------------------------------------------------


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@settings(derandomize=True, deadline=None, max_examples=60)
@given(
    steps=st.integers(1, 10**6),
    dim=st.integers(1, 2000),
    groups=st.integers(0, 50),
    release=st.sampled_from(["last", "all"]),
)
def test_block_size_is_power_of_two_at_most_1024(steps, dim, groups, release):
    mech = LinearProcess(steps, 0.1, 1.0, dim=dim, data_gradients=np.zeros((groups, dim)))
    b = block_size(mech, release)
    assert isinstance(b, int)
    assert _is_power_of_two(b) and b <= 1024
    # The documented budget: a block of runs fits in BLOCK_MEMORY_BYTES unless b == 1. A
    # run of the one program for every T (no Poisson-sampled groups, the last model
    # released) holds one segment of 128 steps' draws, whatever T.
    if advsim._simulate.any_steps_supported(mech, None, release):
        per_run = 16 * 128 * (dim + groups + 1)
    else:
        per_run = 16 * (steps * (dim + groups + 2) + (release == "all") * (steps + 1) * dim)
    assert b == 1 or b * per_run <= advsim._simulate.BLOCK_MEMORY_BYTES
    assert b == 1024 or 2 * b * per_run > advsim._simulate.BLOCK_MEMORY_BYTES


def test_block_size_depends_on_shapes_only():
    base = dict(steps=5000, dim=50, data_gradients=np.zeros((3, 50)))
    b = block_size(LinearProcess(sampling_prob=0.01, noise_multiplier=0.5, **base))
    # _bytes_per_run: 16 * 5000 * (50 + 3 + 2) = 4.4e6 bytes; 2^26 / 4.4e6 = 15.25 -> 2^3.
    assert b == 8
    for kwargs in [
        dict(sampling_prob=1.0, noise_multiplier=30.0),
        dict(sampling_prob=0.3, noise_multiplier=1.0, clip_norm=9.0, learning_rate=1e-3),
        dict(sampling_prob=0.3, noise_multiplier=1.0, canary_schedule=CanarySchedule.only(2)),
    ]:
        assert block_size(LinearProcess(**base, **kwargs)) == b
    # Fixed batching draws no counts, so the one program for every T runs it and a run
    # holds one segment of 128 steps: 16 * 128 * (50 + 3 + 1) bytes, 2^26 / 110592 -> 2^9.
    fixed = LinearProcess(sampling_prob=0.3, noise_multiplier=1.0, batching="fixed", **base)
    assert block_size(fixed) == 512
    # Values of the data gradients do not matter either, only their shape.
    ones = dict(base, data_gradients=np.ones((3, 50)))
    assert block_size(LinearProcess(sampling_prob=0.5, noise_multiplier=1.0, **ones)) == b
    # Shapes do: more steps, a smaller block (where all T steps' counts are held).
    more = dict(base, steps=50_000)
    assert block_size(LinearProcess(sampling_prob=0.5, noise_multiplier=1.0, **more)) < b


def test_default_chunk_size_is_whole_blocks_per_device():
    mech = LinearProcess(20, 0.2, 1.5)
    assert advsim.default_chunk_size(mech) == 16 * block_size(mech) * len(jax.devices())


# --- the engine's clipping, sampling and noise, seen in simulate's scores ---------------------


class _OverNormMechanism(AbstractMechanism):
    """A 1-D linear loss whose raw gradients are 10 C: the canary and one group of
    `n_data` identical examples all have gradient -10 C (the model moves up by C per
    sampled example once clipped), no regularizer, learning rate 1, Poisson sampling."""

    params: DPSGDParams
    n_data: int = eqx.field(static=True)

    def __init__(self, *, steps, sampling_prob, noise_multiplier, clip_norm, n_data):
        self.params = DPSGDParams(
            steps=steps,
            sampling_prob=sampling_prob,
            noise_multiplier=noise_multiplier,
            clip_norm=clip_norm,
            learning_rate=1.0,
            batching="poisson",
            canary_schedule=CanarySchedule(),
        )
        self.n_data = n_data

    def init_model(self):
        return jnp.zeros(1, jnp.float32)

    def canary_gradient(self, model, t):
        return jnp.full(1, -10.0, jnp.float32) * self.clip_norm

    def data_gradients(self, model, t):
        return jnp.full((1, 1), -10.0, jnp.float32) * self.clip_norm

    def data_counts(self):
        return jnp.asarray([self.n_data], jnp.int32)


class _LastModel(advsim.AbstractAdversary):
    def score(self, mechanism, release):
        return release[..., 0]


def _mixture_cdf(x, C, trials, q, noise_sd):
    """CDF of C * Binomial(trials, q) + N(0, noise_sd^2), from scipy."""
    k = np.arange(trials + 1)
    pmf = scipy.stats.binom.pmf(k, trials, q)
    return np.sum(pmf[None, :] * scipy.stats.norm.cdf((x[:, None] - C * k) / noise_sd), axis=1)


@pytest.mark.slow
def test_simulate_gives_the_law_that_clipping_sampling_and_noise_predict():
    """The engine's DP-SGD step (clip, sample, add noise) seen from outside: with raw
    gradients of norm 10 C, m_T = C (B_canary + B_data) + sigma C sqrt(T) Z, where the
    engine's Poisson sampling makes B_canary ~ Binomial(T, q) (in-world only) and
    B_data ~ Binomial(n T, q):
    the in-world law is C Binomial((n + 1) T, q) + N(0, sigma^2 C^2 T), the out-world law
    C Binomial(n T, q) + N(0, sigma^2 C^2 T). Checked by Kolmogorov-Smirnov tests against
    those closed forms (scipy), by the first two moments (5 standard errors), and against
    what an engine that forgot to clip would give (rejected)."""
    T, q, sigma, C, n, trials = 8, 0.25, 0.7, 0.5, 3, 20_000
    mech = _OverNormMechanism(
        steps=T, sampling_prob=q, noise_multiplier=sigma, clip_norm=C, n_data=n
    )
    scores = advsim.simulate(mech, _LastModel(), trials, jax.random.key(5))
    noise_sd = sigma * C * math.sqrt(T)
    for x, m in ((scores.canary_in, (n + 1) * T), (scores.canary_out, n * T)):
        x = np.asarray(x, np.float64)
        # Moments: mean C m q (q C per sampled slot per step), variance C^2 m q (1 - q)
        # + sigma^2 C^2 T (the noise N(0, sigma^2 C^2) per step).
        mean, var = C * m * q, C**2 * m * q * (1 - q) + noise_sd**2
        assert abs(x.mean() - mean) < 5 * math.sqrt(var / trials), (x.mean(), mean)
        var_se = var * math.sqrt(2 / trials) * 1.5  # a little above Gaussian: binomial part
        assert abs(x.var() - var) < 5 * var_se, (x.var(), var)
        # The whole law.
        p = scipy.stats.kstest(x, lambda v, m=m: _mixture_cdf(v, C, m, q, noise_sd)).pvalue
        assert p > 1e-3, p
        # Unclipped, each sampled example would move the model by 10 C.
        p_unclipped = scipy.stats.kstest(x, lambda v, m=m: _mixture_cdf(v, 10 * C, m, q, noise_sd))
        assert p_unclipped.pvalue < 1e-12
    # The canary's own contribution: a mean shift of q C per step.
    shift = float(np.mean(scores.canary_in) - np.mean(scores.canary_out))
    se = math.sqrt((C**2 * (2 * n + 1) * T * q * (1 - q) + 2 * noise_sd**2) / trials)
    assert abs(shift - C * q * T) < 5 * se, (shift, C * q * T)


# --- examples sampled one by one (AbstractPerExampleData) ---------------------------------------


class _OneHotExamples(AbstractPerExampleData):
    """Example i's gradient is 2 e_i (clipped to e_i at C = 1): a step's data sum is the
    0/1 vector of the sampled examples, exact in float32 whatever the summation order."""

    params: DPSGDParams
    num_examples: int = eqx.field(static=True)
    max_batch_size: int = eqx.field(static=True)

    def __init__(self, num_examples, max_batch_size, *, steps=20, sampling_prob=0.5):
        self.params = DPSGDParams(steps, sampling_prob, 1e-3, clip_norm=1.0, learning_rate=1.0)
        self.num_examples, self.max_batch_size = num_examples, max_batch_size

    def init_model(self):
        return jnp.zeros((self.num_examples,), jnp.float32)

    def canary_gradient(self, model, t):
        return jnp.zeros_like(model)

    def example_gradients(self, model, indices, t):
        return 2.0 * jax.nn.one_hot(indices, self.num_examples, dtype=model.dtype)


@pytest.mark.slow
def test_sampled_batches_larger_than_max_batch_size_are_never_cut():
    # B = 2 with n = 12, q = 1/2: almost every step samples more than B examples, so the
    # engine must run several blocks. Each step's increment is -(members + sigma C xi) with
    # sigma C = 1e-3, so rounding recovers the memberships exactly; they must be the draws
    # bernoulli_from_bits(k_count, q, (T, n)) of the run's key (the engine's documented
    # sampler), every one of them, and the all-examples path (B = n) must give the same
    # trajectory bit for bit (one-hot rows: every float sum is exact).
    n, steps, key = 12, 20, jax.random.key(11)
    gathered, every = _OneHotExamples(n, 2), _OneHotExamples(n, n)
    run = lambda m: jax.jit(lambda k: run_mechanism(m, False, key=k, release="all"))(key)  # noqa: E731
    traj = np.asarray(run(gathered), np.float64)
    members = -np.diff(traj, axis=0)
    assert np.all(np.abs(members - np.round(members)) < 0.01)
    k_count = jax.random.split(key, 3)[2]
    drawn = np.asarray(bernoulli_from_bits(k_count, 0.5, (steps, n)))
    np.testing.assert_array_equal(np.round(members), drawn.astype(np.float64))
    assert drawn.sum(1).max() > 2 * 2  # some step needed at least three blocks
    np.testing.assert_array_equal(traj, np.asarray(run(every), np.float64))


@pytest.mark.slow
def test_gathered_lanes_do_not_depend_on_their_neighbours():
    # Under vmap the block loop runs the lanes' largest number of blocks; a lane's result
    # must still be its run alone, bit for bit, whatever its neighbours needed (here the
    # lanes' largest batches differ). Slow: compiling the vmapped loop takes ~2 s of CPU.
    n, steps = 12, 20
    mech = _OneHotExamples(n, 2, steps=steps)
    keys = jax.random.split(jax.random.key(2), 4)
    run = lambda k: run_mechanism(mech, False, key=k)  # noqa: E731
    lanes = jax.jit(jax.vmap(run))(keys)
    np.testing.assert_array_equal(np.asarray(lanes[0]), np.asarray(jax.jit(run)(keys[0])))
    largest = [
        int(bernoulli_from_bits(jax.random.split(k, 3)[2], 0.5, (steps, n)).sum(1).max())
        for k in keys
    ]
    assert len(set(largest)) > 1, largest


def test_poisson_batch_bound():
    # qn + 6 sqrt(qn (1 - q)) = 64 + 6 sqrt(64 * 363 / 427) = 108.26 -> 112 (next multiple
    # of 8), by hand; scipy: a Binomial(427, 64/427) batch exceeds it with probability < 1e-9.
    assert poisson_batch_bound(427, 64 / 427) == 112
    assert scipy.stats.binom.sf(112, 427, 64 / 427) < 1e-9
    assert poisson_batch_bound(4, 0.3) == 4  # capped at n
    assert poisson_batch_bound(1000, 1e-6) == 8  # at least one block of 8
    with pytest.raises(ValueError, match="num_examples"):
        poisson_batch_bound(0, 0.5)

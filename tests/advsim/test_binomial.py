"""`advsim._binomial`: the exact inverse-CDF table of Binomial(n, q) and the engine's use.

Oracles: the CDF of Binomial(n, q) conditioned on the table's window by the pmf ratio
recurrence in mpmath at 40 digits; scipy.stats.binom for small n and for the tails; chi-square
goodness-of-fit tests of the draws (fixed keys, so each test is deterministic), with a
power check that the same statistic rejects a mean shifted by 1/20 of a standard deviation.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from scipy import stats

import advsim
from advsim import AbstractMechanism
from advsim._binomial import (
    MAX_TABLE_SIZE,
    BinomialTable,
    RoundedNormalBinomial,
    _count_at_most,
    binomial_table,
    binomial_window,
)
from advsim._dpsgd import run_mechanism
from advsim._records import DPSGDParams
from advsim._simulate import count_samplers
from advsim.adversaries import LikelihoodSumDecoder, ProjectionScore
from advsim.mechanisms import LikelihoodEncodingLoss, LinearProcess

HUGE = 10**10


class _Groups64(AbstractMechanism):
    """float64, group j's gradient e_j, sigma 1e-12: each step's update reads the counts."""

    params: DPSGDParams
    counts: np.ndarray

    def __init__(self, counts, sampling_prob=0.3, steps=4):
        self.params = DPSGDParams(steps, sampling_prob, 1e-12)
        self.counts = np.asarray(counts, np.int64)

    def init_model(self):
        return jnp.zeros(len(self.counts), jnp.float64)

    def canary_gradient(self, model, t):
        return jnp.zeros_like(model)

    def data_gradients(self, model, t):
        return jnp.eye(len(self.counts), dtype=model.dtype)

    def data_counts(self):
        return jnp.asarray(self.counts)


def _table_cdf(table: BinomialTable) -> tuple[int, np.ndarray]:
    """(lo, the CDF without its padding of ones, last entry 1.0 included)."""
    cdf = np.asarray(table.cdf)
    return int(table.lo), cdf[: int(np.argmax(cdf == 1.0)) + 1]


def _chi_square_pvalue(draws: np.ndarray, n: int, q: float, bins: int = 40, shift=0.0) -> float:
    """Chi-square test of the draws against Binomial(n, q), in `bins` cells of about
    equal probability (edges at scipy's quantiles; probabilities from scipy's CDF)."""
    qs = np.linspace(0, 1, bins + 1)[1:-1]
    edges = np.unique(stats.binom.ppf(qs, n, q).astype(np.int64))  # cell j: (e_{j-1}, e_j]
    cdf = np.concatenate([[0.0], stats.binom.cdf(edges, n, q), [1.0]])
    expected = np.diff(cdf) * draws.size
    observed = np.bincount(
        np.searchsorted(edges, draws + shift, side="left"), minlength=len(cdf) - 1
    )
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    return float(stats.chi2.sf(chi2, len(expected) - 1))


# --- the window --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "q"), [(HUGE, 0.01), (HUGE, 0.5), (HUGE, 1e-6), (10**6, 0.999), (1000, 0.03)]
)
def test_window_tails_are_below_2_to_the_minus_64_and_not_much_smaller(n, q):
    lo, hi = binomial_window(n, q)
    below = stats.binom.cdf(lo - 1, n, q) if lo > 0 else 0.0
    above = stats.binom.sf(hi, n, q) if hi < n else 0.0
    assert below <= 2.0**-64 and above <= 2.0**-64
    # Not wastefully wide: one step inward, a tail that was cut holds more than 2^-80
    # (the Chernoff bound is loose by a polynomial factor only).
    if lo > 0:
        assert stats.binom.cdf(lo, n, q) > 2.0**-80
    if hi < n:
        assert stats.binom.sf(hi - 1, n, q) > 2.0**-80


def test_window_and_table_refuse_bad_arguments():
    with pytest.raises(ValueError, match="sampling_prob in \\(0, 1\\)"):
        binomial_window(100, 1.0)
    with pytest.raises(ValueError, match="MAX_TABLE_SIZE"):
        binomial_table(2**62, 0.5)
    assert binomial_window(2**62, 0.5)[1] - binomial_window(2**62, 0.5)[0] > MAX_TABLE_SIZE


# --- the table's CDF ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "q"),
    [
        (HUGE, 1e-6),
        pytest.param(10**6, 0.5, marks=pytest.mark.slow),
        pytest.param(HUGE, 0.37, marks=pytest.mark.slow),
    ],
)
def test_table_cdf_is_the_conditioned_cdf_to_float64_rounding(n, q):
    lo, cdf = _table_cdf(binomial_table(n, q))
    # The conditioned CDF in 40 digits up to where float64 rounds it to 1, sampled at
    # every `step`-th entry for the wide window (its recurrence still visits every k).
    mpmath.mp.dps = 40
    ratio = mpmath.mpf(q) / (1 - mpmath.mpf(q))
    size = len(cdf) if n < HUGE or q < 1e-3 else 20_000  # q = 0.37: the first 20k entries
    w, acc, sums = mpmath.mpf(1), mpmath.mpf(1), [mpmath.mpf(1)]
    for k in range(lo, lo + size - 1):
        w = w * (n - k) / (k + 1) * ratio
        acc += w
        sums.append(acc)
    if size < len(cdf):  # the total: the rest of the window by the same recurrence, in float
        lo_rest, hi = lo + size - 1, binomial_window(n, q)[1]
        k = np.arange(lo_rest, hi, dtype=np.float64)
        log_ratio = np.log((n - k) * q / ((k + 1) * (1 - q)))
        total = acc + w * mpmath.mpf(float(np.sum(np.exp(np.cumsum(log_ratio)))))
    else:
        total = acc
    exact = np.array([float(s / total) for s in sums])
    # Entries equal to the rounding of the exact conditioned CDF, within 2^-52 (float64
    # has 2^-53 spacing below 1). The float total above only matters at relative 1e-16.
    err = np.max(np.abs(cdf[:size] - exact))
    assert err <= 2.0**-52, err


def test_small_n_table_is_the_exact_cdf():
    # The whole CDF summed exactly (40 digits); scipy's binom.cdf is off by up to 1.4e-14
    # at n = 1000, q = 0.03, the table by < 2^-53 (conditioning on the window is invisible).
    mpmath.mp.dps = 40
    for n, q in [(20, 0.5), (1000, 0.03), (57, 0.9), (300, 0.999)]:
        lo, cdf = _table_cdf(binomial_table(n, q))
        qq = mpmath.mpf(q)
        pmf = [mpmath.binomial(n, j) * qq**j * (1 - qq) ** (n - j) for j in range(lo + len(cdf))]
        exact = np.array([float(mpmath.fsum(pmf[: k + 1])) for k in range(lo, lo + len(cdf))])
        np.testing.assert_allclose(cdf, exact, rtol=0, atol=2.0**-53)


# --- draws -------------------------------------------------------------------------------


def _draws(table, size, seed):
    return np.asarray(jax.jit(lambda k: table.sample((size,), key=k))(jax.random.key(seed)))


@pytest.mark.parametrize(
    ("n", "q"),
    [
        (1000, 0.03),
        pytest.param(20, 0.5, marks=pytest.mark.slow),
        pytest.param(57, 0.9, marks=pytest.mark.slow),
    ],
)
def test_small_n_draws_fit_scipy_binomial(x64, n, q):
    table = binomial_table(n, q)
    draws = _draws(table, 200_000, seed=n)
    # Cells: every value with expected count >= 20, the rest pooled into the two tails.
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, q)
    keep = np.flatnonzero(pmf * draws.size >= 20)
    a, b = keep[0], keep[-1]
    probs = np.concatenate(
        [[stats.binom.cdf(a - 1, n, q)], pmf[a : b + 1], [stats.binom.sf(b, n, q)]]
    )
    observed = np.bincount(np.clip(draws - a + 1, 0, b - a + 2), minlength=b - a + 3)
    expected = probs * draws.size
    mask = expected > 0
    chi2 = float(np.sum((observed[mask] - expected[mask]) ** 2 / expected[mask]))
    assert observed[~mask].sum() == 0
    assert stats.chi2.sf(chi2, mask.sum() - 1) > 1e-3


@pytest.mark.slow  # 2-3 s each: the fast suite keeps the small-n fit and the exact CDFs
@pytest.mark.parametrize("q", [1e-6, 0.01, 0.5])
def test_huge_n_draws_fit_binomial_and_the_test_has_power(x64, q):
    n = HUGE
    table = binomial_table(n, q)
    draws = _draws(table, 400_000, seed=int(q * 1e6))
    assert draws.dtype == np.int64
    assert _chi_square_pvalue(draws, n, q) > 1e-3
    # The same test rejects the draws moved by 1/20 of a standard deviation (where the
    # lattice allows: at q = 1e-6 the sd is 100, a shift of 5).
    shift = max(1, round(math.sqrt(n * q * (1 - q)) / 20))
    assert _chi_square_pvalue(draws, n, q, shift=shift) < 1e-6
    # An exact binomial test of the upper tail beyond 3 sd (scipy's sf is the oracle).
    cut = int(n * q + 3 * math.sqrt(n * q * (1 - q)))
    tail = stats.binomtest(int(np.sum(draws > cut)), draws.size, stats.binom.sf(cut, n, q))
    assert tail.pvalue > 1e-3


def test_search_is_searchsorted_at_every_edge(x64):
    # The draws' search (a branchless binary search) counts the entries <= u, as
    # searchsorted(side="right"): at the entries themselves, just below them, 0 and 1 - 2^-52.
    for n, q in [(HUGE, 1e-6), (57, 0.9), (3, 0.5)]:
        cdf = jnp.asarray(binomial_table(n, q).cdf)
        u = jnp.concatenate([cdf, jnp.nextafter(cdf, 0.0), jnp.array([0.0, 1.0 - 2.0**-52])])
        u = u[u < 1.0]
        got = jax.jit(_count_at_most)(cdf, u)
        np.testing.assert_array_equal(got, jnp.searchsorted(cdf, u, side="right"))


def test_draws_are_a_pure_function_of_the_key(x64):
    table = binomial_table(10**6, 0.01)
    a, b = _draws(table, 1000, seed=3), _draws(table, 1000, seed=3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, _draws(table, 1000, seed=4))
    lo, cdf = _table_cdf(table)
    assert lo <= a.min() and a.max() < lo + len(cdf)


def test_rounded_normal_is_opt_in_and_says_approximate(x64):
    assert "APPROXIMATE" in RoundedNormalBinomial.__doc__
    sample = jax.jit(lambda k: RoundedNormalBinomial(HUGE, 0.01).sample((10_000,), key=k))
    draws = np.asarray(sample(jax.random.key(0)))
    assert abs(draws.mean() - 1e8) < 5 * 9950 / 100 and abs(draws.std() / 9950 - 1) < 0.05


# --- the engine --------------------------------------------------------------------------


def test_engine_picks_tables_only_for_large_groups_under_x64(x64):
    mech = LikelihoodEncodingLoss(3, 0.2, 1.0)
    (table,) = count_samplers(mech)
    assert isinstance(table, BinomialTable) and int(table.count) == HUGE
    assert count_samplers(mech, "jax") is None
    assert isinstance(count_samplers(mech, "normal_approx")[0], RoundedNormalBinomial)
    # Groups of single examples (mean q < 10): jax.random.binomial, the unchanged path.
    assert count_samplers(_Groups64([1, 1, 1])) is None
    assert [type(s) for s in count_samplers(_Groups64([3, 10**6]))] == [type(None), BinomialTable]
    with pytest.raises(ValueError, match="binomial must be one of"):
        count_samplers(mech, "exact")


def test_engine_tables_off_in_float32():
    assert not jax.config.jax_enable_x64
    assert count_samplers(_Groups64([3, 10**6])) is None


@pytest.mark.slow  # 3-6 s: the fast suite stays under 5 minutes
def test_run_mechanism_draws_each_group_from_its_sampler(x64):
    # The model after each step is m - (n_1 e_1 + n_2 e_2 + 1e-12 xi): the release reads
    # the counts back exactly (float64 holds integers below 2^53).
    mech = _Groups64([7, 10**7])
    samplers = count_samplers(mech)
    key = jax.random.key(5)
    run = eqx.filter_jit(run_mechanism)
    traj = run(mech, False, key=key, release="all", count_samplers=samplers)
    counts = -np.diff(np.asarray(traj), axis=0)
    k_count = jax.random.split(key, 3)[2]
    q = jnp.asarray(0.3, jnp.float64)
    small = jax.random.binomial(jax.random.fold_in(k_count, 0), 7.0, q, (4,), jnp.float64)
    huge = samplers[1].sample((4,), key=jax.random.fold_in(k_count, 1))
    np.testing.assert_array_equal(np.round(counts[:, 0]), np.asarray(small))
    np.testing.assert_array_equal(np.round(counts[:, 1]), np.asarray(huge))
    # Without samplers: one jax.random.binomial call for both groups.
    plain = run(mech, False, key=key, release="all")
    both = jax.random.binomial(k_count, jnp.asarray([7.0, 1e7]), q, (4, 2), jnp.float64)
    np.testing.assert_array_equal(np.round(-np.diff(np.asarray(plain), axis=0)), np.asarray(both))


def test_simulate_refuses_unknown_binomial_method():
    with pytest.raises(ValueError, match="binomial must be one of"):
        advsim.simulate(LinearProcess(3, 0.1, 1.0), ProjectionScore(), 10, 0, binomial="fast")


@pytest.mark.slow  # 20 s (three compilations); tests/mechanisms/test_contract.py's
# likelihood-encoding case checks chunk-size invariance through the table path too
def test_table_path_is_chunk_size_invariant_and_differs_from_jax_path(x64):
    mech = LikelihoodEncodingLoss(4, 0.1, 1.0)
    adv = LikelihoodSumDecoder()
    a = advsim.simulate(mech, adv, 70, key=9, chunk_size=1)
    b = advsim.simulate(mech, adv, 70, key=9, chunk_size=4096)
    np.testing.assert_array_equal(a.canary_in, b.canary_in)
    np.testing.assert_array_equal(a.canary_out, b.canary_out)
    c = advsim.simulate(mech, adv, 70, key=9, chunk_size=1, binomial="jax")
    assert not np.array_equal(a.canary_out, c.canary_out)  # another (exact) sampler

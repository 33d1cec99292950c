"""`LinearProcess` against its closed form.

For a linear loss with the canary's gradient of norm C in n schedule steps (and no other
non-zero gradient), the last model projected on the canary's descent direction is, in units
of eta * C, exactly

    in:  Binomial(n, q) + N(0, T sigma^2)        out:  N(0, T sigma^2)

(proof of Theorem 1 of arXiv:2410.06186). Each test simulates both worlds through the
engine and compares the ProjectionScore with this law: the mean and the variance within 5
standard errors (the variance's standard error from the exact fourth central moment), and a
Kolmogorov-Smirnov test against the exact mixture CDF written below (p-value > 1e-3). Keys
are fixed, so the outcome is deterministic; with a correct engine each KS test would fail
for a fraction 1e-3 of keys.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import scipy.stats

import advsim
from advsim import CanarySchedule
from advsim.adversaries import ProjectionScore
from advsim.mechanisms import LinearProcess

T, Q, SIGMA = 20, 0.2, 1.5
N_RUNS = 100_000


def _law(n: int, q: float, noise_sd: float):
    """Moments and CDF of Binomial(n, q) + N(0, noise_sd^2) (n = 0: the out-world)."""
    k = np.arange(n + 1)
    pmf = scipy.stats.binom.pmf(k, n, q)
    var_b, var_g = n * q * (1 - q), noise_sd**2
    # Central fourth moments: Binomial npq(1 + 3(n - 2)pq); Gaussian 3 s^4; for a sum of
    # independent variables mu4 = mu4_B + 6 var_B var_G + mu4_G.
    mu4_b = var_b * (1 + 3 * (n - 2) * q * (1 - q)) if n else 0.0
    mu4 = mu4_b + 6 * var_b * var_g + 3 * var_g**2

    def cdf(x):
        x = np.asarray(x, np.float64)[..., None]
        return np.sum(pmf * scipy.stats.norm.cdf((x - k) / noise_sd), axis=-1)

    return n * q, var_b + var_g, mu4, cdf


def _check_law(samples: np.ndarray, n: int, q: float, noise_sd: float) -> None:
    mean, var, mu4, cdf = _law(n, q, noise_sd)
    size = samples.size
    assert abs(samples.mean() - mean) <= 5 * math.sqrt(var / size), (samples.mean(), mean)
    # Var of the sample variance ~ (mu4 - var^2) / N.
    assert abs(samples.var(ddof=1) - var) <= 5 * math.sqrt((mu4 - var**2) / size), (
        samples.var(ddof=1),
        var,
    )
    pvalue = scipy.stats.kstest(samples, cdf).pvalue
    assert pvalue > 1e-3, pvalue


def _projected(mech: LinearProcess, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # chunk_size=1: one block (1024 runs) per compiled chunk, a shape other tests share.
    scores = advsim.simulate(mech, ProjectionScore(), trials, seed, chunk_size=1)
    unit = float(mech.learning_rate) * float(mech.clip_norm)
    return scores.canary_in / unit, scores.canary_out / unit


def test_law_one_dimensional():
    y_in, y_out = _projected(LinearProcess(T, Q, SIGMA), N_RUNS, seed=0)
    _check_law(y_in, T, Q, math.sqrt(T) * SIGMA)
    _check_law(y_out, 0, Q, math.sqrt(T) * SIGMA)


@pytest.mark.parametrize(("clip_norm", "learning_rate"), [(2.0, 0.5), (3.0, 0.5)])
def test_law_scales_by_learning_rate_times_clip_norm(clip_norm, learning_rate):
    # The step moves the canary's coordinate by eta * C and the noise by eta * sigma * C,
    # so the projection divided by eta * C has the same law as with C = eta = 1.
    mech = LinearProcess(T, Q, SIGMA, clip_norm=clip_norm, learning_rate=learning_rate)
    y_in, y_out = _projected(mech, N_RUNS, seed=1)
    _check_law(y_in, T, Q, math.sqrt(T) * SIGMA)
    _check_law(y_out, 0, Q, math.sqrt(T) * SIGMA)
    # And not by C or eta alone: the raw in-world mean is eta * C * T * q (5 SE).
    raw_mean = y_in.mean() * learning_rate * clip_norm
    se = learning_rate * clip_norm * math.sqrt((T * Q * (1 - Q) + T * SIGMA**2) / N_RUNS)
    assert abs(raw_mean - learning_rate * clip_norm * T * Q) <= 5 * se


@pytest.mark.slow
def test_law_every_third_step():
    # every(3) over T = 20: steps 1, 4, ..., 19, so n = 7 coins; the noise still comes
    # from all T steps.
    schedule = CanarySchedule.every(3)
    mech = LinearProcess(T, Q, SIGMA, canary_schedule=schedule)
    n = len(schedule.steps(T))
    assert n == 7
    y_in, y_out = _projected(mech, N_RUNS, seed=2)
    _check_law(y_in, n, Q, math.sqrt(T) * SIGMA)
    _check_law(y_out, 0, Q, math.sqrt(T) * SIGMA)


@pytest.mark.slow
def test_law_unchanged_by_zero_data():
    # 20 other examples with zero gradients ("zero" distribution, the adversarial-dataset
    # setting) are sampled every step but contribute nothing. The shape (T = 5, d = 5,
    # 20 groups) is the one tests/mechanisms/test_contract.py compiles; binomial sampling of
    # the groups is costly, hence 20 000 runs per world.
    steps, q, sigma = 5, 0.3, 1.0
    mech = LinearProcess.with_data(steps, q, sigma, dim=5, num_examples=20, distribution="zero")
    y_in, y_out = _projected(mech, 20_000, seed=3)
    _check_law(y_in, steps, q, math.sqrt(steps) * sigma)
    _check_law(y_out, 0, q, math.sqrt(steps) * sigma)


def test_law_oracle_rejects_a_wrong_law():
    # Power check of `_check_law` itself on numpy samples: the right law passes; a shift by
    # 0.3 eta C (0.04 noise sd; a dropped or doubled canary step would shift by ~1) and
    # q = 0.25 instead of 0.2 both fail.
    rng = np.random.default_rng(0)
    noise_sd = math.sqrt(T) * SIGMA
    good = rng.binomial(T, Q, N_RUNS) + rng.normal(0, noise_sd, N_RUNS)
    _check_law(good, T, Q, noise_sd)
    with pytest.raises(AssertionError):
        _check_law(good + 0.3, T, Q, noise_sd)
    with pytest.raises(AssertionError):
        _check_law(rng.binomial(T, 0.25, N_RUNS) + rng.normal(0, noise_sd, N_RUNS), T, Q, noise_sd)


# --- projection_law -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "batching", "n", "q"),
    [
        (None, "poisson", T, Q),
        (CanarySchedule.every(3), "poisson", 7, Q),
        (CanarySchedule.only(1, sampled=False), "poisson", 1, 1.0),
        (None, "fixed", T, 1.0),
    ],
)
def test_projection_law_matches_scipy(schedule, batching, n, q):
    mech = LinearProcess(T, Q, SIGMA, canary_schedule=schedule, batching=batching)
    support, log_probs, scale = (np.asarray(a, np.float64) for a in mech.projection_law())
    np.testing.assert_array_equal(support, np.arange(n + 1))
    with np.errstate(divide="ignore"):
        expected = scipy.stats.binom.logpmf(np.arange(n + 1), n, q)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(log_probs[finite], expected[finite], rtol=1e-5, atol=1e-5)
    assert np.all(np.exp(log_probs[~finite]) == 0.0)
    np.testing.assert_allclose(scale, math.sqrt(T) * SIGMA, rtol=1e-6)


def test_projection_law_refuses_non_zero_data():
    mech = LinearProcess.with_data(T, Q, SIGMA, dim=3, num_examples=4, distribution="gaussian")
    with pytest.raises(ValueError, match="exact only without other data gradients"):
        mech.projection_law()


# --- validation -----------------------------------------------------------------------------------


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(sampling_prob=0.0), "sampling_prob must be in (0, 1], got 0.0"),
        (dict(sampling_prob=1.5), "sampling_prob must be in (0, 1], got 1.5"),
        (dict(sampling_prob=-0.2), "sampling_prob must be in (0, 1], got -0.2"),
        (dict(noise_multiplier=0.0), "noise_multiplier must be in (0, inf), got 0.0"),
        (dict(noise_multiplier=-1.0), "noise_multiplier must be in (0, inf), got -1.0"),
        (dict(noise_multiplier=math.inf), "noise_multiplier must be in (0, inf), got inf"),
        (dict(steps=0), "steps must be an integer in [1, 10000000], got 0"),
        (dict(steps=-4), "steps must be an integer in [1, 10000000], got -4"),
        (dict(clip_norm=0.0), "clip_norm must be in (0, inf), got 0.0"),
        (dict(learning_rate=-0.1), "learning_rate must be in (0, inf), got -0.1"),
        (dict(dim=0), "dim must be an integer in [1, inf), got 0"),
        (dict(dim=3, canary_coordinate=3), "canary_coordinate must be an integer in [0, 2], got 3"),
        (dict(batching="random"), "batching must be 'poisson' or 'fixed', got 'random'"),
    ],
)
def test_validation_names_parameter_and_range(kwargs, message):
    args = dict(steps=T, sampling_prob=Q, noise_multiplier=SIGMA) | kwargs
    with pytest.raises(ValueError, match=_exact(message)):
        LinearProcess(**args)


def test_nan_hyperparameter_rejected():
    with pytest.raises(ValueError, match=_exact("noise_multiplier must be a number, got nan")):
        LinearProcess(T, Q, math.nan)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            dict(data_gradients=np.zeros((3, 2))),
            r"data_gradients must have shape \(groups, dim=1\)",
        ),
        (dict(data_gradients=np.zeros(3)), r"data_gradients must have shape"),
        (dict(data_gradients=[[np.nan]]), "data_gradients must be finite"),
        (dict(data_gradients=np.zeros((2, 1)), data_counts=[1, -1]), "data_counts must be 2"),
        (dict(data_gradients=np.zeros((2, 1)), data_counts=[1, 2, 3]), "data_counts must be 2"),
    ],
)
def test_data_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LinearProcess(T, Q, SIGMA, **kwargs)


@pytest.mark.parametrize("counts", [[1.5], [2**31]])
def test_data_counts_must_be_representable_integers(counts):
    with pytest.raises(ValueError, match="data_counts"):
        LinearProcess(T, Q, SIGMA, data_gradients=np.zeros((1, 1)), data_counts=counts)


def test_with_data_validation():
    with pytest.raises(ValueError, match="distribution must be 'zero', 'gaussian' or 'sphere'"):
        LinearProcess.with_data(T, Q, SIGMA, dim=2, num_examples=3, distribution="uniform")
    with pytest.raises(
        ValueError, match=_exact("num_examples must be an integer in [1, inf), got 0")
    ):
        LinearProcess.with_data(T, Q, SIGMA, dim=2, num_examples=0)
    with pytest.raises(ValueError, match=_exact("scale must be in [0, inf), got -1.0")):
        LinearProcess.with_data(T, Q, SIGMA, dim=2, num_examples=3, scale=-1.0)


@pytest.mark.parametrize("distribution", ["gaussian", "sphere"])
def test_with_data_gradients(distribution):
    mech = LinearProcess.with_data(
        T, Q, SIGMA, dim=4, num_examples=500, distribution=distribution, scale=2.0, data_seed=3
    )
    grads = np.asarray(mech.other_gradients, np.float64)
    assert grads.shape == (500, 4)
    np.testing.assert_array_equal(mech.other_counts, 1)
    norms = np.linalg.norm(grads, axis=1)
    if distribution == "sphere":
        np.testing.assert_allclose(norms, 2.0, rtol=1e-6)
    else:
        # N(0, scale^2 / d I): E||g||^2 = scale^2 = 4; over 500 rows the mean of ||g||^2
        # has sd 4 * sqrt(2 / (4 * 500)) = 0.13: allow 5 sd.
        assert abs(np.mean(norms**2) - 4.0) < 0.65
    # data_seed fixes the dataset.
    again = LinearProcess.with_data(
        T, Q, SIGMA, dim=4, num_examples=500, distribution=distribution, scale=2.0, data_seed=3
    )
    np.testing.assert_array_equal(again.other_gradients, mech.other_gradients)


@pytest.mark.parametrize("value", [True, "0.5"])
def test_non_numbers_rejected_as_sampling_prob(value):
    with pytest.raises(TypeError, match="sampling_prob must be a real number"):
        LinearProcess(T, value, SIGMA)


def test_hyperparameters_are_stored_as_float64_arrays():
    # accounting() must see q exactly as given (q = 0.01 stays 0.01, not float32 0.0099999998).
    mech = LinearProcess(T, 0.01, SIGMA)
    assert isinstance(mech.sampling_prob, np.ndarray)
    assert mech.sampling_prob.dtype == np.float64 and mech.sampling_prob.shape == ()
    assert mech.accounting().sampling_prob == 0.01

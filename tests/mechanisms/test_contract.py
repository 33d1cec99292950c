"""The contract every mechanism must satisfy, run on each entry of `CASES`.

A new mechanism file adds one `Case` to `CASES` (a factory, so nothing is built at import
time) and gets every check below:

- the canary's and the data's gradients, once clipped by the engine, have norm <= C;
- the same key gives identical scores, a different key different ones;
- the scores do not depend on the chunk size (bit for bit);
- the scores are finite;
- `accounting()` agrees with the canary schedule and the batching.

Where the expected values come from: the DP-SGD contract of DESIGN.md (the engine clips to
C, the canary is Poisson-sampled with rate q only for a sampled schedule under Poisson
batching) and `simulate`'s docstring (run i depends only on its key).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim import AbstractAdversary, AbstractMechanism, CanarySchedule, clip_gradients
from advsim.adversaries import (
    CoordinateLikelihoodRatio,
    LikelihoodSumDecoder,
    ProjectionScore,
    RandomDirection,
    RepeaterDecoder,
    ThresholdAdversary,
)
from advsim.mechanisms import (
    GradientCanary,
    HistoryRegularizer,
    LikelihoodEncodingLoss,
    LinearProcess,
    MaliciousRepeaters,
    QuadraticRegularizer,
    ThresholdLandscape,
    ZeroingRegularizer,
)


@dataclasses.dataclass(frozen=True)
class Case:
    """One mechanism under contract.

    Attributes:
        name: the test id.
        mechanism: builds the mechanism (called lazily, once per test).
        adversary: builds the adversary used to score runs (default: projection on the
            canary's descent direction).
        x64: run with `jax_enable_x64` (for mechanisms with `requires_x64`).
    """

    name: str
    mechanism: Callable[[], AbstractMechanism]
    adversary: Callable[[], AbstractAdversary] = ProjectionScore
    x64: bool = False


def _with_data(distribution: str, **kwargs) -> Callable[[], LinearProcess]:
    # scale 3 puts most data gradients above C = 1, so the engine's clipping is exercised.
    return lambda: LinearProcess.with_data(
        5, 0.3, 1.0, dim=5, num_examples=20, distribution=distribution, scale=3.0, **kwargs
    )


CASES: list[Case] = [
    Case("linear-1d", lambda: LinearProcess(20, 0.2, 1.5)),
    Case("linear-5d-zero", _with_data("zero")),
    Case("linear-5d-gaussian", _with_data("gaussian")),
    Case("linear-5d-sphere", _with_data("sphere")),
    Case(
        "linear-every3",
        lambda: LinearProcess(20, 0.2, 1.5, canary_schedule=CanarySchedule.every(3)),
    ),
    Case(
        "linear-only1-unsampled",
        lambda: LinearProcess(20, 0.2, 1.5, canary_schedule=CanarySchedule.only(1, sampled=False)),
    ),
    Case("linear-5d-fixed-batch", _with_data("gaussian", batching="fixed")),
    Case("zeroing", lambda: ZeroingRegularizer(10, 0.2, 1.5)),
    Case("quadratic", lambda: QuadraticRegularizer(10, 0.2, 1.5, alpha=0.5)),
    Case("history", lambda: HistoryRegularizer(6, 0.2, 1.0, v=3.0), CoordinateLikelihoodRatio),
    Case("repeaters", lambda: MaliciousRepeaters(5, 0.2, 0.5), RepeaterDecoder),
    Case(
        "likelihood-encoding",
        lambda: LikelihoodEncodingLoss(3, 0.2, 1.0),
        LikelihoodSumDecoder,
        x64=True,
    ),
    Case("landscape", lambda: ThresholdLandscape(6, 2.0, 4), ThresholdAdversary),
    Case(
        "gradient-canary-logistic",
        # scale 3: logistic gradients above C = 1 get clipped; canary at steps 2 and 4; a
        # fixed batch (Poisson batching of data groups is covered by linear-5d-gaussian).
        lambda: GradientCanary(
            5, 0.3, 1.0, dim=5, data="logistic", num_examples=20, scale=3.0,
            canary_schedule=CanarySchedule.every(2, first=2), batching="fixed",
        ),
        lambda: RandomDirection(1),
    ),
]


@pytest.fixture(params=CASES, ids=lambda case: case.name)
def case(request):
    case = request.param
    if case.x64:
        previous = jax.config.jax_enable_x64
        jax.config.update("jax_enable_x64", True)
        yield case
        jax.config.update("jax_enable_x64", previous)
    else:
        yield case


# --- simulations shared by the tests of one case (compiling dominates their cost) -----------

_CACHE: dict = {}


def _chunk_sizes(mech: AbstractMechanism) -> tuple[int, int, int]:
    """chunk_size=1 (one block per chunk), a middle value (two blocks per device) and one
    above the number of trials (a single chunk)."""
    b = advsim.block_size(mech) * len(jax.devices())
    return 1, b + 1, 4 * b


def _trials(mech: AbstractMechanism) -> int:
    # A little over two blocks per device: several chunks of one and two blocks, and a
    # partial tail in each chunking.
    return 2 * advsim.block_size(mech) * len(jax.devices()) + 37


def _scores(case: Case, chunk_size: int, seed: int = 0) -> advsim.Scores:
    cache_key = (case.name, chunk_size, seed, jax.config.jax_enable_x64)
    if cache_key not in _CACHE:
        mech = case.mechanism()
        _CACHE[cache_key] = advsim.simulate(
            mech, case.adversary(), _trials(mech), jax.random.key(seed), chunk_size=chunk_size
        )
    return _CACHE[cache_key]


# --- clipping ------------------------------------------------------------------------------------


def _steps_to_check(mech: AbstractMechanism) -> list[int]:
    return sorted({1, 2, max(1, mech.steps // 2), mech.steps})


def _models_to_check(mech: AbstractMechanism) -> list[jax.Array]:
    m0 = mech.init_model()
    shifted = m0 + jax.random.normal(jax.random.key(1), m0.shape, m0.dtype)
    return [m0, shifted]


def test_clipped_canary_gradient_norm_at_most_c(case):
    mech = case.mechanism()
    c = float(mech.clip_norm)
    for model in _models_to_check(mech):
        for t in _steps_to_check(mech):
            g = clip_gradients(mech.canary_gradient(model, jnp.int32(t)), mech.clip_norm)
            assert g.shape == model.shape
            assert float(jnp.linalg.norm(g)) <= c + 1e-6, (t, g)


def test_clipped_data_gradients_norm_at_most_c(case):
    mech = case.mechanism()
    c = float(mech.clip_norm)
    counts = np.asarray(mech.data_counts())
    assert counts.ndim == 1 and np.all(counts >= 0)
    for model in _models_to_check(mech):
        for t in _steps_to_check(mech):
            grads = mech.data_gradients(model, jnp.int32(t))
            assert grads.shape == (counts.shape[0], *model.shape)
            norms = np.asarray(jnp.linalg.norm(clip_gradients(grads, mech.clip_norm), axis=-1))
            assert np.all(norms <= c + 1e-6), norms


# --- simulation -------------------------------------------------------------------------------


def test_same_key_same_scores(case):
    first = _scores(case, chunk_size=1)
    mech = case.mechanism()
    again = advsim.simulate(mech, case.adversary(), _trials(mech), jax.random.key(0), chunk_size=1)
    np.testing.assert_array_equal(first.canary_in, again.canary_in)
    np.testing.assert_array_equal(first.canary_out, again.canary_out)
    other = _scores(case, chunk_size=1, seed=1)
    assert not np.array_equal(first.canary_in, other.canary_in)
    assert not np.array_equal(first.canary_out, other.canary_out)


@pytest.mark.slow  # two more compilations per case (~5-15 s each on 2 CPU cores)
def test_chunk_size_invariance(case):
    mech = case.mechanism()
    small, middle, large = (_scores(case, cs) for cs in _chunk_sizes(mech))
    for other in (middle, large):
        np.testing.assert_array_equal(small.canary_in, other.canary_in)
        np.testing.assert_array_equal(small.canary_out, other.canary_out)


def test_scores_are_finite(case):
    scores = _scores(case, chunk_size=1)
    mech = case.mechanism()
    assert scores.canary_in.shape == scores.canary_out.shape == (_trials(mech),)
    assert np.all(np.isfinite(scores.canary_in))
    assert np.all(np.isfinite(scores.canary_out))


# --- accounting --------------------------------------------------------------------------------


def test_accounting_matches_schedule(case):
    mech = case.mechanism()
    acc = mech.accounting()
    schedule = mech.canary_schedule
    expected_steps = tuple(t for t in range(1, mech.steps + 1) if bool(schedule.mask(t)))
    assert acc.steps == mech.steps
    assert acc.canary_steps == expected_steps == schedule.steps(mech.steps)
    assert acc.num_canary_steps == len(expected_steps)
    assert acc.noise_multiplier == float(mech.noise_multiplier)
    if schedule.sampled and mech.batching == "poisson":
        assert acc.sampling_prob == float(mech.sampling_prob)
    else:
        assert acc.sampling_prob == 1.0


def test_accounting_known_values():
    # Hand-written expectations for the cases above (steps, q, number of canary steps).
    expected = {
        "linear-1d": (20, 0.2, 20),
        "linear-5d-zero": (5, 0.3, 5),
        "linear-5d-gaussian": (5, 0.3, 5),
        "linear-5d-sphere": (5, 0.3, 5),
        "linear-every3": (20, 0.2, 7),  # steps 1, 4, ..., 19
        "linear-only1-unsampled": (20, 1.0, 1),
        "linear-5d-fixed-batch": (5, 1.0, 5),
    }
    for case in CASES:
        if case.name in expected:
            acc = case.mechanism().accounting()
            assert (acc.steps, acc.sampling_prob, acc.num_canary_steps) == expected[case.name]

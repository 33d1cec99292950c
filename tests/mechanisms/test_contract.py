"""The contract every mechanism must satisfy, run on each entry of `CASES`.

A new mechanism file adds one `Case` to `CASES` (a factory, so nothing is built at import
time) and gets every check below:

- the engine's step moves the model by at most lr * C for the canary and for each data
  example, whatever gradients the mechanism returns (checked on `dpsgd_update`, the step
  `simulate` runs, not on the clipping helper);
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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim import AbstractAdversary, AbstractMechanism, CanarySchedule
from advsim.adversaries import (
    BiasedCoordinate,
    CanaryLoss,
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
    ProjectedLinearCanary,
    QuadraticRegularizer,
    RealModelGradientCanary,
    RealModelInputCanary,
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
    # projected onto a ball of radius 0.5 in 3-D: the noise (sd 1) reaches it every step.
    Case("projected-linear", lambda: ProjectedLinearCanary(6, 1.0, radius=0.5, dim=3)),
    Case(
        "gradient-canary-logistic",
        # scale 3: logistic gradients above C = 1 get clipped; canary at steps 2 and 4; a
        # fixed batch (Poisson batching of data groups is covered by linear-5d-gaussian).
        lambda: GradientCanary(
            5,
            0.3,
            1.0,
            dim=5,
            data="logistic",
            num_examples=20,
            scale=3.0,
            canary_schedule=CanarySchedule.every(2, first=2),
            batching="fixed",
        ),
        lambda: RandomDirection(1),
    ),
    Case(
        "real-model-logistic-gradient-canary",
        # breast_cancer, 8 examples each a group of count 1; lr 1: most per-example
        # gradients have norm > C = 1 at the shifted model. A fixed batch (the case below
        # covers the engine's Poisson sampling of real-model examples).
        lambda: RealModelGradientCanary(
            4,
            0.3,
            1.0,
            num_examples=8,
            learning_rate=1.0,
            batching="fixed",
            canary_schedule=CanarySchedule.every(2, first=2, sampled=False),
        ),
        lambda: BiasedCoordinate(3),
    ),
    Case(
        "real-model-mlp-input-canary",
        # a 30-2-1 MLP and a mislabeled canary, Poisson-sampled at every step.
        # max_batch_size 1: a sampled batch of 2 or more takes several blocks of the engine.
        lambda: RealModelInputCanary(
            2, 0.3, 1.0, model="mlp", width=2, num_examples=4, max_batch_size=1
        ),
        CanaryLoss,
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


@eqx.filter_jit
def _engine_displacements(mech, model, t):
    """How far the engine's update (`advsim.dpsgd_update`, the step `simulate` runs, with
    zero noise) moves m_t when the canary is added to the batch, and when one example of
    each data group is: everything else equal, so the regularizer cancels."""
    counts = jnp.asarray(mech.data_counts(), jnp.int32)
    zero = jnp.zeros_like(model)

    def step(present, cts):
        return advsim.dpsgd_update(mech, model, t, jnp.asarray(present), cts, zero)

    canary = step(True, counts) - step(False, counts)
    base = jnp.zeros_like(counts)
    one_each = jnp.eye(counts.shape[0], dtype=jnp.int32)
    data = jax.vmap(lambda c: step(False, c) - step(False, base))(one_each)
    return jnp.linalg.norm(canary), jnp.linalg.norm(data, axis=-1)


def _step_bound(mech, model, t) -> float:
    """lr_t * C, with float32 rounding of the update at the model's scale."""
    lr = float(mech.step_size(jnp.int32(t)))
    scale = 1.0 + float(jnp.max(jnp.abs(model)))
    return lr * float(mech.clip_norm) * (1 + 1e-5) + 1e-5 * scale


def test_engine_moves_the_model_at_most_lr_c_for_the_canary(case):
    # The contract of DESIGN.md from the engine's side: adding the canary to a step's batch
    # (everything else equal, no noise) moves m_t by at most lr * C, whatever gradient the
    # mechanism returns.
    mech = case.mechanism()
    for model in _models_to_check(mech):
        for t in _steps_to_check(mech):
            assert mech.canary_gradient(model, jnp.int32(t)).shape == model.shape
            norm, _ = _engine_displacements(mech, model, jnp.int32(t))
            assert float(norm) <= _step_bound(mech, model, t), (t, norm)


def test_engine_moves_the_model_at_most_lr_c_per_data_example(case):
    # One more example of group g in the batch moves m_t by at most lr * C.
    mech = case.mechanism()
    counts = np.asarray(mech.data_counts())
    assert counts.ndim == 1 and np.all(counts >= 0)
    for model in _models_to_check(mech):
        for t in _steps_to_check(mech):
            grads = mech.data_gradients(model, jnp.int32(t))
            assert grads.shape == (counts.shape[0], *model.shape)
            _, norms = _engine_displacements(mech, model, jnp.int32(t))
            assert np.all(np.asarray(norms) <= _step_bound(mech, model, t)), (t, norms)


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

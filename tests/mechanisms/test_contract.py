"""The contract every mechanism must satisfy, run on each entry of `CASES`.

A new mechanism file adds one `Case` to `CASES` (a factory, so nothing is built at import
time) and gets every check of `advsim.testing.check_mechanism` (the public suite a user
runs on their own class):

- the shapes the engine expects of every method (the model (d,), the gradients (d,) and
  (g, d), the counts (g,), a scalar step size);
- the engine's step moves the model by at most lr * C for the canary and for each data
  example, whatever gradients the mechanism returns (checked on `dpsgd_update`, the step
  `simulate` runs, not on the clipping helper);
- `accounting()` agrees with the canary schedule and the batching;
- the same key gives identical scores, a different key different ones;
- the scores are finite, one per run;
- the scores do not depend on the chunk size (bit for bit; slow).

Where the expected values come from: the engine clips every gradient to C, the canary is
Poisson-sampled with rate q only for a sampled schedule under Poisson batching, and
`simulate`'s docstring says run i depends only on its key. The adversary of each case is
checked against its mechanism in tests/adversaries/test_contract.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import pytest

import advsim.testing
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


# --- the public contract suite, one test per group of checks ----------------------------------


def _check(case: Case, *checks: str) -> None:
    advsim.testing.check_mechanism(case.mechanism(), case.adversary(), checks=checks)


def test_shapes(case):
    _check(case, "shapes")


def test_engine_moves_the_model_at_most_lr_c(case):
    # Adding the canary, or one more example of a data group, to a step's batch
    # (everything else equal, no noise) moves m_t by at most lr * C, whatever gradient the
    # mechanism returns.
    _check(case, "clipping")


def test_accounting_matches_schedule(case):
    _check(case, "accounting")


@pytest.mark.slow
def test_same_key_same_scores_and_finite(case):
    # One compilation per case; the checks share its simulations.
    _check(case, "determinism", "finite")


@pytest.mark.slow  # two more compilations per case (~5-15 s each on 2 CPU cores)
def test_chunk_size_invariance(case):
    _check(case, "chunking")


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

"""The contract every adversary must satisfy, run on each entry of `CASES`.

Each exported adversary is checked against a mechanism it applies to with
`advsim.testing.check_adversary` (the public suite a user runs on their own class):
`craft` returns the same mechanism with the same accounting twice, `score` returns one
scalar per run, the same key gives the same scores, every score is finite, and higher
scores mean "canary in" (a reversed sign would make every audit return 0).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

import jax
import pytest

import advsim.adversaries
import advsim.testing
from advsim import AbstractAdversary, AbstractMechanism, CanarySchedule
from advsim.adversaries import (
    BiasedCoordinate,
    CanaryGradientProjection,
    CanaryLoss,
    CoordinateLikelihoodRatio,
    LikelihoodRatioScore,
    LikelihoodSumDecoder,
    ProjectionScore,
    RandomDirection,
    RepeaterDecoder,
    SimulatedBiasedDimension,
    ThresholdAdversary,
)
from advsim.mechanisms import (
    GradientCanary,
    HistoryRegularizer,
    LikelihoodEncodingLoss,
    LinearProcess,
    MaliciousRepeaters,
    RealModelGradientCanary,
    RealModelInputCanary,
    ThresholdLandscape,
)


@dataclasses.dataclass(frozen=True)
class Case:
    """One adversary under contract.

    Attributes:
        adversary: builds the adversary.
        mechanism: builds a mechanism it applies to (called lazily, once per test).
        x64: run with `jax_enable_x64` (for mechanisms with `requires_x64`).
    """

    adversary: Callable[[], AbstractAdversary]
    mechanism: Callable[[], AbstractMechanism]
    x64: bool = False

    @property
    def name(self) -> str:
        return type(self.adversary()).__name__


def _gradient_canary() -> GradientCanary:
    # Logistic data gradients above C = 1, the canary at steps 2 and 4, a fixed batch.
    schedule = CanarySchedule.every(2, first=2)
    return GradientCanary(
        5,
        0.3,
        1.0,
        dim=5,
        data="logistic",
        num_examples=20,
        scale=3.0,
        canary_schedule=schedule,
        batching="fixed",
    )


def _real_gradient_canary() -> RealModelGradientCanary:
    # breast_cancer, 8 examples; the canary at steps 2 and 4, always present.
    schedule = CanarySchedule.every(2, first=2, sampled=False)
    return RealModelGradientCanary(
        4, 0.3, 1.0, num_examples=8, batching="fixed", canary_schedule=schedule
    )


def _input_canary() -> RealModelInputCanary:
    return RealModelInputCanary(2, 0.3, 1.0, num_examples=4, max_batch_size=1)


CASES: list[Case] = [
    Case(ProjectionScore, lambda: LinearProcess(20, 0.2, 1.5)),
    Case(LikelihoodRatioScore, lambda: LinearProcess(20, 0.2, 1.5)),
    Case(CoordinateLikelihoodRatio, lambda: HistoryRegularizer(6, 0.2, 1.0, v=3.0)),
    Case(RepeaterDecoder, lambda: MaliciousRepeaters(5, 0.2, 0.5)),
    Case(LikelihoodSumDecoder, lambda: LikelihoodEncodingLoss(3, 0.2, 1.0), x64=True),
    Case(ThresholdAdversary, lambda: ThresholdLandscape(6, 2.0, 4)),
    Case(lambda: RandomDirection(1), _gradient_canary),
    Case(lambda: BiasedCoordinate(3), _real_gradient_canary),
    Case(SimulatedBiasedDimension, _gradient_canary),
    Case(CanaryLoss, _input_canary),
    Case(CanaryGradientProjection, _input_canary),
]


@pytest.fixture(params=CASES, ids=lambda case: case.name)
def case(request):
    case = request.param
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", case.x64 or previous)
    yield case
    jax.config.update("jax_enable_x64", previous)


def test_every_exported_adversary_has_a_case():
    exported = {
        name
        for name in advsim.adversaries.__all__
        if inspect.isclass(cls := getattr(advsim.adversaries, name))
        and issubclass(cls, AbstractAdversary)
    }
    assert exported == {case.name for case in CASES}


@pytest.mark.slow
def test_adversary_contract(case):
    advsim.testing.check_adversary(case.adversary(), case.mechanism())

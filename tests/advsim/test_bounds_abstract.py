"""Bounds as values (`advsim.bounds.AbstractBound`): every bound declares its assumptions,
refuses a process outside each of them (naming it), and keeps the value of the function it
wraps.

Expected values: each instance against the function it wraps (`heuristic_epsilon`,
`composition_epsilon`, `full_batch_epsilon`, `shifted_interpolation_bound`,
`strongly_convex_gdp_bound`), called directly with the run's numbers.
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import jax.numpy as jnp
import pytest

import advsim.bounds as bounds
from advsim import AbstractMechanism, Accounting, CanarySchedule, DPSGDParams
from advsim.bounds import AbstractBound, AssumptionError, ProcessFacts
from advsim.mechanisms import LinearProcess
from advsim.testing import ProjectedScalarFieldConstruction, ScalarField, ScalarFieldConstruction

DELTA = 1e-5
FULL = dict(batching="fixed", canary_schedule=CanarySchedule.every_step(sampled=False))

#: Every AbstractBound that advsim.bounds exports.
BOUNDS = sorted(
    (
        obj
        for obj in vars(bounds).values()
        if inspect.isclass(obj) and issubclass(obj, AbstractBound) and not inspect.isabstract(obj)
    ),
    key=lambda c: c.__name__,
)

#: Full-batch GD on a strongly convex objective (the regularizer's): inside the
#: assumptions of both strongly convex bounds.
STRONGLY_CONVEX = ScalarFieldConstruction(
    6,
    1.0,
    1.0,
    canary=ScalarField.constant(-1.0),
    regularizer=ScalarField(0.0, 2.0),
    learning_rate=0.3,
    **FULL,
)  # fmt: skip

#: A process inside each bound's assumptions.
INSIDE = {
    "LastIterateHeuristic": ScalarFieldConstruction(5, 0.3, 1.0, canary=ScalarField.constant(-1.0)),
    "HeuristicMaxOverSteps": ScalarFieldConstruction(
        5, 0.3, 1.0, canary=ScalarField.constant(-1.0)
    ),
    "Composition": ScalarFieldConstruction(
        3, 0.3, 1.0, canary=ScalarField(0.2, 0.5, jumps=[1.0], jump_heights=[-1.0])
    ),
    "FullBatchGDP": ScalarFieldConstruction(4, 1.0, 2.0, canary=ScalarField.constant(-1.0), **FULL),
    "ShiftedInterpolation": ProjectedScalarFieldConstruction(
        6,
        1.0,
        1.0,
        radius=2.0,
        canary=ScalarField.constant(-1.0),
        groups=[ScalarField(0.1, 0.2)],
        learning_rate=0.5,
        **FULL,
    ),  # fmt: skip
    "LangevinRDP": STRONGLY_CONVEX,
    "StronglyConvexGDP": STRONGLY_CONVEX,
}


def test_every_exported_bound_is_covered_here():
    assert {c.__name__ for c in BOUNDS} == set(INSIDE)


def _breakers(facts: ProcessFacts) -> dict[type, ProcessFacts]:
    """For each assumption type, facts that fail it (and only what it reads changed)."""
    acc = facts.accounting
    r = dataclasses.replace
    return {
        bounds.Linear: r(facts, linear=False),
        bounds.Convex: r(facts, convex=False),
        bounds.StronglyConvex: r(facts, strong_convexity=0.0, example_strong_convexity=0.0),
        bounds.Smooth: r(facts, smoothness=math.inf),
        bounds.LipschitzWithinClip: r(facts, lipschitz=2.0 * facts.clip_norm),
        bounds.RegularizerAsExample: r(
            facts,
            regularizer_zero=False,
            regularizer_lipschitz=3.0 * facts.clip_norm,
            regularizer_smoothness=0.0,
        ),  # fmt: skip
        bounds.HolderGradients: r(facts, holder=lambda beta: math.inf),
        bounds.BoundedDomain: r(facts, radius=math.inf),
        bounds.FullBatch: r(facts, batching="poisson", data_sampling_prob=0.5),
        bounds.PoissonBatches: r(facts, batching="fixed", data_sampling_prob=1.0),
        bounds.CyclicBatches: r(  # gaps 1 then 2 or more: not one step per epoch
            facts,
            accounting=dataclasses.replace(
                acc, canary_steps=(1, 2, max(4, acc.steps)), steps=max(4, acc.steps)
            ),
        ),
        bounds.ConstantStepSize: r(
            facts, accounting=dataclasses.replace(acc, step_sizes=(1.0,) + (0.5,) * (acc.steps - 1))
        ),
        bounds.StepSizeAtMost: r(facts, learning_rate=1e6),
    }


@pytest.mark.parametrize("cls", BOUNDS, ids=lambda c: c.__name__)
def test_a_bound_accepts_a_process_inside_its_assumptions(cls):
    bound = cls()
    mech = INSIDE[cls.__name__]
    assert bound.failures(mech) == ()
    eps = bound.epsilon(mech, DELTA)
    assert math.isfinite(eps) and eps > 0
    assert cls.__name__ in bound.describe() and bound.reference


@pytest.mark.parametrize("cls", BOUNDS, ids=lambda c: c.__name__)
def test_a_bound_refuses_a_process_outside_each_assumption_naming_it(cls):
    bound = cls()
    facts = INSIDE[cls.__name__].facts()
    broken = _breakers(facts)
    for assumption in bound.assumptions:
        outside = broken[type(assumption)]
        reason = assumption.failure(outside)
        assert reason is not None, f"{assumption} holds for its own breaker"
        with pytest.raises(AssumptionError, match="does not apply") as err:
            bound.epsilon(outside, DELTA)
        assert reason in str(err.value) and err.value.bound == cls.__name__


class _Offset(AbstractMechanism):
    """A user's mechanism with no `facts()`: only its numbers are known."""

    params: DPSGDParams

    def __init__(self, steps, sampling_prob, noise_multiplier):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)


def test_composition_assumes_nothing_and_a_mechanism_without_facts_gets_only_numbers():
    mech = _Offset(10, 0.1, 1.0)
    assert bounds.Composition().epsilon(mech, DELTA) == bounds.composition_epsilon(
        DELTA, mech.accounting()
    )
    with pytest.raises(AssumptionError, match="linear losses: not certified"):
        bounds.LastIterateHeuristic().epsilon(mech, DELTA)


def test_real_processes_outside_are_refused_with_the_reason():
    nonlinear = ScalarFieldConstruction(3, 0.5, 1.0, canary=ScalarField(-1.0, 0.3))
    with pytest.raises(AssumptionError, match="some gradient is not constant"):
        bounds.LastIterateHeuristic().epsilon(nonlinear, DELTA)
    poisson = ScalarFieldConstruction(3, 0.5, 1.0, canary=ScalarField.constant(-1.0))
    with pytest.raises(AssumptionError, match="sampled with q = 0.5"):
        bounds.FullBatchGDP().epsilon(poisson, DELTA)
    jump = ProjectedScalarFieldConstruction(
        3, 1.0, 1.0, radius=2.0, canary=ScalarField(-0.5, jumps=[0.5], jump_heights=[0.2]),
        **FULL,
    )  # fmt: skip
    with pytest.raises(AssumptionError, match="gradient jumps"):
        bounds.ShiftedInterpolation().epsilon(jump, DELTA)
    convex_only = ScalarFieldConstruction(3, 1.0, 1.0, canary=ScalarField.constant(-1.0), **FULL)
    with pytest.raises(AssumptionError, match=r"m = 0 is not > 0"):
        bounds.StronglyConvexGDP().epsilon(convex_only, DELTA)


def test_the_instances_keep_the_values_of_the_functions_they_wrap():
    lin = INSIDE["LastIterateHeuristic"]
    acc = lin.accounting()
    assert bounds.LastIterateHeuristic().epsilon(lin, DELTA) == bounds.heuristic_epsilon(DELTA, acc)
    assert bounds.HeuristicMaxOverSteps().epsilon(lin, DELTA) == (
        bounds.heuristic_epsilon_max_over_steps(DELTA, 5, 0.3, 1.0)
    )
    assert bounds.Composition().epsilon(lin, DELTA) == bounds.composition_epsilon(DELTA, acc)
    full = INSIDE["FullBatchGDP"]
    assert bounds.FullBatchGDP().epsilon(full, DELTA) == bounds.full_batch_epsilon(
        DELTA, full.accounting()
    )
    si = INSIDE["ShiftedInterpolation"]
    assert (
        bounds.ShiftedInterpolation().epsilon(si, DELTA)
        == si.shifted_interpolation_bound(DELTA).epsilon
    )
    sc = INSIDE["StronglyConvexGDP"]
    # The objective is the regularizer 2 m (both worlds: the canary's loss is linear), every
    # gradient within C = 1 on the line (the canary's only), one example.
    assert bounds.StronglyConvexGDP().epsilon(sc, DELTA) == bounds.strongly_convex_gdp_bound(
        6, noise_multiplier=1.0, clip_norm=1.0, lipschitz=1.0, strong_convexity=2.0,
        smoothness=2.0, learning_rate=0.3, num_examples=1, delta=DELTA,
    ).epsilon  # fmt: skip
    assert bounds.LangevinRDP().epsilon(INSIDE["LangevinRDP"], DELTA) == bounds.langevin_epsilon(
        DELTA, steps=6, noise_multiplier=1.0, clip_norm=1.0, lipschitz=1.0,
        strong_convexity=2.0, smoothness=2.0, learning_rate=0.3, num_examples=1,
    )  # fmt: skip


def test_a_bad_delta_and_a_bad_process_are_named():
    with pytest.raises(ValueError, match="delta"):
        bounds.Composition().epsilon(INSIDE["Composition"], 2.0)
    with pytest.raises(TypeError, match="got str"):
        bounds.Composition().epsilon("a process", DELTA)


def test_a_user_bound_declares_and_is_checked():
    class HalfComposition(AbstractBound):
        assumptions = (bounds.FullBatch(),)
        reference = "planted"

        def value(self, facts, delta):
            return -1.0

    with pytest.raises(ValueError, match="must be >= 0"):
        HalfComposition().epsilon(INSIDE["FullBatchGDP"], DELTA)
    acc = Accounting(steps=2, sampling_prob=1.0, noise_multiplier=1.0, canary_steps=(1, 2))
    facts = ProcessFacts(
        accounting=acc, clip_norm=1.0, learning_rate=1.0, batching="fixed", canary_sampled=False
    )
    assert HalfComposition().applies(facts)


def test_a_user_assumption_states_itself_in_its_description():
    @dataclasses.dataclass(frozen=True)
    class EvenSteps(bounds.Assumption):
        description = "an even number of steps"

        def failure(self, facts):
            return None if facts.steps % 2 == 0 else f"{facts.steps} steps"

    @dataclasses.dataclass(frozen=True)
    class Silent(bounds.Assumption):
        def failure(self, facts):
            return None

    assert EvenSteps().describe() == str(EvenSteps()) == "an even number of steps"
    with pytest.raises(NotImplementedError, match="Silent says nothing of itself"):
        Silent().describe()


@pytest.mark.parametrize("cls", BOUNDS, ids=lambda c: c.__name__)
def test_delta_inverts_epsilon(cls):
    # delta(eps(1e-5)) = 1e-5: a closed form where the bound has one (heuristic_delta,
    # composition_delta), otherwise the default bisection, which rounds up.
    bound, mech = cls(), INSIDE[cls.__name__]
    eps = bound.epsilon(mech, DELTA)
    assert bound.delta(mech, eps) == pytest.approx(DELTA, rel=1e-6)
    assert bound.delta(mech, 2.0 * eps) < DELTA
    with pytest.raises(ValueError, match="epsilon must be finite and >= 0"):
        bound.delta(mech, -1.0)


def test_delta_refuses_a_process_outside():
    with pytest.raises(AssumptionError, match="some gradient is not constant"):
        bounds.LastIterateHeuristic().delta(
            ScalarFieldConstruction(3, 0.5, 1.0, canary=ScalarField(-1.0, 0.3)), 1.0
        )


def test_the_built_in_scalar_mechanisms_certify_their_facts():
    """The built-in mechanisms read their facts off their definitions. On them the bounds
    meet independent references: the heuristic is Theorem 1's value on the linear process;
    Bok, Su and Altschuler's strongly convex bound is the exact epsilon of the quadratic
    regularizer at full batch (its tight case: the last model is Gaussian in both worlds,
    `quadratic_exact_epsilon`, Section 4.2 of arXiv:2410.06186) and of the zeroing one
    (c = 0: one step's Gaussian mechanism); shifted interpolation is the projected canary's
    own `shifted_interpolation_bound`."""
    from advsim.mechanisms import (
        ProjectedLinearCanary,
        QuadraticRegularizer,
        ZeroingRegularizer,
    )

    lin = LinearProcess(10, 0.1, 1.0)
    assert bounds.LastIterateHeuristic().epsilon(lin, DELTA) == bounds.heuristic_epsilon(
        DELTA, lin.accounting()
    )
    quad = QuadraticRegularizer(20, 1.0, 2.0, alpha=0.3, **FULL)
    assert bounds.StronglyConvexGDP().epsilon(quad, DELTA) == pytest.approx(
        quad.exact_epsilon(DELTA), rel=1e-9
    )
    with pytest.raises(AssumptionError, match="some gradient is not constant"):
        bounds.LastIterateHeuristic().epsilon(quad, DELTA)
    zero = ZeroingRegularizer(10, 1.0, 1.0, **FULL)
    assert bounds.StronglyConvexGDP().epsilon(zero, DELTA) == pytest.approx(
        zero.exact_epsilon(DELTA), rel=1e-9
    )
    proj = ProjectedLinearCanary(200, 1.0, radius=0.5)
    assert bounds.ShiftedInterpolation().epsilon(proj, DELTA) == (
        proj.shifted_interpolation_bound(DELTA).epsilon
    )

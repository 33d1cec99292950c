"""The probe for jumps that `field_breakpoints()` leaves out (`advsim.exact.undeclared_jumps`).

Expected values are read off the constructions themselves:

- a sawtooth regularizer gradient s (m - P floor(m / P)) jumps by -s P at every multiple
  of P, and nowhere else; the grid's reach is `grid_reach`, so the jumps the probe must
  report are the multiples of P inside it;
- `ThresholdLandscape`'s data field jumps at its threshold h from step 2 on (step 1 is
  the canary's alone, Eq. (3) of arXiv:2407.06496), by 2C after clipping;
- steep or only Holder-continuous fields (a tanh of width 1e-4, square and cube roots)
  never jump: no report (no false alarm).
"""

from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim.exact import (
    UndeclaredJumpWarning,
    grid_reach,
    last_iterate_epsilon,
    undeclared_jumps,
)
from advsim.mechanisms import QuadraticRegularizer, ThresholdLandscape
from advsim.validation import as_traced_float, check_positive

DELTA = 1e-5


class Sawtooth(advsim.AbstractScalarLaw):
    """Loss -C m plus a regularizer whose gradient is a sawtooth of period P."""

    params: advsim.DPSGDParams
    period: np.ndarray
    strength: np.ndarray
    jumps: np.ndarray

    def __init__(self, steps, sampling_prob, noise_multiplier, *, period=1.5, strength=0.5,
                 declare=True):  # fmt: skip
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier)
        self.period = as_traced_float("period", period, check_positive)
        self.strength = as_traced_float("strength", strength, check_positive)
        self.jumps = np.zeros((0,))
        if declare:  # every multiple of P in the reach, a period of margin on each side
            lo, hi = grid_reach(self)
            self.jumps = period * np.arange(math.ceil(lo / period) - 1, math.floor(hi / period) + 2)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        p = jnp.asarray(self.period, model.dtype)
        return jnp.asarray(self.strength, model.dtype) * (model - p * jnp.floor(model / p))

    def field_breakpoints(self):
        return jnp.asarray(self.jumps)


class SteepButContinuous(advsim.AbstractScalarLaw):
    params: advsim.DPSGDParams

    def __init__(self, steps, sampling_prob, noise_multiplier):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def data_gradients(self, model, t):
        return jnp.sign(model - 0.7) * jnp.sqrt(jnp.abs(model - 0.7))[None, :]

    def data_counts(self):
        return jnp.asarray([2])

    def regularizer_gradient(self, model, t):
        return 0.5 * jnp.tanh(model / 1e-4) + 0.1 * jnp.cbrt(model + 0.3)


class UndeclaredLandscape(ThresholdLandscape):
    def field_breakpoints(self):
        return jnp.zeros((0,))


def test_an_undeclared_sawtooth_is_found_at_every_multiple_of_its_period():
    mech = Sawtooth(5, 1.0, 0.8, declare=False)
    lo, hi = grid_reach(mech)
    expected = 1.5 * np.arange(math.ceil(lo / 1.5), math.floor(hi / 1.5) + 1)
    jumps = undeclared_jumps(mech)
    assert len(jumps) == expected.size
    np.testing.assert_allclose([j.position for j in jumps], expected, atol=1e-9)
    assert {j.field for j in jumps} == {"regularizer"}
    np.testing.assert_allclose([j.size for j in jumps], -0.5 * 1.5, rtol=1e-9)


def test_declared_jumps_and_continuous_fields_are_not_reported():
    assert undeclared_jumps(Sawtooth(5, 1.0, 0.8)) == []
    assert undeclared_jumps(SteepButContinuous(5, 0.5, 1.0)) == []
    assert undeclared_jumps(ThresholdLandscape(5, 1.0, 4)) == []
    assert undeclared_jumps(QuadraticRegularizer(10, 0.2, 1.0, alpha=0.5)) == []


def test_a_landscape_without_its_breakpoint_jumps_at_h_from_step_two():
    mech = UndeclaredLandscape(5, 1.0, 4, threshold=0.3)
    (jump,) = undeclared_jumps(mech)
    assert jump.field == "data group 0" and jump.step == 2
    assert jump.position == pytest.approx(0.3, abs=1e-9)
    assert abs(jump.size) == pytest.approx(2.0)  # -C s(theta): from +C to -C, clipped at C = 1


def test_the_engine_warns_before_any_work_and_names_the_jumps():
    with pytest.warns(UndeclaredJumpWarning, match=r"Sawtooth: a field jumps .*regularizer at m ="):
        last_iterate_epsilon(Sawtooth(3, 1.0, 0.8, declare=False), DELTA, refinements=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndeclaredJumpWarning)
        last_iterate_epsilon(Sawtooth(3, 1.0, 0.8), DELTA, refinements=2)


def test_check_mechanism_fails_on_a_jump_left_out():
    # The message names the first five jumps (the multiples of 1.5 in the reach, lowest
    # first) and counts the rest.
    mech = Sawtooth(3, 1.0, 0.8, declare=False)
    lo, hi = grid_reach(mech)
    first, last = math.ceil(lo / 1.5), math.floor(hi / 1.5)
    named = "; ".join(
        f"regularizer at m = {1.5 * k:.6g} \\(step 1\\)" for k in range(first, first + 5)
    )
    match = f"'breakpoints' check: .*: {named} and {last - first + 1 - 5} more;"
    with pytest.raises(AssertionError, match=match):
        advsim.testing.check_mechanism(mech, checks=["breakpoints"])
    advsim.testing.check_mechanism(Sawtooth(3, 1.0, 0.8), checks=["breakpoints"])

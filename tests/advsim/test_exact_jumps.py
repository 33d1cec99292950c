"""The probe for jumps that `field_breakpoints()` leaves out (`advsim.exact.undeclared_jumps`).

Expected values are read off the constructions themselves:

- a sawtooth regularizer gradient s (m - P floor(m / P)) jumps by -s P at every multiple
  of P, and nowhere else; the grid's reach is `grid_reach`, so the jumps the probe must
  report are the multiples of P inside it;
- `ThresholdLandscape`'s data field jumps at its threshold h from step 2 on (step 1 is
  the canary's alone, Eq. (3) of arXiv:2407.06496), by 2C after clipping;
- steep or only Holder-continuous fields (a tanh of width 1e-4, square and cube roots)
  never jump: no report (no false alarm);
- random `ScalarFieldConstruction`s (knots, bumps, Holder roots, jumps) declare their
  jumps by construction: with them declared, nothing is reported; with them hidden, each
  declared breakpoint where the engine's clipped field does jump (read off the field on
  both sides of it, 1e-9 away) is reported there, and nothing else (a breakpoint whose
  term drew height 0, or whose both sides clip to C, carries no jump).
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advsim
from advsim.exact import (
    UndeclaredJumpWarning,
    grid_reach,
    last_iterate_epsilon,
    undeclared_jumps,
)
from advsim.exact._jumps import _field_values, _probe_steps
from advsim.exact._programs import any_steps
from advsim.mechanisms import QuadraticRegularizer, ThresholdLandscape
from advsim.testing import SETTINGS, ScalarFieldConstruction, scalar_fields
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


class Hidden(ScalarFieldConstruction):
    def field_breakpoints(self):
        return jnp.zeros((0,))


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


class JumpAtOneStep(advsim.AbstractScalarLaw):
    """Loss -C m plus a regularizer whose gradient steps up by `size` at m = 0.25, at step
    `at` only (continuous, zero, at every other step)."""

    params: advsim.DPSGDParams
    at: int

    def __init__(self, steps, at):
        self.params = advsim.DPSGDParams(steps, 1.0, 1.0)
        self.at = at

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        return jnp.where((t == self.at) & (model >= 0.25), 0.5, 0.0).astype(model.dtype)

    def field_breakpoints(self):
        return jnp.zeros((0,))


@pytest.mark.parametrize("steps, at", [(10, 4), (16, 7), (300, 83)])
def test_a_jump_at_one_step_is_found_up_to_t16_and_at_the_spread_steps(steps, at):
    # Up to T = 16 every step is read; beyond, 1, 2, T - 1, T and twelve evenly spread
    # between 3 and T - 2 (T = 300: round(3 + 26.82 k) = 3, 30, 57, 83, ...). Steps 4 of 10
    # and 7 of 16 lie away from both ends and from the middle.
    assert at in _probe_steps(steps)
    (jump,) = undeclared_jumps(JumpAtOneStep(steps, at))
    assert (jump.field, jump.step) == ("regularizer", at)
    assert jump.position == pytest.approx(0.25, abs=1e-9) and jump.size == pytest.approx(0.5)


def test_the_probed_steps():
    assert _probe_steps(3) == [1, 2, 3]
    assert _probe_steps(16) == list(range(1, 17))
    t = _probe_steps(1000)
    assert len(t) == 16 and t[:2] == [1, 2] and t[-2:] == [999, 1000] and t == sorted(set(t))


def test_the_engine_warns_before_any_work_and_names_the_jumps():
    with pytest.warns(UndeclaredJumpWarning, match=r"Sawtooth: a field jumps .*regularizer at m ="):
        last_iterate_epsilon(Sawtooth(3, 1.0, 0.8, declare=False), DELTA, refinements=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndeclaredJumpWarning)
        last_iterate_epsilon(Sawtooth(3, 1.0, 0.8), DELTA, refinements=2)


def test_check_mechanism_fails_on_a_jump_left_out():
    # The message names the first five jumps (the multiples of 1.5 in the reach, lowest
    # first, each of size -s P = -0.75) and counts the rest.
    mech = Sawtooth(3, 1.0, 0.8, declare=False)
    lo, hi = grid_reach(mech)
    first, last = math.ceil(lo / 1.5), math.floor(hi / 1.5)
    named = "; ".join(
        f"regularizer at m = {1.5 * k:.6g} \\(step 1, size -0.75\\)"
        for k in range(first, first + 5)
    )
    match = f"'breakpoints' check: .*: {named} and {last - first + 1 - 5} more;"
    with pytest.raises(AssertionError, match=match):
        advsim.testing.check_mechanism(mech, checks=["breakpoints"])
    advsim.testing.check_mechanism(Sawtooth(3, 1.0, 0.8), checks=["breakpoints"])


def _jumping_breakpoints(mech, lo, hi) -> list[float]:
    """The declared breakpoints inside (lo, hi) where some field the engine reads (clipped)
    differs by more than 1e-6 between 1e-9 below and 1e-9 above, at a probed step."""
    steps = _probe_steps(mech.steps)
    bps = sorted({float(b) for b in np.asarray(mech.field_breakpoints(), np.float64)})
    real = []
    with jax.enable_x64(True):
        for b in (b for b in bps if lo < b < hi):
            x = jnp.asarray([[b - 1e-9, b + 1e-9]] * len(steps))
            v = np.asarray(_field_values(any_steps(mech), x, jnp.asarray(steps, jnp.int32)))
            if np.max(np.abs(v[:, 1] - v[:, 0])) > 1e-6:
                real.append(b)
    return real


@settings(SETTINGS, max_examples=20)
@given(st.data())
def test_random_constructions_every_real_jump_found_and_nothing_else(data):
    canary = data.draw(scalar_fields(spread=3.0, knots=2, bumps=1, jumps=2, roots=1))
    group = data.draw(scalar_fields(scale=0.5, spread=3.0, knots=1, bumps=1, jumps=1, roots=1))
    kw = dict(canary=canary, groups=[group], counts=[2], batching="fixed")
    declared = ScalarFieldConstruction(4, 1.0, 1.0, **kw)
    assert undeclared_jumps(declared) == []
    lo, hi = grid_reach(declared)
    expected = _jumping_breakpoints(declared, lo, hi)
    found = [j.position for j in undeclared_jumps(Hidden(4, 1.0, 1.0, **kw))]
    assert len(found) == len(expected), (found, expected)
    np.testing.assert_allclose(found, expected, atol=1e-6)

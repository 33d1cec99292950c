"""A float hyperparameter declared with `advsim.validation.as_traced_float` never recompiles.

Two `simulate` calls of a user-written mechanism that differ only in such a float (the
cells of a sweep over it) compile once: the second call traces nothing and compiles
nothing. The same mechanism with the float stored as a plain Python float recompiles
(the control, which shows that the count sees compilations).

Compilations are counted with jax's monitoring events: one "lowering" event per program
jit lowers to MLIR (a jit cache miss) and one "backend compile" event per program XLA
compiles (none when the program comes from jax's persistent compilation cache, so the
control counts lowerings). Traces are not counted: `simulate` evaluates shapes on every
call, which traces without compiling.
"""

import contextlib
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim.adversaries import ProjectionScore
from advsim.validation import as_traced_float, check_nonnegative

LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def count_compilations():
    """Counts the events jax records inside the block, by name."""
    counts = Counter()

    def listener(event: str, duration: float, **kwargs) -> None:
        counts[event] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield counts
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


class TracedCubic(advsim.AbstractMechanism):
    """A linear loss plus a restoring force alpha m^3, alpha a traced field."""

    params: advsim.DPSGDParams
    alpha: object

    def __init__(self, alpha):
        self.params = advsim.DPSGDParams(5, 0.5, 1.0)
        self.alpha = as_traced_float("alpha", alpha, check_nonnegative)

    def init_model(self):
        return jnp.zeros(1)

    def canary_gradient(self, model, t):
        return -jnp.ones(1)

    def regularizer_gradient(self, model, t):
        return jnp.asarray(self.alpha, model.dtype) * model**3


class StaticCubic(TracedCubic):
    """The same mechanism with alpha left a Python float: part of the compiled key."""

    alpha: float

    def __init__(self, alpha):
        self.params = advsim.DPSGDParams(5, 0.5, 1.0)
        self.alpha = float(alpha)


def _simulate(mechanism):
    return advsim.simulate(mechanism, ProjectionScore(), 64, key=0, progress=False)


def test_a_traced_float_compiles_once_across_values():
    first = _simulate(TracedCubic(0.05))  # compiles (or warms up) the program
    with count_compilations() as counts:
        second = _simulate(TracedCubic(0.07))
    assert counts[LOWER] == 0 and counts[COMPILE] == 0, dict(counts)
    # The value did reach the run: the restoring force changed the models.
    assert not np.array_equal(first.canary_in, second.canary_in)


@pytest.mark.slow
def test_a_static_float_recompiles_for_each_value():
    _simulate(StaticCubic(0.05))
    with count_compilations() as counts:
        _simulate(StaticCubic(0.07))
    assert counts[LOWER] > 0, dict(counts)


@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_the_traced_float_is_checked(value):
    with pytest.raises(ValueError, match="alpha must"):
        TracedCubic(value)

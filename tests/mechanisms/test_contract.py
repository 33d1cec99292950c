"""The contract every built-in mechanism satisfies, run on the instances each class provides.

The classes are found, not listed: every concrete `AbstractMechanism` that
`advsim.mechanisms` exports (it exports every public module's `__all__`). Each defines the
classmethod `contract_examples()` (small instances by name; a class without one fails
`test_every_mechanism_provides_its_examples`), and every check of
`advsim.testing.check_mechanism` (the public suite a user runs on their own class) runs on
each instance, scored by its default adversary, the projection on the canary's descent
direction (on the first coordinate for an `AbstractMultiCanary`, whose engine canary is
never inserted: its gradient is zero and has no direction):

- the shapes the engine expects of every method (the model (d,), the gradients (d,) and
  (g, d), the counts (g,), a scalar step size);
- the engine's step moves the model by at most lr * C for the canary and for each data
  example, whatever gradients the mechanism returns (checked on `dpsgd_update`, the step
  `simulate` runs, not on the clipping helper);
- `accounting()` agrees with the canary schedule and the batching;
- no method reads `steps`, so one compiled program serves every T (or the class says why
  it reads T, `reads_steps`: MaliciousRepeaters, whose model has a coordinate per step);
- the same key gives identical scores, a different key different ones;
- the scores are finite, one per run;
- the scores do not depend on the chunk size (bit for bit; slow).

Where the expected values come from: the engine clips every gradient to C, the canary is
Poisson-sampled with rate q only for a sampled schedule under Poisson batching, and
`simulate`'s docstring says run i depends only on its key. Each exported adversary is
checked against one of these instances in tests/adversaries/test_contract.py.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import advsim.mechanisms
import advsim.testing
from advsim import AbstractMechanism, AbstractMultiCanary
from advsim.adversaries import ProjectionScore

from .._plugins import exported_classes, own_examples

#: Every concrete mechanism class `advsim.mechanisms` exports.
MECHANISMS = exported_classes(advsim.mechanisms, AbstractMechanism)


@pytest.fixture(params=MECHANISMS, ids=lambda cls: cls.__name__)
def mechanism_class(request):
    """Each class, with float64 on while it is tested where it needs it (`requires_x64`)."""
    cls = request.param
    with jax.enable_x64(cls.requires_x64 or jax.config.jax_enable_x64):
        yield cls


def test_the_classes_are_found():
    # The built-ins of the construction table (docs/guide/constructions.md) and beyond.
    names = {cls.__name__ for cls in MECHANISMS}
    assert {"LinearProcess", "GradientCanary", "RealModelInputCanary"} <= names
    assert "AbstractRealModel" not in names  # exported, but abstract


def test_every_mechanism_provides_its_examples(mechanism_class):
    own_examples(mechanism_class)


def _check(cls: type[AbstractMechanism], *checks: str) -> None:
    for name, mech in cls.contract_examples().items():
        adversary = None  # check_mechanism's default
        if isinstance(mech, AbstractMultiCanary):
            adversary = ProjectionScore(np.eye(mech.init_model().shape[0])[0])
        try:
            advsim.testing.check_mechanism(mech, adversary, checks=checks)
        except AssertionError as err:
            raise AssertionError(f"{cls.__name__} example {name!r}: {err}") from err


def test_shapes(mechanism_class):
    _check(mechanism_class, "shapes")


def test_engine_moves_the_model_at_most_lr_c(mechanism_class):
    # Adding the canary, or one more example of a data group, to a step's batch
    # (everything else equal, no noise) moves m_t by at most lr * C, whatever gradient the
    # mechanism returns.
    _check(mechanism_class, "clipping")


def test_accounting_matches_schedule(mechanism_class):
    _check(mechanism_class, "accounting")


def test_every_jump_of_a_scalar_law_is_declared(mechanism_class):
    # The exact engine splits a cell only at a declared jump: every built-in scalar law
    # declares each jump its fields make inside the grid's reach (a probe of the fields,
    # advsim.exact.undeclared_jumps; nothing to check for the other mechanisms).
    _check(mechanism_class, "breakpoints")


@pytest.mark.slow
def test_same_key_same_scores_and_finite(mechanism_class):
    # One compilation per example; the checks share its simulations.
    _check(mechanism_class, "determinism", "finite")


@pytest.mark.slow  # one more compilation per example (~5-15 s on 2 CPU cores)
def test_chunk_size_invariance(mechanism_class):
    _check(mechanism_class, "chunking")


@pytest.mark.slow  # 6 s for the 13 classes: each traces every engine method twice per float
def test_no_float_field_compiles_again(mechanism_class):
    # The check warns (RecompileWarning, an error under the suite's filterwarnings) for a
    # float field held as a plain Python float: a sweep over it would compile per cell.
    _check(mechanism_class, "static_floats")


def test_accounting_known_values():
    # Hand-written expectations for LinearProcess's examples (steps, q, number of canary
    # steps), read off their arguments: the canary is in every step of a sampled schedule
    # at rate q, CanarySchedule.every(3) is steps 1, 4, ..., 19 of 20, an unsampled
    # canary and fixed batches have q = 1.
    expected = {
        "1d": (20, 0.2, 20),
        "5d-zero": (5, 0.3, 5),
        "5d-gaussian": (5, 0.3, 5),
        "5d-sphere": (5, 0.3, 5),
        "every3": (20, 0.2, 7),
        "only1-unsampled": (20, 1.0, 1),
        "5d-fixed-batch": (5, 1.0, 5),
    }
    built = advsim.mechanisms.LinearProcess.contract_examples()
    assert set(built) == set(expected)
    for name, mech in built.items():
        acc = mech.accounting()
        assert (acc.steps, acc.sampling_prob, acc.num_canary_steps) == expected[name]

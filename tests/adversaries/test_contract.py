"""The contract every built-in adversary satisfies, run on the instances each class provides.

The classes are found, not listed: every `AbstractAdversary` that `advsim.adversaries`
exports (it exports every public module's `__all__`). Each defines the classmethod
`contract_examples()`: instances keyed by the built-in mechanism each applies to,
`"Class:name"` for `advsim.mechanisms.Class.contract_examples()[name]` (a class without one
fails `test_every_adversary_provides_its_examples`). `advsim.testing.check_adversary` (the
public suite a user runs on their own class) checks on each pair that `craft` returns the
same mechanism with the same accounting twice, `score` returns one scalar per run, the same
key gives the same scores, every score is finite, and higher scores mean "canary in" (a
reversed sign would make every audit return 0).
"""

from __future__ import annotations

import jax
import pytest

import advsim.adversaries
import advsim.mechanisms
import advsim.testing
from advsim import AbstractAdversary, AbstractMechanism

from .._plugins import exported_classes, own_examples

#: Every adversary class `advsim.adversaries` exports.
ADVERSARIES = exported_classes(advsim.adversaries, AbstractAdversary)


def mechanism_class(key: str) -> tuple[type[AbstractMechanism], str]:
    """The mechanism class and example name an adversary's example key names."""
    class_name, _, example = key.partition(":")
    return getattr(advsim.mechanisms, class_name), example


@pytest.fixture(params=ADVERSARIES, ids=lambda cls: cls.__name__)
def adversary_class(request):
    return request.param


def test_the_classes_are_found():
    names = {cls.__name__ for cls in ADVERSARIES}
    assert {"ProjectionScore", "CanaryLoss", "ThresholdAdversary"} <= names
    assert "ThresholdSearch" not in names  # exported, but a search over adversaries


def test_every_adversary_provides_its_examples(adversary_class):
    for key in own_examples(adversary_class):
        mech_cls, example = mechanism_class(key)
        assert issubclass(mech_cls, AbstractMechanism), key
        with jax.enable_x64(mech_cls.requires_x64 or jax.config.jax_enable_x64):
            assert example in mech_cls.contract_examples(), f"{key!r}: no such example"


@pytest.mark.slow
def test_adversary_contract(adversary_class):
    for key, adversary in adversary_class.contract_examples().items():
        mech_cls, example = mechanism_class(key)
        with jax.enable_x64(mech_cls.requires_x64 or jax.config.jax_enable_x64):
            advsim.testing.check_adversary(adversary, mech_cls.contract_examples()[example])

"""The record every closed-form hidden-state bound returns (`HiddenStateBound`).

Expected values: the shared fields are the ones each bound's function sets (the steps and
delta it was given) and its class states (its module's `ASSUMPTIONS` and `REFERENCE`
constants); the repr order is the one `HiddenStateBound.__repr__` documents (the bound's
own values first).
"""

import dataclasses

import pytest

from advsim import bounds
from advsim.bounds import _langevin, _shifted_interpolation, _strongly_convex

SC_RUN = dict(
    noise_multiplier=10.0, clip_norm=1.0, lipschitz=1.0, strong_convexity=0.2, smoothness=1.0,
    learning_rate=0.1, num_examples=10,
)  # fmt: skip
PROJECTED = dict(
    noise_multiplier=8.0, clip_norm=1.0, lipschitz=1.0, smoothness=1.0, learning_rate=0.1,
    num_examples=2, diameter=1.0,
)  # fmt: skip

CASES = [
    (lambda d: bounds.langevin_bound(100, delta=d, **SC_RUN), _langevin, "rho"),
    (lambda d: bounds.strongly_convex_gdp_bound(100, delta=d, **SC_RUN), _strongly_convex, "mu"),
    (lambda d: bounds.shifted_interpolation_bound(100, delta=d, **PROJECTED),
     _shifted_interpolation, "mu"),
]  # fmt: skip


@pytest.mark.parametrize("make, module, value", CASES)
def test_every_closed_form_bound_is_a_hidden_state_bound(make, module, value):
    b = make(1e-5)
    assert isinstance(b, bounds.HiddenStateBound)
    assert (b.steps, b.delta) == (100, 1e-5) and b.epsilon > 0
    assert b.assumptions == module.ASSUMPTIONS and b.reference == module.REFERENCE
    assert make(None).epsilon is None and make(None).delta is None
    # The bound's own value leads its repr; the shared fields follow, in their order.
    text = repr(b)
    assert text.startswith(f"{type(b).__name__}({value}=")
    shared = ["epsilon=", "delta=", "steps=", "assumptions=", "reference="]
    positions = [text.index(", " + s) for s in shared]
    assert positions == sorted(positions) and positions[0] > text.index(f"{value}=")
    assert f"assumptions={module.ASSUMPTIONS!r}" in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.epsilon = 0.0


@pytest.mark.parametrize("make, module, value", CASES)
def test_a_record_cannot_state_other_assumptions_than_its_bound(make, module, value):
    # The assumptions and the source belong to the bound (class attributes), not to a record:
    # building one with others is refused, not stored.
    b = make(1e-5)
    own = {f.name: getattr(b, f.name) for f in dataclasses.fields(b)}
    assert type(b)(**own) == b
    with pytest.raises(TypeError, match="assumptions"):
        type(b)(**own, assumptions=())
    with pytest.raises(TypeError, match="reference"):
        type(b)(**own, reference="elsewhere")


def test_a_bound_that_does_not_state_its_assumptions_is_refused():
    with pytest.raises(TypeError, match=r"Quiet must set the class attributes \['reference'\]"):

        @dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
        class Quiet(bounds.HiddenStateBound):
            assumptions = ("something",)
            value: float

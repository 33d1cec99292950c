"""`simulate` checks the shapes of the mechanism's methods and of the adversary's score
before any run, and names the method and both shapes when one is wrong."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim import AbstractAdversary, AbstractMechanism, DPSGDParams
from advsim._simulate import _CHECKED, check_shapes, simulate_world
from advsim.adversaries import ProjectionScore
from advsim.mechanisms import LinearProcess, ProjectedLinearCanary


class Shaped(AbstractMechanism):
    """A mechanism whose model and gradients have the shapes it is given."""

    params: DPSGDParams
    model: tuple = eqx.field(static=True)
    canary: tuple = eqx.field(static=True)
    data: tuple = eqx.field(static=True)
    lr: tuple = eqx.field(static=True)

    def __init__(self, model=(2,), canary=None, data=None, lr=()):
        self.params = DPSGDParams(3, 0.5, 1.0)
        self.model = model
        self.canary = model if canary is None else canary
        self.data = (1, *model) if data is None else data
        self.lr = lr

    def init_model(self):
        return jnp.zeros(self.model)

    def canary_gradient(self, model, t):
        return -jnp.ones(self.canary)

    def data_gradients(self, model, t):
        return jnp.ones(self.data)

    def data_counts(self):
        return jnp.array([2], jnp.int32)

    def step_size(self, t):
        return jnp.full(self.lr, self.learning_rate)


class TwoScores(AbstractAdversary):
    """Two numbers per run: the projection and its negative."""

    def score(self, mechanism, release):
        return jnp.stack([release[0], -release[0]])


class Crafts(AbstractAdversary):
    """Crafts a mechanism whose canary gradient has the wrong shape."""

    def craft(self, mechanism):
        return Shaped(model=(2,), canary=(1,))

    def score(self, mechanism, release):
        return release[0]


def _simulate(mechanism, adversary=None, release="last"):
    adversary = ProjectionScore(direction=[1.0, 0.0]) if adversary is None else adversary
    return advsim.simulate(mechanism, adversary, 64, key=0, release=release, progress=False)


@pytest.fixture(autouse=True)
def _unchecked():
    # Every test traces its shapes afresh (a structure that passed is not traced again).
    _CHECKED.clear()
    yield
    _CHECKED.clear()


@pytest.fixture
def no_run(monkeypatch):
    """Fails the test if a world is simulated: the shape errors must come first."""

    def run(*args, **kwargs):
        raise AssertionError("a world was simulated before the shape check")

    monkeypatch.setattr("advsim._simulate.simulate_world", run)


def test_score_of_shape_2_is_refused_naming_the_method(no_run):
    # Accepted before: the two scores of each run came back interleaved as two runs.
    with pytest.raises(ValueError) as err:
        _simulate(LinearProcess(5, 0.5, 1.0), TwoScores())
    assert str(err.value) == (
        "TwoScores.score returned shape (2,); expected shape () (one scalar score per run)"
    )


def test_score_is_checked_on_the_whole_trajectory_for_release_all(no_run):
    # release[0] is then m_0: each run gets a (2, 2) score.
    with pytest.raises(ValueError, match=r"TwoScores\.score returned shape \(2, 2\); expected"):
        _simulate(Shaped(), TwoScores(), release="all")


def test_scalar_init_model_is_refused_naming_the_method(no_run):
    # Before: an IndexError inside the engine's step (model.shape[-1] of a 0-d model).
    with pytest.raises(ValueError) as err:
        _simulate(Shaped(model=()))
    assert str(err.value) == (
        "Shaped.init_model returned shape (); expected shape (d,) (the model as a vector "
        "of d >= 1 coordinates)"
    )


def test_canary_gradient_of_shape_1_on_a_2d_model_is_refused(no_run):
    # Before: the (1,) gradient broadcast silently over both coordinates.
    with pytest.raises(ValueError) as err:
        _simulate(Shaped(model=(2,), canary=(1,)))
    assert str(err.value) == (
        "Shaped.canary_gradient returned shape (1,); expected shape (2,) (the model's shape)"
    )


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        (
            Shaped(model=(2, 1)),
            r"Shaped\.init_model returned shape \(2, 1\); expected shape \(d,\)",
        ),
        (
            Shaped(data=(1, 3)),
            r"Shaped\.data_gradients returned shape \(1, 3\); expected shape \(1, 2\)",
        ),
        (
            Shaped(data=(2,)),
            r"Shaped\.data_gradients returned shape \(2,\); expected shape \(1, 2\)",
        ),
        (
            Shaped(lr=(2,)),
            r"Shaped\.step_size returned shape \(2,\); expected shape \(\) \(a scalar\)",
        ),
    ],
    ids=["matrix-model", "data-columns", "data-rows", "step-size"],
)
def test_other_methods_are_checked(no_run, mechanism, message):
    with pytest.raises(ValueError, match=message):
        _simulate(mechanism)


def test_the_crafted_mechanism_is_checked(no_run):
    with pytest.raises(ValueError, match=r"Shaped\.canary_gradient returned shape \(1,\)"):
        _simulate(LinearProcess(5, 0.5, 1.0), Crafts())


def test_an_error_inside_a_method_names_it():
    class Broken(Shaped):
        def canary_gradient(self, model, t):
            return jnp.dot(model, jnp.ones(3)) * model

    with pytest.raises(TypeError) as err:
        check_shapes(Broken())
    assert "raised while tracing Broken.canary_gradient" in err.value.__notes__


def test_valid_mechanisms_pass_and_are_traced_once():
    traced = []

    class Counting(Shaped):
        def init_model(self):
            traced.append(1)
            return jnp.zeros(self.model)

    check_shapes(Counting(), ProjectionScore())
    first = len(traced)
    assert first >= 1
    # Another value of a traced field has the same structure: not traced again.
    other = eqx.tree_at(lambda m: m.params.noise_multiplier, Counting(), np.asarray(2.0))
    check_shapes(other, ProjectionScore())
    assert len(traced) == first
    check_shapes(Counting(model=(3,)), ProjectionScore())  # other shapes: traced
    assert len(traced) > first
    for mechanism in (
        LinearProcess(4, 0.5, 1.0, dim=3),
        ProjectedLinearCanary(4, 1.0, radius=0.5, dim=3),
    ):
        for release in ("last", "all"):
            check_shapes(mechanism, ProjectionScore(), release)


@pytest.mark.slow
def test_the_check_changes_no_score():
    # simulate = the shape check, then each world through simulate_world with its key.
    mechanism, adversary = Shaped(), ProjectionScore(direction=[1.0, 0.0])
    scores = _simulate(mechanism, adversary)
    key = jax.random.key(0)
    for name, world in (("canary_in", 1), ("canary_out", 0)):
        direct = simulate_world(
            mechanism, adversary, 64, jax.random.fold_in(key, world), canary_in=world == 1
        )
        np.testing.assert_array_equal(getattr(scores, name), direct)

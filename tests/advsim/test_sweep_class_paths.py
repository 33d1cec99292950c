"""Sweep configs name classes: a user's own mechanism and adversary, by class path, with no
change to the project; aliases; clear errors for what is not a mechanism or adversary."""

import json
import textwrap

import pytest

from advsim import CanarySchedule
from advsim.mechanisms import GradientCanary, LinearProcess
from advsim.sweep import (
    _classes,
    load_config,
    parse_config,
    register_adversary,
    register_mechanism,
    resolve,
    run_sweep,
)
from advsim.sweep._classes import names
from advsim.sweep._config import build_mechanism

# A new mechanism (DP-SGD on the loss -C * m_0 with a learning rate halved at each step)
# and a new adversary (the sign of the first coordinate), written by a user in a module of
# their own: the sweep resolves them by path, nothing in advsim is registered or edited.
USER_MODULE = """
import equinox as eqx
import jax.numpy as jnp

from advsim import AbstractAdversary, AbstractMechanism, DPSGDParams


class HalvingSteps(AbstractMechanism):
    params: DPSGDParams

    def __init__(self, steps, sampling_prob, noise_multiplier, canary_schedule=None):
        self.params = DPSGDParams(
            steps, sampling_prob, noise_multiplier, canary_schedule=canary_schedule
        )

    def init_model(self):
        return jnp.zeros(1)

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def step_size(self, t):
        return self.learning_rate * 0.5 ** (t - 1)


class FirstCoordinate(AbstractAdversary):
    scale: float = 1.0

    def score(self, mechanism, release):
        return self.scale * release[0]


class NotAMechanism:
    pass
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_counterexample.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_counterexample"


def test_sweep_runs_a_user_mechanism_and_adversary_named_by_class_path(tmp_path, user_module):
    before = (names("mechanism"), names("adversary"))
    config = tmp_path / "mine.toml"
    config.write_text(
        textwrap.dedent(f"""
        [sweep]
        mode = "audit"
        trials = 200
        delta = 1e-3

        [mechanism]
        name = "{user_module}:HalvingSteps"
        steps = 3
        noise_multiplier = 1.0
        canary_schedule = "only:1"

        [adversary]
        name = "{user_module}:FirstCoordinate"
        scale = 2.0

        [grid]
        sampling_prob = [0.5, 1.0]
    """)
    )
    cfg = load_config(config)
    assert cfg.fixed["method"] == "eps_delta"  # not the linear process: assume nothing
    rows = run_sweep(cfg, tmp_path / "out", progress=False)
    assert [r["sampling_prob"] for r in rows] == [0.5, 1.0]
    for r in rows:
        assert r["mechanism"] == "HalvingSteps" and r["adversary"] == "FirstCoordinate"
        assert r["num_canary_steps"] == 1 and r["trials"] == 200
        assert 0.0 < r["heuristic"] <= r["composition"]
        assert r["eps_lower"] is None or 0.0 <= r["eps_lower"] <= r["composition"]
    mechanism = build_mechanism(cfg, cfg.cells()[0].params)
    assert mechanism.canary_schedule == CanarySchedule.only(1)
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert meta["config"]["mechanism"]["name"] == f"{user_module}:HalvingSteps"
    assert (names("mechanism"), names("adversary")) == before  # nothing was registered


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        (
            "mechanism",
            "{m}:NotAMechanism",
            "resolved to <class 'my_counterexample.NotAMechanism'>"
            ", which is not a subclass of advsim.AbstractMechanism",
        ),
        ("mechanism", "{m}:FirstCoordinate", "not a subclass of advsim.AbstractMechanism"),
        ("adversary", "{m}:HalvingSteps", "not a subclass of advsim.AbstractAdversary"),
        ("mechanism", "{m}:Missing", "'my_counterexample' has no attribute 'Missing'"),
        ("mechanism", "no_such_module_xyz:Thing", "cannot import 'no_such_module_xyz'"),
        ("mechanism", "advsim:AbstractMechanism", "an abstract class"),
        ("mechanism", "quadratic", "or a class path 'module:Class'"),
    ],
)
def test_names_that_are_not_mechanisms_or_adversaries_are_refused(user_module, kind, name, message):
    with pytest.raises(ValueError) as err:
        resolve(kind, name.format(m=user_module))
    assert message in str(err.value)


def test_aliases_and_class_paths_build_the_same_instances():
    base = {"sweep": {"mode": "bounds"}, "grid": {"steps": [2, 4]}}

    def mechanism(**mech):
        cfg = parse_config(
            {**base, "mechanism": {"sampling_prob": 0.1, "noise_multiplier": 1.0, **mech}}
        )
        return build_mechanism(cfg, cfg.cells()[0].params)

    assert mechanism(name="linear") == LinearProcess(2, 0.1, 1.0)
    assert mechanism(name="advsim.mechanisms:LinearProcess") == LinearProcess(2, 0.1, 1.0)
    expect = LinearProcess.with_data(2, 0.1, 1.0, dim=10, num_examples=100)
    assert mechanism(name="linear-data") == expect
    assert (
        mechanism(name="advsim.mechanisms:LinearProcess.with_data", dim=10, num_examples=100)
        == expect
    )
    assert mechanism(name="linear", canary_schedule="every:2", canary_sampled=False) == (
        LinearProcess(2, 0.1, 1.0, canary_schedule=CanarySchedule.every(2, sampled=False))
    )
    # gradient-canary: unsampled canary by default; a key the class does not take is refused.
    assert mechanism(name="gradient-canary", canary_schedule="every:2@2") == GradientCanary(
        2, 0.1, 1.0, canary_schedule=CanarySchedule.every(2, first=2, sampled=False)
    )
    with pytest.raises(ValueError, match="unknown parameter mechanism.period; valid: "):
        mechanism(name="gradient-canary", period=2)
    adv = resolve("adversary", "biased-coordinate-random").build(dim=10, seed=3)
    assert adv == resolve("adversary", "advsim.adversaries:BiasedCoordinate.random").build(
        dim=10, seed=3
    )
    with pytest.raises(TypeError, match="unexpected keyword argument 'dim'"):
        resolve("adversary", "biased-coordinate").build(dim=10)


@pytest.mark.parametrize("kind", ["mechanism", "adversary"])
def test_every_alias_resolves_to_a_built_in_class(kind):
    for name in names(kind):
        plugin = resolve(kind, name)
        owner = getattr(plugin.factory, "__self__", plugin.factory)
        package = {"mechanism": "advsim.mechanisms", "adversary": "advsim.adversaries"}[kind]
        assert owner.__module__.startswith(package + "."), (name, owner)


def test_default_method_is_family_only_for_the_linear_process():
    def method(name, **mech):
        return parse_config(
            {
                "sweep": {"trials": 100},
                "mechanism": {
                    "name": name,
                    "steps": 2,
                    "sampling_prob": 0.1,
                    "noise_multiplier": 1.0,
                    **mech,
                },
            }
        ).fixed["method"]

    assert method("linear") == method("advsim.mechanisms:LinearProcess") == "family"
    assert method("gradient-canary") == "eps_delta"
    assert method("advsim.mechanisms:QuadraticRegularizer", alpha=0.5) == "eps_delta"


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("every_step", (1, 2, 3, 4, 5, 6)),
        ("every:2", (1, 3, 5)),
        ("every:3@3", (3, 6)),
        ("only:4", (4,)),
        (" every:2@2 ", (2, 4, 6)),
    ],
)
def test_canary_schedule_parses_its_string_form(text, steps):
    schedule = CanarySchedule.parse(text, sampled=False)
    assert schedule.steps(6) == steps and schedule.sampled is False


@pytest.mark.parametrize("text", ["sometimes", "every:", "every:x", "only:2@2", "every:0"])
def test_canary_schedule_refuses_other_strings(text):
    with pytest.raises(ValueError, match="canary_schedule"):
        CanarySchedule.parse(text)


def test_registered_names_work_and_are_checked(monkeypatch):
    """A script may give a process-local name to a function returning a mechanism or an
    adversary (`register_mechanism`, `register_adversary`)."""
    monkeypatch.setitem(_classes._REGISTERED, "mechanism", {})
    monkeypatch.setitem(_classes._REGISTERED, "adversary", {})

    def halved(steps, sampling_prob, noise_multiplier):
        return LinearProcess(steps, sampling_prob, noise_multiplier, learning_rate=0.5)

    register_mechanism("halved", halved)
    register_adversary("mine", resolve("adversary", "llr").factory)
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism("linear", halved)
    cfg = parse_config(
        {
            "sweep": {"trials": 100},
            "mechanism": {
                "name": "halved",
                "steps": 2,
                "sampling_prob": 0.1,
                "noise_multiplier": 1.0,
            },
            "adversary": {"name": "mine"},
        }
    )
    assert build_mechanism(cfg, cfg.cells()[0].params).learning_rate == 0.5
    register_mechanism("wrong", lambda steps, noise_multiplier: object())
    with pytest.raises(ValueError, match="'wrong' returned object, not an instance of advsim"):
        parse_config(
            {
                "sweep": {"mode": "bounds"},
                "mechanism": {"name": "wrong", "steps": 2, "noise_multiplier": 1.0},
            }
        )

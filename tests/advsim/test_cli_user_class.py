"""`advsim audit` on a user's own classes, with their own constructor arguments
(`--mechanism-arg`, `--adversary-arg`): checked by the class, recorded in run.json, and
the default audit decided on the built mechanism."""

import json

import pytest

from advsim.cli import build_parser, main

# DP-SGD on the loss -C m plus a pull strength * m back to 0: not the heuristic's family
# (the class does not say it is), so its default audit assumes nothing.
MODULE = '''
import jax.numpy as jnp
import numpy as np

import advsim
from advsim.validation import as_traced_float, check_nonnegative


class Pull(advsim.AbstractMechanism):
    params: advsim.DPSGDParams
    strength: np.ndarray

    def __init__(self, steps, sampling_prob, noise_multiplier, strength=0.1, clip_norm=1.0):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier,
                                         clip_norm=clip_norm)
        self.strength = as_traced_float("strength", strength, check_nonnegative)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        return jnp.asarray(self.strength, model.dtype) * model


class Scaled(advsim.AbstractAdversary):
    scale: float = 1.0

    def score(self, mechanism, release):
        return self.scale * release[0]
'''

_RUN = "--steps 2 --sampling-prob 0.5 --noise-multiplier 1 --trials 2000 --no-exact --quiet"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_pull.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_pull"


def _audit(tmp_path, *flags):
    out = tmp_path / "out"
    return main(["audit", *_RUN.split(), *flags, "--out", str(out)]), out


def test_a_user_class_takes_its_own_arguments_and_run_json_records_them(tmp_path, user_module):
    code, out = _audit(
        tmp_path,
        *("--mechanism", f"{user_module}:Pull", "--mechanism-arg", "strength=0.5"),
        *("--adversary", f"{user_module}:Scaled", "--adversary-arg", "scale=2"),
    )
    assert code == 0
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["mechanism"]["name"] == f"{user_module}:Pull"
    assert config["mechanism"]["strength"] == 0.5
    assert config["adversary"] == {"name": f"{user_module}:Scaled", "scale": 2}
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["method"] for r in rows] == ["eps_delta"]  # outside the family: assume nothing


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--mechanism-arg", "strength=-1"), "strength must be in [0, inf), got -1.0"),
        (("--mechanism-arg", "strenght=0.5"), "strenght"),
        (("--mechanism-arg", "strength=1", "--mechanism-arg", "strength=2"), "given twice"),
        (("--mechanism-arg", "strength"), "expected NAME=VALUE"),
        (("--mechanism-arg", "sampling_prob=0.1"), "the command sets sampling_prob with "
                                                   "--sampling-prob"),  # fmt: skip
        (("--adversary", "my_pull:Scaled", "--adversary-arg", "shift=1"), "--adversary"),
    ],
)
def test_bad_class_arguments_are_one_line_errors(tmp_path, user_module, capsys, flags, message):
    code, out = _audit(tmp_path, "--mechanism", f"{user_module}:Pull", *flags)
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert not (out / "run.json").exists()


def test_the_default_method_is_decided_on_the_built_mechanism(user_module):
    from advsim.cli._audit import _method

    for mechanism, method in {"linear": "family", f"{user_module}:Pull": "eps_delta"}.items():
        args = build_parser().parse_args(["audit", "--mechanism", mechanism])
        assert _method(args) == method

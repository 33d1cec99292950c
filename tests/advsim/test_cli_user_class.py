"""`advsim audit` on a user's own classes, with their own constructor arguments
(`--mechanism-arg`, `--adversary-arg`): checked by the class, recorded in run.json, and
the default audit decided on the built mechanism."""

import json

import pytest

from advsim.cli import build_parser, main

from ._user_module import USER_MODULE

# The user's module of the sweep tests (`Cubic`: DP-SGD on -C m plus a restoring force
# alpha m^3, not the heuristic's family, so its default audit assumes nothing), with an
# adversary that takes an argument.
MODULE = (
    USER_MODULE
    + '''

class Scaled(advsim.AbstractAdversary):
    scale: float = 1.0

    def score(self, mechanism, release):
        return self.scale * release[0]
'''
)

_RUN = "--steps 2 --sampling-prob 0.5 --noise-multiplier 1 --trials 2000 --no-exact --quiet"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_cli_cubic.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_cli_cubic"


def _audit(tmp_path, *flags):
    out = tmp_path / "out"
    return main(["audit", *_RUN.split(), *flags, "--out", str(out)]), out


def test_a_user_class_takes_its_own_arguments_and_run_json_records_them(tmp_path, user_module):
    code, out = _audit(
        tmp_path,
        *("--mechanism", f"{user_module}:Cubic", "--mechanism-arg", "alpha=0.5"),
        *("--adversary", f"{user_module}:Scaled", "--adversary-arg", "scale=2"),
    )
    assert code == 0
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["mechanism"]["name"] == f"{user_module}:Cubic"
    assert config["mechanism"]["alpha"] == 0.5
    assert config["adversary"] == {"name": f"{user_module}:Scaled", "scale": 2}
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["method"] for r in rows] == ["eps_delta"]  # outside the family: assume nothing


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--mechanism-arg", "alpha=-1"), "alpha must be in [0, inf), got -1.0"),
        (("--mechanism-arg", "alpah=0.5"), "alpah"),
        (("--mechanism-arg", "alpha=1", "--mechanism-arg", "alpha=2"), "given twice"),
        (("--mechanism-arg", "alpha"), "expected NAME=VALUE"),
        (("--mechanism-arg", "sampling_prob=0.1"), "the command sets sampling_prob with "
                                                   "--sampling-prob"),  # fmt: skip
        (("--adversary", "my_cli_cubic:Scaled", "--adversary-arg", "shift=1"), "--adversary"),
    ],
)
def test_bad_class_arguments_are_one_line_errors(tmp_path, user_module, capsys, flags, message):
    code, out = _audit(tmp_path, "--mechanism", f"{user_module}:Cubic", *flags)
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert not (out / "run.json").exists()


def test_the_default_method_is_decided_on_the_built_mechanism(user_module):
    from advsim.cli._audit import _method

    for mechanism, method in {"linear": "family", f"{user_module}:Cubic": "eps_delta"}.items():
        args = build_parser().parse_args(["audit", "--mechanism", mechanism])
        assert _method(args) == method

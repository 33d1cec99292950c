"""`advsim audit` on a user's own classes, with their own constructor arguments
(`--mechanism-arg`, `--adversary-arg`): checked by the class, recorded in run.json, and
the default audit decided on the built mechanism."""

import json

import pytest

from advsim.cli import build_parser, main

from ._user_module import USER_MODULE

# The user's module of the sweep tests (`Cubic`: DP-SGD on -C m plus a restoring force
# alpha m^3, not the heuristic's family, so its default audit assumes nothing), with an
# adversary that takes an argument and a factory classmethod (`module:Class.factory`) that
# names alpha `strength`.
MODULE = (
    USER_MODULE
    + """

class Scaled(advsim.AbstractAdversary):
    scale: float = 1.0

    def score(self, mechanism, release):
        return self.scale * release[0]


class Strong(Cubic):
    @classmethod
    def with_strength(cls, steps, sampling_prob, noise_multiplier, strength=1.0, clip_norm=1.0):
        return cls(steps, sampling_prob, noise_multiplier, alpha=strength, clip_norm=clip_norm)
"""
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


@pytest.mark.slow  # 15 s on 2 shared cores: an audit of one T, then two resumes
def test_a_user_factory_takes_its_own_arguments_and_run_json_records_them(
    tmp_path, user_module, capsys
):
    def audit(strength, *resume):
        return _audit(
            tmp_path,
            *("--mechanism", f"{user_module}:Strong.with_strength"),
            *("--mechanism-arg", f"strength={strength}"),
            *("--adversary", f"{user_module}:Scaled", "--adversary-arg", "scale=2"),
            *resume,
        )

    code, out = audit(0.5)
    assert code == 0
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["mechanism"]["name"] == f"{user_module}:Strong.with_strength"
    assert config["mechanism"]["strength"] == 0.5
    assert config["adversary"] == {"name": f"{user_module}:Scaled", "scale": 2}
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["method"] for r in rows] == ["eps_delta"]  # outside the family: assume nothing
    # --resume compares the class's arguments like every other option.
    capsys.readouterr()
    assert audit(0.4, "--resume")[0] == 2
    err = capsys.readouterr().err.strip()
    assert "differs in ['mechanism.strength']" in err and len(err.splitlines()) == 1, err
    assert audit(0.5, "--resume")[0] == 0


def test_run_json_holds_a_user_class_arguments_in_its_mechanism_table(user_module):
    # The config `advsim audit` writes to run.json (`config.to_dict()`), built without
    # running it: the class's own argument beside the command's flags.
    from advsim.cli._audit import _check_audit_args, _config

    flags = ["--mechanism", f"{user_module}:Cubic", "--mechanism-arg", "alpha=0.5"]
    args = build_parser().parse_args(["audit", *_RUN.split(), *flags])
    table = _config(args, _check_audit_args(args)).to_dict()["mechanism"]
    assert table["name"] == f"{user_module}:Cubic" and table["alpha"] == 0.5
    assert table["sampling_prob"] == 0.5 and table["noise_multiplier"] == 1.0


_CUBIC = "--mechanism my_cli_cubic:Cubic --mechanism-arg"
_STRONG = "--mechanism my_cli_cubic:Strong.with_strength --mechanism-arg"
_SCALED = "--adversary my_cli_cubic:Scaled --adversary-arg"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # The class's own checks (`as_traced_float` with `check_nonnegative`), on one line
        # after the flags, the class and the argument.
        (f"{_CUBIC} alpha=-1", f"{_CUBIC} alpha=-1: alpha must be in [0, inf), got -1.0"),
        (f"{_CUBIC} alpha=abc", "alpha='abc': alpha must be a real number, got 'abc'"),
        (f"{_STRONG} strength=-1", "strength=-1: alpha must be in [0, inf), got -1.0"),
        # A name the class does not take: its error, and the arguments it does take.
        (f"{_CUBIC} alpah=0.5", "'alpah' (its own arguments: alpha, learning_rate,"),
        (f"{_STRONG} alpha=0.5", "'alpha' (its own arguments: strength)"),
        (f"{_CUBIC} alpha=1 {_SCALED} shift=1", "Scaled.__init__() got an unexpected keyword"),
        # Refused before the class sees them.
        (f"{_CUBIC} alpha=1 --mechanism-arg alpha=2", "--mechanism-arg alpha is given twice"),
        (f"{_CUBIC} alpha", "--mechanism-arg 'alpha': expected NAME=VALUE"),
        (f"{_CUBIC} sampling_prob=0.1", "the command sets sampling_prob with --sampling-prob"),
        ("--mechanism linear-data --mechanism-arg dim=2", "the command sets dim with --dim"),
    ],
)
def test_bad_class_arguments_are_one_line_errors(tmp_path, user_module, capsys, flags, message):
    code, out = _audit(tmp_path, *flags.split())
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert not (out / "run.json").exists()


def test_a_built_in_alias_passes_on_the_arguments_it_has_no_flag_for():
    # LinearProcess's own `canary_coordinate` reaches the class, which checks it.
    from advsim.cli._audit import _check_audit_args, _config

    flags = "--mechanism linear --mechanism-arg canary_coordinate=0"
    args = build_parser().parse_args(["audit", *_RUN.split(), *flags.split()])
    assert _config(args, _check_audit_args(args)).to_dict()["mechanism"]["canary_coordinate"] == 0


def test_the_default_method_is_decided_on_the_built_mechanism(user_module):
    from advsim.cli._audit import _method

    defaults = {
        "linear": "family",
        "linear-data": "eps_delta",
        f"{user_module}:Cubic": "eps_delta",
        f"{user_module}:Strong.with_strength": "eps_delta",
    }
    for mechanism, method in defaults.items():
        args = build_parser().parse_args(["audit", "--mechanism", mechanism])
        assert _method(args) == method

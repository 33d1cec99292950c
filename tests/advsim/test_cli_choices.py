"""`advsim audit`'s choices and help come from their sources (the audit registry, the
threshold selections, the sweep's aliases), every threshold strategy is reachable, and
`--mechanism` takes class paths as `--adversary` does."""

import argparse
import json

import pytest

from advsim.audits import AUDIT_METHODS, AUDITS, THRESHOLD_SELECTIONS
from advsim.cli import build_parser, main
from advsim.sweep import MECHANISM_ALIASES
from advsim.sweep._config import STRATEGY_KEYS

# A user's mechanism in a module of their own (the 1-D linear process, written out).
USER_MODULE = """
import jax.numpy as jnp

from advsim import AbstractMechanism, DPSGDParams


class MyLinear(AbstractMechanism):
    params: DPSGDParams

    def __init__(self, steps, sampling_prob, noise_multiplier, clip_norm=1.0):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, clip_norm=clip_norm)

    def init_model(self):
        return jnp.zeros(1)

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)
"""


def _audit_actions() -> dict:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {a.option_strings[0]: a for a in sub.choices["audit"]._actions if a.option_strings}


def test_choices_and_help_come_from_their_sources():
    actions = _audit_actions()
    assert actions["--method"].choices == list(AUDIT_METHODS)
    threshold = actions["--threshold"]  # an alias, or a class path module:Class
    for name in THRESHOLD_SELECTIONS:
        assert name in threshold.help and threshold.type(name) == name
    assert threshold.type("my_module:MyStrategy") == "my_module:MyStrategy"
    for bad in ("nope", "module:", ":Class"):
        with pytest.raises(argparse.ArgumentTypeError, match="invalid choice"):
            threshold.type(bad)
    for name in AUDIT_METHODS:
        assert f"{name}: {AUDITS[name].assumption}" in actions["--method"].help
    for key in STRATEGY_KEYS:
        flag = "--" + key.replace("_", "-")
        assert flag in actions and actions[flag].default is None
        assert flag in actions["--threshold"].help
    assert actions["--mechanism"].choices is None
    for alias in MECHANISM_ALIASES:
        assert alias in actions["--mechanism"].help


def _run(tmp_path, *flags) -> list[dict]:
    out = tmp_path / "run"
    args = "audit --steps 2 --sampling-prob 0.5 --noise-multiplier 0.5 --trials 2000"
    assert main([*args.split(), "--quiet", "--no-exact", *flags, "--out", str(out)]) == 0
    return json.loads((out / "results.json").read_text())["rows"]


def test_threshold_projected_split_with_its_selection_fraction(tmp_path, capsys):
    rows = _run(tmp_path, "--method", "eps_delta", "--threshold", "projected_split",
                "--selection-fraction", "0.3")  # fmt: skip
    assert rows[0]["threshold_selection"] == "projected_split"
    assert rows[0]["selection_fraction"] == 0.3 and rows[0]["eps_lower"] > 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--selection-fraction", "0.2"], "--selection-fraction applies to --threshold "
         "projected_split or rank_split only, not --threshold by_sample_size"),
        (["--threshold", "explicit"], "--threshold explicit needs --audit-threshold"),
        (["--threshold", "bonferroni", "--num-splits", "3"], "--num-splits applies to"),
        (["--threshold", "projected_split", "--selection-fraction", "1.5"],
         "--selection-fraction must be in (0, 1), got 1.5"),
        (["--mechanism", "nope"], "--mechanism must be one of"),
        (["--sides", "one"], "--method family (the default for --mechanism linear): "
         "--sides='one' does not apply to the 'family' audit"),
        (["--sides", "both"], "argument --sides: invalid choice: 'both'"),
        (["--min-count", "0"], "argument --min-count: must be a positive integer"),
        (["--audit-seed", "-1"], "argument --audit-seed: must be an integer in [0, 2^64 - 1]"),
        (["--mechanism", "os:getcwd"], "not a subclass of advsim.AbstractMechanism"),
    ],
)  # fmt: skip
def test_strategy_and_mechanism_errors_are_one_line_before_running(
    tmp_path, capsys, flags, message
):
    out = tmp_path / "run"
    assert main(["audit", "--steps", "2", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_mechanism_by_class_path_from_a_module_on_the_path(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_mechanisms.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = _run(tmp_path, "--mechanism", "my_mechanisms:MyLinear", "--threshold", "explicit",
                "--audit-threshold", "0.5")  # fmt: skip
    assert rows[0]["mechanism"] == "MyLinear" and rows[0]["threshold"] == 0.5
    assert rows[0]["threshold_selection"] == "explicit"
    # The data flags still name the mechanisms that take them.
    assert main(["audit", "--mechanism", "my_mechanisms:MyLinear", "--dim", "3"]) == 2
    assert "or use --mechanism linear-data" in capsys.readouterr().err


def _parse(*flags):
    from advsim.cli._audit import _check_audit_args, _config

    args = build_parser().parse_args(["audit", *flags])
    return args, _config(args, _check_audit_args(args))


def test_the_audit_options_and_their_defaults():
    actions = _audit_actions()
    assert actions["--method"].default is None
    assert "default: family for a mechanism in the heuristic's family" in actions["--method"].help
    assert actions["--sides"].choices == ["two", "one"] and actions["--sides"].default == "two"
    assert actions["--min-count"].default == 50 and actions["--audit-seed"].default is None
    for flag in ("--sides", "--min-count", "--audit-seed", "--confidence", "--seed"):
        assert flag in actions


def test_the_default_command_keeps_the_built_in_cells():
    """With no flags the command's sweep is the built-in config itself (the same cells and
    ids: a folder started before the audit options resumes), family for the linear
    process; the options enter the cells only when set."""
    from advsim.sweep import builtin_config, parse_config

    builtin = parse_config(builtin_config("audit"))
    _, config = _parse()
    assert config.identity() == builtin.identity()
    assert [c.cell_id for c in config.cells()] == [c.cell_id for c in builtin.cells()]
    assert config.fixed["method"] == "family"
    assert not {"sides", "min_count", "audit_seed"} & set(config.fixed)
    # Set to their defaults, the same cells; set otherwise, in every cell.
    _, same = _parse("--sides", "two", "--min-count", "50", "--method", "family")
    assert same.identity() == builtin.identity()
    _, other = _parse("--method", "eps_delta", "--sides", "one", "--min-count", "9",
                      "--audit-seed", "4", "--confidence", "0.9")  # fmt: skip
    params = other.cells()[0].params
    assert (params["sides"], params["min_count"], params["audit_seed"]) == ("one", 9, 4)
    assert (params["method"], params["confidence"]) == ("eps_delta", 0.9)


def test_the_default_method_assumes_nothing_outside_the_family():
    from advsim.cli._audit import _method

    defaults = {
        "linear": "family",
        "linear-data": "eps_delta",
        "landscape": "eps_delta",
        "gradient-canary": "eps_delta",
    }
    for mechanism, method in defaults.items():
        args = build_parser().parse_args(["audit", "--mechanism", mechanism])
        assert _method(args) == method
    args, config = _parse("--mechanism", "gradient-canary", "--noise-multiplier", "1")
    assert config.fixed["method"] == "eps_delta"

"""Fuzzing the command line and the sweep-file reader with bad input (hypothesis).

Every bad input must end in one line on stderr that names the offending option or key,
exit status 2, no traceback, and nothing written: the output folder given (or the default
`advsim-results/`) must not exist afterwards. All cases here fail before anything is
simulated, so the suite takes a few seconds; the subprocess cases check that no traceback
reaches a real terminal.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advsim import _io
from advsim.audits import AUDIT_METHODS, THRESHOLD_SELECTIONS
from advsim.cli import main
from advsim.sweep import MECHANISM_ALIASES, SweepError, load_config, run_sweep

FUZZ = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# ------------------------------------------------------------------------------ helpers


def _run(argv, capsys):
    """main(argv) in-process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_user_error(code, err, *mentions, where: Path | None = None):
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err  # one line...
    assert "Traceback" not in err and "internal error" not in err
    line = lines[0]
    assert line.startswith("advsim"), line
    assert any(m in line for m in mentions), f"{mentions} not named in: {line}"
    if where is not None:  # ... and nothing written
        assert not (where / "out").exists(), list(where.iterdir())
        assert not (where / "advsim-results").exists(), list(where.iterdir())


def _bad_number(valid_low, valid_high, *, low_closed=False, high_closed=False):
    """Text of numbers outside an interval, NaN, and text that is no number at all."""
    below = st.floats(max_value=valid_low, allow_nan=False, exclude_max=low_closed)
    above = st.floats(min_value=valid_high, allow_nan=False, exclude_min=high_closed)
    return st.one_of(
        below.map(repr),
        above.map(repr),
        st.just("nan"),
        st.text(alphabet="abcxyz,;!%", min_size=1, max_size=6),
    )


_AUDIT_NUMBERS = {
    "--sampling-prob": _bad_number(0.0, 1.0, high_closed=True),
    "--delta": _bad_number(0.0, 1.0),
    "--confidence": _bad_number(0.5, 1.0),
    "--clip-norm": _bad_number(0.0, math.inf),
    "--noise-multiplier": _bad_number(0.0, math.inf),
    "--target-epsilon": _bad_number(0.0, math.inf),
}
_INTEGER_FLAGS = ("--steps", "--trials", "--dim", "--num-examples", "--chunk-size")
_bad_integer = st.one_of(
    st.integers(max_value=0).map(str),
    st.floats(allow_nan=False, allow_infinity=False)
    .filter(lambda x: not float(x).is_integer())
    .map(repr),
    st.text(alphabet="abc-+.e", min_size=1, max_size=5).filter(lambda s: not _is_positive_int(s)),
)


def _is_positive_int(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return value.is_integer() and value >= 1


# ------------------------------------------------------------------------------ audit


@FUZZ
@given(flag=st.sampled_from(sorted(_AUDIT_NUMBERS)), data=st.data())
def test_audit_bad_number_is_one_line(tmp_path, monkeypatch, capsys, flag, data):
    monkeypatch.chdir(tmp_path)
    value = data.draw(_AUDIT_NUMBERS[flag])
    # With sigma given, nothing is calibrated: every case fails before any computation.
    extra = (
        [] if flag in ("--target-epsilon", "--noise-multiplier") else ["--noise-multiplier", "1"]
    )
    code, _, err = _run(["audit", f"{flag}={value}", *extra, "--out", "out", "--quiet"], capsys)
    _assert_user_error(code, err, flag, where=tmp_path)


@FUZZ
@given(flag=st.sampled_from(_INTEGER_FLAGS), value=_bad_integer)
def test_audit_bad_integer_is_one_line(tmp_path, monkeypatch, capsys, flag, value):
    monkeypatch.chdir(tmp_path)
    mech = ["--mechanism", "linear-data"] if flag in ("--dim", "--num-examples") else []
    code, _, err = _run(["audit", *mech, f"{flag}={value}", "--out", "out"], capsys)
    _assert_user_error(code, err, flag, where=tmp_path)


@FUZZ
@given(
    flag=st.sampled_from(
        ["--method", "--threshold", "--mechanism", "--data-distribution", "--adversary"]
    ),
    value=st.text(alphabet="abcdefgh_-", min_size=1, max_size=8),
)
def test_audit_bad_choice_is_one_line(tmp_path, monkeypatch, capsys, flag, value):
    valid = {
        *AUDIT_METHODS,
        *THRESHOLD_SELECTIONS,
        *MECHANISM_ALIASES,
        "zero",
        "gaussian",
        "sphere",
        "projection",
        "llr",
    }
    if value in valid:
        return
    monkeypatch.chdir(tmp_path)
    mech = ["--mechanism", "linear-data"] if flag == "--data-distribution" else []
    code, _, err = _run(["audit", *mech, f"{flag}={value}", "--out", "out"], capsys)
    _assert_user_error(code, err, flag, where=tmp_path)


@FUZZ
@given(
    flag=st.sampled_from(["--dim", "--num-examples", "--data-distribution", "--data-scale"]),
)
def test_audit_refuses_data_flags_for_the_1d_process(tmp_path, monkeypatch, capsys, flag):
    monkeypatch.chdir(tmp_path)
    value = {"--data-distribution": "zero"}.get(flag, "5")
    code, _, err = _run(["audit", "--mechanism", "linear", flag, value], capsys)
    _assert_user_error(code, err, flag, where=tmp_path)
    assert "does not apply to --mechanism linear" in err


@FUZZ
@given(
    unknown=st.sampled_from(["--bogus", "-x", "--no-such-flag", "--stepz"]),
    rest=st.lists(
        st.sampled_from(["--bogus", "--steps", "--trials", "--delta", "1", "a"]), max_size=4
    ),
    first=st.booleans(),
)
def test_audit_garbled_command_line_is_one_line(
    tmp_path, monkeypatch, capsys, unknown, rest, first
):
    """An unknown option anywhere: argparse refuses the line before anything runs."""
    monkeypatch.chdir(tmp_path)
    argv = [unknown, *rest] if first else [*rest, unknown]
    code, _, err = _run(["audit", *argv], capsys)
    _assert_user_error(code, err, "argument", where=tmp_path)


def test_audit_out_cannot_be_used(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep me")
    for out, says in [
        ("afile", "is an existing file"),
        ("afile/sub", "is a file"),
        ("/proc/nope", "cannot create anything in /proc"),
    ]:
        code, stdout, err = _run(["audit", "--steps", "2", "--out", out], capsys)
        _assert_user_error(code, err, "--out", where=tmp_path)
        assert says in err and stdout == ""
    assert (tmp_path / "afile").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_failed_audit_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """A failure at the first T (here: calibration out of reach) removes nothing the user
    had and leaves no empty results folder, the default one included."""
    monkeypatch.chdir(tmp_path)

    def fail(*args, **kwargs):
        raise ValueError("f(a) and f(b) must have different signs")

    monkeypatch.setattr("advsim.bounds.calibrate_noise_multiplier", fail)
    code, _, err = _run(["audit", "--steps", "3", "--delta", "1e-300", "--quiet"], capsys)
    _assert_user_error(code, err, "--delta", where=tmp_path)
    assert "cannot calibrate sigma for T=3" in err
    code, _, err = _run(["audit", "--steps", "3", "--out", "a/b/c", "--quiet"], capsys)
    _assert_user_error(code, err, "--target-epsilon", where=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_internal_error_keeps_its_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def boom(*args, **kwargs):
        raise RuntimeError("an internal inconsistency")

    import advsim.sweep._runner as runner  # the audit's cells run through the sweep runner

    monkeypatch.setattr(runner, "run_audit", boom)
    code = main(["audit", "--steps", "2", "--noise-multiplier", "1", "--out", "out"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" in err and "RuntimeError: an internal inconsistency" in err
    assert "this is a bug in advsim" in err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ bound


_BOUND_NUMBERS = {
    "--sampling-prob": _bad_number(0.0, 1.0, high_closed=True),
    "--noise-multiplier": _bad_number(0.0, math.inf),
    "--delta": _bad_number(0.0, 1.0),
}


@FUZZ
@given(flag=st.sampled_from([*_BOUND_NUMBERS, "--steps", "--canary-steps"]), data=st.data())
def test_bound_bad_value_is_one_line(capsys, flag, data):
    args = {"--steps": "10", "--sampling-prob": "0.1", "--noise-multiplier": "1"}
    strategy = _BOUND_NUMBERS.get(flag, _bad_integer)
    args[flag] = data.draw(strategy)
    code, _, err = _run(["bound", *(f"{k}={v}" for k, v in args.items())], capsys)
    _assert_user_error(code, err, flag)


def test_bound_canary_steps_beyond_steps(capsys):
    code, _, err = _run(
        [
            "bound",
            "--steps",
            "5",
            "--sampling-prob",
            "0.1",
            "--noise-multiplier",
            "1",
            "--canary-steps",
            "6",
        ],
        capsys,
    )
    _assert_user_error(code, err, "--canary-steps")


# ------------------------------------------------------------------------------ sweep files


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value == math.inf else ("-inf" if value == -math.inf else repr(value)))
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(value)


def _toml(config: dict) -> str:
    lines = []
    for table, body in config.items():
        lines.append(f"[{json.dumps(table)}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def _base():
    return {
        "sweep": {"mode": "bounds", "delta": 1e-6},
        "mechanism": {"name": "linear", "sampling_prob": 0.1, "noise_multiplier": 1.0},
        "grid": {"steps": [1, 3]},
    }


_scalar = st.one_of(
    st.integers(min_value=-10, max_value=10),
    st.floats(allow_nan=True),
    st.text(alphabet="abc:-_", max_size=5),
    st.booleans(),
)

# (table, key, bad values): each makes the config invalid wherever it is put.
_BAD_ENTRIES = [
    (
        "sweep",
        "delta",
        st.one_of(
            st.floats(max_value=0.0),
            st.floats(min_value=1.0),
            st.text(max_size=3),
            st.just(math.nan),
        ),
    ),
    ("sweep", "mode", st.text(alphabet="xyz", min_size=1, max_size=4)),
    (
        "sweep",
        "seed",
        st.one_of(st.integers(max_value=-1), st.text(max_size=3), st.floats(allow_nan=False)),
    ),
    ("sweep", "chunk_size", st.one_of(st.integers(max_value=0), st.text(max_size=3))),
    (
        "sweep",
        "composition_discretization",
        st.one_of(st.floats(max_value=0.0), st.floats(min_value=0.1, exclude_min=True)),
    ),
    ("sweep", "trials", st.integers(min_value=2, max_value=10)),  # bounds mode: no effect
    ("sweep", "bogus_key", _scalar),
    ("mechanism", "name", st.text(alphabet="qwz", min_size=1, max_size=5)),
    (
        "mechanism",
        "sampling_prob",
        st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0, exclude_min=True)),
    ),
    ("mechanism", "noise_multiplier", st.floats(max_value=0.0)),
    ("mechanism", "bogus_param", _scalar),
    ("mechanism", "delta", st.floats(min_value=1e-9, max_value=0.1)),  # a setting, misplaced
    (
        "grid",
        "steps",
        st.one_of(
            st.just([]),
            st.lists(st.integers(max_value=0), min_size=1, max_size=3, unique=True),
            st.just([1, 1]),
        ),
    ),
    (
        "grid",
        "sampling_prob",
        st.lists(st.floats(min_value=1.0, exclude_min=True), min_size=1, max_size=2, unique=True),
    ),
    ("grid", "noise_multiplier", st.just(1.0)),  # also fixed in [mechanism]
    ("grid", "seed", st.lists(st.integers(0, 5), min_size=1, max_size=2, unique=True)),
]


@FUZZ
@given(entry=st.sampled_from(range(len(_BAD_ENTRIES))), data=st.data())
def test_sweep_file_bad_key_is_one_line(tmp_path, monkeypatch, capsys, entry, data):
    monkeypatch.chdir(tmp_path)
    table, key, values = _BAD_ENTRIES[entry]
    config = _base()
    if table == "grid" and key != "noise_multiplier":  # swept, not fixed: the range is checked
        config["mechanism"].pop(key, None)
        config["grid"].pop(key, None)
    config[table][key] = data.draw(values)
    path = tmp_path / "bad.toml"
    path.write_text(_toml(config))
    with pytest.raises(ValueError, match=key):
        load_config(path)
    code, _, err = _run(["sweep", path, "--out", "out", "--quiet"], capsys)
    _assert_user_error(code, err, key, where=tmp_path)


@FUZZ
@given(text=st.text(max_size=40))
def test_sweep_file_that_is_not_toml_is_one_line(tmp_path, monkeypatch, capsys, text):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.toml"
    path.write_text(_toml(_base()) + "\n" + "[grid]\n" + text)  # a table given twice
    code, _, err = _run(["sweep", path, "--out", "out"], capsys)
    _assert_user_error(code, err, "bad.toml", where=tmp_path)


def test_sweep_file_missing_or_unreadable(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(["sweep", "nonexistent.toml", "--out", "out"], capsys)
    _assert_user_error(code, err, "nonexistent.toml", where=tmp_path)
    assert "does not exist" in err
    (tmp_path / "adir.toml").mkdir()
    code, _, err = _run(["sweep", "adir.toml", "--out", "out"], capsys)
    _assert_user_error(code, err, "adir.toml", where=tmp_path)
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = _run(["sweep", "binary.toml", "--out", "out"], capsys)
    _assert_user_error(code, err, "binary.toml", where=tmp_path)


def test_sweep_out_is_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.toml").write_text(_toml(_base()))
    (tmp_path / "afile").write_text("keep me")
    code, _, err = _run(["sweep", "good.toml", "--out", "afile"], capsys)
    _assert_user_error(code, err, "--out")
    with pytest.raises(SweepError, match="is an existing file"):
        run_sweep(_base(), tmp_path / "afile", progress=False)
    assert (tmp_path / "afile").read_text() == "keep me"


@pytest.mark.slow
def test_sweep_with_ray_missing_leaves_nothing(tmp_path, monkeypatch, capsys):
    """Without Ray, `--ray` fails before writing run.json, so the plain rerun works."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    (tmp_path / "good.toml").write_text(_toml(_base()))
    code, _, err = _run(["sweep", "good.toml", "--out", "out", "--ray"], capsys)
    _assert_user_error(code, err, "--ray", where=tmp_path)
    assert main(["sweep", "good.toml", "--out", "out", "--quiet"]) == 0


def test_sweep_failing_first_cell_leaves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    import advsim.sweep._runner as runner

    def fail(*args, **kwargs):
        raise ValueError("composition epsilon out of reach")

    monkeypatch.setattr(runner, "run_cell", fail)
    (tmp_path / "good.toml").write_text(_toml(_base()))
    code, _, err = _run(["sweep", "good.toml", "--out", "deep/out", "--quiet"], capsys)
    _assert_user_error(code, err, "out of reach", where=tmp_path)
    assert list(tmp_path.iterdir()) == [tmp_path / "good.toml"]


# ------------------------------------------------------------------------------ help


def test_help_shows_defaults_and_examples(capsys):
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal
    assert "(default: 1000000)" in text and "(default: 0.01)" in text
    assert "(default: 1 5 10 50 100 500 1000)" in text and "examples:" in text
    assert main(["sweep", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "scripts/configs/linear_4x5.toml" in text and "[grid]" in text
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"advsim {_io.package_version()} (commit ") and "unknown" not in out


def test_git_commit_without_a_checkout_reads_the_build_file(monkeypatch):
    import types

    monkeypatch.setattr(_io, "_checkout_commit", lambda here: None)
    monkeypatch.setitem(
        sys.modules, "advsim._build_info", types.SimpleNamespace(GIT_COMMIT="0123abcd")
    )
    assert _io.git_commit() == "0123abcd"
    assert _io.provenance()["git_commit"] == "0123abcd"
    monkeypatch.setitem(sys.modules, "advsim._build_info", None)  # not built: no file
    assert _io.git_commit() == "unknown"


# ------------------------------------------------------------------------------ subprocess


def _subprocess(args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "advsim.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # the README's test command stays under 5 minutes
def test_no_traceback_reaches_the_terminal(tmp_path):
    (tmp_path / "afile").write_text("")
    proc = _subprocess(["audit", "--out", "afile"], tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "advsim audit: error: --out afile is an existing file, not a folder; choose a folder path\n"
    )


@pytest.mark.slow
def test_no_traceback_reaches_the_terminal_for_sweeps_and_bounds(tmp_path):
    for args, says in [
        (["sweep", "nonexistent.toml", "--out", "x"], "nonexistent.toml does not exist"),
        (["audit", "--out", "/proc/nope"], "cannot create anything in /proc"),
        (["audit", "--mechanism", "linear", "--dim", "5"], "--dim does not apply"),
    ]:
        proc = _subprocess(args, tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and says in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_pip_wheel_records_the_commit(tmp_path):
    """`pip install .` has no git checkout at run time: the wheel carries the commit."""
    import zipfile

    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(root), "-w", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("advsim-*.whl")
    text = zipfile.ZipFile(wheel).read("advsim/_build_info.py").decode()
    assert _io._checkout_commit(root / "advsim").split("+")[0] in text


# --------------------------------------------------------- resume, search, help texts


def _search_toml(path: Path, **overrides) -> Path:
    keys = {"steps": 3, "noise_multiplier": 2.0, **overrides}
    path.write_text("[search]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
    return path


@pytest.mark.parametrize("command", ["sweep", "audit", "figure", "search"])
@pytest.mark.parametrize("folder", ["empty", "missing"])
def test_resume_with_nothing_to_resume_names_the_folder(
    tmp_path, monkeypatch, capsys, command, folder
):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    if folder == "empty":
        out.mkdir()
    (tmp_path / "s.toml").write_text(_toml(_base()))
    config = {"sweep": [str(tmp_path / "s.toml")], "audit": [], "figure": ["figure1"],
              "search": [str(_search_toml(tmp_path / "search.toml"))]}[command]  # fmt: skip
    code, _, err = _run([command, *config, "--out", out, "--resume", "--quiet"], capsys)
    _assert_user_error(code, err, f"--resume: {out}")
    assert "to continue" in err
    assert out.exists() == (folder == "empty") and not any(tmp_path.glob("out/*"))


@pytest.mark.parametrize(
    ("key", "value", "mentions"),
    [
        ("knots", 1, "knots must be an integer in [2, 512], got 1"),
        ("iterations", -1, "iterations must be an integer in [0, 100000], got -1"),
        ("search", ["groups"], "search names 'groups' but the cell has no data group"),
        ("span", [1.0, 2.0], "span must be (lo, hi) with lo <= 0 <= hi"),
    ],
)
def test_search_config_bad_value_is_one_line(tmp_path, monkeypatch, capsys, key, value, mentions):
    monkeypatch.chdir(tmp_path)
    config = _search_toml(tmp_path / "search.toml", **{key: value})
    code, _, err = _run(["search", config, "--out", tmp_path / "out"], capsys)
    _assert_user_error(code, err, mentions, where=tmp_path)


def test_search_iterations_zero_evaluates_the_starts_unmoved():
    """0 is in the stated range [0, 100000]: the starts are evaluated, not moved; the
    default search leaves the groups out of a cell without data groups."""
    from advsim.search import SearchConfig

    config = SearchConfig(steps=3, noise_multiplier=2.0, iterations=0)
    assert (config.iterations, config.budget) == (0, 0)
    assert config.search == ("canary", "regularizer")
    assert SearchConfig(steps=3, noise_multiplier=2.0, counts=(4,)).search == (
        "canary", "groups", "regularizer",
    )  # fmt: skip


@pytest.mark.parametrize("wrong", ["adversary", "number"])
def test_exact_epsilon_of_a_non_mechanism_says_it_wants_a_mechanism(wrong):
    from advsim.adversaries import ProjectionScore
    from advsim.exact import last_iterate_epsilon, last_iterate_epsilons

    value = ProjectionScore() if wrong == "adversary" else 0.5
    with pytest.raises(TypeError, match=r"^mechanism must be a mechanism .*got an? ") as info:
        last_iterate_epsilon(value, 1e-5)
    assert ("got an adversary" in str(info.value)) == (wrong == "adversary")
    with pytest.raises(TypeError, match=r"^mechanisms\[0\] must be a mechanism"):
        last_iterate_epsilons([value], 1e-5)


def test_help_texts_cite_what_exists(capsys):
    """`advsim sweep --help` names only files that exist; `advsim plot --help` says what
    it draws."""
    import re

    root = Path(__file__).resolve().parents[2]
    assert main(["sweep", "--help"]) == 0
    text = capsys.readouterr().out
    assert "README" not in text
    cited = re.findall(r"(?:scripts|docs)/[\w/.-]+\.(?:toml|md)", text)
    assert cited and all((root / path).is_file() for path in cited), cited
    assert main(["plot", "--help"]) == 0
    text = capsys.readouterr().out
    assert "DIR/figures/" in text and "heatmaps" in text and "finished cells" in text

"""Hostile inputs that once passed the checks: each ends in one line naming what the user
typed (exit status 2, no traceback, nothing left behind) before any cell runs, or in a
correct result.

The cases: a chunk larger than memory, a TOML file with a byte-order mark, a number of
steps beyond the engine's range, one value spelt twice (1 and 1.0), `advsim plot` of a
one-cell sweep, an empty `--out`, two runs of one sweep folder at once, parameters out
of the accountant's reach (a small sigma, an unreachable target epsilon), a seed beyond
2^64, a canary schedule beyond T, a sampling rate of 1e-300, the permissions of result
files, the interrupt message, the trade-off curve at a tiny sigma, complex scores, the
projected split with too few runs, and the non-finite-score message.
"""

import argparse
import math
import os
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from advsim import Scores
from advsim._io import write_json
from advsim.audits import audit
from advsim.bounds import composition_epsilon, composition_tradeoff_curve, gdp_tradeoff
from advsim.cli import main
from advsim.cli._common import UsageError, _prepare_out
from advsim.sweep import SweepError, load_config, parse_config, run_sweep

REPO = Path(__file__).resolve().parents[2]


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line(code, err, *mentions):
    """The error is one line on stderr naming every `mentions`, exit status 2."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    for m in mentions:
        assert m in lines[0], f"{m!r} not in: {lines[0]}"
    return lines[0]


def _bounds(**mechanism):
    """A two-cell bounds sweep (coarse grid, no exact column: seconds)."""
    return {
        "sweep": {"mode": "bounds", "delta": 1e-6, "exact": False,
                  "composition_discretization": 1e-2},
        "mechanism": {"name": "linear", "sampling_prob": 0.1, "noise_multiplier": 1.0,
                      **mechanism},
        "grid": {"steps": [1, 3]},
    }  # fmt: skip


def _toml(config: dict) -> str:
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return f'"{v}"' if isinstance(v, str) else repr(v)

    return "".join(
        f"[{table}]\n" + "".join(f"{k} = {value(v)}\n" for k, v in body.items())
        for table, body in config.items()
    )


@pytest.fixture
def no_cell_runs(monkeypatch):
    """Fails the test if a cell starts: the error must come before the first cell."""
    import advsim.sweep._runner as runner

    def run_cell(*args, **kwargs):
        raise AssertionError("a cell ran before the bad input was refused")

    monkeypatch.setattr(runner, "run_cell", run_cell)


# ------------------------------------------------------------------------------ chunk size


def test_chunk_size_beyond_memory_is_refused_up_front(tmp_path, monkeypatch, capsys, no_cell_runs):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(
        ["audit", "--steps", "2", "--noise-multiplier", "1", "--chunk-size", "1e15",
         "--out", "out"], capsys,
    )  # fmt: skip
    line = _one_line(code, err, "--chunk-size=1000000000000000", "needs", "available")
    assert "PiB" in line and out == ""
    config = _bounds()
    config["sweep"]["chunk_size"] = 10**15
    (tmp_path / "big.toml").write_text(_toml(config))
    with pytest.raises(ValueError, match=r"sweep\.chunk_size=1000000000000000 needs .* available"):
        load_config(tmp_path / "big.toml")
    code, _, err = _run(["sweep", "big.toml", "--out", "out"], capsys)
    _one_line(code, err, "big.toml", "sweep.chunk_size")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.toml"]


def test_simulate_refuses_a_chunk_beyond_memory():
    from advsim import simulate
    from advsim.adversaries import ProjectionScore
    from advsim.mechanisms import LinearProcess

    with pytest.raises(ValueError, match=r"chunk_size=1000000000000000 needs .* available"):
        simulate(LinearProcess(2, 0.5, 1.0), ProjectionScore(), 10, key=0, chunk_size=10**15)


# ------------------------------------------------------------------------------ config files


def test_toml_with_a_byte_order_mark_is_read(tmp_path):
    text = _toml(_bounds())
    (tmp_path / "plain.toml").write_text(text)
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_config(tmp_path / "bom.toml") == load_config(tmp_path / "plain.toml")


def test_steps_beyond_range_is_refused_naming_the_value(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(
        _toml(_bounds()).replace("steps = [1, 3]", "steps = [99999999999999999999]")
    )
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, 10000000\], got "
                       r"99999999999999999999"):  # fmt: skip
        load_config(tmp_path / "s.toml")
    code, _, err = _run(
        ["audit", "--steps", "99999999999999999999", "--noise-multiplier", "1"], capsys
    )
    _one_line(code, err, "--steps", "[1, 10000000]", "99999999999999999999")
    assert list(tmp_path.iterdir()) == [tmp_path / "s.toml"]


@pytest.mark.parametrize("values", [[1, 1.0], [1.0, 1], [2.0, 2.0], [3, 3]])
def test_one_value_spelt_twice_is_refused(values):
    config = _bounds()
    del config["mechanism"]["noise_multiplier"]
    config["grid"]["noise_multiplier"] = values
    with pytest.raises(ValueError, match="grid.noise_multiplier lists a value twice"):
        parse_config(config)


def test_one_cell_spelt_twice_across_cases_is_refused():
    config = _bounds()
    del config["mechanism"]["noise_multiplier"]
    config["cases"] = [{"noise_multiplier": 1}, {"noise_multiplier": 1.0}]
    with pytest.raises(ValueError, match="are the same cell .*1 and 1.0 are one value"):
        parse_config(config)
    config["cases"] = [{"noise_multiplier": 1}, {"noise_multiplier": 1.5}]
    assert len(parse_config(config).cells()) == 4


def test_seed_beyond_two_to_the_64_is_refused_up_front():
    config = {
        "sweep": {"mode": "audit", "trials": 100, "seed": 2**64 + 1, "common_seed": True},
        "mechanism": {"name": "linear", "sampling_prob": 0.1, "noise_multiplier": 1.0},
        "grid": {"steps": [2]},
    }
    with pytest.raises(ValueError, match=r"sweep.seed must be an integer in \[0, "):
        parse_config(config)
    config["sweep"]["seed"] = 2**64 - 1  # the largest: a valid key
    assert parse_config(config).cells()[0].seed == 2**64 - 1


def test_canary_schedule_beyond_the_steps_is_refused_up_front(tmp_path, capsys, no_cell_runs):
    config = _bounds(canary_schedule="only:11")
    config["grid"]["steps"] = [10, 20]
    (tmp_path / "c.toml").write_text(_toml(config))
    with pytest.raises(ValueError, match=r"cell \{steps=10\}: canary_schedule .* puts the "
                       r"canary in no step of steps=10"):  # fmt: skip
        load_config(tmp_path / "c.toml")
    code, _, err = _run(["sweep", tmp_path / "c.toml", "--out", tmp_path / "out"], capsys)
    _one_line(code, err, "canary_schedule", "steps=10")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ accountant


def test_sigma_too_small_for_the_accountant_is_refused_up_front(
    tmp_path, monkeypatch, capsys, no_cell_runs
):
    monkeypatch.chdir(tmp_path)
    config = _bounds(noise_multiplier=0.001)
    config["sweep"]["composition_discretization"] = 1e-4
    refused = (
        r"noise_multiplier=0.001 is too small .* choose noise_multiplier >= 0.016.* or a "
        r"coarser composition_discretization"
    )
    with pytest.raises(ValueError, match=refused):
        parse_config(config)
    code, _, err = _run(
        ["audit", "--steps", "2", "--noise-multiplier", "0.001", "--out", "out"], capsys
    )
    line = _one_line(code, err, "T=2", "--noise-multiplier=0.001", "--noise-multiplier >= 0.016")
    # advsim audit has no grid to make coarser: the message does not offer one.
    assert "discretization" not in line
    assert list(tmp_path.iterdir()) == []


def test_unreachable_target_epsilon_is_refused_at_once(tmp_path, monkeypatch, capsys, no_cell_runs):
    monkeypatch.chdir(tmp_path)
    tic = time.perf_counter()
    argv = ["audit", "--steps", "2", "--target-epsilon", "1e6", "--out", "out"]
    code, _, err = _run(argv, capsys)
    _one_line(code, err, "T=2", "--target-epsilon=1e+06 is out of reach", "--noise-multiplier")
    assert time.perf_counter() - tic < 30  # once: 88 s of calibration, then the error
    assert list(tmp_path.iterdir()) == []
    # A reachable one passes the check (here q = 1: the closed form, no grid).
    config = _bounds()
    del config["mechanism"]["noise_multiplier"]
    config["mechanism"]["target_epsilon"] = 1e6
    config["mechanism"]["sampling_prob"] = 1.0
    assert len(parse_config(config).cells()) == 2


def test_calibration_failure_names_no_knob_the_audit_lacks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def fail(*args, **kwargs):  # the calibration's own words, naming the library's knob
        raise ValueError(
            "target_epsilon=8.0 needs a noise multiplier below 0.0162, too small for the PLD "
            "grid value_discretization_interval=0.0001; use a coarser grid or a smaller "
            "target_epsilon"
        )

    monkeypatch.setattr("advsim.bounds.calibrate_noise_multiplier", fail)
    code, _, err = _run(["audit", "--steps", "3", "--quiet"], capsys)
    line = _one_line(code, err, "cannot calibrate sigma for T=3", "--sampling-prob")
    assert "discretization" not in line and "coarser" not in line
    assert list(tmp_path.iterdir()) == []


def test_tiny_sampling_rate_leaks_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert composition_epsilon(1e-5, 2, 1e-300, 1.0) == 0.0


def test_tradeoff_curve_at_a_tiny_sigma_is_a_curve():
    # The loss grid spans 1250 nats: e^(loss) overflowed and every delta was NaN.
    f = composition_tradeoff_curve(1, 1.0, 0.02, value_discretization_interval=0.01)
    alpha = np.array([0.0, 1e-12, 1e-6, 0.01, 0.5, 1.0])
    beta = f(alpha)
    assert np.all((beta >= 0) & (beta <= 1))
    # Below the exact curve (N(0, 1) vs N(50, 1)): the audits built on it stay sound.
    assert np.all(beta <= gdp_tradeoff(alpha, 50.0) + 1e-12)
    g = composition_tradeoff_curve(2, 0.5, 0.02, value_discretization_interval=0.01)
    assert float(g(0.0)) == pytest.approx(0.25, abs=1e-9)  # P(the canary never sampled)


# ------------------------------------------------------------------------------ folders


def test_empty_out_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(_toml(_bounds()))
    for argv in (
        ["audit", "--steps", "2", "--noise-multiplier", "1", "--out", ""],
        ["audit", "--out=", "--resume"],
        ["sweep", "s.toml", "--out", " "],
        ["figure", "figure1", "--quick", "--out", ""],
    ):
        code, _, err = _run(argv, capsys)
        _one_line(code, err, "argument --out: must name a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_a_table_figure_folder_is_one_to_resume_and_no_one_to_overwrite(tmp_path, capsys):
    # A table figure (threshold_vs_jax_privacy) keeps its cells in cells/*.json, a sweep
    # figure its sweeps in */run.json: both are "a run of the figure" to the CLI.
    out = tmp_path / "fig"
    (out / "cells").mkdir(parents=True)
    write_json(out / "cells" / "a.json", {"cell": 1})
    code, _, err = _run(["figure", "threshold_vs_jax_privacy", "--quick", "--out", out], capsys)
    _one_line(code, err, "already holds a run of figure threshold_vs_jax_privacy", "--resume")
    args = argparse.Namespace(out=None, resume=True)
    _prepare_out(args, out, "run of figure x", "*/run.json", "cells/*.json")  # accepted
    assert args.out == str(out)
    with pytest.raises(UsageError, match="holds no run of figure x to continue"):
        _prepare_out(args, tmp_path, "run of figure x", "*/run.json", "cells/*.json")


def test_plot_of_one_cell_says_why_and_leaves_no_folder(tmp_path, capsys):
    config = _bounds()
    config["grid"]["steps"] = [2]
    out = tmp_path / "one"
    run_sweep(config, out, progress=False)
    code, stdout, err = _run(["plot", out], capsys)
    _one_line(code, err, str(out), "sweeps no parameter", "results.csv")
    assert stdout == "" and not (out / "figures").exists()


@pytest.mark.slow  # 5-8 s: matplotlib draws the figure
def test_plot_says_what_it_drew(tmp_path, capsys):
    run_sweep(_bounds(), tmp_path / "two", progress=False)
    code, stdout, _ = _run(["plot", tmp_path / "two"], capsys)
    assert code == 0
    assert stdout.splitlines()[-1] == f"advsim plot: wrote 2 files into {tmp_path / 'two/figures'}"


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_result_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_json(tmp_path / "r.json", {"a": 1})
        Scores(np.zeros(3), np.ones(3)).save(tmp_path / "s.npz")
        run_sweep(_bounds(), tmp_path / "sweep", progress=False)
    finally:
        os.umask(old)
    files = [tmp_path / "r.json", tmp_path / "s.npz", *(tmp_path / "sweep").rglob("*.*")]
    for path in files:
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path


def test_interrupt_names_resume(tmp_path, monkeypatch, capsys):
    import advsim.sweep._runner as runner

    real, calls = runner.run_cell, []

    def second_cell_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_cell", second_cell_interrupted)
    (tmp_path / "s.toml").write_text(_toml(_bounds()))
    out = tmp_path / "out"
    code = main(["sweep", str(tmp_path / "s.toml"), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 130
    assert err == (
        f"advsim sweep: interrupted; what was finished is kept in {out} (1 finished cell): "
        f"run the same command with --out {out} --resume to continue it"
    )
    calls.clear()
    calls.append(1)  # the next call is the second: interrupted before a cell finishes
    code = main(["sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o2"), "--quiet"])
    assert code == 130 and "nothing was kept" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()


# ------------------------------------------------------------------------------ lock

_HOLDER = """
import pathlib, sys, time
import advsim.sweep._runner as runner

real = runner.run_cell

def held(config, cell, **kwargs):
    pathlib.Path(sys.argv[2]).touch()  # the sweep holds its folder now
    deadline = time.monotonic() + 120
    while not pathlib.Path(sys.argv[3]).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return real(config, cell, **kwargs)

runner.run_cell = held
from advsim.cli import main
sys.exit(main(["sweep", sys.argv[1], "--out", sys.argv[4], "--quiet"]))
"""


@pytest.mark.slow  # 20-25 s: two processes start jax
def test_concurrent_resume_is_refused_by_the_lock(tmp_path, capsys):
    """A sweep and a `--resume` run of its folder at once: the second is refused at once, naming
    the folder and the first's process; the first finishes alone, and run.json records
    one run, finished."""
    cfg, out = tmp_path / "s.toml", tmp_path / "out"
    cfg.write_text(_toml(_bounds()))
    started, release, log = tmp_path / "started", tmp_path / "release", tmp_path / "first.log"
    with log.open("w") as stderr:
        first = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(cfg), str(started), str(release), str(out)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert first.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the first sweep never started a cell"
            time.sleep(0.01)
        # A second process...
        second = subprocess.run(
            [sys.executable, "-m", "advsim.cli", "sweep", str(cfg), "--out", str(out),
             "--resume", "--quiet"],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert second.stderr.splitlines()[-1] == (
            f"advsim sweep: error: another process (pid {first.pid}) is running the sweep in "
            f"{out}; wait for it to finish (then --resume runs what is left), or choose another "
            "--out folder"
        )
        # ... and this one, without --resume too.
        code, _, err = _run(["sweep", cfg, "--out", out, "--resume", "--quiet"], capsys)
        _one_line(code, err, f"pid {first.pid}")
        code, _, err = _run(["sweep", cfg, "--out", out, "--quiet"], capsys)
        _one_line(code, err, f"pid {first.pid}")
    finally:
        release.touch()
        first.wait(timeout=300)
    assert first.returncode == 0, log.read_text()
    import json

    meta = json.loads((out / "run.json").read_text())
    assert meta["complete"] and len(meta["sessions"]) == 1 and "finished" in meta["sessions"][0]
    assert sorted(p.name for p in out.iterdir()) == [
        "cells", "results.csv", "results.json", "run.json"
    ]  # fmt: skip
    # The lock went with its process: a resume now finds everything done.
    rows = run_sweep(load_config(cfg), out, resume=True, progress=False)
    assert len(rows) == 2
    assert len(json.loads((out / "run.json").read_text())["sessions"]) == 2


def test_a_lock_file_left_by_a_dead_process_blocks_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".advsim-lock").write_text("12345\n")  # a killed holder's file: no flock on it
    assert len(run_sweep(_bounds(), out, progress=False)) == 2
    assert not (out / ".advsim-lock").exists()


def test_lock_refusal_in_process(tmp_path):
    from advsim.sweep._store import sweep_lock

    out = tmp_path / "out"
    with sweep_lock(out):
        # flock locks belong to the open file: a second open in this process conflicts too.
        with pytest.raises(SweepError, match=rf"another process \(pid {os.getpid()}\)"):
            run_sweep(_bounds(), out, progress=False)
    assert list(out.iterdir()) == []


# ------------------------------------------------------------------------------ scores


def test_complex_scores_are_refused():
    with pytest.raises(TypeError, match="canary_in must hold real numbers .* complex128"):
        Scores(np.array([1 + 1j, 2.0]), np.zeros(2))
    with pytest.raises(TypeError, match="canary_out must hold real numbers .* dtype <U1"):
        Scores(np.zeros(2), np.array(["a", "b"]))
    assert Scores(np.array([True, False]), np.array([1, 2])).canary_in.dtype == np.float64


def test_projected_split_counts_the_runs_it_was_given(tmp_path, monkeypatch, capsys):
    two = Scores(np.array([1.0, 2.0]), np.array([0.0, 0.5]))
    with pytest.raises(ValueError, match=r"'projected_split' needs at least 3 scores per "
                       r"world, got n_in=2, n_out=2"):  # fmt: skip
        audit(two, delta=1e-5, method="eps_delta", threshold_selection="projected_split")
    three = Scores(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.5, 0.7]))
    result = audit(three, delta=1e-5, method="eps_delta", threshold_selection="projected_split")
    assert result.eps_lower is not None and result.extras["n_in_total"] == 3
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(
        ["audit", "--steps", "2", "--noise-multiplier", "1", "--trials", "2",
         "--threshold", "projected_split", "--out", "out"], capsys,
    )  # fmt: skip
    _one_line(code, err, "--threshold='projected_split' needs --trials >= 3", "--trials=2")
    assert list(tmp_path.iterdir()) == []


def test_non_finite_scores_message_fits_the_caller():
    bad = Scores(np.array([1.0, math.nan, 2.0]), np.array([0.0, 0.1, math.inf]))
    with pytest.raises(ValueError) as err:
        audit(bad, delta=1e-5, method="eps_delta")
    assert str(err.value) == (
        "1 of 3 canary_in and 1 of 3 canary_out scores are NaN or inf; no epsilon is "
        "computed from non-finite scores"
    )
    assert "mechanism" not in str(err.value)


def test_non_finite_scores_of_a_simulation_name_the_mechanism_and_adversary():
    import jax.numpy as jnp

    from advsim import AbstractAdversary, NonFiniteScoresError, simulate
    from advsim.mechanisms import LinearProcess

    class NaNScore(AbstractAdversary):
        def score(self, mechanism, release):
            return jnp.nan * release[0]

    with pytest.raises(NonFiniteScoresError, match=r"^LinearProcess scored by NaNScore gave "
                       r"non-finite scores: 8 of 8 canary_in and 8 of 8 canary_out"):  # fmt: skip
        simulate(LinearProcess(2, 0.5, 1.0), NaNScore(), 8, key=0)

"""The command line: `advsim bound` and a small `advsim audit`, in-process.

The audits here pass `--no-exact` (the exact column compiles its engine once per T, seconds
each); `tests/advsim/test_sweep_exact.py` tests that column, in sweeps and in the command.
"""

import csv
import json

import jax
import pytest

from advsim import bounds
from advsim.adversaries import ProjectionScore
from advsim.cli import main
from advsim.experiment import run_audit
from advsim.mechanisms import LinearProcess


def test_bound_prints_the_three_bounds(capsys):
    assert (
        main([*("bound --steps 100 --sampling-prob 0.1 --noise-multiplier 1 --delta 1e-5").split()])
        == 0
    )
    out = capsys.readouterr().out
    heur = bounds.heuristic_epsilon(1e-5, 100, 0.1, 1.0)
    assert f"{heur:.6g}" in out
    assert "composition" in out and "full batch" in out and "max over t" in out


def test_bound_rejects_bad_sampling_prob(capsys):
    code = main(["bound", "--steps", "10", "--sampling-prob", "1.5", "--noise-multiplier", "1"])
    assert code == 2
    assert capsys.readouterr().err == (
        "advsim bound: error: --sampling-prob must be in (0, 1], got 1.5\n"
    )


@pytest.mark.slow
# The family audit's check (a 5%-level test) rejects its true null (the linear process is
# in the family) at one of these seeds: expected, and not what this test reads.
@pytest.mark.filterwarnings("ignore::advsim.audits.AssumptionRejectedWarning")
def test_audit_writes_table_csv_json_and_plot(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            *(
                "audit --steps 5 20 --sampling-prob "
                "0.1 --noise-multiplier 1.0 --trials 20000 --quiet --no-exact"
            ).split(),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "eps_lower" in text and "composition" in text
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["steps"]) for r in rows] == [5, 20]
    for r in rows:
        assert 0 <= float(r["eps_lower"]) <= float(r["composition"])
        # The numbers of run_audit called directly at the same seed (what `advsim audit`
        # ran per T before it became a sweep): every T runs with --seed (default 0).
        ref = run_audit(
            LinearProcess(int(r["steps"]), 0.1, 1.0), ProjectionScore(), trials=20000, seed=0
        )
        assert (float(r["eps_lower"]), float(r["eps_point"])) == (ref.eps_lower, ref.eps_point)
        assert int(r["seed"]) == 0
    meta = json.loads((out / "results.json").read_text())
    prov = meta["provenance"]
    assert prov["config"]["sweep"]["trials"] == 20000
    assert "jax" in prov["versions"] and prov["jax_devices"] and prov["git_commit"]
    assert (out / "eps_vs_steps.png").stat().st_size > 0
    assert (out / "eps_vs_steps.pdf").stat().st_size > 0
    assert not list(out.glob(".*.tmp"))  # no half-written files left behind
    assert len(list((out / "cells").glob("*.json"))) == 2  # one checksummed file per T


@pytest.mark.slow  # ~15-20 s on 2 cores: two audits of two T values each
def test_audit_resume_keeps_the_finished_rows(tmp_path, capsys, monkeypatch):
    """A run killed after its first T keeps that row; --resume prints it, runs the rest,
    and gives run_audit's numbers at the seed for every T (the reference, as above)."""
    import advsim.sweep._runner as runner

    real, calls = runner.run_audit, []

    def interrupted(*args, **kwargs):
        calls.append(args[0].accounting().steps)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    out = tmp_path / "r"
    argv = [
        *(
            "audit --steps 5 20 --sampling-prob 0.1 "
            "--noise-multiplier 1 --trials 2000 --seed 4 --quiet --no-exact"
        ).split(),
        "--out",
        str(out),
    ]
    monkeypatch.setattr(runner, "run_audit", interrupted)
    assert main(argv) == 130
    assert len(list((out / "cells").glob("*.json"))) == 1
    monkeypatch.setattr(runner, "run_audit", real)
    capsys.readouterr()
    assert main(argv) == 2  # the folder holds this audit: continue it, never overwrite
    assert "already holds an audit; pass --resume" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0
    text = capsys.readouterr().out
    assert text.index("\n     5 ") < text.index("\n    20 ")  # both rows, in order
    rows = json.loads((out / "results.json").read_text())["rows"]
    for r in rows:
        ref = run_audit(LinearProcess(r["steps"], 0.1, 1.0), ProjectionScore(), trials=2000, seed=4)
        assert (r["eps_lower"], r["eps_point"]) == (ref.eps_lower, ref.eps_point)
    assert main(["audit", "--resume"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err


@pytest.mark.slow
def test_audit_calibrates_sigma_to_target_epsilon(tmp_path):
    out = tmp_path / "run"
    assert (
        main(
            [
                *(
                    "audit --steps 10 --target-epsilon 4 --sampling-prob 0.1 --trials 2000 "
                    "--quiet --no-exact"
                ).split(),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    meta = json.loads((out / "results.json").read_text())
    row = meta["rows"][0]
    assert row["composition"] == pytest.approx(4.0, rel=2e-2)


def test_audit_rejects_both_sigma_and_target(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(
            [*"audit --steps 10 --target-epsilon 4 --noise-multiplier 1".split(), "--out", str(out)]
        )
        == 2
    )
    assert "either --noise-multiplier or --target-epsilon" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_audit_adversary_by_class_path_or_alias_checked_before_running(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["audit", "--steps", "2", "--adversary", "os:getcwd", "--out", str(out)]) == 2
    assert "not a subclass of advsim.AbstractAdversary" in capsys.readouterr().err
    assert not out.exists()  # refused before any folder or simulation
    assert (
        main(
            [
                *(
                    "audit --steps 2 --trials "
                    "200 --quiet --no-exact --adversary advsim.adversaries:LikelihoodRatioScore"
                ).split(),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert rows[0]["adversary"] == "LikelihoodRatioScore"


@pytest.mark.slow
def test_audit_prints_each_row_when_done_and_where_the_time_went(tmp_path, capsys, monkeypatch):
    import re

    import advsim.sweep._runner as runner  # the audit's cells run through the sweep runner

    printed, calls = [], []
    real = runner.run_audit

    def spy(*args, **kwargs):  # what the user had seen when each T started
        printed.append(capsys.readouterr().out)
        calls.append("".join(printed))
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_audit", spy)
    jax.clear_caches()  # compiled by an earlier test otherwise: this run's compilation is 0
    assert (
        main(
            [
                *(
                    "audit --steps 5 20 --sampling-prob "
                    "0.1 --noise-multiplier 1.0 --trials 2000 --quiet --no-exact"
                ).split(),
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    out = "".join(printed) + capsys.readouterr().out
    row5 = re.compile(r"^\s+5\s+1\.0000\s", re.M)
    assert not row5.search(calls[0]) and row5.search(calls[1])  # T=5 shown before T=20 ran
    assert out.index("eps_lower") < out.index("time:")
    (line,) = [x for x in out.splitlines() if x.startswith("time:")]
    total = float(re.match(r"time: (\d+\.\d) s in all", line).group(1))
    parts = dict(re.findall(r"(\w+) (\d+\.\d) s", line))
    assert set(parts) == {"compilation", "simulation", "audit", "bounds", "plot", "other"}
    assert float(parts["compilation"]) > 0
    assert sum(map(float, parts.values())) == pytest.approx(total, abs=0.1 * len(parts))


def test_the_time_report_says_when_the_exact_column_ran_beside_the_rest():
    from advsim.cli._audit_table import time_report
    from advsim.sweep import TIME_COLUMNS

    row = dict.fromkeys(TIME_COLUMNS, 1.0)  # six parts of 1 s each, and a plot of 1 s
    alone = time_report([row], plotting=1.0, total=7.0)
    assert alone.endswith("other 0.0 s") and "beside" not in alone
    beside = time_report([row], plotting=1.0, total=5.0)  # 7 s of parts in 5 s of wall
    assert beside.endswith("(the exact column ran beside the rest: the parts add up to more)")

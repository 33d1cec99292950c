"""`scripts/benchmark_commands.py`: the commands it times, one measured run, its rows.

The speed guide quotes the rows as printed, so what a row says is checked here on
hand-made measurements; one real command (`advsim figure --list`, start-up only) checks
that a measurement reads the process's own status and CPU time.
"""

import pytest

from advsim._io import git_commit
from advsim.figures import list_figures


def test_every_figure_is_timed_in_its_quick_mode_or_only_the_named_ones(load_script):
    bench = load_script("benchmark_commands")
    quick = bench._commands("quick-figures", None)
    assert [label for label, _, _ in quick] == [
        f"advsim figure {name} --quick" for name in list_figures()
    ]
    label, argv, page = bench._commands("figures", ["figure5"])[0]
    assert (label, argv) == ("advsim figure figure5", ["figure", "figure5", "--quiet"])
    assert page == "[Gallery](../gallery.md#figure5)"
    # a table figure has no section of its own: the gallery's tables
    assert bench._commands("figures", ["calibration"])[0][2] == "[Gallery](../gallery.md#tables)"
    with pytest.raises(SystemExit, match=r"no figure named \['figure99'\]"):
        bench._commands("figures", ["figure99"])


def test_a_row_gives_cpu_and_wall_time_and_the_conditions(load_script):
    bench = load_script("benchmark_commands")
    m = {"status": 0, "cpu_s": 23.6, "wall_s": 57.2, "load_before": 5.04, "load_after": 8.96}
    row = bench._row("advsim figure x --quick", "[G](g.md)", m, "an empty compilation cache")
    assert row.startswith("| `advsim figure x --quick` | [G](g.md) | 24 s CPU, 57 s wall | ")
    assert "load average 5.0 before, 9.0 after; an empty compilation cache |" in row
    failed = bench._row("advsim figure x", "[G](g.md)", {**m, "status": 2}, "c")
    assert "| failed (status 2) |" in failed


def test_a_measurement_reads_the_commands_own_status_and_cpu_time(load_script):
    m = load_script("benchmark_commands")._run(["figure", "--list"], shared_cache=False)
    assert m["argv"] == ["advsim", "figure", "--list"] and m["status"] == 0, m
    assert m["git_commit"] == git_commit()  # each command's own: the tree may change meanwhile
    assert 0 < m["cpu_s"] and 0 < m["wall_s"] < 300, m  # a Python start-up, in a process
    assert m["stderr_tail"] == ""

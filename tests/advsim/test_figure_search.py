"""The machine_found figure: searched constructions against the papers' (quick mode).

Expected values: the landscape start is a member of the family (tests/mechanisms/
test_piecewise.py), so in every cell the search's exact epsilon is at least the best paper
construction's minus the engine's error; composition bounds every construction; and the
confirmation's assumption-free eps_lower never exceeds the exact epsilon plus its error
(it is a lower bound on it at 95% confidence, and the score is the exact law's).
"""

import json

import pytest

from advsim.figures import label_problems, run_figure


@pytest.mark.slow
def test_machine_found_quick(tmp_path):
    run_figure("machine_found", quick=True, out=tmp_path, progress=False)
    tables = {
        name: json.loads((tmp_path / f"{name}.json").read_text())["rows"]
        for name in ("machine_found", "machine_found_summary")
    }
    (row,) = tables["machine_found"]
    assert row["cell"] == "heatmap-s2-b4" and row["steps"] == 3
    assert row["search_exact_epsilon"] >= row["paper_exact_epsilon"] - row["search_error"]
    assert row["search_exact_epsilon"] <= row["composition"] + row["search_error"]
    assert row["eps_lower"] <= row["search_exact_epsilon"] + row["search_error"]
    assert row["guarantee"] == "rigorous" and row["confirm_audit"] == "streaming"
    ratio = row["eps_lower"] / row["search_exact_epsilon"]
    assert row["eps_lower_over_exact"] == pytest.approx(ratio, rel=1e-4)
    assert 0.0 <= row["decisive_out"] <= 1.0 and 0.0 <= row["decisive_in"] <= 1.0
    # the heuristic of the process as it ran: step 1 of size 1, the others 1/B, is less
    # private than the constant-rate one
    assert row["heuristic"] > row["heuristic_constant_rate"]
    assert row["violation_by"] in ("construction", "schedule only", "none")
    assert label_problems(list(row), [row]) == []
    (summary,) = tables["machine_found_summary"]
    assert summary["cells"] == 1
    assert (tmp_path / "machine_found.png").exists()
    assert (tmp_path / "machine_found_fields.png").exists()  # the quick run's fields_cell
    assert (tmp_path / "heatmap-s2-b4" / "best.json").exists()

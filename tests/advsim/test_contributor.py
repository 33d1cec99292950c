"""A contributor's path from outside the repository: a new mechanism and a new adversary in
a temporary module pass the public contract check, run in `advsim audit --mechanism
module:Class` and in a sweep, and no file of the repository is touched.

The module imports public names only (`advsim`, `advsim.validation`): the same rule the
built-in plug-ins follow (tests/advsim/test_layering.py).
"""

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from advsim.cli import main
from advsim.sweep import load_config, run_sweep
from advsim.testing import check_adversary, check_mechanism

from ._user_module import USER_MODULE

REPO = Path(__file__).resolve().parents[2]


def _git_status() -> str:
    """The repository's tracked changes, and any file the contributor's run could have
    left in it (other tests running beside this one may write their own outputs)."""
    tracked = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    left = sorted(str(p) for pattern in ("contrib*", "cubic*", "audit", "sweep")
                  for p in REPO.glob(pattern))  # fmt: skip
    return tracked + "\n".join(left)


@pytest.mark.slow
def test_a_new_mechanism_and_adversary_from_outside_run_everywhere(tmp_path, monkeypatch):
    before = _git_status()
    (tmp_path / "contrib.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    import contrib

    mech = contrib.Cubic(5, 0.5, 1.0, alpha=0.01)
    check_mechanism(mech)
    check_adversary(contrib.LastValue(), mech)

    out = tmp_path / "audit"
    args = ["audit", "--mechanism", "contrib:Cubic", "--adversary", "contrib:LastValue",
            "--steps", "3", "--sampling-prob", "0.5", "--noise-multiplier", "1.0",
            "--method", "eps_delta", "--trials", "2000", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    row = json.loads((out / "results.json").read_text())["rows"][0]
    assert row["mechanism"] == "Cubic" and row["adversary"] == "LastValue"
    # A scalar construction: the exact column is there, below composition.
    assert 0.0 < row["exact_epsilon"] <= row["composition"]

    config = tmp_path / "cubic.toml"
    config.write_text(
        textwrap.dedent("""
        [sweep]
        mode = "audit"
        trials = 500
        delta = 1e-3

        [mechanism]
        name = "contrib:Cubic"
        steps = 3
        sampling_prob = 0.5
        noise_multiplier = 1.0

        [adversary]
        name = "contrib:LastValue"

        [grid]
        alpha = [0.0, 0.01]
    """)
    )
    rows = run_sweep(load_config(config), tmp_path / "sweep", progress=False)
    assert [r["alpha"] for r in rows] == [0.0, 0.01]
    assert all(r["mechanism"] == "Cubic" and r["exact_epsilon"] > 0 for r in rows)
    assert _git_status() == before  # no file of the repository was written or left

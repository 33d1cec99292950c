"""Runs the README's "Writing a new counterexample" code exactly as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _section_code(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else None]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, f"no python code in README section {title!r}"
    return "\n".join(blocks)


@pytest.mark.slow
def test_readme_counterexample_runs_and_beats_the_heuristic(capsys):
    code = _section_code("Writing a new counterexample")
    namespace = {"__name__": "readme_example"}
    exec(compile(code, str(README), "exec"), namespace)  # its own assert checks the claim
    out = capsys.readouterr().out
    assert "empirical eps_lower" in out
    result, heuristic = namespace["result"], namespace["heuristic_epsilon"](*namespace["args"])
    # README text claims "about 1.3 against 0.77".
    assert result.eps_lower == pytest.approx(1.3, abs=0.15)
    assert heuristic == pytest.approx(0.770, abs=0.001)

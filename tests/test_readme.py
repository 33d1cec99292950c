"""Runs the first code block of the "Writing a new counterexample" tutorial
(docs/tutorials/counterexample.md) and checks its claim against dp-accounting."""

import re
from pathlib import Path

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "counterexample.md"


def _first_code_block() -> str:
    # The page's first Python block (markdown-exec runs it when the site is built; its
    # fence carries attributes: ```python exec="on" ...).
    blocks = re.findall(r"```python[^\n]*\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert blocks, f"no python code in {PAGE}"
    return blocks[0]


@pytest.mark.slow
def test_readme_counterexample_runs_and_beats_the_heuristic(capsys):
    code = _first_code_block()
    namespace = {"__name__": "readme_example"}
    exec(compile(code, str(PAGE), "exec"), namespace)  # its own assert checks the claim
    out = capsys.readouterr().out
    assert "empirical eps_lower" in out
    result, heuristic = namespace["result"], namespace["heuristic_epsilon"](*namespace["args"])
    # The truth, independently: eta r'(m) = m erases the model, so m_T = -eta (clipped
    # canary gradient + noise of step T) and the last model is exactly one Poisson-sampled
    # Gaussian step (Section 4.1 of arXiv:2410.06186), whose epsilon dp_accounting's PLD
    # accountant gives directly (pessimistic: an upper bound). A sound audit stays below
    # it, and beats the heuristic of T = 10 steps (the page's claim).
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(0.5)))
    one_step = acc.get_epsilon(1e-5)
    assert heuristic < result.eps_lower <= one_step
    # The page's text must describe what the code prints: "about 1.6 against 0.77" and
    # "(3.03, one step)" (a check of the prose, not of the numbers' correctness).
    assert result.eps_lower == pytest.approx(1.6, abs=0.15)
    assert heuristic == pytest.approx(0.770, abs=0.001)
    assert one_step == pytest.approx(3.03, abs=0.005)

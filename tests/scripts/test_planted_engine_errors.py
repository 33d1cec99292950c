"""`scripts/planted_engine_errors.py`: its plants still find their sites in the engine, make
the error they name, and run on the engine's test files."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_every_plant_stands_once_in_the_engine_and_plants_its_factor(load_script):
    script = load_script("planted_engine_errors")
    assert set(script.PLANTS) == {"noise", "canary_gradient", "sampling_prob", "learning_rate"}
    for name, (file, _, new) in script.PLANTS.items():
        text = (REPO / file).read_text(encoding="utf-8")
        planted = script.planted_text(text, name, 1.02)
        assert planted != text and planted.count(new.format(factor="1.02")) == 1, name
    with pytest.raises(ValueError, match="'noise'.*stands 0 times"):
        script.planted_text("no engine here", "noise", 1.02)


def test_the_tests_run_are_those_that_call_the_engine(load_script):
    files = load_script("planted_engine_errors").engine_test_files()
    for caught_by in ("tests/advsim/test_engine.py", "tests/advsim/test_simulate.py",
                      "tests/adversaries/test_likelihood_encoding.py"):  # fmt: skip
        assert caught_by in files
    assert not any(f.startswith("tests/scripts/") for f in files) and len(files) >= 20

"""The scripts under `scripts/` are files, not an installed package: `load_script` imports
one by its name."""

import importlib.util
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture
def load_script():
    """`load_script("benchmark")`: the module `scripts/benchmark.py`, freshly imported."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load

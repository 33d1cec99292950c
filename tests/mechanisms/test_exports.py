"""What a new built-in needs besides its module: its test and its line in the docs.

- `advsim.mechanisms` and `advsim.adversaries` export every name of every public module's
  `__all__` (their `__init__` lists the folder), so a new module needs no export line;
  checked on the packages and on a copy of the `__init__` in a temporary package.
- The contract suites find the classes themselves (tests/mechanisms/test_contract.py,
  tests/adversaries/test_contract.py), from the instances each class provides.
- Every exported mechanism and adversary class is named in the table of
  docs/guide/constructions.md, the mechanism in the first column, the adversary in the
  second: the docs line is the one place a new construction is described.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import advsim.adversaries
import advsim.mechanisms
from advsim import AbstractAdversary, AbstractMechanism

from .._plugins import exported_classes

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (advsim.mechanisms, advsim.adversaries)


def _table_columns() -> tuple[set[str], set[str]]:
    """The names in code spans of the first and second column of the constructions table."""
    text = (ROOT / "docs" / "guide" / "constructions.md").read_text()
    rows = [line.split("|")[1:3] for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) >= 8, "the constructions table was not found"
    spans = re.compile(r"`(\w+)")
    return (
        {name for first, _ in rows for name in spans.findall(first)},
        {name for _, second in rows for name in spans.findall(second)},
    )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_exports_are_the_public_modules_all(package):
    expected = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            expected += module.__all__
            for name in module.__all__:
                assert getattr(package, name) is getattr(module, name), name
    assert package.__all__ == expected
    assert len(set(expected)) == len(expected), "two modules export the same name"


def test_names_of_the_former_export_lists_stay():
    # A sample of the names each package exported by hand before it listed its folder.
    from advsim.adversaries import CanaryLoss, ProjectionScore, ThresholdSearch  # noqa: F401
    from advsim.mechanisms import (  # noqa: F401
        LinearProcess,
        accuracy_report,
        load_dataset,
        two_step_epsilon,
    )


def test_a_new_module_is_exported_without_an_edit(tmp_path, monkeypatch):
    # The `__init__` of advsim.adversaries, run as a package with two modules of its own.
    package = tmp_path / "plugins_copy"
    package.mkdir()
    (package / "__init__.py").write_text((ROOT / "adversaries" / "__init__.py").read_text())
    (package / "new.py").write_text('__all__ = ["NewThing"]\nNewThing = 1\nhelper = 2\n')
    (package / "_private.py").write_text('__all__ = ["Hidden"]\nHidden = 3\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("plugins_copy")
        assert module.__all__ == ["NewThing"]
        assert module.NewThing == 1
        assert not hasattr(module, "helper") and not hasattr(module, "Hidden")
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "plugins_copy"]:
            del sys.modules[name]


def test_the_two_init_files_match():
    # One rule for both plug-in packages: their `__init__` differ only in the docstring.
    def code(folder: str) -> str:
        text = (ROOT / folder / "__init__.py").read_text()
        return text[text.index('"""', 3) + 3 :]

    assert code("mechanisms") == code("adversaries")


def test_every_exported_mechanism_and_adversary_has_a_docs_line():
    mechanisms, adversaries = _table_columns()
    classes = exported_classes(advsim.mechanisms, AbstractMechanism)
    missing = {cls.__name__ for cls in classes} - mechanisms
    assert not missing, f"add a row to docs/guide/constructions.md for {sorted(missing)}"
    classes = exported_classes(advsim.adversaries, AbstractAdversary)
    missing = {cls.__name__ for cls in classes} - adversaries
    assert not missing, f"name {sorted(missing)} in docs/guide/constructions.md's table"

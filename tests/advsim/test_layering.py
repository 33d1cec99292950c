"""The layering the folders promise, checked on the source (DESIGN.md, "Where things live").

- The engine (`advsim/_*.py`, `advsim/bounds/`, `advsim/exact/`) never imports the plug-in packages
  (`advsim.mechanisms`, `advsim.adversaries`, `advsim.audits`) nor the drivers.
- The drivers (`advsim/cli/`, `advsim/sweep/`, `advsim/experiment.py`, `advsim/one_run.py`,
  `advsim/testing/`, `advsim/figures/`)
  import the plug-ins at module level, never inside a function, so what a driver depends
  on is read off its first lines.
- The plug-in packages (`mechanisms/`, `adversaries/`, `audits/`) never import a driver:
  an experiment loop over plug-ins is a driver (`advsim.experiment`), not a method of one.
- Every driver imports on its own, in a fresh interpreter (no import cycle).
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ADVSIM = Path(__file__).resolve().parents[2] / "advsim"
PLUGINS = ("advsim.mechanisms", "advsim.adversaries", "advsim.audits")
DRIVER_MODULES = (
    "advsim.cli", "advsim.sweep", "advsim.experiment", "advsim.one_run", "advsim.testing",
    "advsim.figures",
)


def _engine_files() -> list[Path]:
    return (
        sorted(ADVSIM.glob("_*.py"))
        + sorted((ADVSIM / "bounds").rglob("*.py"))
        + sorted((ADVSIM / "exact").rglob("*.py"))
    )


def _plugin_files() -> list[Path]:
    root = ADVSIM.parent
    return [f for name in ("mechanisms", "adversaries", "audits")
            for f in sorted((root / name).rglob("*.py"))]


def _driver_files() -> list[Path]:
    return [
        *sorted((ADVSIM / "cli").rglob("*.py")),
        ADVSIM / "experiment.py",
        ADVSIM / "one_run.py",
        *sorted((ADVSIM / "sweep").rglob("*.py")),
        *sorted((ADVSIM / "testing").rglob("*.py")),
        *sorted((ADVSIM / "figures").rglob("*.py")),
    ]


def _package(path: Path) -> str:
    """The dotted package a file under advsim/ (or a plug-in folder) belongs to (for
    relative imports; mechanisms/ etc. are installed as advsim.mechanisms etc.)."""
    parts = path.relative_to(ADVSIM.parent).with_suffix("").parts
    if parts[0] != "advsim":
        parts = ("advsim", *parts)
    return ".".join(parts if parts[-1] == "__init__" else parts[:-1]).removesuffix(".__init__")


def imports(tree: ast.AST, package: str = "advsim") -> list[tuple[str, int, bool]]:
    """`(module, line, inside a function)` for every import in `tree`; `from a import b`
    counts as importing both `a` and `a.b` (b may be a submodule)."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, nested) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found.append((base, child.lineno, nested))
                found.extend((f"{base}.{a.name}", child.lineno, nested) for a in child.names)
            visit(child, nested)

    visit(tree, False)
    return found


def _is(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _violations(path: Path, forbidden, *, only_in_functions: bool) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(ADVSIM.parent)}:{line} imports {module}"
        + (" inside a function" if nested else "")
        for module, line, nested in imports(tree, _package(path))
        if _is(module, forbidden) and (nested or not only_in_functions)
    ]


def test_the_checker_sees_every_form_of_import():
    source = (
        "import advsim.audits\n"
        "from advsim import mechanisms\n"
        "from advsim.adversaries import ProjectionScore\n"
        "def f():\n"
        "    from advsim.audits._api import audit\n"
        "    return lambda: __import__('os')\n"
        "from . import _config\n"
    )
    found = imports(ast.parse(source), "advsim.sweep")
    assert ("advsim.audits", 1, False) in found
    assert ("advsim.mechanisms", 2, False) in found
    assert ("advsim.adversaries", 3, False) in found
    assert ("advsim.audits._api", 5, True) in found
    assert ("advsim.sweep._config", 7, False) in found


def test_the_engine_imports_no_plug_in_and_no_driver():
    files = _engine_files()
    assert ADVSIM / "_simulate.py" in files and ADVSIM / "bounds" / "_gdp.py" in files
    bad = [v for f in files for v in _violations(f, PLUGINS + DRIVER_MODULES,
                                                  only_in_functions=False)]
    assert not bad, "the engine must not depend on plug-ins or drivers:\n" + "\n".join(bad)


def test_drivers_import_plug_ins_at_module_level_only():
    files = _driver_files()
    assert ADVSIM / "sweep" / "_config.py" in files
    bad = [v for f in files for v in _violations(f, PLUGINS, only_in_functions=True)]
    assert not bad, "move these imports to the top of the module:\n" + "\n".join(bad)
    # ... and they do import plug-ins there (the check is not vacuous).
    uses = {m for f in files for m, _, _ in imports(ast.parse(f.read_text()), _package(f))}
    assert {"advsim.mechanisms", "advsim.audits"} <= uses


def test_plug_ins_import_no_driver():
    files = _plugin_files()
    assert ADVSIM.parent / "adversaries" / "landscape.py" in files
    bad = [v for f in files for v in _violations(f, DRIVER_MODULES, only_in_functions=False)]
    assert not bad, "a plug-in must not depend on a driver:\n" + "\n".join(bad)


@pytest.mark.parametrize("module", DRIVER_MODULES)
def test_each_driver_imports_first_without_a_cycle(module):
    code = f"import {module}; import advsim; import advsim.sweep; import advsim.cli"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]

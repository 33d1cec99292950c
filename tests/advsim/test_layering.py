"""The layering the folders promise, checked on the source.

- The engine (`advsim/_*.py`, `advsim/bounds/`, `advsim/exact/`) never imports the plug-in packages
  (`advsim.mechanisms`, `advsim.adversaries`, `advsim.audits`) nor the drivers.
- The drivers (`advsim/cli/`, `advsim/sweep/`, `advsim/experiment/`, `advsim/one_run.py`,
  `advsim/streaming.py`,
  `advsim/testing/`, `advsim/figures/`)
  import the plug-ins at module level, never inside a function, so what a driver depends
  on is read off its first lines.
- The plug-in packages (`mechanisms/`, `adversaries/`, `audits/`) never import a driver:
  an experiment loop over plug-ins is a driver (`advsim.experiment`), not a method of one.
- The plug-in packages import only public names of advsim (`advsim`, `advsim.validation`,
  `advsim.bounds`, ...), never a private module or name of another package
  (`advsim._mechanism`, `advsim.bounds._tradeoff`): they are written with the tools a new
  plug-in has. A plug-in package's own private modules are its business.
- No module imports itself back at module level, through any chain (no import cycle), and
  every driver imports on its own, in a fresh interpreter.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ADVSIM = Path(__file__).resolve().parents[2] / "advsim"
PLUGINS = ("advsim.mechanisms", "advsim.adversaries", "advsim.audits")
DRIVER_MODULES = (
    "advsim.cli", "advsim.sweep", "advsim.experiment", "advsim.one_run", "advsim.streaming",
    "advsim.testing",
    "advsim.figures",
)


def _engine_files() -> list[Path]:
    return (
        sorted(ADVSIM.glob("_*.py"))
        + sorted((ADVSIM / "bounds").rglob("*.py"))
        + sorted((ADVSIM / "exact").rglob("*.py"))
    )


def _all_files() -> list[Path]:
    return sorted(ADVSIM.rglob("*.py")) + _plugin_files()


def _module_name(path: Path) -> str:
    """The dotted name a file is imported as (`mechanisms/linear.py`: advsim.mechanisms.linear)."""
    name = _package(path)
    return name if path.name == "__init__.py" else f"{name}.{path.stem}"


def _plugin_files() -> list[Path]:
    root = ADVSIM.parent
    return [f for name in ("mechanisms", "adversaries", "audits")
            for f in sorted((root / name).rglob("*.py"))]


def _driver_files() -> list[Path]:
    return [
        *sorted((ADVSIM / "cli").rglob("*.py")),
        *sorted((ADVSIM / "experiment").rglob("*.py")),
        ADVSIM / "one_run.py",
        ADVSIM / "streaming.py",
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


@pytest.mark.slow
@pytest.mark.parametrize("module", DRIVER_MODULES)
def test_each_driver_imports_first_without_a_cycle(module):
    code = f"import {module}; import advsim; import advsim.sweep; import advsim.cli"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_imports(source: str, package: str) -> list[str]:
    """`"line: module"` for every import in `source` (a module of `package`, function bodies
    included) that reaches a private module or name of an advsim package other than the
    plug-in package it belongs to (`advsim.audits` for any module under it)."""
    own = ".".join(package.split(".")[:2])
    found = []
    for module, line, _ in imports(ast.parse(source), package):
        parts = module.split(".")
        if parts[0] == "advsim" and not _is(module, [own]) and any(map(_private, parts[1:])):
            found.append(f"{line}: {module}")
    return found


def test_the_private_import_checker_catches_a_planted_import():
    planted = (
        "from advsim import Scores, simulate\n"
        "from advsim.validation import as_traced_float\n"
        "from advsim._validation import check_int\n"
        "import advsim.bounds._tradeoff as tradeoff\n"
        "from advsim import _dpsgd\n"
        "from advsim.bounds import _CURVE_MARGIN\n"
        "def f():\n"
        "    from advsim.exact._plan import plan\n"
        "from advsim.audits._base import AbstractAudit\n"
        "from ._threshold import split_halves\n"
    )
    assert private_imports(planted, "advsim.audits") == [
        "3: advsim._validation",
        "3: advsim._validation.check_int",
        "4: advsim.bounds._tradeoff",
        "5: advsim._dpsgd",
        "6: advsim.bounds._CURVE_MARGIN",
        "8: advsim.exact._plan",
        "8: advsim.exact._plan.plan",
    ]
    # The same audit module's own private imports are caught from another package.
    assert "9: advsim.audits._base" in private_imports(planted, "advsim.mechanisms")
    assert private_imports("from advsim import __version__\n", "advsim.mechanisms") == []


def test_plug_ins_import_only_public_names_of_advsim():
    files = _plugin_files()
    assert ADVSIM.parent / "audits" / "_certify.py" in files
    bad = [
        f"{f.relative_to(ADVSIM.parent)}:{v}"
        for f in files
        for v in private_imports(f.read_text(), _package(f))
    ]
    assert not bad, "import these from a public module of advsim:\n" + "\n".join(bad)


def _top_level_statements(tree: ast.Module):
    """The statements run when the module is imported: the module body, into `if`, `try`,
    `with` and class bodies, not into functions."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """`module -> the modules of sources it imports at module level`, for `sources` mapping a
    dotted module name (a package by its own name) to its text. `from p import x` is an
    edge to the module `p.x` when there is one, and to `p` when `x` is not a module."""
    packages = {m for m in sources if any(o.startswith(m + ".") for o in sources)}
    graph = {}
    for name, text in sources.items():
        package = name if name in packages else name.rpartition(".")[0]
        edges = set()
        for node in _top_level_statements(ast.parse(text)):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    edges.add(sub if sub in sources else base)
        graph[name] = {m for m in edges if m in sources and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle `[a, b, ..., a]` of `graph` (module -> modules it imports), or None."""
    state, stack = {}, []  # state: 1 on the current path, 2 done

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_checker_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    planted = {
        "advsim": "from advsim._x import f\n",
        "advsim._x": "import numpy\nfrom advsim._y import g\n",
        "advsim._y": "def g():\n    from advsim import f\n",  # in a function: no edge
        "advsim.pkg": "from . import _a\n",
        "advsim.pkg._a": "from advsim.pkg import _b\n",  # a submodule, not the package
        "advsim.pkg._b": "from ._a import h\n",
    }
    graph = import_graph(planted)
    assert graph["advsim._y"] == set() and graph["advsim.pkg._a"] == {"advsim.pkg._b"}
    assert find_cycle(graph) == ["advsim.pkg._a", "advsim.pkg._b", "advsim.pkg._a"]
    planted["advsim.pkg._b"] = "from advsim.pkg import h\n"  # through the package
    assert find_cycle(import_graph(planted)) == [
        "advsim.pkg", "advsim.pkg._a", "advsim.pkg._b", "advsim.pkg",
    ]  # fmt: skip
    planted["advsim.pkg._b"] = "x = 1\n"
    assert find_cycle(import_graph(planted)) is None


def test_no_import_cycle():
    sources = {_module_name(f): f.read_text() for f in _all_files()}
    assert {"advsim", "advsim.bounds", "advsim.mechanisms.linear", "advsim.audits._api"} <= set(
        sources
    )
    graph = import_graph(sources)
    assert "advsim._simulate" in graph["advsim"]  # edges are found
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)

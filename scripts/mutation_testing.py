r"""Mutation testing of `advsim/bounds/` and `audits/`: how much of the code can the fast tests see?

A measurement run by hand, not in CI. A small mutation engine on Python's `ast` (no
third-party tool): each mutant changes one node of one module,

- arithmetic: `+ <-> -`, `* <-> /`, `** -> *`, `// -> /`, unary `-x -> x`;
- comparisons: `< <-> <=`, `> <-> >=`, `== <-> !=`, `is <-> is not`, `in <-> not in`;
- boolean: `and <-> or`, `not x -> x`;
- constants: an int `n -> n + 1`, a float `x -> 1.01 x` (`0.0 -> 1e-3`; floats of size
  below 1e-6, root-finder tolerances and floors, are left alone), `True <-> False`;
- calls: `min <-> max`;
- return values: a returned float times 1.01 (other types pass through unchanged; returns
  that cannot be floats, such as tuples or constructor calls, are left alone);

and the fast tests that cover the module (`pytest -x -q -p no:cacheprovider -m "not slow"`,
the module's own test files first, so a killed mutant stops early) run against it with a
timeout. A mutant is *killed* when the tests fail or time out, *survived* when they pass.
Docstrings, `__all__`, strings and the arguments of `raise` statements are not mutated.

The work happens in a temporary copy of the repository (never in the working tree: other
people run tests there), laid out as the package is installed (`advsim/audits` etc. are
links to the top-level folders) and put first on `PYTHONPATH`, so the mutated file is the
one imported. Each module's mutants can be sampled (`--per-module N`, seeded), because a
surviving mutant costs a full run of its tests (a minute for `advsim/bounds/`).

Usage:
    python scripts/mutation_testing.py advsim/bounds --per-module 25 --seed 0 \
        --out /tmp/mutants_bounds.json
    python scripts/mutation_testing.py audits --per-module 25 --seed 0
    python scripts/mutation_testing.py advsim/bounds --list          # enumerate, run nothing
    python scripts/mutation_testing.py advsim/bounds --only _gdp.py:17  # one mutant by id

The report lists every survivor (module, line, original and mutated code) for triage:
a test that kills it, or a reason it is equivalent.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import queue
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The fast test files that exercise each module (by what they import), its own file first:
# with -x a killed mutant stops at the first failure, and a survivor costs one run of these.
_B = "tests/advsim/test_bounds_"
_PROPS = ["tests/properties/test_bound_properties.py", "tests/properties/test_robustness.py"]
COVERING = {
    "advsim/bounds/_composition.py": [f"{_B}composition.py", *_PROPS],
    "advsim/bounds/_gdp.py": [f"{_B}composition.py", f"{_B}mixture.py", *_PROPS],
    "advsim/bounds/_heuristic.py": [f"{_B}heuristic.py", *_PROPS],
    "advsim/bounds/_mixture.py": [f"{_B}mixture.py", f"{_B}heuristic.py", *_PROPS],
    "advsim/bounds/_tradeoff.py": [f"{_B}tradeoff.py", "tests/audits/test_tradeoff.py"],
    "advsim/bounds/_violation_curves.py": ["tests/audits/test_certify.py"],
}


def _audits_tests() -> list[str]:
    """Every fast test file of tests/audits/ (the audits' contract suite first)."""
    files = sorted(str(f.relative_to(REPO)) for f in (REPO / "tests/audits").glob("test_*.py"))
    first = "tests/audits/test_contract.py"
    return [first] + [f for f in files if f != first] if first in files else files


def tests_for(module: str) -> list[str]:
    if module in COVERING:
        return [t for t in COVERING[module] if (REPO / t).exists()]
    if module.startswith("advsim/bounds"):
        return sorted({t for ts in COVERING.values() for t in ts})
    # audits/_x.py: tests/audits/test_x.py first (if any), then the rest of tests/audits/.
    pool = _audits_tests()
    own = f"tests/audits/test_{Path(module).stem.lstrip('_')}.py"
    first = [own] if own in pool else []
    return first + [t for t in pool if t not in first]


# ---------------------------------------------------------------------------- mutations

_BINOP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Pow: ast.Mult,
    ast.FloorDiv: ast.Div,
}
_CMPOP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SCALE_RETURN = "(lambda _v: _v * 1.01 if isinstance(_v, float) else _v)"


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: docstrings, `__all__`, raise arguments, annotations."""
    skip: set[int] = set()

    def mark(node):
        for n in ast.walk(node):
            skip.add(id(n))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                mark(body[0])
        if isinstance(node, ast.Raise):
            mark(node)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            mark(node)
        if isinstance(node, ast.arg) and node.annotation is not None:
            mark(node.annotation)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
            mark(node.returns)
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, ast.JoinedStr):
            mark(node)
    return skip


def _may_return_float(value: ast.AST | None) -> bool:
    """False for returns that cannot be a float (containers, booleans, constructors)."""
    if value is None or isinstance(value, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
        return False
    if isinstance(value, (ast.Compare, ast.BoolOp, ast.JoinedStr, ast.ListComp, ast.DictComp)):
        return False
    if isinstance(value, ast.Constant) and not isinstance(value.value, float):
        return False
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
        return False
    if isinstance(value, ast.Call):
        f = value.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name[:1].isupper() or name in ("dict", "tuple", "list", "replace", "str", "int"):
            return False
    return True


def _points(tree: ast.AST) -> list[tuple[int, str]]:
    """(index of the node in `ast.walk` order, kind) for every mutation point."""
    skip = _skipped_nodes(tree)
    points = []
    for i, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
            points.append((i, "binop"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            points.append((i, "neg"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            points.append((i, "not"))
        elif isinstance(node, ast.BoolOp):
            points.append((i, "boolop"))
        elif isinstance(node, ast.Compare):
            for j, op in enumerate(node.ops):
                if type(op) in _CMPOP:
                    points.append((i, f"cmp{j}"))
        elif isinstance(node, ast.Constant):
            v = node.value
            # A float below 1e-6 is a root finder's tolerance or a floor: 1% of it is
            # invisible by construction, so it is left alone.
            if isinstance(v, (bool, int)) or (isinstance(v, float) and not 0 < abs(v) < 1e-6):
                points.append((i, "const"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max")
        ):
            points.append((i, "minmax"))
        elif isinstance(node, ast.Return) and _may_return_float(node.value):
            points.append((i, "return"))
    return points


def _mutate_node(node: ast.AST, kind: str) -> ast.AST:
    if kind == "binop":
        node.op = _BINOP[type(node.op)]()
    elif kind in ("neg", "not"):
        return node.operand
    elif kind == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind.startswith("cmp"):
        j = int(kind[3:])
        node.ops[j] = _CMPOP[type(node.ops[j])]()
    elif kind == "const":
        v = node.value
        if isinstance(v, bool):
            node.value = not v
        elif isinstance(v, int):
            node.value = v + 1
        else:
            node.value = 1e-3 if v == 0.0 else v * 1.01
    elif kind == "minmax":
        node.func.id = "max" if node.func.id == "min" else "min"
    elif kind == "return":
        wrapper = ast.parse(_SCALE_RETURN, mode="eval").body
        node.value = ast.Call(func=wrapper, args=[node.value], keywords=[])
    return node


@dataclass
class Mutant:
    module: str  # path relative to the repository root
    index: int  # node index in ast.walk order
    kind: str
    line: int
    before: str
    after: str
    status: str = "pending"  # killed / survived / timeout / error
    seconds: float = 0.0
    failure: str = ""

    @property
    def ident(self) -> str:
        return f"{Path(self.module).name}:{self.index}:{self.kind}"


def _apply(source: str, index: int, kind: str) -> tuple[str, str, str, int]:
    tree = ast.parse(source)
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == index)
    before = ast.unparse(node)
    line = getattr(node, "lineno", 0)

    # _mutate_node edits in place, except where it returns a child (neg/not): then swap it in.
    target = node
    new = _mutate_node(copy.copy(target), kind) if kind in ("neg", "not") else None
    if new is None:
        _mutate_node(target, kind)
        after = ast.unparse(target)
    else:
        after = ast.unparse(new)
        for parent in ast.walk(tree):
            for field, value in ast.iter_fields(parent):
                if value is target:
                    setattr(parent, field, new)
                elif isinstance(value, list):
                    for k, item in enumerate(value):
                        if item is target:
                            value[k] = new
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), before, after, line


def enumerate_mutants(module: str, root: Path = REPO) -> list[Mutant]:
    source = (root / module).read_text()
    tree = ast.parse(source)
    out = []
    for index, kind in _points(tree):
        _, before, after, line = _apply(source, index, kind)
        if before == after:
            continue
        out.append(Mutant(module, index, kind, line, before[:120], after[:120]))
    return out


# ---------------------------------------------------------------------------- running


def make_sandbox() -> Path:
    """A copy of the repository laid out as installed, first on PYTHONPATH."""
    tmp = Path(tempfile.mkdtemp(prefix="advsim-mutants-"))
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", ".ruff_cache")
    shutil.copytree(REPO, tmp / "repo", ignore=ignore, symlinks=True)
    for pkg in ("audits", "mechanisms", "adversaries"):
        link = tmp / "repo" / "advsim" / pkg
        if not link.exists():
            link.symlink_to(Path("..") / pkg, target_is_directory=True)
    return tmp / "repo"


def run_tests(
    root: Path, tests: list[str], timeout: float, extra: tuple[str, ...] = ()
) -> tuple[str, float, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("JAX_PLATFORMS", "cpu")
    cmd = [
        sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
        "-m", "not slow", *extra, *tests,
    ]  # fmt: skip
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0, ""
    dt = time.monotonic() - t0
    if proc.returncode == 0:
        return "survived", dt, ""
    if proc.returncode == 1:
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        return "killed", dt, (lines[0] if lines else proc.stdout[-300:])[:300]
    return "error", dt, (proc.stdout + proc.stderr)[-300:]


def _check_import_path(root: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(root))
    code = "import advsim.bounds as b, advsim.audits as a; print(b.__file__, a.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True
    )
    if str(root) not in out.stdout or out.stdout.count(str(root)) != 2:
        raise SystemExit(f"sandbox packages are not the ones imported: {out.stdout}{out.stderr}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="advsim/bounds or audits")
    p.add_argument("--per-module", type=int, default=0, help="sample N mutants per module")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=0, help="per mutant (default 3x baseline)")
    p.add_argument("--modules", nargs="*", help="only these file names (e.g. _gdp.py)")
    p.add_argument("--only", nargs="*", help="only these mutant ids (module:index:kind)")
    p.add_argument("--list", action="store_true", help="enumerate the mutants, run nothing")
    p.add_argument(
        "--no-baseline", action="store_true", help="skip the unmutated run (needs --timeout)"
    )
    p.add_argument("--out", type=Path, help="write the results as JSON")
    p.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (one copy each)")
    p.add_argument(
        "--pytest-args", default="", help='extra pytest arguments, e.g. "-k not audits_finite"'
    )
    return p


def _select(args, folder: str) -> tuple[list[str], list[Mutant], dict[str, int]]:
    """The modules of `folder`, the mutants to run (sampled or named) and each module's
    enumerated count."""
    tracked = subprocess.run(
        ["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()  # tracked files only: an untracked one may be someone's work in progress
    modules = sorted(
        m for m in tracked if m.endswith(".py") and Path(m).parent == Path(folder)
        and Path(m).name != "__init__.py"
    )  # fmt: skip
    if args.modules:
        modules = [m for m in modules if Path(m).name in args.modules]
    rng = random.Random(args.seed)
    mutants: list[Mutant] = []
    total = {}
    for module in modules:
        ms = enumerate_mutants(module)
        total[module] = len(ms)
        if args.only:
            ms = [m for m in ms if m.ident in args.only or m.ident.rsplit(":", 1)[0] in args.only]
        elif args.per_module and len(ms) > args.per_module:
            ms = sorted(rng.sample(ms, args.per_module), key=lambda m: m.index)
        mutants += ms
    return modules, mutants, total


def _report(args, folder, modules, mutants, total, elapsed) -> None:
    """Prints the kill counts and survivors; writes the JSON of `--out`."""
    print(f"\n== {folder}: {len(mutants)} mutants in {elapsed / 60:.1f} min ==")
    for module in modules:
        ms = [m for m in mutants if m.module == module]
        if ms:
            dead = sum(m.status != "survived" for m in ms)
            print(f"{module:36s} killed {dead}/{len(ms)} (of {total[module]} enumerated)")
    dead = sum(m.status != "survived" for m in mutants)
    print(f"{'all':36s} killed {dead}/{len(mutants)}")
    print("\nsurvivors:")
    for m in mutants:
        if m.status == "survived":
            print(f"  {m.ident:30s} {m.module}:{m.line}  {m.before!r} -> {m.after!r}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {"folder": folder, "seconds": elapsed, "enumerated": total,
                 "mutants": [asdict(m) | {"id": m.ident} for m in mutants]},
                indent=1,
            )
        )  # fmt: skip


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    folder = args.folder.rstrip("/")
    modules, mutants, total = _select(args, folder)
    print(f"{len(mutants)} mutants to run (of {sum(total.values())}: {total})", flush=True)
    if args.list:
        for m in mutants:
            print(f"{m.ident:32s} L{m.line:<4d} {m.before!r} -> {m.after!r}")
        return 0

    roots = [make_sandbox() for _ in range(args.jobs)]  # one copy per parallel worker
    _check_import_path(roots[0])
    t_start = time.monotonic()
    extra = tuple(shlex.split(args.pytest_args))
    # One baseline run of all the test files involved: the unmutated code must pass them,
    # and its time sets the per-mutant timeout.
    files = sorted({t for m in mutants for t in tests_for(m.module)})
    if args.no_baseline and args.timeout:
        dt = 0.0
    else:
        status, dt, msg = run_tests(roots[0], files, 3600, extra)
        if status != "survived":
            raise SystemExit(f"unmutated code: tests do not pass ({status}): {msg}")
    timeout = args.timeout or max(60.0, 3.0 * dt)
    print(f"baseline: {dt:.0f} s, timeout per mutant {timeout:.0f} s", flush=True)
    free: queue.Queue[Path] = queue.Queue()
    for root in roots:
        free.put(root)
    done = iter(range(1, len(mutants) + 1))
    lock = threading.Lock()

    def work(m: Mutant) -> None:
        root = free.get()
        path = root / m.module
        original = path.read_text()
        mutated, *_ = _apply(original, m.index, m.kind)
        try:
            path.write_text(mutated)
            m.status, m.seconds, m.failure = run_tests(root, tests_for(m.module), timeout, extra)
        finally:
            path.write_text(original)
            free.put(root)
        with lock:
            print(
                f"[{next(done)}/{len(mutants)}] {m.status:8s} {m.seconds:5.1f}s {m.ident:30s} "
                f"L{m.line}: {m.before!r} -> {m.after!r}",
                flush=True,
            )

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(work, mutants))
    elapsed = time.monotonic() - t_start
    for root in roots:
        shutil.rmtree(root.parent, ignore_errors=True)

    _report(args, folder, modules, mutants, total, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

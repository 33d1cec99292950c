"""Planted errors: does a 2% error in each epsilon function or audit fail the fast tests?

The rule it checks: every engine and bound keeps a fast check against an independent
reference, so that a 2% error in any of them fails `pytest` without `-m slow`. For each
public function of `advsim.bounds`, `advsim.exact` and `advsim.mechanisms` whose name says
it computes a privacy quantity (epsilon, delta, mu, rdp, a bound, a calibrated sigma), for
each audit class of `advsim.audits.AUDITS` (its result's `eps_lower`) and for each public
function of `advsim.audits` that returns an epsilon, a mu, a rate bound, a p-value, a
metric or a result holding one, the fast test files that name it run with its results
multiplied by `--factor` (1.02): floats, numpy and jax arrays (tracers too, so jitted
callers see it), lists, tuples and dicts of them, and the number fields of a result object
(`epsilon`, `mu`, `rho`, `epsilons`, `eps_lower`, `mu_lower`, `eps_median`,
`credible_interval`, ...). Every reference to the function in every loaded module is
replaced, so callers that imported it by name see the error too (an audit class has its
`__call__` replaced; `advsim.audits.jax_privacy.CanaryScoreAuditor`'s epsilon methods are
replaced on the class). A function is *caught* when the tests fail and *missed* when they
pass; a caught one is re-run at factor 1, and counts as caught only where the same tests
pass there, so that a failure comes from the number, not from the wrapping.

This file is also the pytest plugin that does the planting (`-p planted_errors`, with
`scripts/` on `PYTHONPATH` and the function in `ADVSIM_PLANT=module:name`).

Usage: python scripts/planted_errors.py [--factor 1.02] [--only NAME ...] [--out DIR]
Writes `--out/planted_errors.json` (atomically, after each function) with the config,
versions and commit, and prints a table. A measurement run by hand (minutes: each function
runs the test files that name it, `-x -n 2`), not in CI.
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
import sys

_PLANT = os.environ.get("ADVSIM_PLANT")
_FACTOR = float(os.environ.get("ADVSIM_PLANT_FACTOR", "1.02"))
_FIELDS = ("epsilon", "epsilons", "mu", "rho", "eps_lower", "mu_lower", "eps_median",
           "credible_interval", "eps_equivalent", "mu_star", "value", "low", "high")
#: Name parts of the functions checked (public names of the three packages).
_WORDS = ("epsilon", "delta", "mu", "rdp", "calibrate", "bound")
#: Name parts of the audits' functions checked (`advsim.audits`): those that return an
#: epsilon, a mu, a rate bound, a p-value or a metric, or a result holding one.
_AUDIT_WORDS = ("eps", "mu", "p_value", "probability", "clopper", "audit", "certify",
                "estimate", "auroc", "tpr_at_fpr", "accuracy", "margin", "channel")
#: Not checked: an audit class, two channel objects, and a margin read only by its sign
#: (its scale changes no result; `one_run_gdp_mu` and `one_run_fdp_audit` are checked).
_NOT_NUMBERS = ("get_audit", "gaussian_channel", "subsampled_gaussian_channel",
                "fdp_one_run_margin")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _scaled(value, factor: float):
    """`value` with every float it holds multiplied by `factor` (see the module docstring)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_scaled(v, factor) for v in value)
    if isinstance(value, dict):
        return {k: _scaled(v, factor) for k, v in value.items()}
    if isinstance(value, float):
        return type(value)(value * factor)
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return value * factor if value.dtype.kind == "f" else value
    held = [f for f in _FIELDS if _holds_floats(getattr(value, f, None))]
    if held:
        value = copy.copy(value)
        for f in held:
            object.__setattr__(value, f, _scaled(getattr(value, f), factor))
    return value


def _holds_floats(field) -> bool:
    """Whether a result's field is a float, a float array, or a tuple of floats."""
    if isinstance(field, tuple) and field and not hasattr(field, "_fields"):
        return all(isinstance(v, float) for v in field)
    return (isinstance(field, float) and not isinstance(field, bool)) or (
        hasattr(field, "dtype") and getattr(field.dtype, "kind", "") == "f"
    )


def plant(spec: str, factor: float) -> int:
    """Replaces the function `spec` ("module:name") everywhere it is referenced by one whose
    results are scaled by `factor`; returns the number of references replaced. An audit
    class (`spec` names a class) has its `__call__` replaced instead, so every instance's
    result (its `eps_lower`) is scaled; returns 1."""
    module_name, name = spec.split(":")
    if "." in name:  # "Class.method": the method is replaced on its class
        cls_name, method = name.split(".")
        cls = getattr(importlib.import_module(module_name), cls_name)
        original = getattr(cls, method)
        if getattr(original, "__planted__", False):
            raise RuntimeError(f"{spec} is planted already")

        @functools.wraps(original)
        def planted_method(self, *args, **kwargs):
            return _scaled(original(self, *args, **kwargs), factor)

        planted_method.__planted__ = True
        setattr(cls, method, planted_method)
        return 1
    original = getattr(importlib.import_module(module_name), name)
    if getattr(original, "__planted__", False):
        raise RuntimeError(f"{spec} is planted already")
    if isinstance(original, type):
        call = original.__call__

        @functools.wraps(call)
        def planted_call(self, *args, **kwargs):
            return _scaled(call(self, *args, **kwargs), factor)

        type.__setattr__(original, "__call__", planted_call)
        type.__setattr__(original, "__planted__", True)
        return 1

    @functools.wraps(original)
    def planted(*args, **kwargs):
        return _scaled(original(*args, **kwargs), factor)

    planted.__planted__ = True
    for package in ("advsim", "advsim.bounds", "advsim.exact", "advsim.mechanisms",
                    "advsim.audits", "advsim.adversaries", "advsim.experiment",
                    "advsim.figures", "advsim.testing"):  # fmt: skip
        importlib.import_module(package)  # every holder loaded before the swap
    replaced = 0
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None) or {}
        for key, value in list(namespace.items()):
            if value is original:
                setattr(module, key, planted)
                replaced += 1
    return replaced


if _PLANT and __name__ != "__main__":  # loaded by pytest as the plugin
    plant(_PLANT, _FACTOR)


def targets() -> list[str]:
    """"module:name" of every public function checked, in the packages' `__all__` order."""
    import inspect

    import advsim.audits
    import advsim.audits.jax_privacy
    import advsim.bounds
    import advsim.exact
    import advsim.mechanisms

    found = []
    for package in (advsim.bounds, advsim.exact, advsim.mechanisms):
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.isfunction(obj) and any(w in name for w in _WORDS):
                found.append(f"{obj.__module__}:{name}")
    found += [f"{cls.__module__}:{cls.__name__}" for cls in advsim.audits.AUDITS.values()]
    for name in advsim.audits.__all__:
        obj = getattr(advsim.audits, name)
        if (inspect.isfunction(obj) and any(w in name for w in _AUDIT_WORDS)
                and name not in _NOT_NUMBERS):  # fmt: skip
            found.append(f"{obj.__module__}:{name}")
    auditor = advsim.audits.jax_privacy.CanaryScoreAuditor  # jax_privacy's twin
    found += [f"{auditor.__module__}:CanaryScoreAuditor.{name}" for name in vars(auditor)
              if name.startswith("epsilon") and callable(getattr(auditor, name))]  # fmt: skip
    return list(dict.fromkeys(found))


def test_files(name: str) -> list[str]:
    """The test files that name `name` as a word (sorted, relative to the repository; the
    scripts' own tests, under tests/scripts, are not a bound's tests)."""
    import re
    from pathlib import Path

    pattern = re.compile(rf"\b{re.escape(name)}\b")
    tests = os.path.join(REPO, "tests")
    found = []
    for folder, _, files in os.walk(tests):
        if os.path.relpath(folder, tests).split(os.sep)[0] == "scripts":
            continue
        for file in files:
            path = os.path.join(folder, file)
            if file.endswith(".py") and pattern.search(Path(path).read_text(encoding="utf-8")):
                found.append(os.path.relpath(path, REPO))
    return sorted(found)


def run_tests(spec: str, files: list[str], factor: float) -> dict:
    """The fast tests of `files` with `spec` planted at `factor`: pytest's status and summary."""
    import subprocess
    import time

    env = dict(os.environ, ADVSIM_PLANT=spec, ADVSIM_PLANT_FACTOR=repr(factor))
    env["PYTHONPATH"] = os.path.join(REPO, "scripts") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "2", "-p", "no:cacheprovider",
           "-p", "planted_errors", *files]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return {"status": proc.returncode, "seconds": time.monotonic() - start,
            "summary": lines[-1] if lines else proc.stderr[-300:]}  # fmt: skip


def check(spec: str, factor: float) -> dict:
    """One function: caught, missed, or why neither (no test names it; fails unplanted)."""
    files = test_files(spec.split(":")[1].split(".")[-1])
    if not files:
        return {"function": spec, "verdict": "no test file names it", "files": []}
    planted = run_tests(spec, files, factor)
    if planted["status"] == 0:
        verdict = "missed"
    elif planted["status"] in (1, 2) and "failed" in planted["summary"]:
        baseline = run_tests(spec, files, 1.0)
        verdict = "caught" if baseline["status"] == 0 else "fails unplanted too"
    else:
        verdict = f"error (pytest status {planted['status']})"
    return {"function": spec, "verdict": verdict, "files": files, **planted}


def report(results: list[dict], key: str, factor: float, tests) -> None:
    """Prints a table of `results` (a row each: its `key`, its verdict, `tests(row)`) and
    exits with status 1 when any of them is not caught."""
    print(f"\n| {key} | a {factor:g}x error | tests |\n|---|---|---|")
    for r in results:
        print(f"| `{r[key]}` | {r['verdict']} | {tests(r)} |")
    missed = [r[key] for r in results if r["verdict"] != "caught"]
    if missed:
        print(f"\nnot caught: {missed}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    import argparse
    from pathlib import Path

    from tqdm import tqdm

    from advsim._io import provenance, write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=1.02, help="the planted error (1.02)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these function names only")
    parser.add_argument("--out", type=Path, default=Path("advsim-results/planted-errors"))
    args = parser.parse_args()
    if not (args.factor > 0 and args.factor != 1):
        parser.error(f"--factor must be > 0 and not 1, got {args.factor}")
    names = {t: {t.split(":")[1], t.split(":")[1].split(".")[-1]} for t in targets()}
    chosen = [t for t, known in names.items() if not args.only or known & set(args.only)]
    if not chosen:
        parser.error(f"--only names no checked function: {args.only}")
    results = []
    record = {**provenance({"factor": args.factor, "only": args.only}), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in tqdm(chosen, desc="functions", unit="function"):
        results.append(check(spec, args.factor))
        write_json(args.out / "planted_errors.json", record)
    report(results, "function", args.factor, lambda r: r.get("summary", ""))


if __name__ == "__main__":
    main()

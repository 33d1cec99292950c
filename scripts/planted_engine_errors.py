"""Planted errors in the simulation engine: does a 2% error in a DP-SGD step fail the fast tests?

The rule of `planted_errors.py` (a 2% error in any engine or bound fails `pytest` without
`-m slow`), for the engine that has no number to scale: `advsim.simulate` returns scores,
which an audit reads only through their order. Here the error is planted in the source,
one site of the step (`advsim/_dpsgd.py`) at a time (`PLANTS`): the noise's scale, the
canary's gradient, the sampling probability, the learning rate, each multiplied by
`--factor` (1.02). Each plant is made in a detached git worktree of HEAD (this checkout is
never edited; uncommitted changes are not in the worktree), where the fast test files that
call the engine (`simulate(`, `run_audit(`, `simulate_scores(`) run (`-x -n 2`). A plant is
*caught* when they fail and *missed* when they pass; the same files run once unplanted
first, and a baseline failure stops the script (a failure must come from the plant).

Usage: python scripts/planted_engine_errors.py [--factor 1.02] [--only NAME ...] [--out DIR]
Writes `--out/planted_engine_errors.json` (atomically, after each plant) with the config,
versions and commit, and prints a table with the tests that failed. A measurement run by
hand (about a minute a plant on 2 cores, plus the baseline), not in CI.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: name: (file, the text as it stands (once in the file), the text with the error; the
#: error's factor is filled in for `{factor}`).
PLANTS = {
    "noise": ("advsim/_dpsgd.py", "sigma * c * std_noise)", "{factor} * sigma * c * std_noise)"),
    "canary_gradient": (
        "advsim/_dpsgd.py",
        "canary = clip_gradients(mechanism.canary_gradient(model, t), c)",
        "canary = {factor} * clip_gradients(mechanism.canary_gradient(model, t), c)",
    ),
    "sampling_prob": (
        "advsim/_dpsgd.py",
        "prob = jnp.asarray(prob, jnp.float32)\n",
        "prob = jnp.asarray(prob, jnp.float32) * {factor}\n",
    ),
    "learning_rate": (
        "advsim/_dpsgd.py",
        "lr = jnp.asarray(mechanism.step_size(t), dtype)",
        "lr = {factor} * jnp.asarray(mechanism.step_size(t), dtype)",
    ),
}
_CALLS = re.compile(r"\b(simulate|run_audit|simulate_scores)\(")


def planted_text(text: str, name: str, factor: float) -> str:
    """`text` (the plant's file) with the plant `name` made; a ValueError where its site
    is not there exactly once (the engine changed: update `PLANTS`)."""
    file, site, planted = PLANTS[name]
    if text.count(site) != 1:
        raise ValueError(f"plant {name!r}: {site!r} stands {text.count(site)} times in {file}")
    return text.replace(site, planted.format(factor=repr(factor)))


def engine_test_files(root: Path = REPO) -> list[str]:
    """The test files that call the engine (sorted, relative to `root`; not tests/scripts)."""
    found = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        rel = path.relative_to(root)
        if rel.parts[1] != "scripts" and _CALLS.search(path.read_text(encoding="utf-8")):
            found.append(str(rel))
    return found


def run_tests(tree: Path, files: list[str]) -> dict:
    """The fast tests of `files` in `tree`: pytest's status, the failed tests, the summary."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "2", "-p", "no:cacheprovider",
           "-rf", *files]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    return {
        "status": proc.returncode,
        "seconds": time.monotonic() - start,
        "failed": [ln.split()[1] for ln in lines if ln.startswith("FAILED ")],
        "summary": lines[-1] if lines else proc.stderr[-300:],
    }


def main() -> None:
    import argparse

    from planted_errors import report  # this folder's (the script's own) module
    from tqdm import tqdm

    from advsim._io import provenance, write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=1.02, help="the planted error (1.02)")
    parser.add_argument("--only", nargs="+", choices=sorted(PLANTS), help="these plants only")
    parser.add_argument("--out", type=Path, default=Path("advsim-results/planted-errors"))
    args = parser.parse_args()
    if not (args.factor > 0 and args.factor != 1):
        parser.error(f"--factor must be > 0 and not 1, got {args.factor}")
    results = []
    record = {**provenance({"factor": args.factor, "only": args.only}), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), "HEAD"],
                       cwd=REPO, check=True)  # fmt: skip
        try:
            files = engine_test_files(tree)
            baseline = run_tests(tree, files)
            record["baseline"] = baseline
            if baseline["status"] != 0:
                sys.exit(f"the engine's tests fail unplanted: {baseline['summary']}")
            for name in tqdm(args.only or list(PLANTS), desc="plants", unit="plant"):
                path = tree / PLANTS[name][0]
                original = path.read_text(encoding="utf-8")
                path.write_text(planted_text(original, name, args.factor), encoding="utf-8")
                try:
                    planted = run_tests(tree, files)
                finally:
                    path.write_text(original, encoding="utf-8")
                verdict = "missed" if planted["status"] == 0 else (
                    "caught" if planted["failed"] else f"error (pytest status {planted['status']})"
                )  # fmt: skip
                results.append({"plant": name, "verdict": verdict, **planted})
                write_json(args.out / "planted_engine_errors.json", record)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
    report(results, "plant", args.factor, lambda r: ", ".join(r["failed"]) or r["summary"])


if __name__ == "__main__":
    main()

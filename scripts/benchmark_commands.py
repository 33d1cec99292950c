"""Benchmark: the wall and CPU time of the figures' commands, each in a fresh process.

Runs `advsim figure NAME --quick --quiet` (`--set quick-figures`, the default) or the full
figures (`--set figures`, hours on 2 cores) one after the other, each in its own process
writing into a temporary folder, and measures for each:
  - the wall time, from the start of the process to its exit;
  - the CPU time (user + sys) of the process and everything it waited for (`os.wait4`);
  - the load average before and after (other jobs on the machine stretch the wall time,
    not the CPU time);
  - the compilation cache: by default a new, empty folder for each command (what a first
    run on a new machine pays, compilation included); `--shared-cache` uses the folder
    `advsim` uses for its commands (`advsim.cli._common.compile_cache_dir`), so a second
    run of this script measures a warm cache.

It ends by printing the rows of the speed guide's table ("Every figure's quick mode",
`docs/guide/speed.md`) for these commands, in Markdown, and writes
every measurement with its config, the package versions and the commit to
`--out/commands.json` (atomically, after each command, so a stopped run keeps what it
measured). The guide quotes the rows as printed.

Usage: python scripts/benchmark_commands.py [--set {quick-figures,figures}]
           [--only NAME ...] [--shared-cache] [--out DIR]
Figures are printed, never asserted: timings on shared machines are not tests.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from advsim._io import git_commit, provenance, write_json
from advsim.figures import list_figures

GALLERY_QUICK = "[Gallery](../gallery.md#how-long-each-quick-mode-takes)"
GALLERY = Path(__file__).resolve().parents[1] / "docs" / "gallery.md"


def _gallery_page(name: str) -> str:
    """The gallery's section of figure `name` (a heading of its own, else its tables')."""
    text = GALLERY.read_text() if GALLERY.exists() else ""
    anchor = name if f"## `{name}`" in text else "tables"
    return f"[Gallery](../gallery.md#{anchor})"


def _commands(which: str, only: list[str] | None) -> list[tuple[str, list[str], str]]:
    """(label, argv after `advsim`, page) of each command of the set `which`."""
    names = list(list_figures())
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        raise SystemExit(f"--only: no figure named {unknown}; the figures are {names}")
    quick = which == "quick-figures"
    rows = []
    for name in names:
        if only and name not in only:
            continue
        flags = ["--quick"] if quick else []
        label = " ".join(["advsim figure", name, *flags])
        page = GALLERY_QUICK if quick else _gallery_page(name)
        rows.append((label, ["figure", name, *flags, "--quiet"], page))
    return rows


def _run(argv: list[str], shared_cache: bool) -> dict:
    """One command in a fresh process: its status, wall and CPU seconds, the load, and the
    commit it ran (the tree may change during a long run: each command imports it anew)."""
    commit = git_commit()
    with tempfile.TemporaryDirectory(prefix="advsim-bench-") as tmp:
        env = dict(os.environ)
        env.pop("ADVSIM_NO_COMPILE_CACHE", None)
        if not shared_cache:
            env["JAX_COMPILATION_CACHE_DIR"] = str(Path(tmp) / "jax-cache")
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "advsim.cli", *argv, "--out", str(Path(tmp) / "out")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        err = proc.stderr.read()
        _, wait_status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        proc.stderr.close()
    return {
        "argv": ["advsim", *argv],
        "git_commit": commit,
        "status": proc.returncode,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "stderr_tail": err.decode(errors="replace")[-2000:] if proc.returncode else "",
    }


def _row(label: str, page: str, m: dict, cache: str) -> str:
    if m["status"] != 0:
        measured = f"failed (status {m['status']})"
    else:
        measured = f"{m['cpu_s']:.0f} s CPU, {m['wall_s']:.0f} s wall"
    conditions = (
        f"{os.cpu_count()} cores, load average {m['load_before']:.1f} before, "
        f"{m['load_after']:.1f} after; {cache}"
    )
    return f"| `{label}` | {page} | {measured} | {conditions} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="which", choices=("quick-figures", "figures"),
                        default="quick-figures")  # fmt: skip
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these figures only")
    parser.add_argument(
        "--shared-cache", action="store_true",
        help="advsim's own compilation cache instead of an empty one per command",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("advsim-results/benchmark-commands"))
    args = parser.parse_args()
    commands = _commands(args.which, args.only)
    cache = "advsim's own compilation cache" if args.shared_cache else "an empty compilation cache"
    measured = []
    config = {"set": args.which, "only": args.only, "shared_cache": args.shared_cache}
    record = {**provenance(config), "cpu_count": os.cpu_count(), "commands": measured}
    args.out.mkdir(parents=True, exist_ok=True)
    bar = tqdm(commands, desc="commands", unit="command")
    for label, argv, page in bar:
        bar.set_postfix_str(label, refresh=True)
        measured.append({"label": label, "page": page, **_run(argv, args.shared_cache)})
        # after every command: a stopped run keeps what it measured
        write_json(args.out / "commands.json", record)
    commits = ", ".join(dict.fromkeys(m["git_commit"] for m in measured))
    print(f"\nMeasured at commit {commits}, {record['created']}, one command "
          f"at a time ({args.out / 'commands.json'}):\n")  # fmt: skip
    print("| command or step | page | measured | conditions |")
    print("|---|---|---|---|")
    for m in measured:
        print(_row(m["label"], m["page"], m, cache))
    failed = [m["label"] for m in measured if m["status"] != 0]
    if failed:
        print(f"\nfailed: {failed} (their stderr is in commands.json)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

"""Ctrl-C on the command line (`advsim.cli._interrupt`).

- A real `advsim sweep` in a subprocess, sent SIGINT at three moments (while it imports
  jax at start-up, while its first cell compiles, during a later cell), exits within
  `STOP_WITHIN_S` = 2 s with status 130 and a last line saying what was kept: nothing
  (and no folder left) before a cell finished, the finished cells and how to resume
  after.
- A KeyboardInterrupt that Python ignores (raised inside a garbage-collection callback,
  as in XLA's) is delivered again in the main thread, not lost.
- A main thread that cannot unwind (it swallows the interrupt, as compiled code that
  never returns to Python would) is ended `GRACE_S` after the signal, after the
  registered cleanups, with the line and status 130.
- The line names what a search keeps (its state at the last checkpoint), what a sweep
  keeps, or that nothing was kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from argparse import Namespace
from pathlib import Path

import pytest

from advsim.cli import _interrupted
from advsim.cli._interrupt import GRACE_S, STOP_WITHIN_S

ROOT = Path(__file__).resolve().parents[2]

_SWEEP = """\
[sweep]
mode = "audit"
seed = 0
trials = 20000
delta = 1e-5
method = "family"

[mechanism]
name = "linear"
steps = 10
sampling_prob = 0.1

[adversary]
name = "projection"

[grid]
noise_multiplier = [0.8, 1.0, 1.5, 2.0]
"""


class _Command:
    """A command line in a subprocess, its stderr read as it comes."""

    def __init__(self, argv, env=None):
        self.proc = subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, **(env or {})},
        )  # fmt: skip
        self._err: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while chunk := self.proc.stderr.read1(4096):
            self._err.append(chunk.decode(errors="replace"))

    @property
    def err(self) -> str:
        return "".join(self._err)

    def wait_for(self, ready, timeout=300.0):
        end = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > end:
                self.proc.kill()
                self.proc.communicate()
                pytest.fail(f"never ready (status {self.proc.returncode}): {self.err}")
            time.sleep(0.005)

    def interrupt(self) -> tuple[int, float]:
        """SIGINT; (exit status, seconds to exit)."""
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        try:
            status = self.proc.wait(timeout=30)
        finally:
            self.proc.kill()
        seconds = time.monotonic() - sent
        self.proc.stdout.read()
        self.proc.stdout.close()
        self._reader.join()  # the last chunk of stderr
        self.proc.stderr.close()
        return status, seconds

    def loaded(self, library: str) -> bool:
        try:
            return library in Path(f"/proc/{self.proc.pid}/maps").read_text()
        except OSError:
            return False


def _sweep(tmp_path) -> tuple[_Command, Path]:
    config = tmp_path / "sweep.toml"
    config.write_text(_SWEEP)
    out = tmp_path / "out"
    # No persistent compilation cache: the first cell compiles every time.
    env = {"ADVSIM_NO_COMPILE_CACHE": "1"}
    return _Command(["-m", "advsim.cli", "sweep", str(config), "--out", str(out)], env), out


def _last_line(err: str) -> str:
    return err.strip().splitlines()[-1].split("\r")[-1]


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_ctrl_c_during_start_up_stops_at_once(tmp_path):
    cmd, out = _sweep(tmp_path)
    cmd.wait_for(lambda: cmd.loaded("jaxlib"))  # importing jax: an extension initialising
    status, seconds = cmd.interrupt()
    assert "cells (audit mode)" not in cmd.err  # still starting up when signalled
    assert status == 130, cmd.err
    assert seconds < STOP_WITHIN_S, seconds
    assert _last_line(cmd.err) == (
        "advsim sweep: interrupted before anything was finished; nothing was kept"
    )
    assert "Traceback" not in cmd.err
    assert not out.exists()


@pytest.mark.slow  # 4.0 s measured on 2 busy cores: start-up, the first cell's compilation
def test_ctrl_c_while_the_first_cell_compiles_stops_within_2_s(tmp_path):
    cmd, out = _sweep(tmp_path)
    cmd.wait_for(lambda: "noise_multiplier=0.8" in cmd.err)  # the first cell has begun
    time.sleep(0.3)  # into its compilation (seconds without the compilation cache)
    assert not list((out / "cells").glob("*.json"))
    status, seconds = cmd.interrupt()
    assert status == 130, cmd.err
    assert seconds < STOP_WITHIN_S, seconds
    assert _last_line(cmd.err) == (
        "advsim sweep: interrupted before anything was finished; nothing was kept"
    )
    assert "Traceback" not in cmd.err and "Exception ignored" not in cmd.err
    assert not out.exists()  # nothing finished: nothing left behind


@pytest.mark.slow  # 11.3 s measured on 2 busy cores: start-up, compilation, two cells
def test_ctrl_c_during_a_later_cell_keeps_the_finished_ones(tmp_path):
    cmd, out = _sweep(tmp_path)
    cmd.wait_for(lambda: "2/4" in cmd.err)  # two cells done, the third begun
    status, seconds = cmd.interrupt()
    assert status == 130, cmd.err
    assert seconds < STOP_WITHIN_S, seconds
    kept = len(list((out / "cells").glob("*.json")))
    assert kept in (2, 3)  # the third may finish in the moment the signal travels
    assert _last_line(cmd.err) == (
        f"advsim sweep: interrupted; what was finished is kept in {out} ({kept} finished "
        f"cells): run the same command with --out {out} --resume to continue it"
    )
    assert "Traceback" not in cmd.err and "Exception ignored" not in cmd.err
    assert json.loads((out / "run.json").read_text())["complete"] is False


_IGNORED = """
import gc, os, signal
from advsim.cli import _interrupt

sent = []

def callback(phase, info):  # the signal arrives while a gc callback runs, as XLA's
    if phase == "start" and not sent:
        sent.append(1)
        os.kill(os.getpid(), signal.SIGINT)
        sum(range(1000))  # bytecodes: the handler runs here, inside the callback

with _interrupt.sigint_handling(lambda: "advsim: interrupted") as session:
    _interrupt.started(session)
    gc.callbacks.append(callback)
    try:
        gc.collect()
        for _ in range(10**6):  # the delivery, when it is not lost
            pass
        print("lost", flush=True)
    except KeyboardInterrupt:
        print("delivered", flush=True)
"""


def test_an_interrupt_python_ignores_is_delivered_again():
    """Without the redelivery, Python prints 'Exception ignored in ... callback' and the
    program goes on ('lost'); with it, the KeyboardInterrupt reaches the main code."""
    proc = subprocess.run(
        [sys.executable, "-c", _IGNORED], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "delivered", proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr


_IN_EXEC = """
import argparse, sys
import advsim.cli as cli


def command(args):  # the signal lands in code run by exec of a string, as a dataclass's
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**7): pass")
    return 0


class Parser:
    def parse_args(self, argv):
        return argparse.Namespace(command="demo", func=command)


cli.build_parser = Parser
sys.exit(cli.main([]))
"""


def test_an_interrupt_inside_exec_still_exits_130_under_python_m(tmp_path):
    """CPython marks "a KeyboardInterrupt went unhandled" when one leaves exec'd string
    code, caught or not, and `python -m` then ends the process by SIGINT (-2) instead of
    the status `main` returned; `_interrupt.finished` clears it."""
    (tmp_path / "interrupted_in_exec.py").write_text(_IN_EXEC)
    proc = subprocess.run(
        [sys.executable, "-m", "interrupted_in_exec"], cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "advsim demo: interrupted"


_STUCK = """
import ctypes, signal, sys, threading, time
from pathlib import Path
from advsim._interrupt import undo_if_stopped
from advsim.cli import _interrupt

marker = Path(sys.argv[1])
with _interrupt.sigint_handling(lambda: "advsim sweep: interrupted; the line") as session:
    _interrupt.started(session)
    with undo_if_stopped(marker.touch):
        # The main thread in compiled code for 20 s (as in an XLA compilation): the
        # signal goes to another thread, and no bytecode runs in this one till it returns.
        # "ready" is printed by a thread once the main thread is inside the C call, so the
        # signal cannot reach a bytecode of the main thread before it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        threading.Thread(
            target=lambda: (time.sleep(0.5), print("ready", flush=True)), daemon=True
        ).start()
        ctypes.CDLL(None).sleep(20)
        print("returned", flush=True)
"""


def test_a_main_thread_that_cannot_unwind_is_ended_after_the_grace(tmp_path):
    marker = tmp_path / "cleaned"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK, str(marker)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "ready"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    status = proc.wait(timeout=30)
    seconds = time.monotonic() - sent
    out, err = proc.communicate()
    assert status == 130, (err, seconds, out)
    assert GRACE_S <= seconds < STOP_WITHIN_S, seconds
    assert err.strip() == "advsim sweep: interrupted; the line"
    assert marker.exists()  # the registered cleanup ran


def _args(out, resumable=True):
    """A command's parsed options: one with --resume (not given), or one without."""
    return Namespace(out=str(out), resume=False) if resumable else Namespace(out=str(out))


def test_the_line_says_what_a_search_keeps(tmp_path):
    out = tmp_path / "search"
    out.mkdir()
    (out / "state.json").write_text(json.dumps({"trace": [{}] * 41, "gradient": {}}))
    assert _interrupted("advsim search", _args(out)) == (
        f"advsim search: interrupted; the search's progress up to its last checkpoint "
        f"(41 evaluations, state.json) is kept in {out}: run the same command with --out "
        f"{out} --resume to continue it"
    )


def test_the_line_says_what_a_sweep_or_figure_keeps(tmp_path):
    out = tmp_path / "figure"
    for key, cells in (("a", 2), ("b", 1)):  # a figure: one sweep per sub-folder
        (out / key / "cells").mkdir(parents=True)
        (out / key / "run.json").write_text("{}")
        for i in range(cells):
            (out / key / "cells" / f"{i}.json").write_text("{}")
    assert _interrupted("advsim figure", _args(out)) == (
        f"advsim figure: interrupted; what was finished is kept in {out} (3 finished "
        f"cells): run the same command with --out {out} --resume to continue it"
    )
    empty = tmp_path / "empty"
    assert _interrupted("advsim search", _args(empty)) == (
        "advsim search: interrupted before anything was finished; nothing was kept"
    )
    line = _interrupted("advsim bound", _args(empty, resumable=False))
    assert line == "advsim bound: interrupted"


def test_ctrl_c_handling_is_undone_after_a_command(capsys):
    """`main` in-process leaves Python's own SIGINT handling as it found it."""
    from advsim.cli import main

    before = signal.getsignal(signal.SIGINT), sys.unraisablehook
    assert main(["bound", "--steps", "0", "--sampling-prob", "0.1",
                 "--noise-multiplier", "1"]) == 2  # fmt: skip
    assert (signal.getsignal(signal.SIGINT), sys.unraisablehook) == before
    capsys.readouterr()

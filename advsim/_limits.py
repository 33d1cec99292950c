"""The ranges of the run parameters that several layers check, each defined once.

The command line, the sweep config, `simulate` and `run_audit` all take `trials`, a seed,
a chunk size and a number of steps; each checks them with the validator here, so the same
value is accepted or refused, with the same range in the message, wherever it is given.
This module imports no jax (the command line checks its options before loading it).
"""

from __future__ import annotations

import os
import sys

from advsim._validation import check_int

__all__ = [
    "CHUNK_BYTES_PER_RUN",
    "MAX_SEED",
    "MAX_STEPS",
    "MAX_TRIALS",
    "MIN_TRIALS",
    "available_memory",
    "check_chunk_size",
    "check_seed",
    "check_steps",
    "check_trials",
]

#: Runs per world: at least 2 (an audit chooses its threshold on some runs and counts on
#: others), at most 2**32 - 1 (run indices are folded into the key as uint32).
MIN_TRIALS, MAX_TRIALS = 2, 2**32 - 1
#: An integer seed becomes a 64-bit key (`advsim._simulate.as_key`).
MAX_SEED = 2**64 - 1
#: Steps of one DP-SGD run. The accounting lists every step that can carry the canary
#: (10^7 of them take 4 s and 1.2 GB), and a simulated run computes every step.
MAX_STEPS = 10**7
#: Memory a chunk of runs holds per run besides its blocks (measured by the arrays it
#: allocates): the run's index (uint32) and score (float64), on the device and on the host.
CHUNK_BYTES_PER_RUN = 24


def check_trials(name: str, value) -> int:
    """Checks a number of runs per world: an integer in [2, 2**32 - 1].

    Raises:
        TypeError: not an integer.
        ValueError: outside the range.
    """
    return check_int(name, value, minimum=MIN_TRIALS, maximum=MAX_TRIALS)


def check_steps(name: str, value) -> int:
    """Checks the number of steps of a run: an integer in [1, 10^7] (`MAX_STEPS`).

    Raises:
        TypeError: not an integer.
        ValueError: outside the range.
    """
    return check_int(name, value, minimum=1, maximum=MAX_STEPS)


def check_seed(name: str, value) -> int:
    """Checks an integer seed: in [0, 2**64 - 1].

    Raises:
        TypeError: not an integer.
        ValueError: outside the range.
    """
    return check_int(name, value, minimum=0, maximum=MAX_SEED)


def _host_memory() -> int | None:
    """Bytes the host can still give (MemAvailable of /proc/meminfo, else the free pages),
    None where neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _device_memory() -> int | None:
    """Bytes free on the accelerators (summed over the devices), None on a CPU backend, or
    before jax is imported (nothing can have been allocated on a device then)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    total = 0
    try:
        for device in jax.devices():
            stats = device.memory_stats() if device.platform != "cpu" else None
            if not stats or "bytes_limit" not in stats:
                return None
            total += int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    except Exception:  # a backend without memory statistics
        return None
    return total


def available_memory() -> tuple[int, str] | None:
    """`(bytes, where)`: the memory a chunk of runs can take, the smaller of the host's
    available memory and the accelerators' free memory; None when neither is known."""
    found = [(b, w) for b, w in ((_host_memory(), "host"), (_device_memory(), "device")) if b]
    return min(found) if found else None


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError


def check_chunk_size(name: str, value) -> int:
    """Checks a chunk size (runs per compiled chunk): an integer >= 1 whose chunk fits in
    the memory available now (`CHUNK_BYTES_PER_RUN` a run, `available_memory`).

    Raises:
        TypeError: not an integer.
        ValueError: below 1, or a chunk larger than the memory available (the message
            gives the bytes it needs, the memory available and the largest chunk that fits).
    """
    value = check_int(name, value, minimum=1)
    memory = available_memory()
    need = value * CHUNK_BYTES_PER_RUN
    if memory is not None and need > memory[0]:
        fits = memory[0] // CHUNK_BYTES_PER_RUN
        raise ValueError(
            f"{name}={value} needs {_bytes(need)} ({CHUNK_BYTES_PER_RUN} bytes a run: its "
            f"index and score), more than the {_bytes(memory[0])} of {memory[1]} memory "
            f"available; give at most {fits:.3g} runs a chunk, or leave {name} unset (the "
            "default chunk fits)"
        )
    return value

"""Every CPU core, by default: one JAX host device per core, set before JAX starts.

XLA runs one compiled program on one CPU thread, so a CPU-only machine computes on one core
unless JAX is given several host devices. `simulate` shards each chunk of runs over
`jax.devices()` (one `shard_map` lane set per device), so one host device per core uses
every core, with the same scores: run i depends only on its key and its lane width, never
on the device that computes it.

`use_every_core` asks JAX for one host device per usable core (`os.sched_getaffinity`):
it sets `JAX_NUM_CPU_DEVICES` when jax is not imported yet (so it is inherited by child
processes, which then use every core too), or `jax.config.update("jax_num_cpu_devices",
...)` when jax is imported but has not started. It changes nothing when:

- `ADVSIM_CPU_DEVICES` is set: a number of host devices (1 turns this off), or "auto";
- the device count is already chosen: `JAX_NUM_CPU_DEVICES`, or
  `--xla_force_host_platform_device_count` in `XLA_FLAGS`;
- JAX has already started (a JAX operation ran before advsim was imported): then its
  device count stands, and `simulate` uses the devices it has.

Accelerators are not affected: `jax.devices()` lists the GPUs or TPUs where there are some.
"""

from __future__ import annotations

import os
import sys

__all__ = ["CPU_DEVICES_VARIABLE", "usable_cores", "use_every_core"]

#: The environment variable that overrides the host device count advsim asks for.
CPU_DEVICES_VARIABLE = "ADVSIM_CPU_DEVICES"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _requested(environ) -> int | None:
    """The host device count to ask for, or None to leave JAX's choice alone."""
    setting = environ.get(CPU_DEVICES_VARIABLE, "auto").strip().lower()
    if "JAX_NUM_CPU_DEVICES" in environ:
        return None
    if "xla_force_host_platform_device_count" in environ.get("XLA_FLAGS", ""):
        return None
    if setting == "auto":
        return usable_cores()
    try:
        count = int(setting)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(
            f"{CPU_DEVICES_VARIABLE} must be 'auto' or a whole number >= 1, got {setting!r}"
        )
    return count


def use_every_core(environ=os.environ) -> int | None:
    """Asks JAX for one host device per usable core (see the module's docstring).

    Returns:
        The host device count asked for, or None where nothing was changed.

    Raises:
        ValueError: `ADVSIM_CPU_DEVICES` is neither "auto" nor a whole number >= 1.
    """
    count = _requested(environ)
    if count is None or count == 1:
        return None
    jax = sys.modules.get("jax")
    if jax is None:
        environ["JAX_NUM_CPU_DEVICES"] = str(count)
        return count
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return None
    jax.config.update("jax_num_cpu_devices", count)
    return count

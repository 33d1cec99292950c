"""`import advsim` asks JAX for one host device per core (advsim._cores), unless told not to."""

import os
import subprocess
import sys

import pytest

from advsim._cores import CPU_DEVICES_VARIABLE, _requested, usable_cores, use_every_core


def test_the_default_is_one_device_per_usable_core():
    assert _requested({}) == usable_cores() == len(os.sched_getaffinity(0))
    assert _requested({CPU_DEVICES_VARIABLE: "auto"}) == usable_cores()
    assert _requested({CPU_DEVICES_VARIABLE: "3"}) == 3


@pytest.mark.parametrize(
    "environ",
    [
        {"JAX_NUM_CPU_DEVICES": "1"},
        {"XLA_FLAGS": "--xla_force_host_platform_device_count=3"},
        {"JAX_NUM_CPU_DEVICES": "2", CPU_DEVICES_VARIABLE: "4"},
    ],
)
def test_a_device_count_chosen_already_stands(environ):
    assert _requested(environ) is None
    before = dict(environ)
    assert use_every_core(environ) is None
    assert environ == before


def test_one_device_asks_for_nothing():
    environ = {CPU_DEVICES_VARIABLE: "1"}
    assert use_every_core(environ) is None
    assert environ == {CPU_DEVICES_VARIABLE: "1"}


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_a_bad_setting_is_refused_by_name(value):
    with pytest.raises(ValueError, match=rf"{CPU_DEVICES_VARIABLE} must be 'auto' or a whole"):
        _requested({CPU_DEVICES_VARIABLE: value})


def _devices_after_import(env_update: dict, first: str = "") -> int:
    """`len(jax.devices())` in a fresh process that imports advsim (after `first`)."""
    env = {k: v for k, v in os.environ.items()}
    for name in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS", CPU_DEVICES_VARIABLE):
        env.pop(name, None)
    env.update(env_update, JAX_PLATFORMS="cpu")
    code = f"{first}import advsim, jax; print(len(jax.devices()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # four fresh processes, each importing jax
def test_import_gives_one_host_device_per_core_and_respects_the_opt_out():
    # Three fresh processes: the default (jax imported by advsim), jax imported first but
    # not started (the config route), and the opt-out.
    assert _devices_after_import({CPU_DEVICES_VARIABLE: "3"}) == 3
    assert _devices_after_import({CPU_DEVICES_VARIABLE: "3"}, first="import jax; ") == 3
    assert _devices_after_import({CPU_DEVICES_VARIABLE: "1"}) == 1
    # A JAX operation before advsim is imported fixes the count: advsim leaves it.
    started = "import jax; jax.numpy.zeros(1); "
    assert _devices_after_import({CPU_DEVICES_VARIABLE: "3"}, first=started) == 1

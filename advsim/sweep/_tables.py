"""Reading a sweep config's tables: the sweep-wide options of `[sweep]`, `[adversary]`,
the fixed settings and the `[grid]` and `[[cases]]` values, each key and value checked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advsim._limits import check_chunk_size, check_seed
from advsim.experiment import EXACT_REFINEMENTS
from advsim.sweep._classes import Plugin, resolve
from advsim.sweep._settings import (
    _AUDIT_DEFAULTS,
    _AUDIT_SETTINGS,
    _BOUNDS_SETTINGS,
    _COMMON_DEFAULTS,
    _SCALARS,
    _SETTINGS,
    AUDIT_OPTION_KEYS,
    STRATEGY_KEYS,
    STREAMING_KEYS,
    _as_values,
    _check_setting,
)

_MODES = ("audit", "bounds")
_TABLES = ("sweep", "mechanism", "adversary", "grid", "cases")
_SWEEP_KEYS = (
    "mode",
    "seed",
    "common_seed",
    "exact",
    "exact_refinements",
    "name",
    "chunk_size",
    *_COMMON_DEFAULTS,
    *_AUDIT_DEFAULTS,
    *STRATEGY_KEYS,
    *AUDIT_OPTION_KEYS,
    *STREAMING_KEYS,
    *_BOUNDS_SETTINGS,
)


def _pop_sweep_options(sweep: dict) -> dict:
    """Takes the sweep-wide options out of `[sweep]` (leaving the cell settings), checked,
    each at its default where absent; returns them by `SweepConfig` field."""
    bad = set(sweep) - set(_SWEEP_KEYS)
    if bad:
        raise ValueError(f"unknown key(s) {sorted(bad)} in [sweep]; valid: {list(_SWEEP_KEYS)}")
    mode = sweep.pop("mode", "audit")
    if mode not in _MODES:
        raise ValueError(f"sweep.mode must be 'audit' or 'bounds', got {mode!r}")
    seed = sweep.pop("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):  # 1.0 is no seed in a file
        raise ValueError(f"sweep.seed must be an integer in [0, 2^64 - 1], got {seed!r}")
    check_seed("sweep.seed", seed)
    name = sweep.pop("name", None)
    if name is not None and not isinstance(name, str):
        raise ValueError(f"sweep.name must be a string, got {name!r}")
    chunk_size = sweep.pop("chunk_size", None)
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise ValueError(f"sweep.chunk_size must be an integer >= 1, got {chunk_size!r}")
        check_chunk_size("sweep.chunk_size", chunk_size)
    common_seed = sweep.pop("common_seed", False)
    if not isinstance(common_seed, bool):
        raise ValueError(f"sweep.common_seed must be true or false, got {common_seed!r}")
    exact = sweep.pop("exact", True)
    if not isinstance(exact, bool):
        raise ValueError(
            f"sweep.exact must be true or false (the exact epsilon column), got {exact!r}"
        )
    exact_refinements = sweep.pop("exact_refinements", EXACT_REFINEMENTS)
    if (
        isinstance(exact_refinements, bool)
        or not isinstance(exact_refinements, int)
        or not 2 <= exact_refinements <= 6
    ):
        raise ValueError(
            "sweep.exact_refinements must be an integer in [2, 6] (the most grids of the "
            f"exact engine, each twice as fine), got {exact_refinements!r}"
        )
    return {
        "mode": mode,
        "seed": seed,
        "chunk_size": chunk_size,
        "name": name,
        "common_seed": common_seed,
        "exact": exact,
        "exact_refinements": exact_refinements,
    }


def _parse_adversary(adv: dict, mode: str) -> tuple[str | None, dict]:
    """`(name, keyword arguments)` of `[adversary]` (default: the projection adversary),
    built once to check them; `(None, {})` in bounds mode, which takes none."""
    if mode == "bounds":
        if adv:
            raise ValueError("[adversary] has no effect in bounds mode (nothing is simulated)")
        return None, {}
    adv_name = adv.pop("name", "projection")
    try:
        resolve("adversary", adv_name).build(**adv)
    except (TypeError, ValueError) as err:
        raise ValueError(f"[adversary] {adv_name!r}: {err}") from None
    return adv_name, adv


class _Keys:
    """The parameter keys a cell of this mode and mechanism may have."""

    def __init__(self, mode: str, plugin: Plugin):
        self.mode, self.plugin = mode, plugin
        allowed = set(_COMMON_DEFAULTS) | {"target_epsilon"} | set(plugin.params)
        allowed |= set(_AUDIT_SETTINGS) if mode == "audit" else set(_BOUNDS_SETTINGS)
        self.allowed = allowed

    def check(self, key: str, where: str) -> None:
        """Refuses a key the cells cannot have, saying why and what is valid."""
        any_key = self.plugin.any_key
        if key in self.allowed or (any_key and key not in _SETTINGS):
            return
        if self.mode == "bounds" and key in _AUDIT_SETTINGS:
            raise ValueError(f"{where}.{key} has no effect in bounds mode (nothing is simulated)")
        if self.mode == "audit" and key in _BOUNDS_SETTINGS:
            raise ValueError(
                f"{where}.{key} applies to bounds mode only (an audit reports the bounds of "
                "advsim.bounds.bounds_for)"
            )
        if key == "seed":
            raise ValueError(
                f"{where}.seed cannot vary per cell; sweep `replicate = [0, 1, ...]` for "
                "independent repetitions"
            )
        valid = sorted(self.allowed) + (["(any: the class takes **kwargs)"] if any_key else [])
        raise ValueError(f"unknown parameter {where}.{key}; valid: {valid}")


def _parse_fixed(sweep: Mapping, mech: Mapping, keys: _Keys) -> dict[str, Any]:
    """The fixed parameters: the settings left in `[sweep]`, then `[mechanism]`'s keys."""
    fixed: dict[str, Any] = {}
    for key, value in sweep.items():
        keys.check(key, "sweep")
        fixed[key] = _check_setting(key, value, f"sweep.{key}")
    for key, value in mech.items():
        keys.check(key, "mechanism")
        if key in _SETTINGS:
            raise ValueError(f"mechanism.{key} is a sweep setting: put it in [sweep]")
        if not isinstance(value, _SCALARS):
            raise ValueError(f"mechanism.{key} must be a number, string or boolean, got {value!r}")
        fixed[key] = _check_setting(key, value, f"mechanism.{key}")
    return fixed


def _parse_grid(table, where: str, keys: _Keys, fixed: Mapping) -> dict:
    """A `[grid]` or `[[cases]]` table: each key's list of values, checked."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table of parameter = [values], got {table!r}")
    grid = {}
    for key, value in table.items():
        keys.check(key, where)
        if key in fixed:
            raise ValueError(
                f"{where}.{key} is also set as a fixed parameter; give it in one place"
            )
        values = _as_values(key, value, where)
        for i, v in enumerate(values):
            _check_setting(key, v, f"{where}.{key}[{i}]")
        grid[key] = values
    return grid

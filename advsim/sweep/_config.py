"""Sweep configs: the typed, validated record of what every cell runs.

`parse_config` checks the tables and keys a sweep may have, resolves the mechanism and
adversary the config names (`advsim.sweep._classes`: class paths and aliases), and builds
every cell's mechanism once, so a bad parameter anywhere in the grid fails before the
sweep starts, naming the cell.

The audit's settings: `method` (default: "family" for a mechanism in the heuristic's
family, where that audit's assumption is exact, else the assumption-free "eps_delta":
`advsim.experiment.default_audit_method`), `delta`, `confidence`, `threshold_selection`
and its options (`STRATEGY_KEYS`), and the optional `sides`, `min_count` and
`audit_seed` (`AUDIT_OPTION_KEYS`), which enter a cell's parameters, and so its id, only
where they are set to something other than their default: a config written before them
keeps its cells.

`streaming = true` in `[sweep]` (with an optional `pilot_runs = N`, which may be swept)
audits every cell by a streaming audit (`advsim.experiment.run_audit(...,
streaming=True)`): a pilot of `pilot_runs` runs per world plans the threshold tests, the
cell's `trials` are only counted, and `eps_lower` is the assumption-free (eps, delta)
bound. Its method is "eps_delta" (the default then), and it takes no threshold strategy:
its cells have no `threshold_selection` (their records read "streaming").
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from advsim._limits import check_chunk_size, check_seed
from advsim._mechanism import AbstractMechanism
from advsim.experiment import EXACT_REFINEMENTS, default_audit_method
from advsim.sweep._checks import CellError, check_cell
from advsim.sweep._classes import Plugin, resolve
from advsim.sweep._recompile import StaticFloatsSeen
from advsim.sweep._settings import (  # noqa: F401 (re-exported)
    _AUDIT_DEFAULTS,
    _AUDIT_SETTINGS,
    _BOUNDS_SETTINGS,
    _COMMON_DEFAULTS,
    _SCALARS,
    _SETTINGS,
    _UNSET_DEFAULTS,
    AUDIT_OPTION_KEYS,
    STRATEGY_KEYS,
    STREAMING_KEYS,
    _as_values,
    _by_value,
    _check_audit_options,
    _check_setting,
    _check_strategy_options,
    _streaming_defaults,
    _unset_defaults,
    audit_options,
    canon,
    check_audit_options,
    describe,
    strategy_options,
    streaming_options,
)

__all__ = [
    "Cell",
    "SweepConfig",
    "SweepError",
    "builtin_config",
    "load_config",
    "parse_config",
]


class SweepError(RuntimeError):
    """A sweep folder that cannot be used as asked (damaged cell file, other config, ...),
    or a cell that failed.

    Attributes:
        cell: the `Cell` that failed, where one did (its cause is the cell's own error).
    """

    def __init__(self, message: str, cell: Cell | None = None):
        super().__init__(message)
        self.cell = cell


# ------------------------------------------------------------------------------ config

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


@dataclasses.dataclass(frozen=True)
class Cell:
    """One configuration of a sweep.

    Attributes:
        index: position in the sweep's cell order (the table's row order).
        cell_id: 16 hex digits of SHA-256 over everything that determines the result
            (mode, mechanism, adversary, parameters, sweep seed, `common_seed`); names
            `cells/<id>.json`.
        params: the cell's parameters: settings, mechanism parameters, `target_epsilon`.
        seed: the cell's seed, derived from the sweep seed and `cell_id`; with
            `common_seed`, the sweep seed itself.
    """

    index: int
    cell_id: str
    params: dict
    seed: int


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A validated sweep: what to run in every cell. Build with `parse_config`.

    `mechanism` and `adversary` keep the names as the config wrote them (an alias or a
    class path), so cell ids, and with them resumes of older sweep folders, do not change;
    `mechanism_plugin` and `adversary_plugin` are the classes they resolve to.

    `common_seed` (`[sweep] common_seed = true`): every cell runs with the sweep seed
    itself (common random numbers: the cells are compared on the same noise draws, as
    `advsim audit` does over T), instead of a seed derived from the sweep seed and the
    cell's id (independent cells, the default).

    `exact` (`[sweep] exact = false` turns it off; default true): every cell whose
    mechanism has the capability (`advsim.AbstractScalarLaw`) gets the exact epsilon of its
    last model and its refinement-estimated error (`advsim.experiment.exact_columns`:
    at most `exact_refinements` grids, default 3, each row stopping at the second or a
    later grid once its error estimate is within `EXACT_RTOL`, 1e-4, of its epsilon),
    computed once per distinct mechanism; the
    other cells leave those columns empty. It changes no simulated number, so it is not
    part of the cell ids; a resume must keep it (it is part of the config).
    """

    mode: str
    seed: int
    mechanism: str
    adversary: str | None
    adversary_kwargs: dict
    fixed: dict
    grid: dict
    cases: tuple
    chunk_size: int | None = None
    name: str | None = None
    common_seed: bool = False
    exact: bool = True
    exact_refinements: int = EXACT_REFINEMENTS
    #: `(T, q, n)` of each cell's run by cell id (steps, the canary's sampling rate, its
    #: number of steps), read from the mechanism `parse_config` builds to check the cell:
    #: calibrating a cell's sigma needs them, and the runner builds each mechanism once.
    cell_runs: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict:
        """The config as a TOML-shaped dict with every default filled in;
        `parse_config(c.to_dict()) == c`."""
        sweep = {"mode": self.mode, "seed": self.seed}
        if self.common_seed:  # absent when false: older sweep folders keep their identity
            sweep["common_seed"] = True
        if not self.exact:  # absent at their defaults, likewise
            sweep["exact"] = False
        if self.exact_refinements != EXACT_REFINEMENTS:
            sweep["exact_refinements"] = self.exact_refinements
        if self.name is not None:
            sweep["name"] = self.name
        if self.chunk_size is not None:
            sweep["chunk_size"] = self.chunk_size
        mech = {"name": self.mechanism}
        for key, value in self.fixed.items():
            (sweep if key in _SETTINGS else mech)[key] = value
        out = {"sweep": sweep, "mechanism": mech}
        if self.adversary is not None:
            out["adversary"] = {"name": self.adversary, **self.adversary_kwargs}
        out["grid"] = {k: list(v) for k, v in self.grid.items()}
        if self.cases:
            out["cases"] = [{k: list(v) for k, v in case.items()} for case in self.cases]
        return out

    @functools.cached_property
    def mechanism_plugin(self) -> Plugin:
        """The mechanism class (or classmethod) `mechanism` names, resolved."""
        return resolve("mechanism", self.mechanism)

    @functools.cached_property
    def adversary_plugin(self) -> Plugin | None:
        """The adversary class `adversary` names, resolved (None in bounds mode)."""
        return None if self.adversary is None else resolve("adversary", self.adversary)

    def identity(self) -> dict:
        """What a resume must match: the config without execution-only keys."""
        d = self.to_dict()
        d["sweep"] = {k: v for k, v in d["sweep"].items() if k not in ("chunk_size", "name")}
        return d

    @functools.cached_property
    def swept(self) -> list[str]:
        """The parameters that take more than one value over the cells, in config order."""
        keys = list(self.grid)
        for case in self.cases:
            keys += [k for k in case if k not in keys]
        cells = self._cells
        return [k for k in keys if len({canon(c.params.get(k)) for c in cells}) > 1]

    def cells(self) -> list[Cell]:
        """Every cell, in order: cases in order, each the product of its grid (first key
        slowest)."""
        return list(self._cells)

    @functools.cached_property
    def _cells(self) -> tuple[Cell, ...]:
        out = []
        for sub in self.cases or ({},):
            grid = {**self.grid, **sub}
            keys = list(grid)
            for values in itertools.product(*(grid[k] for k in keys)):
                params = {**self.fixed, **dict(zip(keys, values, strict=True))}
                cid = _cell_id(self, params)
                seed = self.seed if self.common_seed else _cell_seed(self.seed, cid)
                out.append(Cell(len(out), cid, params, seed))
        return tuple(out)


def _cell_id(config: SweepConfig, params: Mapping) -> str:
    ident = {
        "mode": config.mode,
        "mechanism": config.mechanism,
        "adversary": [config.adversary, config.adversary_kwargs],
        "params": dict(params),
        "seed": config.seed,
    }
    if config.common_seed:  # only then: the ids of other sweeps stay as they were
        ident["common_seed"] = True
    return hashlib.sha256(canon(ident).encode()).hexdigest()[:16]


def _cell_seed(seed: int, cell_id: str) -> int:
    """A 31-bit seed from the sweep seed and the cell id (independent of other cells)."""
    digest = hashlib.sha256(f"advsim-sweep:{seed}:{cell_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Reads a TOML sweep config (with the standard library's `tomllib`: data, never code).

    Raises:
        ValueError: a missing or unreadable file, invalid TOML or config, with the file,
            key, value and valid range.
    """
    path = Path(path)
    try:
        # A byte-order mark (some editors write one) is no TOML statement: it is dropped.
        data = tomllib.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode())
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a text (UTF-8) TOML file: {err}") from None
    except FileNotFoundError:
        raise ValueError(
            f"sweep config {path} does not exist; give the path of a TOML file (examples: "
            "scripts/configs/*.toml)"
        ) from None
    except OSError as err:
        raise ValueError(f"cannot read sweep config {path}: {err.strerror or err}") from None
    try:
        return parse_config(data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def builtin_config(name: str) -> dict:
    """A sweep config shipped with the package (`advsim/sweep/<name>.toml`), as the dict
    of its tables, for a driver to adjust before `parse_config` (e.g. "audit": the
    built-in experiment of `advsim audit`).

    Raises:
        ValueError: no built-in config has this name.
    """
    path = resources.files("advsim.sweep").joinpath(f"{name}.toml")
    if not path.is_file():
        raise ValueError(f"no built-in sweep config named {name!r}")
    return tomllib.loads(path.read_text())


def parse_config(data: Mapping) -> SweepConfig:
    """Validates a sweep config given as a dict (the TOML's tables).

    Every key is checked up front: unknown tables and keys, settings out of range, grid
    values that are not lists of scalars, a key both fixed and swept; the mechanism and
    adversary names are resolved (`advsim.sweep.resolve`: an alias or a class path, only
    subclasses of the abstract bases) and the adversary is built. Then every cell's
    mechanism is built once (cheaply, without running it) and its run checked against what
    the computation takes (the canary schedule within
    T, a sigma the accountant's grid can hold, a reachable `target_epsilon`, enough runs
    for the threshold strategy), so a bad parameter anywhere in the grid fails now, naming
    the cell, rather than hours into the sweep. Numbers are compared by value: a list or a
    set of cases that gives one value twice (1 and 1.0) is refused.

    Raises:
        ValueError: naming the key, the value and the valid range.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a sweep config must be a table, got {type(data).__name__}")
    unknown = set(data) - set(_TABLES)
    if unknown:
        raise ValueError(f"unknown table(s) {sorted(unknown)}; valid: {', '.join(_TABLES)}")
    sweep = dict(data.get("sweep", {}))
    options = _pop_sweep_options(sweep)
    mode = options["mode"]
    mech = dict(data.get("mechanism", {}))
    mech_name = mech.pop("name", None)
    plugin = resolve("mechanism", mech_name)
    adv_name, adv_kwargs = _parse_adversary(dict(data.get("adversary", {})), mode)
    keys = _Keys(mode, plugin)
    fixed = _parse_fixed(sweep, mech, keys)
    grid = _parse_grid(data.get("grid", {}), "grid", keys, fixed)
    cases_raw = data.get("cases", [])
    if not isinstance(cases_raw, list):
        raise ValueError(f"cases must be an array of tables ([[cases]]), got {cases_raw!r}")
    cases = tuple(_parse_grid(c, f"cases[{i}]", keys, fixed) for i, c in enumerate(cases_raw))
    swept = set(grid).union(*cases) if cases else set(grid)
    fixed = _unset_defaults(fixed)  # `sides = "two"` is the config that does not set it
    defaults = _defaults(mode, plugin)
    if fixed.get("streaming"):
        _streaming_defaults(fixed, swept, defaults)
    elif "streaming" in swept:
        raise ValueError(
            "streaming cannot vary per cell: set streaming = true in [sweep] to audit every "
            "cell by a streaming audit (a separate sweep compares it with another audit)"
        )
    for key, value in defaults.items():
        if key not in fixed and key not in swept:
            fixed[key] = value
    config = SweepConfig(
        mechanism=mech_name,
        adversary=adv_name,
        adversary_kwargs=adv_kwargs,
        fixed=dict(sorted(fixed.items())),
        grid=grid,
        cases=cases,
        **options,
    )
    if config.common_seed and "replicate" in {*fixed, *swept}:
        raise ValueError(
            "sweep.common_seed = true runs every cell with the sweep seed, so replicates "
            "would repeat the same runs; drop replicate, or common_seed for independent ones"
        )
    methods = _check_cells(config, plugin)
    method_set = "method" in data.get("sweep", {}) or "method" in swept or fixed.get("streaming")
    if mode != "audit" or method_set or set(methods) == {config.fixed["method"]}:
        return config
    if len(methods) > 1:
        cells = "; ".join(f"{m}: cells {v}" for m, v in sorted(methods.items()))
        raise ValueError(
            "the cells' mechanisms differ on the heuristic's family, so their default audit "
            f"methods differ ({cells}; in_heuristic_family() of each built mechanism): set "
            "method in [sweep], or per cell in [grid] or [[cases]]"
        )
    (method,) = methods
    return parse_config({**data, "sweep": {**data.get("sweep", {}), "method": method}})


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


def _defaults(mode: str, plugin: Plugin) -> dict:
    """The settings a cell gets unless the config gives them. The audit method is decided
    on each cell's built mechanism (`advsim.experiment.default_audit_method`, in
    `parse_config`); the value here is a first guess that spares most configs a second
    pass: "family" where the class says which of its instances are in the heuristic's
    family (it overrides `in_heuristic_family`), else "eps_delta"."""
    defaults = dict(_COMMON_DEFAULTS)
    if mode == "audit":
        defaults |= _AUDIT_DEFAULTS
        overrides = isinstance(plugin.factory, type) and (
            plugin.factory.in_heuristic_family is not AbstractMechanism.in_heuristic_family
        )
        defaults["method"] = "family" if overrides else "eps_delta"
    return defaults


def _check_cells(config: SweepConfig, plugin: Plugin) -> dict[str, list]:
    """Refuses a sweep without cells, a cell without a required parameter, with a strategy
    option its `threshold_selection` does not take, whose mechanism cannot be built, that
    its run would refuse (`advsim.sweep._checks.check_cell`), or that repeats another
    (numbers compared by value); records each cell's run in `config.cell_runs`. Returns
    the cells (by index) of each default audit method, decided on the cells' built
    mechanisms (`advsim.experiment.default_audit_method`)."""
    cells = config.cells()
    if not cells:
        raise ValueError("the sweep has no cells")
    required = [k for k in plugin.required if k != "noise_multiplier"]
    swept = config.swept
    ids = {}
    static_floats = StaticFloatsSeen(config.mode, config.exact)
    methods: dict[str, list] = {}
    for cell in cells:
        same = canon(_by_value(_unset_defaults(cell.params)))
        if same in ids:
            raise ValueError(
                f"cells {ids[same]} and {cell.index} are the same cell "
                f"{describe(cell.params, swept)} (numbers are compared by value: 1 and 1.0 "
                "are one value)"
            )
        ids[same] = cell.index
        missing = [k for k in required if k not in cell.params]
        if "noise_multiplier" not in cell.params and "target_epsilon" not in cell.params:
            missing.append("noise_multiplier (or target_epsilon)")
        if missing:
            raise ValueError(
                f"cell {describe(cell.params, swept)} has no value for {missing} "
                f"(set it in [mechanism] or [grid])"
            )
        if "noise_multiplier" in cell.params and "target_epsilon" in cell.params:
            raise ValueError(
                f"cell {describe(cell.params, swept)}: give noise_multiplier or "
                "target_epsilon, not both"
            )
        if config.mode == "audit":
            _check_strategy_options(cell.params, swept)
            _check_audit_options(cell.params, swept)
        try:
            mechanism = build_mechanism(config, cell.params, noise_multiplier=1.0)
            where = f"cell {describe(cell.params, swept)}"
            config.cell_runs[cell.cell_id] = check_cell(config, cell, mechanism, where)
        except CellError:
            raise
        except (TypeError, ValueError) as err:
            raise ValueError(f"cell {describe(cell.params, swept)}: {err}") from None
        static_floats.add(mechanism)
        methods.setdefault(default_audit_method(mechanism), []).append(cell.index)
    static_floats.warn(stacklevel=4)  # at the caller of parse_config / load_config
    return methods


def build_mechanism(config: SweepConfig, params: Mapping, *, noise_multiplier=None):
    """The mechanism of a cell: its parameters (not the settings) passed to the class the
    config names; `noise_multiplier` fills in for a cell that gives `target_epsilon`."""
    plugin = config.mechanism_plugin
    keys, any_key = plugin.params, plugin.any_key
    kwargs = {k: v for k, v in params.items() if k in keys or (any_key and k not in _SETTINGS)}
    kwargs.pop("target_epsilon", None)
    if noise_multiplier is not None and "noise_multiplier" not in params:
        kwargs["noise_multiplier"] = noise_multiplier
    return plugin.build(**kwargs)

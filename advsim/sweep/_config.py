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

from advsim._mechanism import AbstractMechanism
from advsim.experiment import EXACT_REFINEMENTS, default_audit_method
from advsim.sweep._checks import CellError, check_cell
from advsim.sweep._classes import Plugin, resolve
from advsim.sweep._recompile import StaticFloatsSeen
from advsim.sweep._settings import (  # noqa: F401 (re-exported)
    _AUDIT_DEFAULTS,
    _COMMON_DEFAULTS,
    _SETTINGS,
    AUDIT_OPTION_KEYS,
    STRATEGY_KEYS,
    STREAMING_KEYS,
    _by_value,
    _check_audit_options,
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
from advsim.sweep._tables import (
    _TABLES,
    _Keys,
    _parse_adversary,
    _parse_fixed,
    _parse_grid,
    _pop_sweep_options,
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
    method_set = "method" in data.get("sweep", {}) or "method" in swept or fixed.get("streaming")
    methods, static_floats = _check_cells(config, plugin, bool(method_set))
    if mode != "audit" or method_set or set(methods) == {config.fixed["method"]}:
        static_floats.warn(stacklevel=3)  # at the caller of parse_config / load_config
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


def _defaults(mode: str, plugin: Plugin) -> dict:
    """The settings a cell gets unless the config gives them. The audit method is decided
    on each cell's built mechanism (`advsim.experiment.default_audit_method`, in
    `parse_config`, which also checks each cell's audit options against that method); the
    value here only keys the cells of a first pass, and spares most configs a second one:
    "family" where the class says which of its instances are in the heuristic's family (it
    overrides `in_heuristic_family`), else "eps_delta"."""
    defaults = dict(_COMMON_DEFAULTS)
    if mode == "audit":
        defaults |= _AUDIT_DEFAULTS
        overrides = isinstance(plugin.factory, type) and (
            plugin.factory.in_heuristic_family is not AbstractMechanism.in_heuristic_family
        )
        defaults["method"] = "family" if overrides else "eps_delta"
    return defaults


def _check_cells(
    config: SweepConfig, plugin: Plugin, method_set: bool
) -> tuple[dict[str, list], StaticFloatsSeen]:
    """Refuses a sweep without cells, a cell without a required parameter, whose mechanism
    cannot be built, with a strategy option its `threshold_selection` does not take or
    audit options its method refuses (the method the config sets, else the cell's built
    mechanism's default: `method_set` False), that its run would refuse
    (`advsim.sweep._checks.check_cell`), or that repeats another (numbers compared by
    value); records each cell's run in `config.cell_runs`. Returns the cells (by index) of
    each default audit method, decided on the cells' built mechanisms
    (`advsim.experiment.default_audit_method`), and the plain-float fields seen, to warn
    about once the config is final."""
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
        try:
            mechanism = build_mechanism(config, cell.params, noise_multiplier=1.0)
        except (TypeError, ValueError) as err:
            raise ValueError(f"cell {describe(cell.params, swept)}: {err}") from None
        method = default_audit_method(mechanism)
        if config.mode == "audit":
            settings = cell.params if method_set else {**cell.params, "method": method}
            _check_strategy_options(settings, swept)
            _check_audit_options(settings, swept)
        try:
            where = f"cell {describe(cell.params, swept)}"
            config.cell_runs[cell.cell_id] = check_cell(config, cell, mechanism, where)
        except CellError:
            raise
        except (TypeError, ValueError) as err:
            raise ValueError(f"cell {describe(cell.params, swept)}: {err}") from None
        static_floats.add(mechanism)
        methods.setdefault(method, []).append(cell.index)
    return methods, static_floats


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

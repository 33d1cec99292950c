"""Sweeps: a grid of configurations, one audit (or bounds only) per cell, resumable.

A sweep is a TOML file (or the same content as a dict) naming a mechanism and an
adversary from the registries below, fixed parameters, and a grid of swept ones:

```toml
[sweep]
mode = "audit"          # "audit": simulate + audit + bounds; "bounds": bounds only
seed = 0
trials = 20000          # runs per world (audit mode)
delta = 1e-5

[mechanism]
name = "linear"         # a key of MECHANISMS; the other keys are its parameters
steps = 10

[adversary]
name = "projection"     # a key of ADVERSARIES (audit mode)

[grid]                  # cartesian product, first key varies slowest
noise_multiplier = [1.0, 2.0, 3.0, 4.0]
sampling_prob = [0.02, 0.05, 0.1, 0.2, 0.5]
```

An optional `[[cases]]` array adds sub-grids: each case's keys (scalars or lists) replace
the grid's, and the cells are the union over cases of the case-merged product, in order
(e.g. three (q, sigma) regimes, each over the same list of T). A cell's parameters can be
any mechanism parameter, `target_epsilon` (sigma is then calibrated so that composition
gives it at `delta`), the settings `delta`, `trials`, `method`, `confidence`,
`threshold_selection`, and `replicate` (a label that only changes the cell's seed).

Each cell gets a stable id (a hash of everything that determines its result) and a seed
derived from the sweep seed and that id, so a cell's numbers do not depend on which other
cells exist or on the order they run in. The output folder holds

- `run.json`: the config, provenance (package versions, JAX backend and devices, git
  commit) and one entry per session (first run and every resume);
- `cells/<id>.json`: one file per finished cell, written atomically (temporary file, then
  rename) with a SHA-256 checksum of its content, so a killed sweep loses at most the
  cell in flight and a damaged file is detected, never mixed in;
- `results.csv` and `results.json`: the tidy table, one row per cell in cell order, with
  every parameter, eps_lower, eps_point, heuristic, composition, full_batch, trials, seed
  and wall time, and what each eps_lower certifies: `guarantee` ("rigorous", "assumes
  Gaussian", "assumes family", "optimistic"), `assumption`, `assumption_rejected` (the
  audit's held-out check of its assumption), `eps_point_above_composition` (an estimate
  outside the possible range) and the reasons for missing numbers.

The audit method defaults to "family" (the last-iterate paper's) for the linear process,
the heuristic's tight case, and to the assumption-free "eps_delta" for every other
mechanism.

Cells with the same shapes (same T, same dimensions) share one compiled simulation: the
mechanisms keep their numeric hyperparameters as traced arrays, so `advsim.simulate`
compiles once per shape, and every cell's trials run through the same chunked,
device-sharded runner. Cells are independent, so they can also run on a Ray cluster
(`executor="ray"`) into the same folder layout: a sweep started locally can be resumed on a
cluster and vice versa.

Example:
    >>> from advsim.sweep import parse_config
    >>> cfg = parse_config({"sweep": {"mode": "bounds", "delta": 1e-6},
    ...                     "mechanism": {"name": "linear", "sampling_prob": 0.1,
    ...                                   "noise_multiplier": 1.0},
    ...                     "grid": {"steps": [1, 3]}})
    >>> [c.params["steps"] for c in cfg.cells()]
    [1, 3]
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import math
import os
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ADVERSARIES",
    "MECHANISMS",
    "Cell",
    "SweepConfig",
    "SweepError",
    "load_config",
    "load_results",
    "parse_config",
    "register_adversary",
    "plot_sweep",
    "register_mechanism",
    "run_cell",
    "run_sweep",
]

CELL_FORMAT = "advsim-sweep-cell/1"
RUN_FILE = "run.json"
CELLS_DIR = "cells"
TABLE_CSV = "results.csv"
TABLE_JSON = "results.json"

#: Columns of the result of one cell, in table order (audit mode; bounds mode has the
#: subset that does not need a simulation).
AUDIT_COLUMNS = (
    "mechanism", "adversary", "method", "steps", "sampling_prob", "noise_multiplier",
    "num_canary_steps", "delta", "confidence", "threshold_selection", "eps_lower",
    "eps_point", "heuristic", "composition", "full_batch", "rigorous", "guarantee",
    "assumption", "assumption_rejected", "eps_point_above_composition", "eps_lower_note",
    "eps_point_note", "threshold", "fpr", "fnr", "trials", "seed", "wall_time_s",
)
BOUNDS_COLUMNS = (
    "mechanism", "steps", "sampling_prob", "noise_multiplier", "num_canary_steps", "delta",
    "heuristic", "composition", "full_batch", "wall_time_s",
)


class SweepError(RuntimeError):
    """A sweep folder that cannot be used as asked (damaged cell file, other config, ...)."""


# --------------------------------------------------------------------------- registries

#: Mechanism builders by name: `build(**params) -> AbstractMechanism`. Its signature says
#: which parameters a config may set.
MECHANISMS: dict[str, Callable[..., Any]] = {}
#: Adversary builders by name: `build(**kwargs) -> AbstractAdversary`.
ADVERSARIES: dict[str, Callable[..., Any]] = {}


def register_mechanism(name: str, build: Callable[..., Any], *, replace: bool = False) -> None:
    """Makes `build` available to sweep configs as `[mechanism] name = "<name>"`.

    Args:
        name: the config name.
        build: a callable returning an `advsim.AbstractMechanism`; its keyword parameters
            are the config's mechanism parameters (numbers a sweep varies should be stored
            as traced arrays by the mechanism, so one compilation serves the grid). It must
            accept `noise_multiplier` for `target_epsilon` to work.
        replace: allow replacing an existing entry.
    """
    if not replace and name in MECHANISMS:
        raise ValueError(f"mechanism {name!r} is already registered")
    MECHANISMS[name] = build


def register_adversary(name: str, build: Callable[..., Any], *, replace: bool = False) -> None:
    """Makes `build` available to sweep configs as `[adversary] name = "<name>"`."""
    if not replace and name in ADVERSARIES:
        raise ValueError(f"adversary {name!r} is already registered")
    ADVERSARIES[name] = build


def _schedule(canary_schedule: str, sampled: bool):
    from advsim._mechanism import CanarySchedule

    text = str(canary_schedule)
    kind, _, arg = text.partition(":")
    try:
        if text == "every_step":
            return CanarySchedule.every_step(sampled=sampled)
        if kind in ("every", "only") and arg.strip().isdigit():
            make = CanarySchedule.every if kind == "every" else CanarySchedule.only
            return make(int(arg), sampled=sampled)
    except ValueError as err:
        raise ValueError(f"canary_schedule {text!r}: {err}") from None
    raise ValueError(
        f"canary_schedule must be 'every_step', 'every:K' (steps 1, 1+K, ...) or 'only:S' "
        f"(step S only), got {canary_schedule!r}"
    )


def _linear(
    steps: int,
    sampling_prob: float,
    noise_multiplier: float,
    *,
    clip_norm: float = 1.0,
    learning_rate: float = 1.0,
    dim: int = 1,
    canary_coordinate: int = 0,
    canary_schedule: str = "every_step",
    canary_sampled: bool = True,
    batching: str = "poisson",
):
    """`LinearProcess` with no other data; the canary schedule given as a string."""
    from advsim.mechanisms import LinearProcess

    return LinearProcess(
        steps, sampling_prob, noise_multiplier, clip_norm=clip_norm,
        learning_rate=learning_rate, dim=dim, canary_coordinate=canary_coordinate,
        canary_schedule=_schedule(canary_schedule, canary_sampled), batching=batching,
    )


def _linear_data(
    steps: int,
    sampling_prob: float,
    noise_multiplier: float,
    *,
    dim: int = 10,
    num_examples: int = 100,
    distribution: str = "gaussian",
    scale: float = 1.0,
    data_seed: int = 0,
    clip_norm: float = 1.0,
    learning_rate: float = 1.0,
    canary_schedule: str = "every_step",
    canary_sampled: bool = True,
    batching: str = "poisson",
):
    """`LinearProcess.with_data`: other examples' gradients drawn once from a distribution."""
    from advsim.mechanisms import LinearProcess

    return LinearProcess.with_data(
        steps, sampling_prob, noise_multiplier, dim=dim, num_examples=num_examples,
        distribution=distribution, scale=scale, data_seed=data_seed, clip_norm=clip_norm,
        learning_rate=learning_rate, canary_schedule=_schedule(canary_schedule, canary_sampled),
        batching=batching,
    )


def _projection(**kwargs):
    from advsim.adversaries import ProjectionScore

    return ProjectionScore(**kwargs)


def _llr():
    from advsim.adversaries import LikelihoodRatioScore

    return LikelihoodRatioScore()


def _landscape(
    steps: int,
    noise_multiplier: float,
    *,
    batch_size: int = 1,
    threshold: float | None = None,
    clip_norm: float = 1.0,
    orientation: str = "reinforce",
):
    """`ThresholdLandscape` (Eq. (3) of arXiv:2405.14457): canary at step 1, batch B."""
    from advsim.mechanisms import ThresholdLandscape

    return ThresholdLandscape(
        steps, noise_multiplier, batch_size, threshold=threshold, clip_norm=clip_norm,
        orientation=orientation,
    )


def _threshold(threshold: float | None = None):
    from advsim.adversaries import ThresholdAdversary

    return ThresholdAdversary(threshold)


def _gradient_canary(
    steps: int,
    sampling_prob: float,
    noise_multiplier: float,
    *,
    clip_norm: float = 1.0,
    learning_rate: float = 1.0,
    dim: int = 10,
    period: int = 1,
    canary_sampled: bool = False,
    batching: str = "poisson",
    data: str = "zero",
    num_examples: int = 100,
    copies: int = 1,
    scale: float = 1.0,
    spread: float = 100.0,
    data_seed: int = 0,
):
    """`GradientCanary` (arXiv:2405.14457): crafted gradient at steps k, 2k, ... (k = period)."""
    from advsim._mechanism import CanarySchedule
    from advsim.mechanisms import GradientCanary

    return GradientCanary(
        steps, sampling_prob, noise_multiplier, clip_norm=clip_norm,
        learning_rate=learning_rate, dim=dim, batching=batching, data=data,
        canary_schedule=CanarySchedule.every(period, first=period, sampled=canary_sampled),
        num_examples=num_examples, copies=copies, scale=scale, spread=spread,
        data_seed=data_seed,
    )


def _biased_coordinate(coordinate: int | None = None, seed: int = 0, dim: int | None = None):
    """`BiasedCoordinate(coordinate)`, or Algorithm 2's random one given `dim` and `seed`."""
    from advsim.adversaries import BiasedCoordinate

    if coordinate is None:
        if dim is None:
            raise ValueError("biased-coordinate needs `coordinate`, or `dim` for a random one")
        return BiasedCoordinate.random(dim, seed=seed)
    return BiasedCoordinate(coordinate)


def _random_direction(seed: int = 0, statistic: str = "cosine"):
    from advsim.adversaries import RandomDirection

    return RandomDirection(seed, statistic)


def _simulated_biased_dimension(
    simulation: str = "noiseless", rank: str = "per_step", runs: int = 4, seed: int = 0
):
    from advsim.adversaries import SimulatedBiasedDimension

    return SimulatedBiasedDimension(simulation, rank, runs, seed)


register_mechanism("linear", _linear)
register_mechanism("linear-data", _linear_data)
register_mechanism("landscape", _landscape)
register_adversary("projection", _projection)
register_adversary("llr", _llr)
register_mechanism("gradient-canary", _gradient_canary)
register_adversary("biased-coordinate", _biased_coordinate)
register_adversary("random-direction", _random_direction)
register_adversary("simulated-biased-dimension", _simulated_biased_dimension)
register_adversary("landscape-threshold", _threshold)


def _parameters(build: Callable[..., Any]) -> tuple[list[str], bool]:
    """The parameter names of a builder and whether it takes **kwargs."""
    params = inspect.signature(build).parameters.values()
    names = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


def _required(build: Callable[..., Any]) -> list[str]:
    params = inspect.signature(build).parameters.values()
    return [
        p.name for p in params
        if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


# ------------------------------------------------------------------------------ config

_MODES = ("audit", "bounds")
#: Mechanisms that are the heuristic's tight case, where the default "family" audit's
#: assumption holds; every other mechanism defaults to the assumption-free "eps_delta".
_FAMILY_MECHANISMS = ("linear",)
_AUDIT_DEFAULTS = {
    "trials": 100_000,
    "method": "family",
    "confidence": 0.95,
    "threshold_selection": "split",
}
_COMMON_DEFAULTS = {"delta": 1e-5}
#: Bounds mode only: the PLD grid spacing of the composition bound (default: the
#: library's, 1e-4). 1e-3 is ten times faster and moves epsilon by about 1e-3 at T = 1000.
_BOUNDS_SETTINGS = ("composition_discretization",)
_SETTINGS = (*_COMMON_DEFAULTS, *_AUDIT_DEFAULTS, "replicate", *_BOUNDS_SETTINGS)
_SWEEP_KEYS = (
    "mode", "seed", "name", "chunk_size", *_COMMON_DEFAULTS, *_AUDIT_DEFAULTS,
    *_BOUNDS_SETTINGS,
)
_SCALARS = (bool, int, float, str)


def _check_setting(key: str, value, where: str):
    """Validates one cell setting; returns it (ints stay ints, floats floats)."""
    from advsim._validation import check_delta, check_in_interval, check_int, check_positive
    from advsim.audits import AUDIT_METHODS

    try:
        if key == "delta":
            check_delta(key, value)
        elif key == "trials":
            check_int(key, value, minimum=2, maximum=2**32 - 1)
        elif key == "replicate":
            check_int(key, value, minimum=0)
        elif key == "confidence":
            check_in_interval(key, value, 0.5, 1.0)
        elif key == "target_epsilon":
            check_positive(key, value)
        elif key == "composition_discretization":
            check_in_interval(key, value, 0.0, 0.1, high_closed=True)
        elif key == "method" and value not in AUDIT_METHODS:
            raise ValueError(f"method must be one of {list(AUDIT_METHODS)}, got {value!r}")
        elif key == "threshold_selection" and value not in ("split", "same"):
            raise ValueError(f"threshold_selection must be 'split' or 'same', got {value!r}")
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None
    return value


@dataclasses.dataclass(frozen=True)
class Cell:
    """One configuration of a sweep.

    Attributes:
        index: position in the sweep's cell order (the table's row order).
        cell_id: 16 hex digits of SHA-256 over everything that determines the result
            (mode, mechanism, adversary, parameters, sweep seed); names `cells/<id>.json`.
        params: the cell's parameters: settings, mechanism parameters, `target_epsilon`.
        seed: the cell's seed, derived from the sweep seed and `cell_id`.
    """

    index: int
    cell_id: str
    params: dict
    seed: int


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A validated sweep: what to run in every cell. Build with `parse_config`."""

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

    def to_dict(self) -> dict:
        """The config as a TOML-shaped dict with every default filled in;
        `parse_config(c.to_dict()) == c`."""
        sweep = {"mode": self.mode, "seed": self.seed}
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
        return [k for k in keys if len({_canon(c.params.get(k)) for c in cells}) > 1]

    def cells(self) -> list[Cell]:
        """Every cell, in order: cases in order, each the product of its grid (first key
        slowest)."""
        return list(self._cells)

    @functools.cached_property
    def _cells(self) -> tuple[Cell, ...]:
        out = []
        for sub in (self.cases or ({},)):
            grid = {**self.grid, **sub}
            keys = list(grid)
            for values in itertools.product(*(grid[k] for k in keys)):
                params = {**self.fixed, **dict(zip(keys, values, strict=True))}
                cid = _cell_id(self, params)
                out.append(Cell(len(out), cid, params, _cell_seed(self.seed, cid)))
        return tuple(out)


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _cell_id(config: SweepConfig, params: Mapping) -> str:
    ident = {
        "mode": config.mode,
        "mechanism": config.mechanism,
        "adversary": [config.adversary, config.adversary_kwargs],
        "params": dict(params),
        "seed": config.seed,
    }
    return hashlib.sha256(_canon(ident).encode()).hexdigest()[:16]


def _cell_seed(seed: int, cell_id: str) -> int:
    """A 31-bit seed from the sweep seed and the cell id (independent of other cells)."""
    digest = hashlib.sha256(f"advsim-sweep:{seed}:{cell_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Reads a TOML sweep config (with the standard library's `tomllib`: data, never code).

    Raises:
        ValueError: invalid TOML or config, with the file, key, value and valid range.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    try:
        return parse_config(data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _as_values(key: str, value, where: str) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError(f"{where}.{key} must be a non-empty list of values, got []")
    for v in values:
        if not isinstance(v, _SCALARS):
            raise ValueError(
                f"{where}.{key} values must be numbers, strings or booleans, got {v!r}"
            )
    canon = [_canon(v) for v in values]
    if len(set(canon)) != len(canon):
        raise ValueError(f"{where}.{key} lists a value twice: {values!r}")
    return list(values)


def parse_config(data: Mapping) -> SweepConfig:
    """Validates a sweep config given as a dict (the TOML's tables).

    Every key is checked up front: unknown tables and keys, settings out of range, grid
    values that are not lists of scalars, a key both fixed and swept. Then every cell's
    mechanism is built once (cheaply, without running it), so a bad parameter anywhere in
    the grid fails now, naming the cell, rather than hours into the sweep.

    Raises:
        ValueError: naming the key, the value and the valid range.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a sweep config must be a table, got {type(data).__name__}")
    unknown = set(data) - {"sweep", "mechanism", "adversary", "grid", "cases"}
    if unknown:
        raise ValueError(
            f"unknown table(s) {sorted(unknown)}; valid: sweep, mechanism, adversary, grid, "
            "cases"
        )
    sweep = dict(data.get("sweep", {}))
    bad = set(sweep) - set(_SWEEP_KEYS)
    if bad:
        raise ValueError(f"unknown key(s) {sorted(bad)} in [sweep]; valid: {list(_SWEEP_KEYS)}")
    mode = sweep.pop("mode", "audit")
    if mode not in _MODES:
        raise ValueError(f"sweep.mode must be 'audit' or 'bounds', got {mode!r}")
    seed = sweep.pop("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"sweep.seed must be an integer >= 0, got {seed!r}")
    name = sweep.pop("name", None)
    if name is not None and not isinstance(name, str):
        raise ValueError(f"sweep.name must be a string, got {name!r}")
    chunk_size = sweep.pop("chunk_size", None)
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1
    ):
        raise ValueError(f"sweep.chunk_size must be an integer >= 1, got {chunk_size!r}")

    mech = dict(data.get("mechanism", {}))
    mech_name = mech.pop("name", None)
    if mech_name not in MECHANISMS:
        raise ValueError(
            f"mechanism.name must be one of {sorted(MECHANISMS)}, got {mech_name!r}"
        )
    build = MECHANISMS[mech_name]
    mech_keys, mech_any = _parameters(build)

    adv = dict(data.get("adversary", {}))
    if mode == "bounds":
        if adv:
            raise ValueError("[adversary] has no effect in bounds mode (nothing is simulated)")
        adv_name, adv_kwargs = None, {}
    else:
        adv_name = adv.pop("name", "projection")
        if adv_name not in ADVERSARIES:
            raise ValueError(
                f"adversary.name must be one of {sorted(ADVERSARIES)}, got {adv_name!r}"
            )
        adv_kwargs = adv
        try:
            ADVERSARIES[adv_name](**adv_kwargs)
        except (TypeError, ValueError) as err:
            raise ValueError(f"[adversary] {adv_name!r}: {err}") from None

    allowed = set(_COMMON_DEFAULTS) | {"target_epsilon"} | set(mech_keys)
    if mode == "audit":
        allowed |= set(_AUDIT_DEFAULTS) | {"replicate"}
    else:
        allowed |= set(_BOUNDS_SETTINGS)
    valid_list = sorted(allowed) + (["(any: the builder takes **kwargs)"] if mech_any else [])

    def check_key(key: str, where: str) -> None:
        if key in allowed or (mech_any and key not in _SETTINGS):
            return
        if mode == "bounds" and key in (*_AUDIT_DEFAULTS, "replicate"):
            raise ValueError(f"{where}.{key} has no effect in bounds mode (nothing is simulated)")
        if mode == "audit" and key in _BOUNDS_SETTINGS:
            raise ValueError(
                f"{where}.{key} applies to bounds mode only (an audit reports the bounds of "
                "advsim.bounds.bounds_for)"
            )
        if key == "seed":
            raise ValueError(
                f"{where}.seed cannot vary per cell; sweep `replicate = [0, 1, ...]` for "
                "independent repetitions"
            )
        raise ValueError(f"unknown parameter {where}.{key}; valid: {valid_list}")

    fixed: dict[str, Any] = {}
    for key, value in sweep.items():  # settings given in [sweep]
        check_key(key, "sweep")
        fixed[key] = _check_setting(key, value, f"sweep.{key}")
    for key, value in mech.items():
        check_key(key, "mechanism")
        if key in _SETTINGS:
            raise ValueError(f"mechanism.{key} is a sweep setting: put it in [sweep]")
        if not isinstance(value, _SCALARS):
            raise ValueError(f"mechanism.{key} must be a number, string or boolean, got {value!r}")
        fixed[key] = _check_setting(key, value, f"mechanism.{key}")

    def parse_grid(table, where: str) -> dict:
        if not isinstance(table, Mapping):
            raise ValueError(f"{where} must be a table of parameter = [values], got {table!r}")
        grid = {}
        for key, value in table.items():
            check_key(key, where)
            if key in fixed:
                raise ValueError(
                    f"{where}.{key} is also set as a fixed parameter; give it in one place"
                )
            values = _as_values(key, value, where)
            for i, v in enumerate(values):
                _check_setting(key, v, f"{where}.{key}[{i}]")
            grid[key] = values
        return grid

    grid = parse_grid(data.get("grid", {}), "grid")
    cases_raw = data.get("cases", [])
    if not isinstance(cases_raw, list):
        raise ValueError(f"cases must be an array of tables ([[cases]]), got {cases_raw!r}")
    cases = tuple(parse_grid(c, f"cases[{i}]") for i, c in enumerate(cases_raw))

    defaults = dict(_COMMON_DEFAULTS)
    if mode == "audit":
        defaults |= _AUDIT_DEFAULTS
        if mech_name not in _FAMILY_MECHANISMS:
            # The family audit assumes the heuristic's family, which a counterexample
            # denies: elsewhere the default assumes nothing.
            defaults["method"] = "eps_delta"
    swept = set(grid).union(*cases) if cases else set(grid)
    for key, value in defaults.items():
        if key not in fixed and key not in swept:
            fixed[key] = value
    fixed = dict(sorted(fixed.items()))

    config = SweepConfig(
        mode=mode, seed=seed, mechanism=mech_name, adversary=adv_name,
        adversary_kwargs=adv_kwargs, fixed=fixed, grid=grid, cases=cases,
        chunk_size=chunk_size, name=name,
    )
    cells = config.cells()
    if not cells:
        raise ValueError("the sweep has no cells")
    required = [k for k in _required(build) if k != "noise_multiplier"]
    swept = config.swept
    ids = {}
    for cell in cells:
        missing = [k for k in required if k not in cell.params]
        if "noise_multiplier" not in cell.params and "target_epsilon" not in cell.params:
            missing.append("noise_multiplier (or target_epsilon)")
        if missing:
            raise ValueError(
                f"cell {_describe(cell.params, swept)} has no value for {missing} "
                f"(set it in [mechanism] or [grid])"
            )
        if "noise_multiplier" in cell.params and "target_epsilon" in cell.params:
            raise ValueError(
                f"cell {_describe(cell.params, swept)}: give noise_multiplier or "
                "target_epsilon, not both"
            )
        try:
            _build_mechanism(config, cell.params, noise_multiplier=1.0)
        except (TypeError, ValueError) as err:
            raise ValueError(f"cell {_describe(cell.params, swept)}: {err}") from None
        if cell.cell_id in ids:
            raise ValueError(f"cells {ids[cell.cell_id]} and {cell.index} are the same cell")
        ids[cell.cell_id] = cell.index
    return config


def _describe(params: Mapping, keys: Sequence[str] | None = None) -> str:
    """`{k=v, ...}` over `keys` (the swept parameters, which tell the cells apart), or
    over every parameter when none is given or none is swept."""
    shown = [k for k in (keys or ()) if k in params] or list(params)
    return "{" + ", ".join(f"{k}={params[k]!r}" for k in shown) + "}"


def _build_mechanism(config: SweepConfig, params: Mapping, *, noise_multiplier=None):
    build = MECHANISMS[config.mechanism]
    keys, any_key = _parameters(build)
    kwargs = {k: v for k, v in params.items() if k in keys or (any_key and k not in _SETTINGS)}
    kwargs.pop("target_epsilon", None)
    if noise_multiplier is not None and "noise_multiplier" not in params:
        kwargs["noise_multiplier"] = noise_multiplier
    return build(**kwargs)


# -------------------------------------------------------------------------------- cells


def run_cell(
    config: SweepConfig, cell: Cell, *, progress: bool | None = None
) -> dict:
    """Runs one cell and returns its result (the columns `AUDIT_COLUMNS` or
    `BOUNDS_COLUMNS`).

    Audit mode: `advsim.experiment.run_audit` with the cell's mechanism, adversary and
    settings, `seed=cell.seed` (the chunked, device-sharded `simulate` underneath). Bounds
    mode: `advsim.bounds.bounds_for` of the mechanism's accounting. With `target_epsilon`,
    sigma is first calibrated by `calibrate_noise_multiplier` over the canary's steps.

    Args:
        config: the sweep.
        cell: one of `config.cells()`.
        progress: the simulation's tqdm bar (default: automatic for long cells).
    """
    from advsim import bounds

    start = time.perf_counter()
    p = cell.params
    delta = p["delta"]
    mechanism = _build_mechanism(config, p, noise_multiplier=1.0)
    if "target_epsilon" in p:
        acc = mechanism.accounting()
        sigma = bounds.calibrate_noise_multiplier(
            p["target_epsilon"], delta, acc.steps, acc.sampling_prob,
            canary_steps=acc.num_canary_steps,
        )
        mechanism = _build_mechanism(config, p, noise_multiplier=sigma)
    if config.mode == "bounds":
        acc = mechanism.accounting()
        if "composition_discretization" in p:  # bounds_for with a coarser PLD grid
            args = (delta, acc.steps, acc.sampling_prob, acc.noise_multiplier)
            n = acc.num_canary_steps
            b = {
                "heuristic": bounds.heuristic_epsilon(*args, canary_steps=n),
                "composition": bounds.composition_epsilon(
                    *args, canary_steps=n,
                    value_discretization_interval=p["composition_discretization"],
                ),
                "full_batch": bounds.full_batch_epsilon(*args, canary_steps=n),
            }
        else:
            b = bounds.bounds_for(acc, delta)
        result = {
            "mechanism": type(mechanism).__name__,
            "steps": acc.steps,
            "sampling_prob": acc.sampling_prob,
            "noise_multiplier": acc.noise_multiplier,
            "num_canary_steps": acc.num_canary_steps,
            "delta": delta,
            **{k: float(b[k]) for k in ("heuristic", "composition", "full_batch")},
        }
    else:
        from advsim.experiment import run_audit

        adversary = ADVERSARIES[config.adversary](**config.adversary_kwargs)
        record = run_audit(
            mechanism, adversary, trials=p["trials"], seed=cell.seed, method=p["method"],
            delta=delta, confidence=p["confidence"],
            threshold_selection=p["threshold_selection"], chunk_size=config.chunk_size,
            progress=progress,
        ).to_dict()
        result = {k: record[k] for k in AUDIT_COLUMNS if k != "wall_time_s"}
    result["wall_time_s"] = time.perf_counter() - start
    return result


def _run_cell_remote(config: SweepConfig, cell: Cell, builders: tuple) -> dict:
    """What a Ray worker runs. Registries are per process, so the driver ships the two
    builders the config names (cloudpickled: a mechanism registered in a notebook works)."""
    (mech_name, mech_build), (adv_name, adv_build) = builders
    MECHANISMS[mech_name] = mech_build
    if adv_name is not None:
        ADVERSARIES[adv_name] = adv_build
    return run_cell(config, cell, progress=False)


# ----------------------------------------------------------------------------- files


def _encode(value):
    """JSON-safe copy: non-finite floats become the strings 'inf', '-inf', 'nan'."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _encode(value.item())
    return value


def _decode_result(result: Mapping) -> dict:
    return {
        k: float(v) if isinstance(v, str) and v in ("inf", "-inf", "nan") else v
        for k, v in result.items()
    }


def _checksum(payload: Mapping) -> str:
    return hashlib.sha256(_canon(payload).encode()).hexdigest()


def _cell_payload(cell: Cell, result: Mapping) -> dict:
    return {
        "format": CELL_FORMAT,
        "cell_id": cell.cell_id,
        "params": _encode(cell.params),
        "seed": cell.seed,
        "result": _encode(result),
    }


def _write_cell(cells_dir: Path, cell: Cell, result: Mapping) -> dict:
    """Writes `cells/<id>.json` atomically with its checksum; returns the stored result."""
    from advsim._io import atomic_path

    payload = _cell_payload(cell, result)
    text = json.dumps({**payload, "sha256": _checksum(payload)}, indent=1) + "\n"
    path = cells_dir / f"{cell.cell_id}.json"
    with atomic_path(path) as tmp:
        with tmp.open("w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    # The table is built from what the file holds, so a resumed sweep and an uninterrupted
    # one read exactly the same numbers.
    return _decode_result(json.loads(text)["result"])


def _read_cell(path: Path, cell: Cell | None, keys: Sequence[str] = ()) -> dict:
    """Reads and verifies one cell file; raises SweepError naming the file if it is damaged,
    truncated, or belongs to another cell."""
    hint = "delete it to recompute that cell"
    try:
        text = path.read_text()
    except OSError as err:
        raise SweepError(f"cannot read cell file {path}: {err}; {hint}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SweepError(
            f"cell file {path} is corrupted or partially written (not valid JSON: {err}); "
            f"{hint}"
        ) from None
    if not isinstance(data, dict) or data.get("format") != CELL_FORMAT or "sha256" not in data:
        raise SweepError(
            f"cell file {path} is not an advsim sweep cell ({CELL_FORMAT} with a checksum); "
            f"{hint}"
        )
    stored = data.pop("sha256")
    if _checksum(data) != stored:
        raise SweepError(
            f"cell file {path} is corrupted: its checksum does not match its content; {hint}"
        )
    if cell is not None and (
        data.get("cell_id") != cell.cell_id
        or data.get("params") != _encode(cell.params)
        or data.get("seed") != cell.seed
    ):
        raise SweepError(
            f"cell file {path} holds a different cell than {_describe(cell.params, keys)}; "
            f"{hint}"
        )
    if not isinstance(data.get("result"), dict):
        raise SweepError(f"cell file {path} has no result; {hint}")
    return _decode_result(data["result"])


def _table_rows(config: SweepConfig, cells: Sequence[Cell], results: Mapping) -> list[dict]:
    rows = []
    for cell in cells:
        if cell.cell_id not in results:
            continue
        row = {"cell": cell.index, "cell_id": cell.cell_id}
        row.update(cell.params)
        for key, value in results[cell.cell_id].items():
            row.setdefault(key, value)  # a parameter keeps the value the config gave
        rows.append(row)
    return rows


def _columns(config: SweepConfig, rows: Sequence[Mapping]) -> list[str]:
    swept = config.swept
    first = ["cell", "cell_id", *swept]
    result_cols = AUDIT_COLUMNS if config.mode == "audit" else BOUNDS_COLUMNS
    cols = list(first)
    for row in rows:
        for key in row:
            if key not in cols and key not in result_cols:
                cols.append(key)
    cols += [k for k in result_cols if k not in cols]
    return cols


def _write_table(out: Path, config: SweepConfig, rows: list[dict]) -> None:
    from advsim._io import write_csv, write_json

    columns = _columns(config, rows)
    write_csv(out / TABLE_CSV, rows, columns)
    write_json(out / TABLE_JSON, {"columns": columns, "rows": rows})


def load_results(out: str | os.PathLike, *, partial: bool = False) -> tuple[SweepConfig, list]:
    """The config and the table of a sweep folder, rebuilt from its verified cell files.

    Args:
        out: the sweep folder.
        partial: allow unfinished sweeps (only the finished cells' rows).

    Returns:
        `(config, rows)`, rows in cell order.

    Raises:
        SweepError: no run.json, a damaged cell file (named), or missing cells without
            `partial`.
    """
    out = Path(out)
    config = _load_run_config(out)
    cells_dir = out / CELLS_DIR
    results = {}
    for cell in config.cells():
        path = cells_dir / f"{cell.cell_id}.json"
        if path.exists():
            results[cell.cell_id] = _read_cell(path, cell, config.swept)
    n = len(config.cells())
    if len(results) < n and not partial:
        raise SweepError(
            f"{out} has {len(results)} of {n} cells finished; resume it "
            f"(advsim sweep CONFIG --out {out} --resume) or pass partial=True"
        )
    return config, _table_rows(config, config.cells(), results)


def _load_run_config(out: Path) -> SweepConfig:
    path = out / RUN_FILE
    if not path.exists():
        raise SweepError(f"{out} is not a sweep folder: it has no {RUN_FILE}")
    try:
        meta = json.loads(path.read_text())
        return parse_config(meta["config"])
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise SweepError(f"{path} is corrupted or not an advsim sweep record: {err}") from None
    except ValueError as err:
        raise SweepError(f"{path} holds a config that is not valid here: {err}") from None


# ------------------------------------------------------------------------------ runner


def _config_diff(a: Mapping, b: Mapping, prefix: str = "") -> list[str]:
    keys = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            keys += _config_diff(va, vb, f"{prefix}{k}.")
        elif _canon(va) != _canon(vb):
            keys.append(f"{prefix}{k}")
    return keys


def _session(executor: str, done_before: int) -> dict:
    from advsim._io import provenance

    prov = provenance()
    prov.pop("config")
    return {"executor": executor, "cells_done_at_start": done_before, **prov}


def run_sweep(
    config: SweepConfig | Mapping | str | os.PathLike,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = True,
    executor: str = "local",
    ray_address: str | None = None,
) -> list[dict]:
    """Runs every cell of a sweep into `out`, skipping the finished ones on resume.

    Each finished cell is written at once as `out/cells/<id>.json` (atomically, with a
    checksum); the table `results.csv`/`results.json` is rebuilt from the cell files at
    the end (and every 10 s on the way). A sweep killed at any moment loses at most the
    cells in flight; `resume=True` verifies every finished cell file (a damaged one is
    reported by name, never used), runs the rest, and produces the same table as an
    uninterrupted run: each cell's seed depends only on the sweep seed and its parameters.

    Args:
        config: a `SweepConfig`, a dict, or the path of a TOML file.
        out: the output folder (created).
        resume: continue a sweep in `out` (its run.json must hold the same config, up to
            `chunk_size` and `name`). Without it, a folder that already has finished
            cells is refused rather than overwritten.
        progress: tqdm bars: cells (with the time left) and, for long cells, the
            simulation's runs.
        executor: "local" (cells one after another, each sharded over every local device)
            or "ray" (cells as Ray tasks; needs `pip install advsim[ray]`; this process
            writes the files, so the workers need no shared file system).
        ray_address: for "ray": the cluster to join (`ray.init(address=...)`, e.g. "auto");
            default: an already initialised Ray, else a local instance.

    Returns:
        The table's rows, in cell order.

    Raises:
        ValueError: an invalid config.
        SweepError: a folder that holds another sweep, or a damaged cell file.
    """
    from tqdm.auto import tqdm

    from advsim._io import provenance, write_json

    if isinstance(config, str | os.PathLike):
        config = load_config(config)
    elif not isinstance(config, SweepConfig):
        config = parse_config(config)
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
    out = Path(out)
    cells_dir = out / CELLS_DIR
    run_path = out / RUN_FILE
    cells = config.cells()

    if run_path.exists():
        old = _load_run_config(out)
        if not resume:
            raise SweepError(
                f"{out} already holds a sweep ({run_path}); pass --resume (resume=True) to "
                "continue it, or choose a new --out folder"
            )
        if old.identity() != config.identity():
            diff = _config_diff(old.identity(), config.identity())
            raise SweepError(
                f"{out} was started with a different config (differs in {diff}); resume it "
                "with the config in its run.json, or choose a new --out folder"
            )
        meta = json.loads(run_path.read_text())
    elif cells_dir.exists() and any(cells_dir.glob("*.json")):
        raise SweepError(f"{cells_dir} holds cell files but {out} has no {RUN_FILE}; refusing")
    else:
        meta = provenance(config.to_dict())
        meta["sessions"] = []
    cells_dir.mkdir(parents=True, exist_ok=True)

    # Leftovers of writes killed mid-way: by construction incomplete, never read.
    for tmp in cells_dir.glob(".*.tmp"):
        tmp.unlink()
    expected = {c.cell_id: c for c in cells}
    results: dict[str, dict] = {}
    for path in sorted(cells_dir.glob("*.json")):
        cell = expected.get(path.stem)
        if cell is None:
            raise SweepError(
                f"cell file {path} is not a cell of this sweep's config; move it away"
            )
        results[cell.cell_id] = _read_cell(path, cell, config.swept)

    pending = [c for c in cells if c.cell_id not in results]
    meta["sessions"].append(_session(executor, len(results)))
    meta["cells"] = len(cells)
    meta["complete"] = False
    write_json(run_path, meta)

    bar = tqdm(
        total=len(cells), initial=len(results), unit="cell", desc="sweep",
        disable=not progress, dynamic_ncols=True,
    )
    last_table = time.monotonic()

    def finished(cell: Cell, result: dict) -> None:
        nonlocal last_table
        results[cell.cell_id] = _write_cell(cells_dir, cell, result)
        bar.update(1)
        if time.monotonic() - last_table > 10.0:
            _write_table(out, config, _table_rows(config, cells, results))
            last_table = time.monotonic()

    with bar:
        if executor == "local":
            for cell in pending:
                bar.set_postfix_str(_short(config, cell), refresh=True)
                try:
                    result = run_cell(config, cell, progress=None if progress else False)
                except Exception as err:
                    raise SweepError(
                        f"cell {cell.cell_id} {_describe(cell.params, config.swept)} failed: "
                        f"{err}; the {len(results)} finished cells are kept in {cells_dir}"
                    ) from err
                finished(cell, result)
        elif pending:
            _run_ray(config, pending, finished, ray_address)

    rows = _table_rows(config, cells, results)
    _write_table(out, config, rows)
    meta["complete"] = True
    meta["sessions"][-1]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json(run_path, meta)
    return rows


def _short(config: SweepConfig, cell: Cell) -> str:
    return ", ".join(f"{k}={cell.params[k]}" for k in config.swept if k in cell.params)


def _run_ray(config: SweepConfig, pending: Sequence[Cell], finished, address) -> None:
    try:
        import ray
    except ImportError:
        raise SweepError(
            "executor='ray' needs Ray: pip install 'advsim[ray]'"
        ) from None
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(_run_cell_remote)
    builders = (
        (config.mechanism, MECHANISMS[config.mechanism]),
        (config.adversary, ADVERSARIES.get(config.adversary)),
    )
    shared = ray.put(config), ray.put(builders)
    refs = {remote.remote(shared[0], cell, shared[1]): cell for cell in pending}
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        cell = refs.pop(done[0])
        try:
            result = ray.get(done[0])
        except Exception as err:
            for ref in refs:
                ray.cancel(ref)
            raise SweepError(
                f"cell {cell.cell_id} {_describe(cell.params, config.swept)} failed on Ray: {err}"
            ) from err
        finished(cell, result)


# ------------------------------------------------------------------------------- plots


def _group(rows: Sequence[Mapping], keys: Sequence[str]) -> list[tuple[tuple, list]]:
    groups: dict[str, tuple[tuple, list]] = {}
    for r in rows:
        values = tuple(r.get(k) for k in keys)
        groups.setdefault(_canon(values), (values, []))[1].append(r)
    return list(groups.values())


def _fmt_value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _short_key(key: str) -> str:
    """A parameter's short name in file names."""
    return {"steps": "T", "sampling_prob": "q", "noise_multiplier": "sigma",
            "target_epsilon": "eps_target"}.get(key, key)


def _title(pairs: Sequence[tuple[str, Any]]) -> str:
    from advsim.plotting import _short, _tex_number

    def value(v):
        return f"${_tex_number(v)}$" if isinstance(v, float) else str(v)

    return ", ".join(f"{_short(k)} = {value(v)}" for k, v in pairs)


def plot_sweep(out: str | os.PathLike) -> list[Path]:
    """Draws the usual figures of a sweep folder into `out/figures/` (PNG and PDF).

    - eps-vs-T curves (or against the one swept parameter), the three bounds as reference
      lines and the empirical epsilon as markers, one panel per value of the other swept
      parameters;
    - with two or more swept parameters and no `cases` (a full grid), heatmaps over the
      first two (T on the horizontal axis when it is one of them; one file per value of
      the others) of every epsilon column, and ratio heatmaps: heuristic / composition,
      in audit mode eps_lower / heuristic, and when T is swept eps(T) / eps(T_min) of the
      heuristic (and of eps_point in audit mode).

    Works on unfinished sweeps too (the finished cells). Returns the written paths.
    """
    from advsim.plotting import (
        plot_eps_vs_steps_panels,
        plot_heatmap,
        plot_ratio_heatmap,
    )

    out = Path(out)
    config, rows = load_results(out, partial=True)
    if not rows:
        raise SweepError(f"{out} has no finished cells to plot")
    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    swept = config.swept
    audit = config.mode == "audit"
    values = ["eps_lower", "eps_point"] if audit else []
    values += ["heuristic", "composition", "full_batch"]
    mech_keys, _ = _parameters(MECHANISMS[config.mechanism])
    fixed = [(k, v) for k, v in config.fixed.items()
             if k not in swept and (k in mech_keys or k in ("target_epsilon", "delta"))]
    if audit and "trials" not in swept:
        fixed.append(("runs/world", config.fixed["trials"]))
    if audit and "method" not in swept:  # what the eps_lower cells certify comes from it
        fixed.append(("audit", f"{config.fixed['method']} ({config.fixed['confidence']:g})"))
    base_title = ", ".join([config.mechanism, _title(fixed)] if fixed else [config.mechanism])
    paths: list[Path] = []

    curve_x = "steps" if "steps" in swept else (swept[0] if len(swept) == 1 else None)
    if curve_x is not None:
        others = [k for k in swept if k != curve_x]
        groups = _group(rows, others)
        per_fig = 12
        for start in range(0, len(groups), per_fig):
            chunk = groups[start : start + per_fig]
            panels = [(_title(list(zip(others, key, strict=True))) or base_title, grp)
                      for key, grp in chunk]
            suffix = f"_{start // per_fig + 1}" if len(groups) > per_fig else ""
            paths += plot_eps_vs_steps_panels(
                panels, figdir / f"eps_vs_{curve_x}{suffix}", x=curve_x,
                suptitle=base_title if others else None,
            )

    if len(swept) >= 2 and not config.cases:  # cases need not fill a rectangle
        y, x = swept[0], swept[1]
        if y == "steps":
            x, y = y, x
        facets = [k for k in swept if k not in (x, y)]
        for key, frows in _group(rows, facets):
            pairs = list(zip(facets, key, strict=True))
            suffix = "".join(f"_{_short_key(k)}{_fmt_value(v)}" for k, v in pairs)
            title = ", ".join(t for t in (base_title, _title(pairs)) if t)
            for col in values:
                if any(isinstance(r.get(col), int | float) for r in frows):
                    paths += plot_heatmap(frows, x, y, col, figdir / f"heatmap_{col}{suffix}",
                                          title=title)
            ratios = [("heuristic", "composition")]
            if audit:
                ratios.append(("eps_lower", "heuristic"))
            for num, den in ratios:
                paths += plot_ratio_heatmap(
                    frows, x, y, num, figdir / f"ratio_{num}_over_{den}{suffix}",
                    denominator=den, title=title,
                )
            if "steps" in (x, y):
                t0 = min(r["steps"] for r in frows)
                for num in ["heuristic"] + (["eps_point"] if audit else []):
                    paths += plot_ratio_heatmap(
                        frows, x, y, num, figdir / f"ratio_{num}_over_T{t0}{suffix}",
                        baseline={"steps": t0}, title=title,
                    )
    return paths

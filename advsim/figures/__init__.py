"""Figures as data: each seed figure is a small TOML file run by `advsim figure NAME`.

A figure file (`advsim/figures/defs/<name>.toml`, shipped with the package) holds

```toml
[figure]
title = "Figure 14 of arXiv:2405.14457: ..."   # one line, shown by `advsim figure --list`
plot = "advsim.figures._plots_landscape:plot_figure14"   # draws it (none: tables only)
compute = "module:function"   # optional: derived columns and tables (exact laws, ratios)

[params]                      # free-form numbers the hooks read (e.g. delta, fine grids)

[sweeps.sweep]                # one or more sweep configs (`advsim.sweep`), each run into
[sweeps.sweep.sweep]          # OUT/<key>/ by `advsim.sweep.run_sweep` (resumable), each
mode = "audit"                # merged over the optional [sweep_defaults] (tables they share)
...

[tables.figure14]             # OUT/figure14.csv/.json: `source` (a sweep key or a table
source = "sweep"              # the compute hook returned) projected onto `columns` (all
columns = ["noise_multiplier", "eps_lower"]   # by default), printed unless print = false

[quick]                       # merged over the file (tables recursively, lists replaced)
sweeps.sweep.grid.steps = [1, 5, 25]
```

The hooks take the `Figure` (name, quick and resume flags, params, sweeps, output folder)
and the finished sweeps' rows, `{key: rows}`: `compute(figure, rows) -> {name: rows}`
(it may also add derived columns to the sweeps' rows), `plot(figure, rows, tables) ->
[paths]`. Plot functions live in `advsim.figures._plots_<family>` and share the style of
`advsim.plotting`.

**Every epsilon carries its label.** Every epsilon-valued column of a table has its
label beside it: an audit's epsilon (a name containing `eps_lower`, `eps_point`,
`eps_held_out`, `eps_gdp`, `eps_family` or `eps_delta_lower`) its guarantee (`guarantee`,
or one named after the column: `h_star_guarantee`, `guarantee_t25`, `eps_gdp_guarantee`)
and, where the guarantee starts with "assumes", the verdict of the assumption's check
(`assumption_rejected` or named alike); a point estimate (`eps_point`, `eps_held_out`,
`*_point*`) a label of its own saying it is an estimate, not a bound
(`eps_point_guarantee`), and beside composition the flag of an estimate above it
(`<column>_above_composition`, printed as `!`); an `eps_lower` beside the exact epsilon
of its row, the flag `<column>_above_exact` with its note (allowed at the audit's
confidence); an exact epsilon its error and the kind of that error (`exact_error`,
`exact_error_kind`, or `<column>_error`, `<column>_error_kind`); a bound (`heuristic`,
`heuristic_max`, `composition`, `full_batch`, `shifted_interpolation`) what it assumes
(`<column>_assumes`: the bound's kind, assumptions and reference, as
`advsim.bounds.LastIterateHeuristic` and the others state them). A column whose values
are all flags or words (a boolean `claimed`) holds no epsilon, whatever its name.
`run_figure` inserts the labels that follow from a column's name and row (point
estimates, bounds, the flag above the exact epsilon) beside their columns;
`label_problems` states what a table still lacks, and `run_figure` refuses to finish a
figure whose tables lack a label (after writing them). A table whose exact columns have
no error estimate yet says why in its `exact_error_missing` (a string); only their error
and kind are then not required.

Example:
    >>> from advsim.figures import list_figures
    >>> "figure1" in list_figures()
    True
"""

from __future__ import annotations

import copy
import importlib
import inspect
import os
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from advsim._io import provenance, write_csv, write_json
from advsim._labels import add_labels, label_problems
from advsim.sweep import run_sweep

__all__ = [
    "Figure",
    "CLOSED_FORM",
    "add_labels",
    "PLD_REFINEMENT",
    "TRAPEZOID_REFINEMENT",
    "exact_epsilon",
    "exact_with_error",
    "label_problems",
    "list_figures",
    "load_figure",
    "pld_exact",
    "trapezoid_exact",
    "print_table",
    "run_figure",
]


@dataclass(frozen=True)
class Figure:
    """One figure file, with its `[quick]` table merged in when `quick`."""

    name: str
    title: str
    plot: str | None
    compute: str | None
    params: dict
    sweeps: dict
    tables: dict
    quick: bool = False
    out: Path = field(default=Path("."))
    resume: bool = False


def _defs():
    return resources.files("advsim.figures").joinpath("defs")


def _names() -> list[str]:
    return sorted(p.name[:-5] for p in _defs().iterdir() if p.name.endswith(".toml"))


def list_figures() -> dict[str, str]:
    """`{name: title}` of every figure file, sorted by name."""
    return {name: load_figure(name).title for name in _names()}


def _merge(base: dict, over: Mapping) -> dict:
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def load_figure(
    name: str, *, quick: bool = False, out: str | os.PathLike = ".", resume: bool = False
) -> Figure:
    """Reads `defs/<name>.toml`; with `quick`, its `[quick]` table merged over it.

    Raises:
        ValueError: no figure has this name, or the file lacks a `[figure]` title.
    """
    path = _defs().joinpath(f"{name}.toml")
    if not path.is_file():
        raise ValueError(f"no figure named {name!r}; the figures: {', '.join(_names())}")
    data = tomllib.loads(path.read_text())
    quick_table = data.pop("quick", {})
    if quick:
        _merge(data, quick_table)
    head = data.get("figure", {})
    if not isinstance(head.get("title"), str) or not isinstance(head.get("plot", ""), str):
        raise ValueError(f"figure {name!r}: [figure] needs a string title (and plot, if any)")
    return Figure(
        name=name, title=head["title"], plot=head.get("plot"), compute=head.get("compute"),
        params=data.get("params", {}), sweeps={
            key: _merge(copy.deepcopy(data.get("sweep_defaults", {})), sweep)
            for key, sweep in data.get("sweeps", {}).items()
        },
        tables=data.get("tables", {}), quick=quick, out=Path(out), resume=resume,
    )


def _function(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def exact_epsilon(spec: Mapping, mechanism, delta: float, grid: float | None = None) -> float:
    """The exact epsilon of a table row's construction (the compute hooks' `exact` columns).

    `mechanism.exact_epsilon(delta)`; or, with `grid` (a quick mode's coarser PLD grid,
    `params.exact_discretization`) and a row that names the function behind that method
    (`exact = "module:function"`), `function(delta, **spec["params"],
    value_discretization_interval=grid)`: the same law on a coarser grid (1e-3 is about 8x
    faster than the default 1e-4).
    """
    if grid is None or "exact" not in spec:
        return float(mechanism.exact_epsilon(delta))
    function = _function(spec["exact"])
    return float(function(delta, **spec["params"], value_discretization_interval=grid))


CLOSED_FORM = "closed form (float64 rounding only)"
"""The kind of an exact epsilon's error where it is a closed form or an exact sum (error
0: no grid, no truncation beyond float64)."""
PLD_REFINEMENT = "refinement estimate (PLD grid h against 2h)"
"""The kind of an exact epsilon's error where it is computed on a PLD grid of interval h:
the change from the grid of interval 2h (an estimate of the discretisation error, not a
bound; as the exact engine's `refinement estimate`)."""


TRAPEZOID_REFINEMENT = "refinement estimate (trapezoid rule on n points against (n + 1) / 2)"
"""The kind of an exact epsilon's error where it is a trapezoid-rule integral on a uniform
grid of n points: the change from the grid twice as coarse (an estimate, not a bound; the
rule is second order, so the change overstates the n-point value's error: 1.3 and 4.4
times it for `two_step_epsilon` at two thresholds, against adaptive quadrature)."""


def trapezoid_exact(function, *args, points: int, **kwargs) -> tuple:
    """`function(*args, points=points, **kwargs)` (a number or an array) and its error, the
    change from `points = (points + 1) // 2` (`TRAPEZOID_REFINEMENT`): `(value, error)`."""
    fine = np.asarray(function(*args, points=points, **kwargs), np.float64)
    coarse = np.asarray(function(*args, points=(points + 1) // 2, **kwargs), np.float64)
    return fine, np.abs(fine - coarse)


def pld_exact(function, delta: float, *args, interval: float | None = None, **kwargs) -> dict:
    """An exact epsilon on a PLD grid with its error: `function(delta, *args, **kwargs,
    value_discretization_interval=h)` (h = `interval`, or the function's default) as
    `exact`, and `exact_error` = its change from the grid 2h (`PLD_REFINEMENT`)."""
    if interval is None:
        interval = inspect.signature(function).parameters["value_discretization_interval"].default
    fine = float(function(delta, *args, **kwargs, value_discretization_interval=interval))
    coarse = float(function(delta, *args, **kwargs, value_discretization_interval=2 * interval))
    return {"exact": fine, "exact_error": abs(fine - coarse), "exact_error_kind": PLD_REFINEMENT}


def exact_with_error(spec: Mapping, mechanism, delta: float, grid: float | None = None) -> dict:
    """`exact_epsilon` with its error: `exact`, `exact_error`, `exact_error_kind`.

    A row that names the PLD function behind its mechanism's `exact_epsilon` (`exact =
    "module:function"`) gets the value `exact_epsilon` gives and its change from the PLD
    grid twice as coarse (`PLD_REFINEMENT`); any other row's mechanism has a closed form
    (`CLOSED_FORM`, error 0: the heuristic's Binomial-Gaussian mixture of one step, the
    quadratic regularizer's exact law).
    """
    value = exact_epsilon(spec, mechanism, delta, grid)
    if "exact" not in spec:
        return {"exact": value, "exact_error": 0.0, "exact_error_kind": CLOSED_FORM}
    function = _function(spec["exact"])
    h = grid or inspect.signature(function).parameters["value_discretization_interval"].default
    coarse = float(function(delta, **spec["params"], value_discretization_interval=2 * h))
    return {"exact": value, "exact_error": abs(value - coarse), "exact_error_kind": PLD_REFINEMENT}


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}" if value == 0 or 1e-2 <= abs(value) < 1e5 else f"{value:.3g}"
    return str(value)


def _above(row: Mapping, column: str) -> bool:
    return str(row.get(f"{column}_above_composition")).lower() == "true"


def _above_exact(row: Mapping, column: str) -> bool:
    return str(row.get(f"{column}_above_exact")).lower() == "true"


def print_table(name: str, rows: Sequence[Mapping], columns: Sequence[str]) -> None:
    """Prints `rows` as an aligned text table, floats to three decimals; an estimate whose
    `<column>_above_composition` flag is true gets a `!` (as `advsim audit` prints it), a
    lower bound whose `<column>_above_exact` flag is true a `*`, each explained under the
    table."""
    cells = [
        [_fmt(r.get(c)) + ("!" if _above(r, c) else "") + ("*" if _above_exact(r, c) else "")
         for c in columns]
        for r in rows
    ]  # fmt: skip
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print(f"\n{name}")
    for row in ([*columns], *cells):
        print(" ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    if any(_above(r, c) for r in rows for c in columns):
        print(
            "! the estimate lies above the composition bound: outside the possible range "
            "(too few runs for the rates it reads)"
        )
    if any(_above_exact(r, c) for r in rows for c in columns):
        print(
            "* the lower bound lies above the exact epsilon: allowed at the audit's "
            "confidence c (in up to 1 - c of seeds)"
        )


def run_figure(
    name: str,
    *,
    quick: bool = False,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
) -> list[Path]:
    """Runs the figure's sweeps into `out/<key>/`, writes its tables, draws it.

    Args:
        name: a figure file's name (`list_figures()`).
        quick: merge the file's `[quick]` table (a coarse grid, few runs: about a minute).
        out: output folder (default `advsim-results/<name>[-quick]`).
        resume: continue sweeps already started in `out` (`advsim.sweep.run_sweep`).
        progress: progress bars.

    Returns:
        The paths written: the tables (`.csv`; `.json` with provenance: the figure, its
        params, package versions, devices, git commit) and the figure files.
    """
    out = Path(out or f"advsim-results/{name}" + ("-quick" if quick else ""))
    fig = load_figure(name, quick=quick, out=out, resume=resume)
    start = time.perf_counter()
    rows = {
        key: run_sweep(config, out / key, resume=resume, progress=progress)
        for key, config in fig.sweeps.items()
    }
    tables = _function(fig.compute)(fig, rows) if fig.compute else {}
    paths, meta = [], provenance({"figure": name, "quick": quick, "params": fig.params})
    unlabelled = []
    for table_name, spec in fig.tables.items():
        source = rows[spec["source"]] if spec["source"] in rows else tables[spec["source"]]
        source = [dict(r) for r in source]
        columns = add_labels(spec.get("columns") or list(source[0]), source)
        table = [{c: r.get(c) for c in columns} for r in source]
        exact = not spec.get("exact_error_missing")
        unlabelled += [f"{table_name}: {p}" for p in label_problems(columns, table, exact=exact)]
        write_csv(out / f"{table_name}.csv", table, columns)
        write_json(out / f"{table_name}.json",
                   {"columns": columns, "rows": table, "provenance": meta})
        paths += [out / f"{table_name}.csv", out / f"{table_name}.json"]
        if spec.get("print", True):
            print_table(table_name, table, columns)
    if fig.plot:
        paths += _function(fig.plot)(fig, rows, tables)
    print("wrote", ", ".join(map(str, paths)), f"({time.perf_counter() - start:.0f} s)")
    if unlabelled:
        raise ValueError(
            f"figure {name!r} wrote epsilons without their labels:\n" + "\n".join(unlabelled)
        )
    return paths

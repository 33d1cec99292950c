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

**Every epsilon carries its label.** A table column holding an audit's epsilon (a name
containing `eps_lower`, `eps_point`, `eps_held_out`, `eps_gdp`, `eps_family` or
`eps_delta_lower`, e.g. `h_star_eps_lower`, `eps_lower_t25`) needs beside it the
guarantee label of that number (`guarantee`, or one named after the column, e.g.
`h_star_guarantee`, `guarantee_t25`, `eps_gdp_guarantee`); where a label says the number
rests on an assumption, the verdict of the assumption's check (`assumption_rejected` or
named alike, e.g. `gdp_assumption_rejected`); and a point estimate (`eps_point`,
`eps_held_out`, `*_point*`) in a table with a composition column (`composition`,
`eps_composition`), the flag of an estimate above composition
(`<column>_above_composition`, what `advsim audit` and `print_table` print as `!`).
`label_problems` states the rule; `run_figure` refuses to finish a figure whose tables
break it (after writing them).

Example:
    >>> from advsim.figures import list_figures
    >>> "figure1" in list_figures()
    True
"""

from __future__ import annotations

import copy
import importlib
import os
import re
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from advsim._io import provenance, write_csv, write_json
from advsim.sweep import run_sweep

__all__ = [
    "Figure",
    "exact_epsilon",
    "label_problems",
    "list_figures",
    "load_figure",
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


_ESTIMATE = re.compile(
    r"^(?P<pre>.*?)(?P<kind>eps_(?:lower|point|held_out|gdp|family|delta_lower))(?P<post>.*)$"
)
#: Columns that qualify an estimate rather than hold one.
_LABEL_SUFFIXES = ("_note", "_above_composition", "_guarantee", "_assumption_rejected")


def _named_after(column: str, what: str) -> list[str]:
    """The names a `what` column ("guarantee", "assumption_rejected") of `column` may
    have: `what` itself, or named after the column (module docstring)."""
    m = _ESTIMATE.match(column)
    pre, kind, post = m["pre"], m["kind"], m["post"]
    names = [what, f"{pre}{what}{post}", f"{column}_{what}", f"{pre}{kind}_{what}"]
    if what == "assumption_rejected":  # eps_gdp -> gdp_assumption_rejected
        names.append(f"{kind.removeprefix('eps_')}_{what}")
    return list(dict.fromkeys(names))


def label_problems(columns: Sequence[str], rows: Sequence[Mapping] = ()) -> list[str]:
    """What a table with these columns (and rows, when given) lacks to label its epsilons.

    Args:
        columns: the table's column names.
        rows: its rows; with them, a guarantee label that starts with "assumes" requires
            the verdict column too (without them, only the column names are checked).

    Returns:
        One sentence per missing column (empty when the table is labelled; the rule is
        in the module docstring).

    Example:
        >>> label_problems(["steps", "eps_lower", "guarantee"])
        []
        >>> label_problems(["steps", "h_star_eps_lower"])[0][:50]
        'h_star_eps_lower has no guarantee label beside it '
    """
    present, problems = set(columns), []
    composition = bool(present & {"composition", "eps_composition"})
    for column in columns:
        m = _ESTIMATE.match(column)
        if m is None or column.endswith(_LABEL_SUFFIXES):
            continue
        names = _named_after(column, "guarantee")
        found = [n for n in names if n in present]
        if not found:
            problems.append(
                f"{column} has no guarantee label beside it (a column named one of "
                f"{', '.join(names)})"
            )
        elif any(str(r.get(found[0], "")).startswith("assumes") for r in rows):
            verdicts = _named_after(column, "assumption_rejected")
            if not present & set(verdicts):
                problems.append(
                    f"{column} rests on an assumption ({found[0]}) but has no verdict of "
                    f"its check beside it (a column named one of {', '.join(verdicts)})"
                )
        point = m["kind"] in ("eps_point", "eps_held_out") or "point" in m["post"]
        if point and composition and f"{column}_above_composition" not in present:
            problems.append(
                f"{column} is a point estimate in a table with a composition column but "
                f"has no {column}_above_composition flag beside it"
            )
    return problems


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}" if value == 0 or 1e-2 <= abs(value) < 1e5 else f"{value:.3g}"
    return str(value)


def _above(row: Mapping, column: str) -> bool:
    return str(row.get(f"{column}_above_composition")).lower() == "true"


def print_table(name: str, rows: Sequence[Mapping], columns: Sequence[str]) -> None:
    """Prints `rows` as an aligned text table, floats to three decimals; an estimate whose
    `<column>_above_composition` flag is true gets a `!` (as `advsim audit` prints it),
    explained under the table."""
    cells = [[_fmt(r.get(c)) + ("!" if _above(r, c) else "") for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print(f"\n{name}")
    for row in ([*columns], *cells):
        print(" ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    if any(_above(r, c) for r in rows for c in columns):
        print(
            "! the estimate lies above the composition bound: outside the possible range "
            "(too few runs for the rates it reads)"
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
        columns = spec.get("columns") or list(source[0])
        table = [{c: r.get(c) for c in columns} for r in source]
        unlabelled += [f"{table_name}: {p}" for p in label_problems(columns, table)]
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

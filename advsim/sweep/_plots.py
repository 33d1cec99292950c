"""The usual figures of a sweep folder (curves and heatmaps), drawn with `advsim.plotting`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from advsim._plot_style import symbol, tex_number
from advsim.plotting import (
    plot_eps_vs_steps_panels,
    plot_heatmap,
    plot_ratio_heatmap,
)
from advsim.sweep._config import SweepError, canon
from advsim.sweep._store import load_results

__all__ = ["plot_sweep"]


def _group(rows: Sequence[Mapping], keys: Sequence[str]) -> list[tuple[tuple, list]]:
    groups: dict[str, tuple[tuple, list]] = {}
    for r in rows:
        values = tuple(r.get(k) for k in keys)
        groups.setdefault(canon(values), (values, []))[1].append(r)
    return list(groups.values())


def _fmt_value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _short_key(key: str) -> str:
    """A parameter's short name in file names."""
    return {"steps": "T", "sampling_prob": "q", "noise_multiplier": "sigma",
            "target_epsilon": "eps_target"}.get(key, key)


def _title(pairs: Sequence[tuple[str, Any]]) -> str:
    def value(v):
        return f"${tex_number(v)}$" if isinstance(v, float) else str(v)

    return ", ".join(f"{symbol(k)} = {value(v)}" for k, v in pairs)


def plot_sweep(out: str | os.PathLike) -> list[Path]:
    """Draws the usual figures of a sweep folder into `out/figures/` (PNG and PDF).

    - eps-vs-T curves (or against the one swept parameter), the three bounds as reference
      lines and the empirical epsilon as markers, one panel per value of the other swept
      parameters;
    - with two or more swept parameters and no `cases` (a full grid), heatmaps over the
      first two (T on the horizontal axis when it is one of them; one file per value of
      the others) of every epsilon column (`exact_epsilon` included where the cells have
      it), and ratio heatmaps: heuristic / composition, in audit mode eps_lower /
      heuristic, where the cells have the exact epsilon heuristic / exact_epsilon (and
      eps_lower / exact_epsilon in audit mode), and when T is swept eps(T) / eps(T_min)
      of the heuristic (and of eps_point in audit mode).

    Works on unfinished sweeps too (the finished cells). Returns the written paths.

    Raises:
        SweepError: a folder with no finished cell, or a sweep that sweeps no parameter
            (one cell: every figure plots epsilon against a swept parameter); nothing is
            written then.
    """
    out = Path(out)
    config, rows = load_results(out, partial=True)
    if not rows:
        raise SweepError(f"{out} has no finished cells to plot")
    swept = config.swept
    if not swept:
        raise SweepError(
            f"{out} holds one cell and sweeps no parameter, so there is nothing to plot (the "
            "figures show epsilon against a swept parameter); its numbers are in "
            f"{out / 'results.csv'}"
        )
    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    audit = config.mode == "audit"
    values = ["eps_lower", "eps_point"] if audit else []
    values += ["heuristic", "composition", "full_batch"]
    exact = any(isinstance(r.get("exact_epsilon"), int | float) for r in rows)
    if exact:
        values.append("exact_epsilon")
    mech_keys = config.mechanism_plugin.params
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
            if exact:  # the bound, and the audit, against the truth
                ratios.append(("heuristic", "exact_epsilon"))
                if audit:
                    ratios.append(("eps_lower", "exact_epsilon"))
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

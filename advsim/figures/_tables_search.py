"""Machine-found against hand-made: the search's exact epsilon beside the papers'.

For every cell of `params.cells` (the cells of Cebere et al.'s Fig. 4 heatmap,
arXiv:2405.14457, sigma x B at T = 25 with the canary at step 1; and Poisson cells with
the canary at every step), `advsim.search.search` maximises the exact last-iterate epsilon
over the piecewise-linear family from the papers' constructions and random members,
beside random search at the same budget, each cell resumable in `OUT/<cell>/`. The table
gives, per cell: the best paper construction's exact epsilon, the search's (with its
refinement estimate of error), the random arm's, the last-iterate heuristic and
composition, whether the search beat the papers beyond the engine's error, and its
distance below composition. Every epsilon is `last_iterate_epsilon`'s (three grids).

With `params.confirm_runs` > 0, every reported construction is run through the
simulation engine with the Neyman-Pearson score of its exact law
(`advsim.search.confirm`): `eps_lower` is the assumption-free held-out (eps, delta) audit,
which must not exceed the exact epsilon; where the exact epsilon beats the heuristic,
`certified` says whether `certify_violation` certifies it at those runs.
"""

from __future__ import annotations

import dataclasses
import json
import math

from advsim._io import write_json
from advsim.search import Confirmation, SearchConfig, config_from_mapping, confirm, search

__all__ = ["compute_machine_found", "heatmap_cells"]


def heatmap_cells(steps: int, sigmas, batch_sizes, search_params) -> list[tuple[str, dict]]:
    """The (name, config table) of every cell of the Fig. 4 heatmap (the landscape's cell:
    a fixed batch of B identical examples, step sizes 1 then 1/B, the canary at step 1)."""
    cells = []
    for sigma in sigmas:
        for b in batch_sizes:
            table = {
                "steps": steps, "noise_multiplier": float(sigma), "batching": "fixed",
                "counts": [int(b)], "canary_schedule": "only:1", "canary_sampled": False,
                "step_sizes": "landscape", "per_step": ["groups"],
                "starts": ["landscape", "linear"], **search_params,
            }  # fmt: skip
            cells.append((f"heatmap-s{sigma:g}-b{b}", table))
    return cells


def _row(name: str, cfg: SearchConfig, result, confirmation) -> dict:
    batch = cfg.counts[0] if cfg.counts and cfg.batching == "fixed" else None
    gap = result.composition - result.exact_epsilon
    row = {
        "cell": name,
        "steps": cfg.steps,
        "sampling_prob": cfg.sampling_prob,
        "noise_multiplier": cfg.noise_multiplier,
        "batch_size": batch,
        "best_paper": max(cfg.starts, key=lambda s: result.starts[s]["before"]),
        "paper_exact_epsilon": result.best_paper,
        "search_exact_epsilon": result.exact_epsilon,
        "search_error": result.exact_error,
        "found_by": result.best_from,
        "gradient_exact_epsilon": max(
            (v["after"] for v in result.starts.values() if math.isfinite(v["after"])),
            default=math.nan,
        ),
        "random_exact_epsilon": result.random_exact_epsilon,
        "heuristic": result.heuristic,
        "composition": result.composition,
        "beat_papers": result.improved,
        "gain_over_papers": result.exact_epsilon - result.best_paper,
        "below_composition": gap,
        "seconds": result.seconds["total"],
    }
    if confirmation is not None:
        row.update(
            confirm_runs=confirmation.runs,
            eps_lower=confirmation.eps_lower,
            guarantee=confirmation.guarantee,
            eps_lower_at_most_exact=confirmation.sound,
            heuristic_violation_certified=confirmation.certified,
        )
    return row


def _confirmation(folder, result, cfg: SearchConfig, runs: int) -> Confirmation:
    """`confirm` of the cell's best construction, kept in `folder/confirm.json` (a resumed
    figure reads it back when it confirms the same construction at the same runs)."""
    path = folder / "confirm.json"
    key = {"best_from": result.best_from, "exact_epsilon": result.exact_epsilon, "runs": runs,
           "seed": cfg.seed}  # fmt: skip
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return Confirmation(**saved["confirmation"])
    confirmation = confirm(result.best, cfg.delta, runs, seed=cfg.seed)
    write_json(path, {"key": key, "confirmation": dataclasses.asdict(confirmation)})
    return confirmation


def compute_machine_found(figure, rows) -> dict:
    """Runs every cell's search (and confirmation) and returns the table and its summary."""
    params = figure.params
    search_params = dict(params.get("search", {}))
    cells = heatmap_cells(params["heatmap_steps"], params["sigmas"], params["batch_sizes"],
                          search_params)  # fmt: skip
    for cell in params.get("poisson_cells", []):
        cells.append((f"poisson-t{cell['steps']}", {**search_params, **cell}))
    table = []
    for name, config in cells:
        cfg = config_from_mapping({**config, "delta": params["delta"]})
        folder = figure.out / name
        resume = figure.resume and (folder / "state.json").exists()
        print(f"[{name}] searching ({'resumed' if resume else 'new'}) into {folder}")
        result = search(cfg, folder, resume=resume)
        confirmation = None
        if params.get("confirm_runs", 0):
            confirmation = _confirmation(folder, result, cfg, int(params["confirm_runs"]))
        table.append(_row(name, cfg, result, confirmation))
    beat = [r for r in table if r["beat_papers"]]
    summary = [{
        "cells": len(table),
        "cells_beating_papers": len(beat),
        "largest_gain": max((r["gain_over_papers"] for r in table), default=math.nan),
        "median_gain": sorted(r["gain_over_papers"] for r in table)[len(table) // 2],
        "smallest_gap_below_composition": min(r["below_composition"] for r in table),
        "largest_gap_below_composition": max(r["below_composition"] for r in table),
        "gradient_beats_random_in": sum(
            r["gradient_exact_epsilon"] > r["random_exact_epsilon"] for r in table
        ),
    }]  # fmt: skip
    return {"machine_found": table, "machine_found_summary": summary}

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

The heuristic is that of the process as it ran (Theorem 1 of arXiv:2410.06186 at the
cell's learning-rate schedule: at the landscape's cells step 1 has size 1 and the others
1/B), beside the constant-rate value earlier tables printed; `violation_by` says whether
the found construction exceeds the heuristic of its own schedule ("construction"), or
only the constant-rate value ("schedule only": the linear loss at that schedule already
does), or neither. The constructions exceed the heuristic only outside its assumptions:
their losses are not linear and the regularizer is not clipped (Section 4 of
arXiv:2410.06186). `regularizer_bound` limits the regularizer's knot values and jumps
separately, not the field, so each row reports the largest field values.

With `params.confirm_runs` > 0, every reported construction is run through the
simulation engine with the Neyman-Pearson score of its exact law
(`advsim.search.confirm`): `eps_lower` is the assumption-free held-out (eps, delta) audit,
with `params.confirm_streaming` a streaming audit (`advsim.streaming.audit_streaming`: a
pilot plans the tests, the main run is only counted, resumable from
`OUT/<cell>/stream-<digest>.json`), which must not exceed the exact epsilon; `eps_lower_over_exact`
is the share of the truth it sees, and `decisive_in` / `decisive_out` the probabilities
of the exact law's decisive events (`advsim.search.decisive_events`), which say why it
falls short where it does. Where the exact epsilon beats the heuristic, `certified` says
whether the runs certify it. With `params.likelihood_encoding_runs` > 0, the Poisson
cells also carry the likelihood-encoding loss (Annamalai 2024, "It's Our Loss"), which
reaches composition by design but lies beyond the exact engine: its streaming-audited
`likelihood_encoding_eps_lower` is an audit's lower bound, not an exact value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import jax
import numpy as np

from advsim._io import write_json
from advsim.adversaries import LikelihoodSumDecoder
from advsim.bounds import heuristic_epsilon
from advsim.exact import ERROR_KIND
from advsim.mechanisms import LikelihoodEncodingLoss
from advsim.search import Confirmation, SearchConfig, config_from_mapping, confirm, search
from advsim.streaming import audit_streaming

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


def _largest(field) -> float:
    """max |g| of a piecewise-linear field: its values at the knots, on both sides of
    each jump (it is constant beyond the outer knots)."""
    values = np.abs(np.asarray(field.values, np.float64))
    if field.jumps is not None:
        values = np.maximum(values, np.abs(np.asarray(field.values) + np.asarray(field.jumps)))
    return float(values.max())


def _violation_by(result, heuristic_constant: float) -> str:
    """Whether the construction, or only the schedule, exceeds the heuristic."""
    low = result.exact_epsilon - result.exact_error
    if low > result.heuristic:
        return "construction"
    if low > heuristic_constant:
        return "schedule only"
    return "none"


def _row(name: str, cfg: SearchConfig, result, confirmation) -> dict:
    batch = cfg.counts[0] if cfg.counts and cfg.batching == "fixed" else None
    gap = result.composition - result.exact_epsilon
    acc = result.best.accounting()
    constant = heuristic_epsilon(
        cfg.delta, acc.steps, acc.sampling_prob, acc.noise_multiplier,
        canary_steps=acc.num_canary_steps,
    )  # fmt: skip
    # the gradient arm's best start after descent (each exact epsilon with its error)
    finite = [v for v in result.starts.values() if math.isfinite(v["after"])]
    gradient = max(finite, key=lambda v: v["after"], default={"after": math.nan,
                                                               "after_error": math.nan})
    row = {
        "cell": name,
        "steps": cfg.steps,
        "sampling_prob": cfg.sampling_prob,
        "noise_multiplier": cfg.noise_multiplier,
        "batch_size": batch,
        "best_paper": max(cfg.starts, key=lambda s: result.starts[s]["before"]),
        "paper_exact_epsilon": result.best_paper,
        "paper_error": result.best_paper_error,
        "paper_error_kind": ERROR_KIND,
        "search_exact_epsilon": result.exact_epsilon,
        "search_error": result.exact_error,
        "search_error_kind": ERROR_KIND,
        "found_by": result.best_from,
        "gradient_exact_epsilon": gradient["after"],
        "gradient_error": gradient["after_error"],
        "gradient_error_kind": ERROR_KIND,
        "random_exact_epsilon": result.random_exact_epsilon,
        "random_error": result.random_exact_error,
        "random_error_kind": ERROR_KIND,
        "heuristic": result.heuristic,
        "heuristic_constant_rate": constant,
        "violation_by": _violation_by(result, constant),
        "largest_canary_field": _largest(result.best.canary),
        "largest_regularizer_field": _largest(result.best.regularizer),
        "composition": result.composition,
        "beat_papers": result.improved,
        "gain_over_papers": result.exact_epsilon - result.best_paper,
        "below_composition": gap,
        "seconds": result.seconds["total"],
    }
    if confirmation is not None:
        row.update(
            confirm_runs=confirmation.runs,
            confirm_audit=confirmation.audit,
            eps_lower=confirmation.eps_lower,
            guarantee=confirmation.guarantee,
            eps_lower_over_exact=confirmation.ratio,
            eps_lower_at_most_exact=confirmation.sound,
            decisive_in=confirmation.decisive_in,
            decisive_out=confirmation.decisive_out,
            heuristic_violation_certified=confirmation.certified,
            confirm_seconds=confirmation.seconds,
        )
    return row


def _confirmation(folder, result, cfg: SearchConfig, runs: int, streaming: bool,
                  pilot_runs: int | None) -> Confirmation:  # fmt: skip
    """`confirm` of the cell's best construction, kept in `folder/confirm.json` (a resumed
    figure reads it back when it confirms the same construction at the same runs; an
    interrupted streaming audit resumes from its `folder/stream-<digest>.json`)."""
    path = folder / "confirm.json"
    key = {"best_from": result.best_from, "exact_epsilon": result.exact_epsilon, "runs": runs,
           "seed": cfg.seed, "streaming": streaming, "pilot_runs": pilot_runs}  # fmt: skip
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return Confirmation(**saved["confirmation"])
    # One counts checkpoint per construction and size: a changed one starts afresh.
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    stream = folder / f"stream-{digest}.json"
    confirmation = confirm(result.best, cfg.delta, runs, seed=cfg.seed, streaming=streaming,
                           pilot_runs=pilot_runs, checkpoint=stream if streaming else None)
    write_json(path, {"key": key, "confirmation": dataclasses.asdict(confirmation)})
    return confirmation


def _likelihood_encoding(folder, cfg: SearchConfig, runs: int) -> dict:
    """The likelihood-encoding loss at a Poisson cell, streaming-audited (its decoder's
    score), kept in `folder/likelihood_encoding.json`; resumable from
    `folder/likelihood_encoding_stream.json`."""
    path = folder / "likelihood_encoding.json"
    key = {"runs": runs, "seed": cfg.seed, "delta": cfg.delta}
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return saved["columns"]
    with jax.enable_x64(True):
        mech = LikelihoodEncodingLoss(cfg.steps, cfg.sampling_prob, cfg.noise_multiplier)
        result = audit_streaming(mech, LikelihoodSumDecoder(), runs, cfg.seed,
                                 delta=cfg.delta, checkpoint=folder /
                                 "likelihood_encoding_stream.json")  # fmt: skip
    columns = {
        "likelihood_encoding_eps_lower": result.eps_lower,
        "likelihood_encoding_guarantee": f"{result.guarantee.label} streaming audit, "
        f"{runs} runs per world (a lower bound, not an exact value)",
        "likelihood_encoding_runs": runs,
    }
    write_json(path, {"key": key, "columns": columns})
    return columns


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
            confirmation = _confirmation(folder, result, cfg, int(params["confirm_runs"]),
                                         bool(params.get("confirm_streaming", False)),
                                         params.get("confirm_pilot_runs"))  # fmt: skip
        row = _row(name, cfg, result, confirmation)
        if name.startswith("poisson") and params.get("likelihood_encoding_runs", 0):
            row.update(_likelihood_encoding(folder, cfg, int(params["likelihood_encoding_runs"])))
        table.append(row)
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

r"""The search: gradient ascent of the exact epsilon over the family, beside random search.

Both arms evaluate the same objective, the exact epsilon of the last model on one coarse
grid (`advsim.exact.FixedGridEpsilon`: the engine's propagation, its derivative by the
implicit function theorem), minus a penalty on mass that leaves the grid. The gradient
arm runs projected Adam (optax) from every start for `iterations` steps; the random arm
evaluates `budget` members drawn in the box. Whatever either reports is recomputed by
`last_iterate_epsilon` (three grids, automatic support): the coarse grid only ranks.

A search writes into its folder, atomically, after every chunk of work: `state.json` (the
progress of every start, the random arm's best, the optimiser's state), `trace.csv` (the
objective at every step), and at the end `search.json` (the summary, with the best
construction's class as `construction_class`, "module:Class"), the best construction
(`best.json`, a `PiecewiseConstruction` file, with `fields.png`; for a class of your
own its searched arrays, `best.eqx`, and `best_meta.json`), which `load_best` reloads.
Run again on the same folder with `resume=True` it continues where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from advsim._io import provenance, write_csv, write_json
from advsim._labels import bound_label
from advsim.bounds import bounds_for
from advsim.exact import ERROR_KIND, last_iterate_epsilon, last_iterate_epsilons
from advsim.exact._gradient import FixedGridEpsilon
from advsim.search._config import CONFIRM_KEYS, SearchConfig
from advsim.search._family import Family, build_family
from advsim.search._parameters import class_path, save_best

__all__ = ["SearchResult", "search"]

#: Steps between two checkpoints of the gradient arm (and evaluations of the random arm).
CHECKPOINT_EVERY = 20
#: Random members evaluated per compiled call.
RANDOM_BATCH = 8
TRACE_COLUMNS = ("arm", "start", "iteration", "grid_epsilon", "lost_mass", "best_grid_epsilon")


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What a search found.

    Attributes:
        config: the search's config.
        best: the best construction (a `PiecewiseConstruction`, or the config's class).
        best_from: which arm and start found it ("gradient:landscape", "random", ...).
        exact_epsilon, exact_error: `last_iterate_epsilon` of `best` (finest of three
            grids; the error is a refinement estimate, not a bound).
        starts: per start: its exact epsilon before and after the gradient arm, each with
            its error (`before_error`, `after_error`).
        random_exact_epsilon, random_exact_error: the random arm's best, recomputed
            exactly, and its error.
        best_paper, best_paper_error: the largest exact epsilon among the papers' starts
            (nan if none) and its error.
        heuristic, composition: the last-iterate heuristic and composition at the cell.
        improved: whether the search beat its best start by more than the engine's error.
        seconds: wall time of each arm and of the exact evaluations.
        folder: where the files are.
    """

    config: SearchConfig
    best: Any
    best_from: str
    exact_epsilon: float
    exact_error: float
    starts: dict[str, dict[str, float]]
    random_exact_epsilon: float
    best_paper: float
    heuristic: float
    composition: float
    improved: bool
    seconds: dict[str, float]
    folder: Path | None
    best_paper_error: float = math.nan
    random_exact_error: float = math.nan

    def summary(self) -> dict[str, Any]:
        """The scalars, for `search.json` and tables."""
        return {
            "best_from": self.best_from,
            "exact_epsilon": self.exact_epsilon,
            "exact_error": self.exact_error,
            "exact_error_kind": ERROR_KIND,
            "best_paper_exact_epsilon": self.best_paper,
            "best_paper_error": self.best_paper_error,
            "best_paper_error_kind": ERROR_KIND,
            "random_exact_epsilon": self.random_exact_epsilon,
            "random_error": self.random_exact_error,
            "random_error_kind": ERROR_KIND,
            "heuristic_epsilon": self.heuristic,
            "heuristic_epsilon_assumes": bound_label("heuristic"),
            "composition_epsilon": self.composition,
            "composition_epsilon_assumes": bound_label("composition"),
            "improved": self.improved,
            "starts": self.starts,
            "seconds": self.seconds,
        }


def _objective(grid: FixedGridEpsilon, family: Family):
    """theta -> (objective, (epsilon, lost)), with the lost-mass penalty."""
    tolerance = 0.01 * grid.delta

    def f(theta):
        eps, lost = grid(family.member(theta))
        excess = jnp.maximum(jnp.max(lost) - tolerance, 0.0) / grid.delta
        return eps - 10.0 * excess, (eps, jnp.max(lost))

    return f


def _search_support(family: Family) -> tuple[float, float]:
    """The search grid's interval: the knots' span (or the starts' grids)."""
    return float(family.knots[0]), float(family.knots[-1])


def _state_path(folder: Path | None) -> Path | None:
    return None if folder is None else folder / "state.json"


def _load_state(folder: Path | None, cfg: SearchConfig, resume: bool) -> dict:
    path = _state_path(folder)
    if path is None or not path.exists():
        return {"config": cfg.to_dict(), "gradient": {}, "random": None, "trace": []}
    if not resume:
        raise FileExistsError(
            f"{folder} holds a search already (state.json): pass resume=True (--resume) to "
            "continue it, or choose another folder"
        )
    state = json.loads(path.read_text())
    saved = {k: v for k, v in state["config"].items() if k not in CONFIRM_KEYS}
    if saved != cfg.search_settings():
        now = cfg.search_settings()
        changed = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
        raise ValueError(f"{folder} holds a search of another config (differs in {changed})")
    return state


def _save_state(folder: Path | None, state: dict) -> None:
    if folder is not None:
        write_json(folder / "state.json", state)
        write_csv(folder / "trace.csv", state["trace"], TRACE_COLUMNS)


def _gradient_arm(family, f, state, folder, bar):
    """Projected Adam from every start; state["gradient"][name] holds each one's progress."""
    cfg = family.config
    opt = optax.adam(cfg.step * cfg.clip_norm)
    value_and_grad = jax.jit(jax.value_and_grad(f, has_aux=True))
    rng = np.random.default_rng([cfg.seed, 1])
    random_starts = family.random(rng, cfg.random_starts)
    starts = dict(family.starts)
    starts.update({f"random{i}": random_starts[i] for i in range(cfg.random_starts)})
    for name, theta0 in starts.items():
        done = state["gradient"].get(name)
        if done is not None and done["iteration"] >= cfg.iterations:
            continue
        theta = jnp.asarray(theta0 if done is None else done["theta"])
        opt_state = opt.init(theta)
        if done is not None:
            leaves = [jnp.asarray(x) for x in done["opt_state"]]
            opt_state = jax.tree.unflatten(jax.tree.structure(opt_state), leaves)
        record = done or {"iteration": 0, "best": -math.inf, "best_theta": list(map(float, theta0))}
        for it in range(record["iteration"], cfg.iterations + 1):
            (value, (eps, lost)), grad = value_and_grad(theta)
            value = float(value)
            if value > record["best"]:
                record["best"], record["best_theta"] = value, np.asarray(theta).tolist()
            state["trace"].append({
                "arm": "gradient", "start": name, "iteration": it, "grid_epsilon": float(eps),
                "lost_mass": float(lost), "best_grid_epsilon": record["best"],
            })  # fmt: skip
            bar.update(1)
            if it == cfg.iterations:
                record["iteration"] = it
                break
            updates, opt_state = opt.update(-grad, opt_state)
            theta = family.clip(optax.apply_updates(theta, updates))
            record["iteration"] = it + 1
            if (it + 1) % CHECKPOINT_EVERY == 0:
                record["theta"] = np.asarray(theta).tolist()
                record["opt_state"] = [np.asarray(x).tolist() for x in jax.tree.leaves(opt_state)]
                state["gradient"][name] = record
                _save_state(folder, state)
        record["theta"] = np.asarray(theta).tolist()
        record["opt_state"] = [np.asarray(x).tolist() for x in jax.tree.leaves(opt_state)]
        state["gradient"][name] = record
        _save_state(folder, state)
    return starts


def _random_arm(family, f, state, folder, bar):
    """`budget` members drawn in the box, evaluated RANDOM_BATCH at a time."""
    cfg = family.config
    budget = cfg.budget
    record = state["random"] or {"evaluated": 0, "best": -math.inf, "best_theta": None}
    batched = jax.jit(jax.vmap(lambda th: f(th)[0]))
    rng = np.random.default_rng([cfg.seed, 2])
    draws = family.random(rng, budget) if budget else np.zeros((0, family.lower.size))
    while record["evaluated"] < budget:
        lo = record["evaluated"]
        hi = min(lo + RANDOM_BATCH, budget)
        chunk = draws[lo:hi]
        pad = np.concatenate([chunk, np.repeat(chunk[-1:], RANDOM_BATCH - len(chunk), 0)])
        values = np.asarray(batched(jnp.asarray(pad)))[: len(chunk)]
        for k, v in enumerate(values):
            if float(v) > record["best"]:
                record["best"], record["best_theta"] = float(v), chunk[k].tolist()
            state["trace"].append({
                "arm": "random", "start": "", "iteration": lo + k, "grid_epsilon": float(v),
                "lost_mass": math.nan, "best_grid_epsilon": record["best"],
            })  # fmt: skip
        record["evaluated"] = hi
        bar.update(hi - lo)
        if hi % (CHECKPOINT_EVERY * RANDOM_BATCH) < RANDOM_BATCH or hi == budget:
            state["random"] = record
            _save_state(folder, state)
    state["random"] = record
    return record


def _exact_all(mechs, delta, support) -> list:
    """`last_iterate_epsilon` of each construction on three grids: one batched call
    (`last_iterate_epsilons`, automatic support), else one call each, automatic, then over
    the search grid's `support` (a strongly expanding member's automatic interval can be
    too wide to plan); None for a construction the engine refuses both ways (mass leaving
    the grid, a grid too large)."""
    try:
        return list(last_iterate_epsilons(mechs, delta, progress=False))
    except (FloatingPointError, ValueError):
        pass
    out = []
    for mech in mechs:
        for where in (None, support):
            try:
                out.append(last_iterate_epsilon(mech, delta, support=where, progress=False))
                break
            except (FloatingPointError, ValueError):
                continue
        else:
            out.append(None)
    return out


def search(
    config: SearchConfig, folder: str | Path | None = None, *, resume: bool = False,
    progress: bool | None = None,
) -> SearchResult:  # fmt: skip
    """Searches the piecewise-linear family for the construction whose last model leaks
    most at one cell (module docstring).

    Args:
        config: the cell, the family's shape, the starts and the budget (`SearchConfig`).
        folder: where to write the state, trace and results (None: nothing written).
        resume: continue the search already in `folder`.
        progress: a tqdm bar (default: on).

    Returns:
        A `SearchResult`: the best construction and its exact epsilon (recomputed on three
        grids), every start's before and after, the random arm's best, the heuristic and
        composition at the cell.

    Raises:
        ValueError: a start outside the box, a folder holding another search.
        FileExistsError: `folder` holds a search and `resume` is False.
    """
    folder = None if folder is None else Path(folder)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    state = _load_state(folder, config, resume)
    seconds = {}
    start = time.perf_counter()
    with jax.enable_x64(True):
        family = build_family(config)
        grid = FixedGridEpsilon(family.template, config.delta, cells_per_sd=config.cells_per_sd,
                                support=_search_support(family))  # fmt: skip
        f = _objective(grid, family)
        n_starts = len(family.starts) + config.random_starts
        total = n_starts * (config.iterations + 1) + config.budget
        with tqdm(total=total, desc="search", unit="eval", disable=progress is False) as bar:
            bar.update(len([r for r in state["trace"]]))
            t0 = time.perf_counter()
            starts = _gradient_arm(family, f, state, folder, bar)
            seconds["gradient"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            rand = _random_arm(family, f, state, folder, bar)
            seconds["random"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        result, law = _finish(family, starts, state, rand, folder, seconds)
        seconds["exact"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - start
    result = dataclasses.replace(result, seconds=seconds)
    if folder is not None:
        _write_results(result, law)
    return result


def _finish(family: Family, starts, state, rand, folder, seconds):
    """Recomputes every start (before, after) and the random best on three grids; the
    `SearchResult` and the best's `last_iterate_epsilon` result (its law)."""
    cfg = family.config
    named = []
    for name, theta0 in starts.items():
        named.append((f"start:{name}", family.member(jnp.asarray(theta0))))
        best_theta = jnp.asarray(state["gradient"][name]["best_theta"])
        named.append((f"gradient:{name}", family.member(best_theta)))
    if rand["best_theta"] is not None:
        named.append(("random", family.member(jnp.asarray(rand["best_theta"]))))
    laws = _exact_all([m for _, m in named], cfg.delta, _search_support(family))
    values = [(math.nan, math.inf) if r is None else (r.epsilon, r.error) for r in laws]
    exact = dict(zip([n for n, _ in named], values, strict=True))
    per_start = {
        name: {"before": exact[f"start:{name}"][0], "before_error": exact[f"start:{name}"][1],
               "after": exact[f"gradient:{name}"][0], "after_error": exact[f"gradient:{name}"][1],
               "grid_best": state["gradient"][name]["best"]}
        for name in starts
    }  # fmt: skip
    valid = [(exact[n][0], exact[n][1], n, m) for n, m in named if math.isfinite(exact[n][0])]
    eps, err, source, best = max(valid, key=lambda c: c[0])
    law = laws[[n for n, _ in named].index(source)]  # plotted as it is: not computed again
    papers = [exact[f"start:{n}"] for n in family.starts]
    best_paper, best_paper_error = max(papers, key=lambda p: p[0], default=(math.nan, math.nan))
    paper_err = max((e for _, e in papers), default=0.0)
    random_eps, random_err = exact.get("random", (math.nan, math.nan))
    b = bounds_for(family.template.accounting(), cfg.delta)
    improved = bool(papers) and eps > best_paper + err + paper_err
    result = SearchResult(
        config=cfg, best=jax.tree.map(lambda x: np.asarray(x), best), best_from=source,
        exact_epsilon=float(eps), exact_error=float(err), starts=per_start,
        random_exact_epsilon=float(random_eps), best_paper=float(best_paper),
        heuristic=float(b["heuristic"]), composition=float(b["composition"]),
        improved=improved, seconds=seconds, folder=folder,
        best_paper_error=float(best_paper_error), random_exact_error=float(random_err),
    )  # fmt: skip
    return result, law


def _write_results(result: SearchResult, law) -> None:
    from advsim.search._report import plot_fields

    folder = result.folder
    meta = {"exact_epsilon": result.exact_epsilon, "exact_error": result.exact_error,
            "found_by": result.best_from, "delta": result.config.delta}  # fmt: skip
    summary = {**result.summary(), "construction_class": class_path(result.best)}
    write_json(folder / "search.json", {**summary, **provenance(result.config.to_dict())})
    if result.config.construction is not None:  # a class of the user's: its arrays
        save_best(folder, result.best)
        write_json(folder / "best_meta.json", meta)
        return
    result.best.save(folder / "best.json", metadata=meta)
    plot_fields(result.best, folder / "fields", title=_title(result), exact=law)


def _title(result: SearchResult) -> str:
    c = result.config
    return (
        f"T={c.steps}, q={c.sampling_prob:g}, sigma={c.noise_multiplier:g}: exact eps "
        f"{result.exact_epsilon:.3f} (best paper {result.best_paper:.3f}, heuristic "
        f"{result.heuristic:.3f}, composition {result.composition:.3f})"
    )


def member_epsilon(family: Family, theta) -> float:
    """The search grid's epsilon of the member with parameters `theta` (for tests)."""
    with jax.enable_x64(True):
        grid = FixedGridEpsilon(family.template, family.config.delta,
                                cells_per_sd=family.config.cells_per_sd,
                                support=_search_support(family))  # fmt: skip
        return float(eqx.filter_jit(lambda m: grid(m)[0])(family.member(jnp.asarray(theta))))

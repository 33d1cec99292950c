"""The runner: one cell (simulate + audit + bounds, or bounds only), and a whole sweep on
a local or a Ray executor, writing through the cell store."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from advsim import bounds
from advsim._exact_columns import ExactBeside
from advsim._interrupt import undo_if_stopped
from advsim._io import provenance, write_json
from advsim.audits import DEFAULT_THRESHOLD_SELECTION
from advsim.experiment import EXACT_COLUMNS, exact_columns, run_audit
from advsim.sweep._config import (
    Cell,
    SweepConfig,
    SweepError,
    audit_options,
    build_mechanism,
    canon,
    describe,
    load_config,
    parse_config,
    strategy_options,
    streaming_options,
)
from advsim.sweep._store import (
    AUDIT_COLUMNS,
    CELLS_DIR,
    LOCK_FILE,
    RUN_FILE,
    load_run_config,
    read_cell,
    sweep_lock,
    table_rows,
    write_cell,
    write_table,
)

__all__ = ["CalibrationError", "run_cell", "run_sweep"]

#: Seconds an interrupted sweep waits for the thread computing exact columns beside it
#: (it stops at its next chunk of steps; one still compiling is left to end with the process).
_BESIDE_WAIT_S = 0.3


class CalibrationError(ValueError):
    """No noise multiplier reaches a cell's `target_epsilon` (the calibration's own error
    is the cause).

    Attributes:
        target_epsilon, delta, steps, sampling_prob: what was asked.
    """

    def __init__(self, target_epsilon, delta, steps, sampling_prob, cause: BaseException):
        reason = " ".join(str(cause).split()) or type(cause).__name__
        super().__init__(
            f"cannot calibrate sigma for T={steps} to target_epsilon {target_epsilon:g} at "
            f"delta {delta:g} (q={sampling_prob:g}): {reason}"
        )
        self.target_epsilon, self.delta = target_epsilon, delta
        self.steps, self.sampling_prob, self.reason = steps, sampling_prob, reason


def run_cell(config: SweepConfig, cell: Cell, *, progress: bool | None = None) -> dict:
    """Runs one cell and returns its result (the columns `AUDIT_COLUMNS` or
    `BOUNDS_COLUMNS`).

    Audit mode: `advsim.experiment.run_audit` with the cell's mechanism, adversary and
    settings, `seed=cell.seed` (the chunked, device-sharded `simulate` underneath), and
    where the time went (`TIME_COLUMNS`: calibration, then `run_audit`'s compilation,
    simulation, audit and bounds). Bounds mode: `advsim.bounds.bounds_for` of the
    mechanism's accounting. With `target_epsilon`, sigma is first calibrated by
    `calibrate_noise_multiplier` over the canary's steps (`calibrate_time_s`: the seconds
    of that call; `run_sweep`'s local runs calibrate a sweep's cells in one batch up
    front, and there it is a cache hit plus the cell's equal share of the batch's wall
    time, which its `wall_time_s` includes too). Unless the sweep sets
    `exact = false`, both modes add the exact epsilon of the last model where the
    mechanism has the capability (`advsim.experiment.exact_columns`: once per distinct
    mechanism in a process, so replicates reuse it; empty columns, with the reason in
    `exact_note`, elsewhere) and the time it took (`exact_time_s`, compilation included).

    Args:
        config: the sweep.
        cell: one of `config.cells()`.
        progress: the calibration's and the simulation's tqdm bars (default: automatic for
            long ones; False: none).

    Raises:
        CalibrationError: no sigma reaches the cell's `target_epsilon`.
    """
    start = time.perf_counter()
    p = cell.params
    mechanism, calibration = _calibrated_mechanism(config, cell, progress)
    if config.mode == "bounds":
        result = _bounds_cell(config, mechanism, p, progress)
    else:
        result = _audit_cell(config, mechanism, cell, progress, calibration)
    result["wall_time_s"] = time.perf_counter() - start
    return result


def _cell_run(config: SweepConfig, cell: Cell) -> tuple[int, float, int]:
    """The cell's run (T, q, n): from `config.cell_runs`, recorded when the config was
    checked, or read off the mechanism for a config not made by parse_config."""
    run = config.cell_runs.get(cell.cell_id)
    if run is None:
        acc = build_mechanism(config, cell.params, noise_multiplier=1.0).accounting()
        run = (acc.steps, acc.sampling_prob, acc.num_canary_steps)
    return run


def _calibrate_up_front(config: SweepConfig, cells: Sequence[Cell], progress) -> dict:
    """Calibrates the cells with `target_epsilon` before any runs, one
    `advsim.bounds.calibrate_noise_multipliers` call per group of cells with the same
    target, delta and q (and at least two distinct numbers of canary steps: a group with
    one shares nothing); each cell's own `calibrate_noise_multiplier` call then reads its
    sigma from the cache. Returns `{cell_id: seconds}`: the group's wall time split
    equally among its cells, for `_add_shared_calibration` (so that `calibrate_time_s`
    still sums to the time calibration took). A failure is left to the cell it concerns:
    its own call raises it, naming the cell, when the sweep reaches it."""
    groups: dict[tuple, list] = {}
    for cell in cells:
        p = cell.params
        if "target_epsilon" in p:
            try:
                steps, q, n = _cell_run(config, cell)
            except (TypeError, ValueError):
                continue  # the cell's run reports it
            groups.setdefault((p["target_epsilon"], p["delta"], q), []).append((cell, steps, n))
    shares = {}
    for (target, delta, q), members in groups.items():
        if len({n for _, _, n in members}) < 2:
            continue
        tic = time.perf_counter()
        with contextlib.suppress(ValueError, RuntimeError, ArithmeticError, TypeError):
            bounds.calibrate_noise_multipliers(
                target,
                delta,
                [steps for _, steps, _ in members],
                q,
                canary_steps=[n for _, _, n in members],
                progress=False if progress is False else None,
            )
        seconds = time.perf_counter() - tic
        shares.update({cell.cell_id: seconds / len(members) for cell, _, _ in members})
    return shares


def _add_shared_calibration(result: dict, seconds: float) -> dict:
    """A cell's result with its share of the up-front calibration added to its
    `calibrate_time_s` (audit mode; bounds mode has no such column) and `wall_time_s`."""
    if seconds:
        result = dict(result)
        if result.get("calibrate_time_s") is not None:
            result["calibrate_time_s"] += seconds
        if result.get("wall_time_s") is not None:
            result["wall_time_s"] += seconds
    return result


def _calibrated_mechanism(config: SweepConfig, cell: Cell, progress: bool | None):
    """`(the cell's mechanism, seconds its calibration took)`: with `target_epsilon`, at
    the noise multiplier calibrated to it over the canary's steps; else as configured.
    The mechanism is built once: the calibration reads the cell's run (T, q, n) from
    `config.cell_runs`, recorded when the config was checked. The seconds are those of
    the cell's `calibrate_noise_multiplier` call (a cache hit after `_calibrate_up_front`,
    whose share `_add_shared_calibration` adds)."""
    p = cell.params
    if "target_epsilon" not in p:
        return build_mechanism(config, p), 0.0
    delta = p["delta"]
    steps, q, n = _cell_run(config, cell)
    tic = time.perf_counter()
    try:
        sigma = bounds.calibrate_noise_multiplier(
            p["target_epsilon"],
            delta,
            steps,
            q,
            canary_steps=n,
            progress=False if progress is False else None,
        )
    except (ValueError, RuntimeError, ArithmeticError) as err:
        raise CalibrationError(p["target_epsilon"], delta, steps, q, err) from err
    calibration = time.perf_counter() - tic
    return build_mechanism(config, p, noise_multiplier=sigma), calibration


def _bounds_cell(config: SweepConfig, mechanism, p: Mapping, progress: bool | None) -> dict:
    """A bounds-mode cell's columns (but the wall time): the bounds of the mechanism's
    accounting and, unless the sweep sets `exact = false`, its exact columns."""
    delta = p["delta"]
    acc = mechanism.accounting()
    if "composition_discretization" in p:  # bounds_for with a coarser PLD grid
        # The accounting itself, not its numbers: the heuristic is at the run's
        # learning-rate schedule when it has one (composition and full batch ignore it).
        b = {
            "heuristic": bounds.heuristic_epsilon(delta, acc),
            "composition": bounds.composition_epsilon(
                delta, acc, value_discretization_interval=p["composition_discretization"]
            ),
            "full_batch": bounds.full_batch_epsilon(delta, acc),
        }
    else:
        b = bounds.bounds_for(acc, delta)
    exact, exact_time = dict.fromkeys(EXACT_COLUMNS), 0.0
    if config.exact:
        tic = time.perf_counter()
        exact = exact_columns(
            mechanism,
            delta,
            refinements=config.exact_refinements,
            progress=False if progress is False else None,
        )
        exact_time = time.perf_counter() - tic
    return {
        "mechanism": type(mechanism).__name__,
        "steps": acc.steps,
        "sampling_prob": acc.sampling_prob,
        "noise_multiplier": acc.noise_multiplier,
        "num_canary_steps": acc.num_canary_steps,
        "delta": delta,
        **{k: float(b[k]) for k in ("heuristic", "composition", "full_batch")},
        **exact,
        "exact_time_s": exact_time,
    }


def _audit_cell(
    config: SweepConfig, mechanism, cell: Cell, progress: bool | None, calibration: float
) -> dict:
    """An audit-mode cell's `AUDIT_COLUMNS` but the wall time: `advsim.experiment.run_audit`
    with the cell's adversary and settings (its strategy's options, and `sides`,
    `min_count`, `audit_seed`, `streaming`, `pilot_runs` at their defaults where the cell
    does not set them), and the seconds the `calibration` took. A streaming cell has no
    `threshold_selection` (run_audit's default, which it takes; its record reads
    "streaming")."""
    p = cell.params
    adversary = config.adversary_plugin.build(**config.adversary_kwargs)
    record = run_audit(
        mechanism,
        adversary,
        trials=p["trials"],
        seed=cell.seed,
        method=p["method"],
        delta=p["delta"],
        confidence=p["confidence"],
        threshold_selection=p.get("threshold_selection", DEFAULT_THRESHOLD_SELECTION),
        strategy_options=strategy_options(p),
        **audit_options(p),
        **streaming_options(p),
        chunk_size=config.chunk_size,
        progress=progress,
        exact=config.exact,
        exact_refinements=config.exact_refinements,
    ).to_dict()
    record["calibrate_time_s"] = calibration
    return {k: record[k] for k in AUDIT_COLUMNS if k != "wall_time_s"}


def _run_cell_remote(config: SweepConfig, cell: Cell, plugins: tuple) -> dict:
    """What a Ray worker runs. The driver ships the resolved classes (a class path is
    imported by reference; a name registered in a notebook travels cloudpickled)."""
    config.__dict__["mechanism_plugin"], config.__dict__["adversary_plugin"] = plugins
    return run_cell(config, cell, progress=False)


def _config_diff(a: Mapping, b: Mapping, prefix: str = "") -> list[str]:
    keys = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            keys += _config_diff(va, vb, f"{prefix}{k}.")
        elif canon(va) != canon(vb):
            keys.append(f"{prefix}{k}")
    return keys


def _session(executor: str, done_before: int) -> dict:
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
    on_cell: Callable[[dict, bool], None] | None = None,
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
        executor: "local" (cells one after another, each sharded over every local device;
            the noise multipliers of cells with `target_epsilon` are calibrated up front,
            one batched `advsim.bounds.calibrate_noise_multipliers` call per target,
            delta and q, each cell's `calibrate_time_s` holding an equal share of it) or
            "ray" (cells as Ray tasks, each calibrating its own; needs
            `pip install advsim[ray]`; this process writes the files, so the workers need
            no shared file system).
        ray_address: for "ray": the cluster to join (`ray.init(address=...)`, e.g. "auto");
            default: an already initialised Ray, else a local instance.
        on_cell: called with each cell's table row as soon as it is there, and whether
            this session computed it: `on_cell(row, True)` when a cell finishes (its file
            written), `on_cell(row, False)` at the start for each cell a resume found
            finished (in cell order). E.g. `advsim audit` prints its table row by row.

    Returns:
        The table's rows, in cell order.

    Raises:
        ValueError: an invalid config.
        SweepError: a folder that holds another sweep, or a damaged cell file.
    """
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
    if out.exists() and not out.is_dir():
        raise SweepError(f"{out} is an existing file, not a folder; choose another --out folder")
    if executor == "ray":
        _import_ray()  # before anything is written: a missing Ray leaves no folder behind

    # What this call creates; removed again if it fails before finishing a cell.
    created = [p for p in (cells_dir, out, *out.parents) if not p.exists()]
    new_run = False  # whether this call writes the folder's run.json (a new sweep)

    def leave_nothing(stopped: bool = False) -> None:
        """Nothing finished in a sweep this call started: leave nothing behind, so that
        the same command can simply be run again (`stopped`: the process ends without
        unwinding, its lock file still there; `advsim._interrupt`)."""
        if new_run and not any(cells_dir.glob("*.json")):
            run_path.unlink(missing_ok=True)
            if stopped:
                (out / LOCK_FILE).unlink(missing_ok=True)
            for path in created:
                with contextlib.suppress(OSError):
                    path.rmdir()  # only if empty

    stopped = functools.partial(leave_nothing, stopped=True)
    try:
        with undo_if_stopped(stopped), sweep_lock(out):  # one process at a time in a folder
            new_run = not run_path.exists()
            meta = _start_or_resume(config, out, resume)
            cells_dir.mkdir(parents=True, exist_ok=True)
            # Leftovers of writes killed mid-way: by construction incomplete, never read.
            for tmp in cells_dir.glob(".*.tmp"):
                tmp.unlink()
            results = _read_cells(cells_dir, cells, config)
            pending = [c for c in cells if c.cell_id not in results]
            meta["sessions"].append(_session(executor, len(results)))
            meta["cells"] = len(cells)
            meta["complete"] = False
            write_json(run_path, meta)
            if on_cell is not None:
                for row in table_rows(config, cells, results):
                    on_cell(row, False)
            return _run_pending(
                config, out, cells, pending, results, meta, progress, executor, ray_address,
                on_cell,
            )  # fmt: skip
    except BaseException:
        leave_nothing()
        raise


def _start_or_resume(config: SweepConfig, out: Path, resume: bool) -> dict:
    """The run's metadata: that of the sweep in `out` when resuming it (same config), a
    new one otherwise; refuses a folder that holds another sweep, or cell files without a
    run file."""
    cells_dir = out / CELLS_DIR
    run_path = out / RUN_FILE
    if run_path.exists():
        old = load_run_config(out)
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
        return json.loads(run_path.read_text())
    if cells_dir.exists() and any(cells_dir.glob("*.json")):
        raise SweepError(f"{cells_dir} holds cell files but {out} has no {RUN_FILE}; refusing")
    meta = provenance(config.to_dict())
    meta["sessions"] = []
    return meta


def _read_cells(cells_dir: Path, cells: Sequence[Cell], config: SweepConfig) -> dict:
    """The finished cells' results, every file verified; all damaged files are reported at
    once (one SweepError naming each), never used."""
    expected = {c.cell_id: c for c in cells}
    results: dict[str, dict] = {}
    problems = []
    for path in sorted(cells_dir.glob("*.json")):
        cell = expected.get(path.stem)
        if cell is None:
            problems.append(f"cell file {path} is not a cell of this sweep's config; move it away")
            continue
        try:
            results[cell.cell_id] = read_cell(path, cell, config.swept)
        except SweepError as err:
            problems.append(str(err))
    if len(problems) == 1:
        raise SweepError(problems[0])
    if problems:
        raise SweepError(
            f"{len(problems)} damaged cell files in {cells_dir} (delete them to recompute "
            "those cells): " + " | ".join(problems)
        )
    return results


def _run_pending(config, out, cells, pending, results, meta, progress, executor, address, on_cell):
    cells_dir = out / CELLS_DIR
    bar = tqdm(
        total=len(cells),
        initial=len(results),
        unit="cell",
        desc="sweep",
        disable=not progress,
        dynamic_ncols=True,
    )
    last_table = time.monotonic()
    said_skipped = False

    def finished(cell: Cell, result: dict) -> None:
        nonlocal last_table, said_skipped
        results[cell.cell_id] = write_cell(cells_dir, cell, result)
        bar.update(1)
        note = result.get("exact_note") or ""
        if progress and not said_skipped and note.startswith("skipped: predicted"):
            said_skipped = True  # once a sweep: each cell's own estimate is in exact_note
            tqdm.write(
                f"sweep: the exact column of cell {cell.cell_id} "
                f"{describe(cell.params, config.swept)} was {note} (the same for any later "
                "cell so long: see exact_note)"
            )
        if on_cell is not None:
            on_cell(table_rows(config, [cell], results)[0], True)
        if time.monotonic() - last_table > 10.0:
            write_table(out, config, table_rows(config, cells, results), meta)
            last_table = time.monotonic()

    with bar:
        if executor == "local":
            shares = _calibrate_up_front(config, pending, None if progress else False)
            beside = None
            try:
                for i, cell in enumerate(pending):
                    if i == 1:  # the first cell has compiled alone; the rest share its programs
                        beside = _exact_beside(config, pending[1:], shares)
                    bar.set_postfix_str(_short(config, cell), refresh=True)
                    try:
                        result = run_cell(config, cell, progress=None if progress else False)
                        result = _add_shared_calibration(result, shares.get(cell.cell_id, 0.0))
                    except (ValueError, TypeError, ArithmeticError) as err:
                        # Parameters out of a computation's reach: the user's to change.
                        kept = (
                            f"; the {len(results)} finished cells are kept in {cells_dir}"
                            if results
                            else ""
                        )
                        raise SweepError(
                            f"cell {cell.cell_id} {describe(cell.params, config.swept)} failed: "
                            f"{err}{kept}",
                            cell,
                        ) from err
                    except Exception as err:  # a bug: keep its traceback, say which cell
                        err.add_note(
                            f"advsim sweep: while running cell {cell.cell_id} "
                            f"{describe(cell.params, config.swept)}"
                        )
                        raise
                    finished(cell, result)
            except KeyboardInterrupt:  # Ctrl-C: the thread is not waited for long
                if beside is not None:
                    beside.stop(timeout=_BESIDE_WAIT_S)
                    beside = None
                raise
            finally:  # a failure stops it too (at its next chunk of steps)
                if beside is not None:
                    beside.stop()
        elif pending:
            _run_ray(config, pending, finished, address)

    rows = table_rows(config, cells, results)
    meta["complete"] = True
    meta["sessions"][-1]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json(out / RUN_FILE, meta)
    write_table(out, config, rows, meta)
    return rows


def _exact_beside(
    config: SweepConfig, cells: Sequence[Cell], shares: Mapping
) -> ExactBeside | None:
    """An `ExactBeside` computing the exact columns of an audit sweep's `cells` (their
    crafted mechanisms, as `run_audit` asks them) on a thread of its own while the main
    one simulates and audits: the audit's host work leaves a core idle (the seven cells
    of `advsim audit` took 49.4 s one after the other). A cell calibrated to a
    `target_epsilon` is taken only where the batch up front calibrated it (`shares`),
    so the thread never searches sigma; None when there is nothing to do."""
    if config.mode != "audit" or not config.exact or not cells:
        return None

    def job(cell: Cell):
        if "target_epsilon" in cell.params and cell.cell_id not in shares:
            return None
        mechanism, _ = _calibrated_mechanism(config, cell, False)
        crafted = config.adversary_plugin.build(**config.adversary_kwargs).craft(mechanism)
        return crafted, cell.params["delta"], {"refinements": config.exact_refinements}

    return ExactBeside([functools.partial(job, cell) for cell in cells])


def _short(config: SweepConfig, cell: Cell) -> str:
    return ", ".join(f"{k}={cell.params[k]}" for k in config.swept if k in cell.params)


def _import_ray():
    try:
        import ray
    except ImportError:
        raise SweepError(
            "executor='ray' (--ray) needs Ray: pip install 'advsim[ray]', or run without --ray"
        ) from None
    return ray


def _run_ray(config: SweepConfig, pending: Sequence[Cell], finished, address) -> None:
    ray = _import_ray()
    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(_run_cell_remote)
    plugins = (config.mechanism_plugin, config.adversary_plugin)
    shared = ray.put(config), ray.put(plugins)
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
                f"cell {cell.cell_id} {describe(cell.params, config.swept)} failed on Ray: {err}",
                cell,
            ) from err
        finished(cell, result)

"""The cell store: one checksummed file per finished cell, written atomically; the table.

A sweep folder holds `run.json` (config, provenance, sessions), `cells/<id>.json` (one per
finished cell, written to a temporary file and renamed, with a SHA-256 of its content) and
`results.csv` / `results.json`, always rebuilt from the verified cell files, so a resumed
sweep and an uninterrupted one give the same table.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from advsim._io import _jsonable as _encode  # non-finite floats as 'inf', '-inf', 'nan'
from advsim._io import atomic_path, write_csv, write_json
from advsim._labels import add_labels
from advsim.experiment import record_columns
from advsim.sweep._config import Cell, SweepConfig, SweepError, canon, describe, parse_config

__all__ = ["AUDIT_COLUMNS", "BOUNDS_COLUMNS", "TIME_COLUMNS", "load_results"]

CELL_FORMAT = "advsim-sweep-cell/1"
RUN_FILE = "run.json"
CELLS_DIR = "cells"
#: Held (`fcntl.flock`) by the process running the sweep in a folder; removed when it ends.
LOCK_FILE = ".advsim-lock"
TABLE_CSV = "results.csv"
TABLE_JSON = "results.json"

AUDIT_COLUMNS = record_columns()
"""Columns of the result of one cell, in table order (audit mode): the fields of
`advsim.experiment.AuditRecord`, in its order. The exact columns
(`advsim.experiment.EXACT_COLUMNS`: `exact_epsilon`, `exact_error`, `exact_error_kind`,
`exact_note`) are empty where the mechanism lacks the capability or the sweep sets
`exact = false`, and in cells stored before them.
"""
TIME_COLUMNS = record_columns("time")
"""Where an audit cell's wall time went (`AuditRecord`'s time fields): calibrating sigma (0
without `target_epsilon`), and `advsim.experiment.run_audit`'s JAX compilation,
simulation, audit and bounds (each without the compilation inside it), and the exact
columns (their compilation included; 0 when not computed). Cells stored before these
columns leave them empty.
"""
BOUNDS_COLUMNS = record_columns(bounds=True)
"""Columns of the result of one cell in bounds mode (no simulation): the fields of
`AuditRecord` a bounds-only cell has (the parameters, the reference bounds and, where the
mechanism has the capability, the exact epsilon), in its order.
"""


@contextlib.contextmanager
def sweep_lock(out: Path):
    """Holds the sweep folder `out` (created if needed) for this process: an exclusive
    `flock` on `out/LOCK_FILE`, which records the holder's process id. A second process
    (two `--resume` runs of one folder at once) is refused at once, with a `SweepError`
    naming the folder and the holder, before it reads or writes anything: the two would
    compute the same cells, and run.json would record one of them as never finished. The lock
    dies with its process, so a killed sweep never leaves the folder locked. Without
    `fcntl` (Windows) nothing is locked.
    """
    try:
        import fcntl
    except ImportError:  # no advisory locks here
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise SweepError(
                f"another process (pid {holder}) is running the sweep in {out}; wait for it "
                "to finish (then --resume runs what is left), or choose another --out folder"
            ) from None
        try:  # the holder before may have removed the file between our open and flock
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still held: a process waiting on this file retries
        os.close(fd)


def _decode_result(result: Mapping) -> dict:
    return {
        k: float(v) if isinstance(v, str) and v in ("inf", "-inf", "nan") else v
        for k, v in result.items()
    }


def _checksum(payload: Mapping) -> str:
    return hashlib.sha256(canon(payload).encode()).hexdigest()


def _cell_payload(cell: Cell, result: Mapping) -> dict:
    return {
        "format": CELL_FORMAT,
        "cell_id": cell.cell_id,
        "params": _encode(cell.params),
        "seed": cell.seed,
        "result": _encode(result),
    }


def write_cell(cells_dir: Path, cell: Cell, result: Mapping) -> dict:
    """Writes `cells/<id>.json` atomically with its checksum; returns the stored result."""
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


def read_cell(path: Path, cell: Cell | None, keys: Sequence[str] = ()) -> dict:
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
            f"cell file {path} is corrupted or partially written (not valid JSON: {err}); {hint}"
        ) from None
    if not isinstance(data, dict) or data.get("format") != CELL_FORMAT or "sha256" not in data:
        raise SweepError(
            f"cell file {path} is not an advsim sweep cell ({CELL_FORMAT} with a checksum); {hint}"
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
            f"cell file {path} holds a different cell than {describe(cell.params, keys)}; {hint}"
        )
    if not isinstance(data.get("result"), dict):
        raise SweepError(f"cell file {path} has no result; {hint}")
    return _decode_result(data["result"])


def table_rows(config: SweepConfig, cells: Sequence[Cell], results: Mapping) -> list[dict]:
    """The table of the finished cells, in cell order: the cell, its parameters, its
    result, and the labels beside its epsilons (`advsim.figures.label_problems`)."""
    rows = []
    for cell in cells:
        if cell.cell_id not in results:
            continue
        row = {"cell": cell.index, "cell_id": cell.cell_id}
        row.update(cell.params)
        for key, value in results[cell.cell_id].items():
            row.setdefault(key, value)  # a parameter keeps the value the config gave
        rows.append(row)
    add_labels(list(dict.fromkeys(k for r in rows for k in r)), rows)
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
    return add_labels(cols, rows)  # each label right after its epsilon


def write_table(
    out: Path, config: SweepConfig, rows: list[dict], provenance: Mapping | None = None
) -> None:
    """`results.csv` and `results.json` (`columns`, `rows` and, where given, the
    `provenance` of run.json: config, versions, JAX devices, git commit, sessions)."""
    columns = _columns(config, rows)
    write_csv(out / TABLE_CSV, rows, columns)
    table = {"columns": columns, "rows": rows}
    if provenance is not None:
        table["provenance"] = dict(provenance)
    write_json(out / TABLE_JSON, table)


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
    config = load_run_config(out)
    cells_dir = out / CELLS_DIR
    results = {}
    for cell in config.cells():
        path = cells_dir / f"{cell.cell_id}.json"
        if path.exists():
            results[cell.cell_id] = read_cell(path, cell, config.swept)
    n = len(config.cells())
    if len(results) < n and not partial:
        raise SweepError(
            f"{out} has {len(results)} of {n} cells finished; resume it "
            f"(advsim sweep CONFIG --out {out} --resume) or pass partial=True"
        )
    return config, table_rows(config, config.cells(), results)


def load_run_config(out: Path) -> SweepConfig:
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

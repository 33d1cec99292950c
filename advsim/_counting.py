r"""Simulate and count, never hold: each world's runs scoring at or above fixed thresholds.

A streaming audit needs, of each world's $N$ runs, only how many score at or above each of
$K$ thresholds fixed before the runs: $K$ integers per world, whatever $N$. `simulate_counts`
runs the engine of `advsim.simulate` chunk by chunk and reduces every chunk on the device
to those counts, so memory grows with $K$, not with $N$ ($10^9$ runs per world would be
8 GB of scores per world).

Run $i$ of a world uses the key `fold_in(world_key, i)`, as in `simulate`, and a count is a
sum of per-run indicators: the counts are the very counts of `simulate`'s scores with the
same key, for any chunk size and device count, and a run resumed from a checkpoint of the
counts of runs $[0, n)$ gives the counts of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from advsim._adversary import AbstractAdversary
from advsim._io import atomic_path
from advsim._limits import check_chunk_size, check_trials
from advsim._mechanism import AbstractMechanism
from advsim._scores import NonFiniteScoresError
from advsim._simulate import (
    _chunk_scores,
    _layout,
    chunk_program_args,
    crafted_run,
    replicated,
)

__all__ = ["ThresholdCounts", "check_thresholds", "read_counts_checkpoint", "simulate_counts"]

#: What a counts checkpoint file says it is (read back only when it matches).
CHECKPOINT_FORMAT = "advsim-threshold-counts/1"
#: Seconds between checkpoint writes (and at the end of each world).
CHECKPOINT_SECONDS = 10.0
_WORLDS = (("canary_in", 1), ("canary_out", 0))


@dataclasses.dataclass(frozen=True)
class ThresholdCounts:
    """How many runs of each world scored at or above each threshold.

    Attributes:
        thresholds: the K thresholds $\\tau_j$, fixed before the runs.
        runs: runs per world.
        in_at_or_above: for each $\\tau_j$, the canary-in runs with score $\\ge \\tau_j$.
        out_at_or_above: the same for the canary-out runs.
        resumed_from: runs per world already counted in the checkpoint this call read
            (`{"canary_in": n, "canary_out": n}`; zeros for a fresh run).
    """

    thresholds: tuple[float, ...]
    runs: int
    in_at_or_above: tuple[int, ...]
    out_at_or_above: tuple[int, ...]
    resumed_from: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain values, JSON-ready."""
        return {
            "thresholds": list(self.thresholds),
            "runs": self.runs,
            "in_at_or_above": list(self.in_at_or_above),
            "out_at_or_above": list(self.out_at_or_above),
            "resumed_from": dict(self.resumed_from),
        }


def check_thresholds(name: str, thresholds) -> tuple[float, ...]:
    """Checks planned thresholds: a non-empty sequence of finite numbers.

    Raises:
        ValueError: naming `name`, the value and what is valid.
    """
    try:
        values = np.asarray(thresholds, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a sequence of finite numbers, got {thresholds!r}"
        ) from None
    if values.size == 0:
        raise ValueError(
            f"{name} plans no test: give at least one threshold (a finite number), got "
            f"{list(values)!r}"
        )
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite numbers, got {values.tolist()!r}")
    return tuple(float(v) for v in values)


def _fingerprint(mechanism, adversary, runs: int, key, thresholds) -> str:
    """A digest of everything the counts depend on: both modules' structure and values,
    the runs, the key and the thresholds (bit for bit)."""
    h = hashlib.sha256()
    for obj in (mechanism, adversary):
        leaves, treedef = jax.tree_util.tree_flatten(obj)
        h.update(str(treedef).encode())
        for leaf in leaves:
            if eqx.is_array(leaf) or isinstance(leaf, np.ndarray | np.generic):
                arr = np.asarray(leaf)
                h.update(f"{arr.dtype}{arr.shape}".encode())
                h.update(np.ascontiguousarray(arr).tobytes())
            else:
                h.update(repr(leaf).encode())
    h.update(f"{runs}".encode())
    h.update(np.asarray(jax.random.key_data(key)).tobytes())
    h.update(b"".join(float(t).hex().encode() for t in thresholds))
    return h.hexdigest()


def read_counts_checkpoint(path) -> dict | None:
    """The record a `simulate_counts` checkpoint holds (None when there is no file).

    Raises:
        ValueError: the file is not such a checkpoint.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"checkpoint {str(path)!r} is not a counts checkpoint: {err}") from None
    if not isinstance(record, dict) or record.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"checkpoint {str(path)!r} is not a counts checkpoint (format "
            f"{CHECKPOINT_FORMAT!r})"
        )
    return record


def _write_checkpoint(path: Path, record: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(record, indent=1))


def _chunk_counts(scores, thresholds, valid):
    """Per threshold, the runs among the first `valid` of the chunk with score >= it, and
    the number of those runs whose score is not finite."""
    keep = jnp.arange(scores.shape[0]) < valid
    at_or_above = (scores[None, :] >= thresholds[:, None]) & keep[None, :]
    bad = (~jnp.isfinite(scores)) & keep
    return jnp.sum(at_or_above, axis=1, dtype=jnp.int32), jnp.sum(bad, dtype=jnp.int32)


@eqx.filter_jit
def _counted_chunk(thresholds, valid, *chunk_args):
    """`_chunk_scores(*chunk_args)` reduced to `_chunk_counts` in the same compiled
    program: the scores never leave the devices."""
    return _chunk_counts(_chunk_scores(*chunk_args), thresholds, valid)


def simulate_counts(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    runs: int,
    key,
    thresholds,
    *,
    chunk_size: int | None = None,
    checkpoint: str | os.PathLike | None = None,
    metadata: dict | None = None,
    progress: bool | None = None,
    binomial: str = "table",
) -> ThresholdCounts:
    r"""Counts each world's runs scoring at or above each threshold, holding no scores.

    The same runs as `advsim.simulate(mechanism, adversary, runs, key)` (crafted by the
    adversary, the in-world from `fold_in(key, 1)`, the out-world from `fold_in(key, 0)`,
    run $i$ from `fold_in(world_key, i)`), scored chunk by chunk on the devices, each
    chunk reduced there to $K$ counts: $\#\{i : s_i \ge \tau_j\}$ per world. The counts
    are those of `simulate`'s scores, exactly, for any `chunk_size` and device count.

    Args:
        mechanism: the DP-SGD run.
        adversary: crafts the run and scores its release ("last" release).
        runs: runs per world, in [2, 2**32 - 1].
        key: a `jax.random.key` or an integer seed (as `simulate`).
        thresholds: the K planned thresholds, finite, fixed before the runs.
        chunk_size: runs per compiled chunk (as `simulate`).
        checkpoint: a JSON file for the counts so far, written atomically every
            `CHECKPOINT_SECONDS` and at the end of each world. If it exists and was
            written for this very run (mechanism, adversary, runs, key and thresholds, bit
            for bit), counting resumes where it stopped; written for another run, it is
            refused.
        metadata: a JSON-ready dict stored in the checkpoint (e.g. how the thresholds were
            planned), read back with `read_counts_checkpoint`.
        progress: a tqdm bar with runs/s and the time left; default: when the job has more
            than 5e7 run-steps.
        binomial: as `simulate`.

    Returns:
        `ThresholdCounts`.

    Raises:
        ValueError: `runs` out of range, thresholds that plan no test or are not finite, a
            bad `chunk_size` or `binomial`, a checkpoint of another run.
        NonFiniteScoresError: a score is NaN or inf (it would fall below every threshold
            unnoticed).

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> from advsim.adversaries import ProjectionScore
        >>> mech = LinearProcess(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
        >>> c = simulate_counts(mech, ProjectionScore(), 1000, 0, [0.0, 3.0])
        >>> len(c.in_at_or_above), c.runs
        (2, 1000)
    """
    runs = check_trials("runs", runs)
    thresholds = check_thresholds("thresholds", thresholds)
    if chunk_size is not None:
        chunk_size = check_chunk_size("chunk_size", chunk_size)
    key, crafted = crafted_run(mechanism, adversary, key, "last", binomial)
    fingerprint = _fingerprint(crafted, adversary, runs, key, thresholds)
    k = len(thresholds)
    state = {name: {"done": 0, "counts": [0] * k} for name, _ in _WORLDS}
    path = None if checkpoint is None else Path(checkpoint)
    if path is not None:
        saved = read_counts_checkpoint(path)
        if saved is not None:
            if saved.get("fingerprint") != fingerprint:
                raise ValueError(
                    f"checkpoint {str(path)!r} was written for another run (mechanism, "
                    "adversary, runs, key or thresholds differ): give another path, or "
                    "delete it to start again"
                )
            state = {name: dict(saved["worlds"][name]) for name, _ in _WORLDS}
    resumed = {name: int(state[name]["done"]) for name, _ in _WORLDS}

    def save():
        if path is not None:
            _write_checkpoint(path, {
                "format": CHECKPOINT_FORMAT, "fingerprint": fingerprint, "runs": runs,
                "thresholds": [t.hex() for t in thresholds], "metadata": metadata or {},
                "worlds": state,
            })  # fmt: skip

    layout = _layout(crafted, "last", chunk_size, binomial, runs, adversary)
    (program_mechanism, program_adversary, rest), mesh = chunk_program_args(
        crafted, adversary, layout
    )
    taus = replicated(jnp.asarray(np.asarray(thresholds)), mesh)
    if progress is None:
        progress = 2 * runs * crafted.steps > 5e7
    bar = tqdm(total=2 * runs, initial=sum(resumed.values()), unit="run", unit_scale=True,
               desc="simulate and count", disable=not progress, leave=False)  # fmt: skip
    last_save = time.monotonic()
    with bar:
        for name, world in _WORLDS:
            world_key, canary = replicated((jax.random.fold_in(key, world),
                                            jnp.asarray(world == 1)), mesh)  # fmt: skip
            st = state[name]

            def collect(start, n, pending, st=st, name=name):
                nonlocal last_save
                counts, bad = pending
                if int(bad):
                    raise NonFiniteScoresError(
                        f"{type(crafted).__name__} scored by {type(adversary).__name__} gave "
                        f"{int(bad)} non-finite score(s) among {name} runs [{start}, "
                        f"{start + n})"
                    )
                st["counts"] = [a + int(b) for a, b in zip(st["counts"], np.asarray(counts),
                                                           strict=True)]  # fmt: skip
                st["done"] = start + n
                bar.update(n)
                if time.monotonic() - last_save > CHECKPOINT_SECONDS:
                    save()
                    last_save = time.monotonic()

            # One chunk in flight while the previous one's counts are read (as `simulate`).
            pending = None
            for start in range(int(st["done"]), runs, layout.chunk):
                n = min(layout.chunk, runs - start)
                counted = _counted_chunk(taus, jnp.int32(n), program_mechanism,
                                         program_adversary, world_key, np.uint32(start), canary,
                                         *rest)  # fmt: skip
                if pending is not None:
                    collect(*pending)
                pending = (start, n, counted)
            if pending is not None:
                collect(*pending)
            save()
    return ThresholdCounts(
        thresholds=thresholds,
        runs=runs,
        in_at_or_above=tuple(int(c) for c in state["canary_in"]["counts"]),
        out_at_or_above=tuple(int(c) for c in state["canary_out"]["counts"]),
        resumed_from=resumed,
    )


"""What a search is asked: the cell (T, q, sigma, delta, batch structure), the family's
shape (knots, which fields are searched, one row per step or not), the starts and the
budget. Checked in full before any work, naming what is wrong."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from advsim._schedule import CanarySchedule
from advsim._validation import (
    check_delta,
    check_int,
    check_positive,
    check_probability,
)

__all__ = ["FIELDS", "START_KINDS", "SearchConfig", "config_from_mapping", "load_config"]

FIELDS = ("canary", "groups", "regularizer")
"""The fields of a `PiecewiseConstruction` a search may vary."""
START_KINDS = ("linear", "zeroing", "quadratic", "landscape", "random")
"""Starts: the papers' constructions (`PiecewiseConstruction`'s classmethods) and random
members of the box. `quadratic:ALPHA` gives the quadratic regularizer's alpha."""


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """A search of the piecewise-linear family at one cell (`advsim.search.search`).

    Attributes:
        steps: T.
        noise_multiplier: sigma.
        delta: the delta epsilon is read at.
        sampling_prob: q (Poisson batching; 1 at fixed batching).
        batching: "poisson" or "fixed".
        counts: examples per data group (a fixed batch of B identical examples: [B]).
        canary_schedule: the schedule's string form ("every_step", "only:1", "every:K").
        canary_sampled: whether the canary is Poisson-sampled at its steps.
        step_sizes: "constant" (`learning_rate` every step) or "landscape" (1 at step 1,
            then 1 / counts[0], Eq. (3) of arXiv:2405.14457).
        learning_rate: eta for "constant".
        clip_norm: C.
        knots: knots per field, 2 to 512, uniform over `span` (the starts' breakpoints
            are added).
        span: (lo, hi) of the knots and of the search grid, lo <= 0 <= hi (it holds the
            initial model m_0 = 0); None: the starts' grids.
        search: which fields vary ("canary", "groups", "regularizer"; "groups" needs a
            data group, `counts`); None: every field the cell has (the groups only where
            `counts` names some).
        per_step: which fields have one row of values per step (else one row).
        jumps: whether the searched fields may jump at their knots.
        regularizer_bound: bounds the regularizer's knot values (|value| <= bound) and its
            jumps (|jump| <= 2 bound) separately, in the model's units per step; not the
            field: on one side of a jump the field is value + jump, up to 3 x the bound
            (`advsim figure machine_found` reports each construction's largest field
            value). The canary's and the groups' fields range over [-C, C] (jumps
            [-2C, 2C]) and the engine clips them to C.
        starts: the start names (`START_KINDS`).
        random_starts: how many random members start gradient ascent too.
        iterations: gradient steps per start, 0 to 100000 (0: each start is evaluated
            where it is, not moved; the random arm's default budget is then 0).
        step: Adam's learning rate, in units of C.
        random_candidates: the random-search baseline's evaluations (default: 3 x the
            gradient arm's steps, a gradient costing about 3 evaluations).
        cells_per_sd: the search grid's nodes per noise sd (coarse; every reported value
            is recomputed by `last_iterate_epsilon`).
        seed: the random starts' and the baseline's seed.
        confirm_runs: runs per world of the confirmation by simulation (0: none), at most
            10^8 held in memory, up to 2^32 - 1 with `confirm_streaming`.
        confirm_streaming: confirm by a streaming audit (`advsim.streaming.audit_streaming`:
            a pilot plans the tests, the main run is only counted, resumable).
        confirm_pilot_runs: the streaming audit's pilot, runs per world (default: 10% of
            `confirm_runs` within [10^4, 2 x 10^7]).
        construction: a construction class of your own, `"module:Class"`, searched in
            place of the built-in family through the arrays it names (`search_parameters`,
            `search_box`: the protocol in `advsim.search`); None: the piecewise family.
            With it, the family's shape keys (knots, search, per_step, jumps,
            regularizer_bound, counts, batching, canary_schedule, step_sizes,
            learning_rate, clip_norm) do not apply, and the starts are the construction as
            built ("given") and `random_starts`.
        construction_args: keyword arguments of its constructor besides the cell's steps,
            sampling_prob and noise_multiplier.

    The `confirm_*` keys decide only the confirmation: a search resumes whatever they are.
    """

    steps: int
    noise_multiplier: float
    delta: float = 1e-5
    sampling_prob: float = 1.0
    batching: str = "poisson"
    counts: tuple[int, ...] = ()
    canary_schedule: str = "every_step"
    canary_sampled: bool = True
    step_sizes: str = "constant"
    learning_rate: float = 1.0
    clip_norm: float = 1.0
    knots: int = 9
    span: tuple[float, float] | None = None
    search: tuple[str, ...] | None = None
    per_step: tuple[str, ...] = ()
    jumps: bool = True
    regularizer_bound: float = 4.0
    starts: tuple[str, ...] = ("linear",)
    random_starts: int = 1
    iterations: int = 100
    step: float = 0.1
    random_candidates: int | None = None
    cells_per_sd: float = 3.0
    seed: int = 0
    confirm_runs: int = 0
    confirm_streaming: bool = False
    confirm_pilot_runs: int | None = None
    construction: str | None = None
    construction_args: dict | None = None

    def __post_init__(self):
        set_ = object.__setattr__
        if self.construction is not None:
            if not isinstance(self.construction, str) or ":" not in self.construction:
                raise ValueError(
                    "construction must be a class path 'module:Class', got "
                    f"{self.construction!r}"
                )
            if self.starts not in (("linear",), ["linear"], ("given",), ["given"]):
                raise ValueError(
                    f"starts {list(self.starts)!r}: a construction class starts from itself "
                    "as built ('given') and random_starts; the papers' starts belong to the "
                    "built-in family"
                )
            set_(self, "starts", ("given",))
        if self.construction_args is not None:
            if self.construction is None:
                raise ValueError("construction_args needs construction, a class path")
            if not isinstance(self.construction_args, dict):
                raise ValueError(
                    f"construction_args must be a table, got {self.construction_args!r}"
                )
        set_(self, "steps", check_int("steps", self.steps, minimum=1, maximum=10_000))
        set_(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        set_(self, "delta", check_delta("delta", self.delta))
        set_(self, "sampling_prob", check_probability("sampling_prob", self.sampling_prob))
        if self.batching not in ("poisson", "fixed"):
            raise ValueError(f"batching must be 'poisson' or 'fixed', got {self.batching!r}")
        counts = tuple(
            check_int(f"counts[{i}]", n, minimum=1, maximum=10_000)
            for i, n in enumerate(self.counts)
        )
        set_(self, "counts", counts)
        CanarySchedule.parse(self.canary_schedule)  # raises naming the text
        if self.step_sizes not in ("constant", "landscape"):
            raise ValueError(
                f"step_sizes must be 'constant' or 'landscape', got {self.step_sizes!r}"
            )
        if self.step_sizes == "landscape" and not counts:
            raise ValueError("step_sizes = 'landscape' needs a data group: counts = [B]")
        for name in ("learning_rate", "clip_norm", "regularizer_bound", "step"):
            set_(self, name, check_positive(name, getattr(self, name)))
        set_(self, "knots", check_int("knots", self.knots, minimum=2, maximum=512))
        if self.span is not None:
            lo, hi = (float(v) for v in self.span)
            if not (lo < hi and lo <= 0.0 <= hi):
                raise ValueError(
                    f"span must be (lo, hi) with lo <= 0 <= hi and lo < hi (it holds the "
                    f"initial model m_0 = 0), got {self.span!r}"
                )
            set_(self, "span", (lo, hi))
        if self.search is None:
            set_(self, "search", tuple(f for f in FIELDS if f != "groups" or counts))
        for name in ("search", "per_step"):
            values = tuple(getattr(self, name))
            bad = [v for v in values if v not in FIELDS]
            if bad:
                raise ValueError(f"{name} names fields {bad}; the family's fields are {FIELDS}")
            set_(self, name, values)
        if not self.search:
            raise ValueError(f"search must name at least one of {FIELDS}")
        if "groups" in self.search and not counts:
            raise ValueError(
                "search names 'groups' but the cell has no data group (counts = []); give "
                "counts = [B, ...] or leave 'groups' out of search"
            )
        set_(self, "starts", tuple(self.starts))
        for start in self.starts if self.construction is None else ():
            _check_start(start)
        if not self.starts and not self.random_starts:
            raise ValueError("give at least one start (starts or random_starts)")
        set_(self, "random_starts", check_int("random_starts", self.random_starts, minimum=0,
                                              maximum=1000))  # fmt: skip
        set_(self, "iterations", check_int("iterations", self.iterations, minimum=0,
                                           maximum=100_000))  # fmt: skip
        if self.random_candidates is not None:
            set_(self, "random_candidates", check_int(
                "random_candidates", self.random_candidates, minimum=0, maximum=10**7))  # fmt: skip
        cells = check_positive("cells_per_sd", self.cells_per_sd)
        if cells < 2:
            raise ValueError(f"cells_per_sd must be >= 2, got {cells!r}")
        set_(self, "seed", check_int("seed", self.seed, minimum=0, maximum=2**32 - 1))
        if not isinstance(self.confirm_streaming, bool):
            raise ValueError(
                f"confirm_streaming must be true or false, got {self.confirm_streaming!r}"
            )
        most = 2**32 - 1 if self.confirm_streaming else 10**8
        set_(self, "confirm_runs", check_int("confirm_runs", self.confirm_runs, minimum=0,
                                             maximum=most))  # fmt: skip
        if self.confirm_pilot_runs is not None:
            if not (self.confirm_streaming and self.confirm_runs):
                raise ValueError(
                    "confirm_pilot_runs applies to a streaming confirmation only: set "
                    f"confirm_streaming = true and confirm_runs > 0, or drop it (got "
                    f"{self.confirm_pilot_runs!r})"
                )
            set_(self, "confirm_pilot_runs", check_int(
                "confirm_pilot_runs", self.confirm_pilot_runs, minimum=2,
                maximum=self.confirm_runs))  # fmt: skip

    @property
    def budget(self) -> int:
        """The random-search baseline's evaluations."""
        if self.random_candidates is not None:
            return self.random_candidates
        return 3 * self.iterations * (len(self.starts) + self.random_starts)

    def search_settings(self) -> dict[str, Any]:
        """`to_dict` without the `CONFIRM_KEYS`: what a search's state must match to resume."""
        return {k: v for k, v in self.to_dict().items() if k not in CONFIRM_KEYS}

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data (recorded in every result file)."""
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def _check_start(start: str) -> None:
    kind, _, arg = str(start).partition(":")
    if kind not in START_KINDS or kind == "random":
        raise ValueError(
            f"starts names {start!r}; a start is one of {START_KINDS[:-1]} (quadratic as "
            "'quadratic:ALPHA'); random members are asked with random_starts"
        )
    if kind == "quadratic":
        try:
            float(arg)
        except ValueError:
            raise ValueError(f"start {start!r}: write 'quadratic:ALPHA' with a number") from None
    elif arg:
        raise ValueError(f"start {start!r} takes no argument")


#: The keys that decide only the confirmation by simulation, not the search.
CONFIRM_KEYS = ("confirm_runs", "confirm_streaming", "confirm_pilot_runs")


def config_from_mapping(data: Mapping[str, Any]) -> SearchConfig:
    """A `SearchConfig` from a mapping (a TOML table), refusing unknown keys by name."""
    known = {f.name for f in dataclasses.fields(SearchConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"the search config has unknown key(s) {unknown}; known keys: {sorted(known)}"
        )
    kwargs = dict(data)
    for key in ("counts", "search", "per_step", "starts", "span"):
        if key in kwargs and kwargs[key] is not None:
            if isinstance(kwargs[key], str):
                raise ValueError(f"{key} must be a list, got the string {kwargs[key]!r}")
            kwargs[key] = tuple(kwargs[key])
    return SearchConfig(**kwargs)


def load_config(path: str | Path) -> SearchConfig:
    """The `[search]` table of a TOML file (a UTF-8 byte-order mark is accepted)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise ValueError(f"cannot read the search config {str(path)!r}: {err}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: {err}") from None
    extra = sorted(set(doc) - {"search"})
    if "search" not in doc or extra:
        raise ValueError(f"{path}: a search config holds one [search] table, found {sorted(doc)}")
    return config_from_mapping(doc["search"])

"""The settings a sweep's cells take besides the mechanism's parameters: their keys, their
defaults and their checks, one cell at a time."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from advsim._limits import check_seed, check_trials
from advsim._validation import (
    check_delta,
    check_finite,
    check_in_interval,
    check_int,
    check_positive,
)
from advsim.audits import (
    AUDIT_METHODS,
    AUDITS,
    DEFAULT_THRESHOLD_SELECTION,
    SIDES,
    THRESHOLD_SELECTIONS,
    as_threshold_strategy,
    get_audit,
)
from advsim.experiment import check_streaming_options

__all__ = [
    "AUDIT_OPTION_KEYS",
    "STRATEGY_KEYS",
    "STREAMING_KEYS",
    "audit_options",
    "canon",
    "check_audit_options",
    "describe",
    "strategy_options",
    "streaming_options",
]


_AUDIT_DEFAULTS = {
    "trials": 100_000,
    "method": "eps_delta",  # "family" for the heuristic's family: `_defaults`
    "confidence": 0.95,
    "threshold_selection": DEFAULT_THRESHOLD_SELECTION,
}


#: The threshold strategies' options (`advsim.audits.THRESHOLD_SELECTIONS`) by their sweep
#: key: settings of the cells whose `threshold_selection` takes them. The explicit
#: strategy's `threshold` is `audit_threshold` here: a mechanism may take a `threshold` of
#: its own, and the table's `threshold` column is the one the audit used.
STRATEGY_KEYS = {
    ("audit_threshold" if option == "threshold" else option): option
    for options in THRESHOLD_SELECTIONS.values()
    for option in options
}


#: The audit's options beyond the strategy's, by sweep key, with the value a cell has when
#: the config does not set them: `sides` ("two": both orders of the neighbouring pair;
#: "one": only "score high means canary in"), `min_count` (the point estimate's least
#: count) and `audit_seed` (the seed of the audit's split of the runs; None: the cell's
#: seed). Unlike `_AUDIT_DEFAULTS`, they are not filled into the cells, and a fixed value
#: equal to the default is dropped: they enter a cell's parameters (and its id) only when
#: set otherwise, so the cells of a config written before them keep their ids.
AUDIT_OPTION_KEYS = {"sides": "two", "min_count": 50, "audit_seed": None}


#: The streaming audit's settings, by sweep key, with the value a cell has when the config
#: does not set them: `streaming` (audit by a pilot-planned, counted streaming audit,
#: `advsim.experiment.run_audit(..., streaming=True)`; in `[sweep]` only, every cell alike)
#: and `pilot_runs` (its pilot's runs per world, in [2, trials]; None:
#: `advsim.streaming.default_pilot_runs(trials)`). As `AUDIT_OPTION_KEYS`, they enter a
#: cell's parameters (and its id) only when set to something other than their default.
STREAMING_KEYS = {"streaming": False, "pilot_runs": None}


#: The settings that enter a cell only when set otherwise than their default.
_UNSET_DEFAULTS = {**AUDIT_OPTION_KEYS, **STREAMING_KEYS}


_COMMON_DEFAULTS = {"delta": 1e-5}


#: Bounds mode only: the PLD grid spacing of the composition bound (default: the
#: library's, 1e-4). 1e-3 is ten times faster and moves epsilon by about 1e-3 at T = 1000.
_BOUNDS_SETTINGS = ("composition_discretization",)


_AUDIT_SETTINGS = (
    *_AUDIT_DEFAULTS,
    *STRATEGY_KEYS,
    *AUDIT_OPTION_KEYS,
    *STREAMING_KEYS,
    "replicate",
)


_SETTINGS = (*_COMMON_DEFAULTS, *_AUDIT_SETTINGS, *_BOUNDS_SETTINGS)


_SCALARS = (bool, int, float, str)


def _check_setting(key: str, value, where: str):
    """Validates one cell setting; returns it (ints stay ints, floats floats)."""
    try:
        if key == "delta":
            check_delta(key, value)
        elif key == "trials":
            check_trials(key, value)
        elif key == "replicate":
            check_int(key, value, minimum=0)
        elif key in ("num_splits", "min_count"):
            check_int(key, value, minimum=1)
        elif key == "streaming" and not isinstance(value, bool):
            raise ValueError(
                f"streaming must be true or false (a pilot-planned, counted audit), got {value!r}"
            )
        elif key == "pilot_runs" and (
            isinstance(value, bool) or not isinstance(value, int) or value < 2
        ):
            raise ValueError(
                "pilot_runs must be an integer in [2, trials] (the streaming audit's pilot "
                f"runs per world), got {value!r}"
            )
        elif key == "audit_seed":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"audit_seed must be an integer in [0, 2^64 - 1], got {value!r}")
            check_seed(key, value)
        elif key == "sides" and value not in SIDES:
            raise ValueError(f"sides must be one of {list(SIDES)}, got {value!r}")
        elif key == "confidence":
            check_in_interval(key, value, 0.5, 1.0)
        elif key == "selection_fraction":
            check_in_interval(key, value, 0.0, 1.0)
        elif key == "audit_threshold":
            check_finite(key, value)
        elif key == "target_epsilon":
            check_positive(key, value)
        elif key == "composition_discretization":
            check_in_interval(key, value, 0.0, 0.1, high_closed=True)
        elif key == "method" and value not in AUDIT_METHODS:
            raise ValueError(f"method must be one of {list(AUDIT_METHODS)}, got {value!r}")
        elif key == "threshold_selection" and value not in THRESHOLD_SELECTIONS:
            if not isinstance(value, str) or ":" not in value:
                raise ValueError(
                    f"threshold_selection must be one of {list(THRESHOLD_SELECTIONS)} or a "
                    f"class path 'module:Class', got {value!r}"
                )
            as_threshold_strategy(value)  # a class path: it must name a strategy
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None
    return value


def strategy_options(params: Mapping) -> dict:
    """A cell's options of its threshold strategy, as `advsim.audits.audit` names them."""
    return {option: params[key] for key, option in STRATEGY_KEYS.items() if key in params}


def audit_options(params: Mapping) -> dict:
    """A cell's `AUDIT_OPTION_KEYS`, each at its default where the cell does not set it, as
    `advsim.experiment.run_audit` names them."""
    return {key: params.get(key, default) for key, default in AUDIT_OPTION_KEYS.items()}


def streaming_options(params: Mapping) -> dict:
    """A cell's `STREAMING_KEYS`, each at its default where the cell does not set it, as
    `advsim.experiment.run_audit` names them."""
    return {key: params.get(key, default) for key, default in STREAMING_KEYS.items()}


def _unset_defaults(params: Mapping) -> dict:
    """`params` without the `AUDIT_OPTION_KEYS` and `STREAMING_KEYS` at their defaults (the
    same cell as unset)."""
    return {
        k: v
        for k, v in params.items()
        if not (k in _UNSET_DEFAULTS and canon(_by_value(v)) == canon(_UNSET_DEFAULTS[k]))
    }


def canon(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _by_value(value):
    """`value` with every integral float as its int (recursively), so that values equal
    as numbers are equal whatever their spelling (1 and 1.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _by_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_by_value(v) for v in value]
    return value


def _as_values(key: str, value, where: str) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError(f"{where}.{key} must be a non-empty list of values, got []")
    for v in values:
        if not isinstance(v, _SCALARS):
            raise ValueError(
                f"{where}.{key} values must be numbers, strings or booleans, got {v!r}"
            )
    keys = [canon(_by_value(v)) for v in values]
    if len(set(keys)) != len(keys):
        spelt = len({canon(v) for v in values}) == len(values)  # equal only as numbers
        note = " (numbers are compared by value: 1 and 1.0 are one value)" if spelt else ""
        raise ValueError(f"{where}.{key} lists a value twice: {values!r}{note}")
    return list(values)


def _check_strategy_options(params: Mapping, swept: Sequence[str]) -> None:
    """Refuses an option of a threshold strategy on a cell whose strategy does not take it,
    and the explicit strategy without its threshold. (A streaming cell takes none:
    `check_audit_options` says so.)"""
    if params.get("streaming"):
        return
    selection = params["threshold_selection"]
    if selection == "explicit" and "audit_threshold" not in params:
        raise ValueError(
            f"cell {describe(params, swept)}: threshold_selection = 'explicit' needs "
            "audit_threshold, the threshold fixed before the scores (set it in [sweep] or "
            "[grid])"
        )
    for key, option in STRATEGY_KEYS.items():
        if key in params and option not in THRESHOLD_SELECTIONS.get(selection, ()):
            takers = [s for s, opts in THRESHOLD_SELECTIONS.items() if option in opts]
            raise ValueError(
                f"cell {describe(params, swept)}: {key} applies to threshold_selection = "
                f"{' or '.join(map(repr, takers))} only, not {selection!r} (give it in the "
                "[[cases]] of that strategy)"
            )


def check_audit_options(params: Mapping) -> None:
    """Raises the error the audit would raise for a cell's settings (`method`,
    `confidence`, `threshold_selection` and the `AUDIT_OPTION_KEYS`; e.g. `sides = "one"`
    with the family audit, whose eps covers both orders of the pair), by building it once.
    A streaming cell's (`STREAMING_KEYS`) are those that
    `advsim.experiment.check_streaming_options` takes (`pilot_runs` within the cell's
    `trials`); `pilot_runs` needs `streaming`.

    Raises:
        ValueError, TypeError: the audit's own message.
    """
    method = params["method"]
    selection = params.get("threshold_selection", _AUDIT_DEFAULTS["threshold_selection"])
    options = audit_options(params)
    streaming = streaming_options(params)
    if streaming["streaming"]:
        check_streaming_options(
            trials=params.get("trials", _AUDIT_DEFAULTS["trials"]),
            method=method,
            threshold_selection=selection,
            strategy_options={k: params[k] for k in STRATEGY_KEYS if k in params},
            pilot_runs=streaming["pilot_runs"],
            **options,
        )
        return
    if streaming["pilot_runs"] is not None:
        raise ValueError(
            "pilot_runs applies to streaming audits only (the pilot that plans their tests), "
            f"got pilot_runs={streaming['pilot_runs']!r} without streaming = true"
        )
    own = AUDITS[method].threshold_selections
    get_audit(
        method,
        confidence=params.get("confidence", _AUDIT_DEFAULTS["confidence"]),
        threshold_selection=selection if selection in own else own[0],
        sides=options["sides"],
        min_count=options["min_count"],
    )


def _check_audit_options(params: Mapping, swept: Sequence[str]) -> None:
    """Refuses a cell whose audit would refuse its settings (`check_audit_options`)."""
    try:
        check_audit_options(params)
    except (TypeError, ValueError) as err:
        raise ValueError(f"cell {describe(params, swept)}: {err}") from None


def describe(params: Mapping, keys: Sequence[str] | None = None) -> str:
    """`{k=v, ...}` over `keys` (the swept parameters, which tell the cells apart), or
    over every parameter when none is given or none is swept."""
    shown = [k for k in (keys or ()) if k in params] or list(params)
    return "{" + ", ".join(f"{k}={params[k]!r}" for k in shown) + "}"


def _streaming_defaults(fixed: dict, swept: set, defaults: dict) -> None:
    """A streaming sweep's settings (`streaming = true` in `[sweep]`): its method defaults
    to "eps_delta" (the statement a streaming audit makes), and its cells have no
    `threshold_selection` (the tests are planned on the pilot; the records read
    "streaming"): a fixed "by_sample_size" (the default) or "split" is dropped (the same
    cells as unset), any
    other value is refused with the cells (`check_audit_options`), and a swept one here."""
    defaults["method"] = "eps_delta"
    del defaults["threshold_selection"]
    if fixed.get("threshold_selection") in ("split", DEFAULT_THRESHOLD_SELECTION):
        del fixed["threshold_selection"]
    if "threshold_selection" in swept:
        raise ValueError(
            "threshold_selection cannot be swept with streaming = true: a streaming audit "
            "plans its tests on a pilot of its own (valid: unset, or the default in [sweep])"
        )

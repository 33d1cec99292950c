"""Small keyword validators: every bad input names the parameter, its value and the range.

Nothing in advsim clips or coerces an out-of-range parameter silently; these helpers raise
`ValueError` (or `TypeError` for a wrong kind of value) with a message of the form
``"sampling_prob must be in (0, 1], got 1.5"``. `as_traced_float` stores a checked float
hyperparameter as a mechanism field that jit traces. The public names are re-exported by
`advsim.validation`.
"""

from __future__ import annotations

import importlib
import math
import numbers
import sys

import numpy as np

__all__ = [
    "as_traced_float",
    "check_canary_steps",
    "check_delta",
    "check_finite",
    "check_in_interval",
    "check_int",
    "check_keywords",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "import_class_path",
]


def _as_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.floating | np.integer):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must be a number, got nan")
    return value


def check_in_interval(
    name: str,
    value,
    low: float,
    high: float,
    *,
    low_closed: bool = False,
    high_closed: bool = False,
) -> float:
    """Checks that a real number lies in an interval, open or closed at either end.

    Args:
        name: the parameter's name, for the message.
        value: a real number (a Python or numpy int or float; not a bool).
        low, high: the interval's ends.
        low_closed, high_closed: whether each end belongs to the interval (default open).

    Returns:
        `value` as a Python float.

    Raises:
        TypeError: `value` is not a real number.
        ValueError: `value` is NaN or outside the interval.

    Example:
        >>> check_in_interval("level", 0.95, 0.0, 1.0)
        0.95
    """
    value = _as_real(name, value)
    ok_low = value >= low if low_closed else value > low
    ok_high = value <= high if high_closed else value < high
    if not (ok_low and ok_high):
        lb = "[" if low_closed else "("
        rb = "]" if high_closed else ")"
        raise ValueError(f"{name} must be in {lb}{low:g}, {high:g}{rb}, got {value!r}")
    return value


def check_probability(name: str, value) -> float:
    """Checks a sampling probability, which must lie in (0, 1].

    The same as `check_in_interval(name, value, 0, 1, high_closed=True)`: returns `value` as
    a Python float; raises `TypeError` for a value that is not a real number and
    `ValueError` for one outside (0, 1] or NaN.
    """
    return check_in_interval(name, value, 0.0, 1.0, high_closed=True)


def check_delta(name: str, value, *, allow_zero: bool = False) -> float:
    """Checks a DP delta, which must lie in the open interval (0, 1), or in [0, 1) with
    `allow_zero`.

    The same as `check_in_interval(name, value, 0, 1)` (its result and errors); with
    `allow_zero`, `check_in_interval(name, value, 0, 1, low_closed=True)`. Only a caller
    whose statement holds at delta = 0 (pure DP, e.g. the assumption-free eps-delta audit)
    passes `allow_zero`: every bound of a mechanism with Gaussian noise is infinite there.

    Example:
        >>> check_delta("delta", 0.0, allow_zero=True)
        0.0
        >>> check_delta("delta", 0.0)
        Traceback (most recent call last):
        ...
        ValueError: delta must be in (0, 1), got 0.0
    """
    return check_in_interval(name, value, 0.0, 1.0, low_closed=allow_zero)


def check_positive(name: str, value, *, allow_inf: bool = False) -> float:
    """Checks a strictly positive real number, finite unless `allow_inf`.

    Args:
        name: the parameter's name, for the message.
        value: a real number.
        allow_inf: accept +inf (default False).

    Returns:
        `value` as a Python float.

    Raises:
        TypeError: `value` is not a real number.
        ValueError: `value` is not in (0, inf) (or (0, inf] with `allow_inf`).

    Example:
        >>> check_positive("noise_multiplier", 0.0)
        Traceback (most recent call last):
        ...
        ValueError: noise_multiplier must be in (0, inf), got 0.0
    """
    value = _as_real(name, value)
    if not value > 0 or (math.isinf(value) and not allow_inf):
        rng = "(0, inf]" if allow_inf else "(0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return value


def check_finite(name: str, value) -> float:
    """Checks a finite real number and returns it as a Python float.

    Raises a `TypeError` for a value that is not a real number, a `ValueError` for an
    infinite one or NaN.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.floating | np.integer):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def check_nonnegative(name: str, value) -> float:
    """Checks a finite real number >= 0.

    The same as `check_in_interval(name, value, 0, inf, low_closed=True)` (its result and
    errors: the message says "must be in [0, inf)").
    """
    return check_in_interval(name, value, 0.0, math.inf, low_closed=True)


def check_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Checks an integer in [minimum, maximum].

    A float with an integral value (`3.0`) is accepted as that integer; any other float
    is a `TypeError`, never rounded.

    Args:
        name: the parameter's name, for the message.
        value: an integer (a Python or numpy int, or an integral float).
        minimum: the smallest value allowed (default 1).
        maximum: the largest value allowed (default None: unbounded).

    Returns:
        `value` as a Python int.

    Raises:
        TypeError: `value` is not an integer.
        ValueError: `value` is outside [minimum, maximum].

    Example:
        >>> check_int("steps", 10.0)
        10
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        if isinstance(value, float | np.floating) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        hi = "inf)" if maximum is None else f"{maximum}]"
        raise ValueError(f"{name} must be an integer in [{minimum}, {hi}, got {value!r}")
    return value


def check_canary_steps(value, steps: int, *, count: bool) -> int | tuple[int, ...]:
    """Checks `canary_steps` of a run of `steps` steps: the steps that can carry the
    canary, 1-indexed (as `advsim.Accounting.canary_steps`), or, where only how many
    matters (`count=True`: composition, the heuristic, their curves), that number n.

    Args:
        value: distinct integers in [1, steps] (a sequence or array), or (with `count`)
            one integer n in [1, steps].
        steps: T >= 1.
        count: whether the caller reads only the number of steps.

    Returns:
        n (with `count`), else the steps, sorted.

    Raises:
        TypeError: an entry is not an integer; a number where the steps are needed.
        ValueError: a step outside [1, steps], repeated steps, no step.

    Example:
        >>> check_canary_steps([3, 1], 4, count=False), check_canary_steps([3, 1], 4, count=True)
        ((1, 3), 2)
        >>> check_canary_steps(2, 4, count=True)
        2
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if hasattr(value, "__iter__") and not isinstance(value, str | bytes):
        entries = value.ravel().tolist() if isinstance(value, np.ndarray) else list(value)
        chosen = np.asarray(entries)
        if chosen.size and chosen.dtype.kind not in "iu":  # each entry's type, by name
            ints = [check_int("each of canary_steps", s, minimum=-sys.maxsize) for s in entries]
            chosen = np.asarray(ints, dtype=object)  # Python ints: any size
        if chosen.size == 0:
            raise ValueError(f"canary_steps must name at least one step, got {value!r}")
        ordered = np.sort(chosen)  # vectorised: T goes up to 10^7
        if ordered[0] < 1 or ordered[-1] > steps or np.any(ordered[1:] == ordered[:-1]):
            raise ValueError(f"canary_steps must be distinct steps in [1, {steps}], got {value!r}")
        return int(ordered.size) if count else tuple(ordered.tolist())
    if not count:
        raise TypeError(
            f"canary_steps must be the steps that can carry the canary (distinct integers in "
            f"[1, {steps}]), not their number: this value depends on which steps; got {value!r}"
        )
    return check_int("canary_steps", value, maximum=steps)


def check_keywords(caller: str, given, keywords: type) -> None:
    """Checks the keys of a `**kwargs` typed by a `TypedDict` (`Unpack[keywords]`).

    Python does not check `Unpack[...]` keywords at run time; this does, so that a
    misspelt or missing keyword fails by name, as it would in an explicit signature.

    Args:
        caller: the function or class taking them, for the message.
        given: the keywords passed (a mapping).
        keywords: the `TypedDict` class that types them.

    Raises:
        TypeError: a key `keywords` does not have (naming it and the valid keys), or a
            required key missing.

    Example:
        >>> from typing import TypedDict
        >>> class Ball(TypedDict):
        ...     radius: float
        >>> check_keywords("ball", {"raduis": 1.0}, Ball)
        Traceback (most recent call last):
        ...
        TypeError: ball() got unexpected keyword(s) ['raduis']; the keywords of Ball are ['radius']
    """
    valid = sorted(keywords.__required_keys__ | keywords.__optional_keys__)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise TypeError(
            f"{caller}() got unexpected keyword(s) {unknown}; the keywords of "
            f"{keywords.__name__} are {valid}"
        )
    missing = sorted(keywords.__required_keys__ - set(given))
    if missing:
        raise TypeError(f"{caller}() missing keyword(s) {missing} ({keywords.__name__})")


def as_traced_float(name: str, value, check) -> np.ndarray:
    """Checks a float hyperparameter and stores it as a field that jit traces.

    Assign the result to a mechanism's (or an adversary's) field in its `__init__`:
    `self.radius = as_traced_float("radius", radius, check_positive)`. The field is a 0-d
    float64 numpy array, which `eqx.filter_jit` treats as an input, so runs that differ only
    in this value reuse one compiled function. A float stored as a plain Python float (or
    declared `eqx.field(static=True)`) is part of the compiled function's key instead, and
    every new value compiles again: a sweep over it recompiles in every cell (one sweep
    took 13.1 s with the float left static against 6.1 s with it traced). Float64 on the
    host also keeps values read outside jit exact (`accounting()` sees q = 0.01, not its
    float32 rounding); cast it where it is used, `jnp.asarray(self.radius, model.dtype)`.

    Args:
        name: the field's name, for the message.
        value: a real number, or a 0-d array holding one.
        check: the validator, called as `check(name, value)` (`check_positive`,
            `check_finite`, ..., or any function of that signature returning a float).

    Returns:
        A 0-d float64 `np.ndarray`.

    Raises:
        TypeError, ValueError: whatever `check` raises for a bad value.

    Example:
        >>> as_traced_float("radius", 2, check_positive)
        array(2.)
    """
    if isinstance(value, np.ndarray | np.generic) and np.ndim(value) == 0:
        value = value.item()  # a 0-d array is a scalar; anything else is checked as given
    return np.asarray(check(name, value), dtype=np.float64)


def import_class_path(path: str, where: str):
    """The object a class path `"module:Class"` (or `"module:Class.factory"`) names.

    How a sweep's config, the command line and `advsim.audits.audit` reach a class of your
    own (a mechanism, an adversary, a threshold strategy) by name: the module is imported
    (it must be on `sys.path`), then each dotted part of the name is looked up in turn.

    Args:
        path: `"module:Qualified.name"`.
        where: what the path was given as, for the messages (`"mechanism"`).

    Returns:
        The object (a class, a factory, any attribute).

    Raises:
        ValueError: not of the form `"module:name"`, a module that cannot be imported or
            raises while it is imported (its error is named), or a missing attribute.

    Example:
        >>> import_class_path("fractions:Fraction", "number")
        <class 'fractions.Fraction'>
    """
    module_name, _, qualname = str(path).partition(":")
    if not module_name or not qualname:
        raise ValueError(f"{where} {path!r} is not a class path 'module:Class'")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"{where} {path!r}: cannot import {module_name!r} ({err})") from None
    except Exception as err:  # the module itself is broken: say so, not "a bug in advsim"
        raise ValueError(
            f"{where} {path!r}: importing {module_name!r} raised {type(err).__name__}: {err}"
        ) from err
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{where} {path!r}: {obj.__name__!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj

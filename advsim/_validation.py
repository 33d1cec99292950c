"""Small keyword validators: every bad input names the parameter, its value and the range.

Nothing in advsim clips or coerces an out-of-range parameter silently; these helpers raise
`ValueError` (or `TypeError` for a wrong kind of value) with a message of the form
``"sampling_prob must be in (0, 1], got 1.5"``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_delta",
    "check_finite",
    "check_in_interval",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_probability",
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
    """Returns `value` as a float if it lies in the interval, else raises ValueError."""
    value = _as_real(name, value)
    ok_low = value >= low if low_closed else value > low
    ok_high = value <= high if high_closed else value < high
    if not (ok_low and ok_high):
        lb = "[" if low_closed else "("
        rb = "]" if high_closed else ")"
        raise ValueError(f"{name} must be in {lb}{low:g}, {high:g}{rb}, got {value!r}")
    return value


def check_probability(name: str, value) -> float:
    """A sampling probability: must lie in (0, 1]."""
    return check_in_interval(name, value, 0.0, 1.0, high_closed=True)


def check_delta(name: str, value) -> float:
    """A DP delta: must lie in the open interval (0, 1)."""
    return check_in_interval(name, value, 0.0, 1.0)


def check_positive(name: str, value, *, allow_inf: bool = False) -> float:
    """A strictly positive, finite (unless `allow_inf`) real number."""
    value = _as_real(name, value)
    if not value > 0 or (math.isinf(value) and not allow_inf):
        rng = "(0, inf]" if allow_inf else "(0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return value


def check_finite(name: str, value) -> float:
    """A finite real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.floating | np.integer):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def check_nonnegative(name: str, value) -> float:
    """A finite real number >= 0."""
    value = _as_real(name, value)
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be in [0, inf), got {value!r}")
    return value


def check_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum] (maximum None means unbounded)."""
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

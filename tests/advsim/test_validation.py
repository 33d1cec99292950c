"""The keyword validators of `advsim.validation`: every bad value is named, with its range.

Expected messages name the parameter, its range and the value given ("sampling_prob must
be in (0, 1], got 1.5"); the valid ranges are the ones documented in each helper's
docstring.
"""

from __future__ import annotations

import math
import re
from typing import TypedDict

import numpy as np
import pytest

from advsim import Accounting
from advsim.validation import (
    as_traced_float,
    check_canary_steps,
    check_delta,
    check_in_interval,
    check_int,
    check_keywords,
    check_nonnegative,
    check_positive,
    check_probability,
    check_run_arguments,
)


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


# --- messages: "<name> must be in <range>, got <value>" ---------------------------------


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (check_probability, 1.5, "sampling_prob must be in (0, 1], got 1.5"),
        (check_probability, 0.0, "sampling_prob must be in (0, 1], got 0.0"),
        (check_probability, -0.25, "sampling_prob must be in (0, 1], got -0.25"),
        (check_delta, 1.0, "sampling_prob must be in (0, 1), got 1.0"),
        (check_delta, 0.0, "sampling_prob must be in (0, 1), got 0.0"),
        (check_positive, 0.0, "sampling_prob must be in (0, inf), got 0.0"),
        (check_positive, -1.0, "sampling_prob must be in (0, inf), got -1.0"),
        (check_positive, math.inf, "sampling_prob must be in (0, inf), got inf"),
        (check_nonnegative, -1e-9, "sampling_prob must be in [0, inf), got -1e-09"),
        (check_nonnegative, math.inf, "sampling_prob must be in [0, inf), got inf"),
    ],
)
def test_out_of_range_message_names_parameter_range_and_value(check, value, message):
    with pytest.raises(ValueError, match=_exact(message)):
        check("sampling_prob", value)


def test_check_in_interval_brackets_follow_closedness():
    # Bracket per side: "[" / "]" closed, "(" / ")" open, bounds printed with :g.
    with pytest.raises(ValueError, match=_exact("x must be in [0.5, 2), got 2.0")):
        check_in_interval("x", 2, 0.5, 2.0, low_closed=True)
    with pytest.raises(ValueError, match=_exact("x must be in (0.5, 2], got 0.5")):
        check_in_interval("x", 0.5, 0.5, 2.0, high_closed=True)
    assert check_in_interval("x", 0.5, 0.5, 2.0, low_closed=True) == 0.5
    assert check_in_interval("x", 2, 0.5, 2.0, high_closed=True) == 2.0


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (check_probability, 1.0),
        (check_probability, 1e-12),
        (check_delta, 0.5),
        (check_positive, 3),
        (check_nonnegative, 0.0),
        (check_probability, np.float32(0.25)),
        (check_positive, np.int64(7)),
    ],
)
def test_valid_values_are_returned_as_python_floats(check, value):
    out = check("p", value)
    assert type(out) is float
    assert out == float(value)


def test_check_positive_allow_inf():
    assert check_positive("sigma", math.inf, allow_inf=True) == math.inf
    with pytest.raises(ValueError, match=re.escape("sigma must be in (0, inf], got 0.0")):
        check_positive("sigma", 0.0, allow_inf=True)


# --- bool and nan are not numbers -----------------------------------------------------------


@pytest.mark.parametrize(
    "check", [check_probability, check_delta, check_positive, check_nonnegative]
)
@pytest.mark.parametrize("value", [True, False, np.True_])
def test_bool_is_rejected_as_a_number(check, value):
    # True == 1 would otherwise pass as a probability of 1 (see _as_real).
    with pytest.raises(TypeError, match="q must be a real number, got"):
        check("q", value)


@pytest.mark.parametrize(
    "check", [check_probability, check_delta, check_positive, check_nonnegative]
)
@pytest.mark.parametrize("value", [math.nan, np.float32("nan"), np.nan])
def test_nan_is_rejected(check, value):
    with pytest.raises(ValueError, match=_exact("q must be a number, got nan")):
        check("q", value)


@pytest.mark.parametrize("value", ["0.5", None, [0.5], 1j])
def test_non_real_values_are_type_errors(value):
    with pytest.raises(TypeError, match="q must be a real number"):
        check_probability("q", value)


# --- integers ---------------------------------------------------------------------------------


def test_check_int_messages():
    with pytest.raises(ValueError, match=_exact("steps must be an integer in [1, inf), got 0")):
        check_int("steps", 0)
    with pytest.raises(ValueError, match=_exact("trials must be an integer in [2, 10], got 11")):
        check_int("trials", 11, minimum=2, maximum=10)


@pytest.mark.parametrize("value", [True, False, 1.5, math.nan, math.inf, "3", None])
def test_check_int_rejects_non_integers(value):
    with pytest.raises(TypeError, match="steps must be an integer, got"):
        check_int("steps", value)


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (np.int32(4), 4), (5.0, 5)])
def test_check_int_accepts_integral_values(value, expected):
    # Integral floats (5.0) are documented as accepted and converted.
    out = check_int("steps", value)
    assert type(out) is int
    assert out == expected


def test_check_canary_steps_reads_steps_or_where_allowed_their_number():
    # One meaning: the steps that can carry the canary (as Accounting.canary_steps); a
    # function that reads only how many takes that number instead.
    assert check_canary_steps([3, 1], 4, count=False) == (1, 3)
    assert check_canary_steps(np.array([4, 2]), 4, count=False) == (2, 4)
    assert check_canary_steps(range(1, 5), 4, count=True) == 4
    assert check_canary_steps((2, 4), 4, count=True) == check_canary_steps(2, 4, count=True) == 2
    with pytest.raises(TypeError, match=re.escape("not their number") + ".*got 2$"):
        check_canary_steps(2, 4, count=False)
    for bad in ((1, 1), (0, 2), (2, 5)):
        with pytest.raises(
            ValueError, match=_exact(f"canary_steps must be distinct steps in [1, 4], got {bad}")
        ):
            check_canary_steps(bad, 4, count=True)
    with pytest.raises(ValueError, match="at least one step"):
        check_canary_steps([], 4, count=False)
    with pytest.raises(TypeError, match="each of canary_steps must be an integer, got 1.5"):
        check_canary_steps([1.5], 4, count=True)
    # advsim.Accounting checks its steps with it (a float step was truncated: 1.5 -> 1).
    with pytest.raises(TypeError, match="each of canary_steps must be an integer, got 1.5"):
        Accounting(4, 0.1, 1.0, (1.5, 3))
    assert Accounting(4, 0.1, 1.0, [3.0, 1]).canary_steps == (1, 3)
    with pytest.raises(
        ValueError, match=_exact("canary_steps must be an integer in [1, 4], got 5")
    ):
        check_canary_steps(5, 4, count=True)


def test_check_run_arguments_tells_the_two_forms_apart():
    # f(..., accounting) or f(..., steps, sampling_prob, noise_multiplier): the record
    # itself, or None for the numbers; a mix of both and a missing number are TypeErrors
    # by name (the messages of the bounds, history_epsilon and repeaters_epsilon).
    acc = Accounting(4, 0.1, 1.0, (2, 4))
    assert check_run_arguments("f", acc, None, None) is acc
    assert check_run_arguments("f", 4, 0.1, 1.0) is None
    assert check_run_arguments("f", 4, 0.1, 1.0, canary_steps=(2, 4)) is None
    with pytest.raises(TypeError, match=_exact(
        "f: pass either an Accounting or steps, sampling_prob and noise_multiplier, not "
        "both (got an Accounting and noise_multiplier, canary_steps)"
    )):  # fmt: skip
        check_run_arguments("f", acc, None, 1.0, canary_steps=2)
    with pytest.raises(TypeError, match=_exact(
        "f: missing sampling_prob and noise_multiplier (or pass an advsim.Accounting as steps)"
    )):  # fmt: skip
        check_run_arguments("f", 4, None, None)
    with pytest.raises(TypeError, match="^missing noise_multiplier"):
        check_run_arguments(None, 4, 0.1, None)


def test_accounting_refuse_schedule_names_the_function_the_schedule_and_why():
    Accounting(3, 1.0, 1.0, (1,)).refuse_schedule("f", "why")  # no schedule: nothing
    Accounting(3, 1.0, 1.0, (1,), step_sizes=(2, 2, 2)).refuse_schedule("f", "why")  # constant
    run = Accounting(3, 1.0, 1.0, (1,), step_sizes=(1, 0.5, 0.5))
    with pytest.raises(ValueError, match=_exact(
        "f is not defined at a learning-rate schedule, but the accounting has one "
        "(step_sizes = (1, 0.5, 0.5)): why"
    )):  # fmt: skip
        run.refuse_schedule("f", "why")


# --- the traced-float field -------------------------------------------------------------------


@pytest.mark.parametrize("value", [2, 2.0, np.float32(2.0), np.array(2.0), np.int64(2)])
def test_as_traced_float_stores_a_0d_float64_array(value):
    out = as_traced_float("radius", value, check_positive)
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float64
    assert float(out) == 2.0


def test_as_traced_float_keeps_the_host_value_exact():
    assert float(as_traced_float("q", 0.01, check_probability)) == 0.01  # not float32's


@pytest.mark.parametrize(
    "value, error, message",
    [
        (0.0, ValueError, "radius must be in (0, inf), got 0.0"),
        (np.array(-1.0), ValueError, "radius must be in (0, inf), got -1.0"),
        (np.ones(2), TypeError, "radius must be a real number, got array([1., 1.])"),
        (True, TypeError, "radius must be a real number, got True"),
    ],
)
def test_as_traced_float_checks_with_the_given_validator(value, error, message):
    with pytest.raises(error, match=_exact(message)):
        as_traced_float("radius", value, check_positive)


# --- keywords typed by a TypedDict ------------------------------------------------------------


class _Ball(TypedDict, total=False):
    radius: float
    dim: int


class _Centred(_Ball):
    centre: float  # required: total=True by default


def test_check_keywords_names_the_unknown_key_and_the_valid_ones():
    message = (
        "ball() got unexpected keyword(s) ['raduis']; the keywords of _Ball are ['dim', 'radius']"
    )
    with pytest.raises(TypeError, match=_exact(message)):
        check_keywords("ball", {"raduis": 1.0}, _Ball)


def test_check_keywords_names_a_missing_required_key():
    with pytest.raises(TypeError, match=_exact("ball() missing keyword(s) ['centre'] (_Centred)")):
        check_keywords("ball", {"radius": 1.0}, _Centred)
    check_keywords("ball", {"centre": 0.0}, _Centred)  # optional keys may be left out
    check_keywords("ball", {}, _Ball)

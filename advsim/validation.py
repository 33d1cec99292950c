"""Checks for a plug-in's constructor: the validators and the traced-float field.

A mechanism, an adversary or an audit checks its arguments when it is built, so that a bad
value fails at once and by name, never in the middle of a compiled run. The built-in
plug-ins use these helpers, and a new one can too:

- `check_int`, `check_positive`, `check_nonnegative`, `check_finite`, `check_probability`,
  `check_delta` and `check_in_interval` return the value (as a Python int or float) or
  raise a `ValueError` (a `TypeError` for a value of the wrong kind) whose message names
  the parameter, the range and the value: ``"sampling_prob must be in (0, 1], got 1.5"``.
  `check_delta` refuses delta = 0 unless asked (`allow_zero=True`: only for a statement
  that holds at pure DP).
- `check_canary_steps` checks the steps that can carry the canary (or, for a function
  that reads only how many, their number), with `advsim.Accounting`'s message.
- `check_run_arguments` tells a function's two forms apart, `f(..., accounting)` (an
  `advsim.Accounting`, nothing beside it) and `f(..., steps, sampling_prob,
  noise_multiplier)`, and refuses a mix of both or a missing number, by name.
- `check_keywords` checks a `**kwargs` typed by a `TypedDict` (`Unpack[...]`, which
  Python does not check at run time): a misspelt or missing key is a `TypeError` by name.
- `as_traced_float` checks a float hyperparameter with one of them and stores it as a
  0-d float64 array, which jit traces: a sweep over it compiles once.

Example:
    >>> import equinox as eqx
    >>> from advsim.validation import as_traced_float, check_int, check_positive
    >>> class Ball(eqx.Module):
    ...     dim: int = eqx.field(static=True)  # sets shapes: static
    ...     radius: object  # a float hyperparameter: traced
    ...     def __init__(self, dim, radius):
    ...         self.dim = check_int("dim", dim)
    ...         self.radius = as_traced_float("radius", radius, check_positive)
    >>> Ball(3, 2.0).radius
    array(2.)
"""

from advsim import _validation
from advsim._accounting import check_run_arguments
from advsim._validation import *  # noqa: F403 (the names of its __all__)

__all__ = [*_validation.__all__, "check_run_arguments"]

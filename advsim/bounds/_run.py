"""The run parameters every DP-SGD bound takes, checked in one place.

A bound is called either with numbers, `f(x, steps, sampling_prob, noise_multiplier,
canary_steps=n)`, or with the record of a run, `f(x, mechanism.accounting())`: an
`advsim.Accounting` in place of `steps`, and nothing else. Either way `run_parameters`
returns the checked `(T, q, sigma, n)`.
"""

from __future__ import annotations

from advsim._accounting import Accounting
from advsim._validation import check_int, check_positive, check_probability

__all__ = ["run_parameters"]


def run_parameters(
    steps, sampling_prob=None, noise_multiplier=None, canary_steps=None
) -> tuple[int, float, float, int]:
    r"""`(T, q, sigma, n)` from a bound's arguments: numbers, or one `advsim.Accounting`.

    Args:
        steps: $T \ge 1$, or an `advsim.Accounting` (then leave the others unset; its
            `num_canary_steps` is n).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, the number of steps that can carry the canary
            (default T).

    Raises:
        ValueError: naming the parameter and its range.
        TypeError: for an `Accounting` together with numbers, or missing numbers.
    """
    if isinstance(steps, Accounting):
        given = {"sampling_prob": sampling_prob, "noise_multiplier": noise_multiplier}
        given["canary_steps"] = canary_steps
        extra = [name for name, value in given.items() if value is not None]
        if extra:
            raise TypeError(
                f"pass either an Accounting or steps, sampling_prob and noise_multiplier, "
                f"not both (got an Accounting and {', '.join(extra)})"
            )
        return steps.steps, steps.sampling_prob, steps.noise_multiplier, steps.num_canary_steps
    numbers = {"sampling_prob": sampling_prob, "noise_multiplier": noise_multiplier}
    missing = [name for name, value in numbers.items() if value is None]
    if missing:
        raise TypeError(f"missing {' and '.join(missing)} (or pass an advsim.Accounting as steps)")
    steps = check_int("steps", steps, minimum=1)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    n = steps if canary_steps is None else check_int("canary_steps", canary_steps, maximum=steps)
    return steps, q, sigma, n

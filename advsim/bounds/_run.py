"""The run parameters every DP-SGD bound takes, checked in one place.

A bound is called either with numbers, `f(x, steps, sampling_prob, noise_multiplier,
canary_steps=n)`, or with the record of a run, `f(x, mechanism.accounting())`: an
`advsim.Accounting` in place of `steps`, and nothing else. Either way `run_parameters`
returns the checked `(T, q, sigma, n)`.

A record can carry a learning-rate schedule (`Accounting.step_sizes`), which the four
numbers do not describe. Each bound says what it does with one: the composition bounds
ignore it, because they do not depend on it (`schedule="ignore"`); the last-iterate
heuristic computes its value at the schedule (`advsim.bounds._step_sizes`) and never
reaches `run_parameters` with one; any other bound refuses it (the default), so that no
constant-rate value is ever reported for a run with a schedule.
"""

from __future__ import annotations

from typing import Literal

from advsim._accounting import check_run_arguments
from advsim._validation import (
    check_canary_steps,
    check_int,
    check_positive,
    check_probability,
)

__all__ = ["run_parameters"]


def run_parameters(
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    canary_steps=None,
    *,
    schedule: Literal["refuse", "ignore"] = "refuse",
    bound: str = "this bound",
) -> tuple[int, float, float, int]:
    r"""`(T, q, sigma, n)` from a bound's arguments: numbers, or one `advsim.Accounting`.

    Args:
        steps: $T \ge 1$, or an `advsim.Accounting` (then leave the others unset; its
            `num_canary_steps` is n).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, the number of steps that can carry the canary, or
            those steps (distinct, in $[1, T]$; only their number is read) (default T).
        schedule: what to do with an `Accounting` that has a learning-rate schedule
            (`step_sizes`): "refuse" (a ValueError naming it; the default) or "ignore"
            (for a bound that does not depend on the step sizes).
        bound: the bound's name, for the refusal's message.

    Raises:
        ValueError: naming the parameter and its range; a schedule the bound refuses.
        TypeError: for an `Accounting` together with numbers, or missing numbers.
    """
    run = check_run_arguments(None, steps, sampling_prob, noise_multiplier, canary_steps)
    if run is not None:
        if schedule != "ignore":
            run.refuse_schedule(
                bound, "it assumes one learning rate at every step (see "
                "advsim.bounds.heuristic_epsilon for the last-iterate heuristic at a schedule)"
            )  # fmt: skip
        return run.steps, run.sampling_prob, run.noise_multiplier, run.num_canary_steps
    steps = check_int("steps", steps, minimum=1)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    n = steps if canary_steps is None else check_canary_steps(canary_steps, steps, count=True)
    return steps, q, sigma, n

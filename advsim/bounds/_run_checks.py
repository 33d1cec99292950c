"""The checks every bound of a gradient run shares (`check_gradient_run`): the numbers in
range, the neighbouring relation known, and clipping that never acts (C >= L)."""

from __future__ import annotations

from fractions import Fraction

from advsim._validation import check_delta, check_int, check_positive

__all__ = [
    "NEIGHBOURING",
    "check_curvature",
    "check_gradient_run",
    "check_strongly_convex_gd",
    "one_step_sensitivity",
    "optional_epsilon",
]

#: The neighbouring relations: adding or removing the canary (advsim's in/out), or
#: replacing one example.
NEIGHBOURING = ("add_remove", "replace_one")


def check_gradient_run(
    *, steps, noise_multiplier, clip_norm, lipschitz, learning_rate, neighbouring, why: str
) -> tuple[int | None, float, float, float, float]:
    """`(steps, sigma, C, L, lr)`, checked: steps >= 1 (None: not checked, returned as
    None), the others > 0, `neighbouring` one of `NEIGHBOURING`, and C >= L (`why` says
    what the bound needs clipping never to act for).

    Raises:
        ValueError: naming the parameter, its value and the valid range.
    """
    steps = None if steps is None else check_int("steps", steps, minimum=1)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    c = check_positive("clip_norm", clip_norm)
    lip = check_positive("lipschitz", lipschitz)
    lr = check_positive("learning_rate", learning_rate)
    if neighbouring not in NEIGHBOURING:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING}, got {neighbouring!r}")
    if c < lip:
        raise ValueError(
            f"clip_norm must be >= lipschitz = {lip!r} (clipping must never act {why}), got {c!r}"
        )
    return steps, sigma, c, lip, lr


def one_step_sensitivity(lipschitz: float, neighbouring: str) -> float:
    """How far one example moves a summed gradient: L to add or remove it, 2L to replace
    it."""
    return lipschitz if neighbouring == "add_remove" else 2.0 * lipschitz


def check_curvature(strong_convexity, smoothness) -> tuple[float, float]:
    """`(m, M)`, checked: both > 0 and m <= M (an M-smooth, m-strongly convex objective).

    Args:
        strong_convexity: m.
        smoothness: M.

    Returns:
        `(m, M)` as floats.

    Raises:
        ValueError: naming the parameter, its value and the valid range.
    """
    m = check_positive("strong_convexity", strong_convexity)
    big_m = check_positive("smoothness", smoothness)
    if m > big_m:
        raise ValueError(f"strong_convexity must be in (0, smoothness] = (0, {big_m!r}], got {m!r}")
    return m, big_m


def check_strongly_convex_gd(
    steps, noise_multiplier, clip_norm, lipschitz, strong_convexity, smoothness,
    learning_rate, num_examples, neighbouring, *, step_limit: int, why: str, paper: str,
):  # fmt: skip
    """The checks of a full-batch DP-GD run on an m-strongly convex, M-smooth objective.

    `check_gradient_run`, `check_curvature`, `num_examples >= 1` and the step-size limit
    `learning_rate * M < step_limit`, exactly (in fractions).

    Args:
        steps, noise_multiplier, clip_norm, lipschitz, strong_convexity, smoothness,
            learning_rate, num_examples, neighbouring: the run, as the bounds take it.
        step_limit: the bound on `learning_rate * smoothness` (strict).
        why: what the bound needs clipping never to act for.
        paper: the paper's form of the step-size limit, for the error message.

    Returns:
        `(steps, sigma, C, L, m, M, lr, n)`.

    Raises:
        ValueError: naming the parameter, its value and the valid range.
    """
    steps, sigma, c, lip, lr = check_gradient_run(
        steps=steps, noise_multiplier=noise_multiplier, clip_norm=clip_norm,
        lipschitz=lipschitz, learning_rate=learning_rate, neighbouring=neighbouring, why=why,
    )  # fmt: skip
    m, big_m = check_curvature(strong_convexity, smoothness)
    n = check_int("num_examples", num_examples, minimum=1)
    if Fraction(lr) * Fraction(big_m) >= step_limit:
        raise ValueError(
            f"learning_rate must be in (0, {step_limit}/smoothness) = "
            f"(0, {step_limit / big_m:.6g}) ({paper}), got {lr!r}"
        )
    return steps, sigma, c, lip, m, big_m, lr, n


def optional_epsilon(delta, epsilon_of) -> tuple[float | None, float | None]:
    """`(delta, epsilon_of(delta))` with delta checked, or `(None, None)` for no delta.

    Args:
        delta: None, or delta in (0, 1).
        epsilon_of: eps(delta) of the bound, called only when a delta is given.

    Returns:
        `(delta, epsilon)`, both None when `delta` is None.

    Raises:
        ValueError: for a delta outside (0, 1).
    """
    if delta is None:
        return None, None
    delta = check_delta("delta", delta)
    return delta, epsilon_of(delta)

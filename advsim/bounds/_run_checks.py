"""The checks every bound of a gradient run shares (`check_gradient_run`): the numbers in
range, the neighbouring relation known, and clipping that never acts (C >= L)."""

from __future__ import annotations

from advsim._validation import check_int, check_positive

__all__ = ["NEIGHBOURING", "check_gradient_run", "one_step_sensitivity"]

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

"""The checks every bound of a gradient run shares (`check_gradient_run`): the numbers in
range, the neighbouring relation known, and clipping that never acts (C >= L); and the
strongly convex bounds' shared keywords (`StronglyConvexRun`)."""

from __future__ import annotations

from fractions import Fraction
from typing import TypedDict

from advsim._validation import check_delta, check_int, check_keywords, check_positive

__all__ = [
    "NEIGHBOURING",
    "StronglyConvexRun",
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


class StronglyConvexRun(TypedDict):
    r"""A noisy GD run on an m-strongly convex, M-smooth objective, as the strongly convex
    bounds take it: `langevin_bound` (and `langevin_rdp`, `langevin_epsilon`),
    `strongly_convex_gdp_bound` (and `strongly_convex_gdp_epsilon`) and `noisy_sgd_rdp`
    (and `noisy_sgd_epsilon`).

    One dict states a setting once and every bound reads it:
    `langevin_bound(T, **run)`, `strongly_convex_gdp_bound(T, **run)`. Each bound states
    its own limit on `learning_rate` and the steps or epochs it runs; the neighbouring
    relation is each bound's own keyword (their defaults differ).

    Keys:
        noise_multiplier: $\sigma > 0$ (noise $\mathcal N(0, \sigma^2C^2I)$ on the summed
            gradient).
        clip_norm: $C \ge$ `lipschitz` (so clipping never acts).
        lipschitz: $L > 0$, a bound on every per-example gradient norm (on $K$, for a
            projected run).
        strong_convexity: $m > 0$, of the objective one step descends: the summed
            objective $F = \sum_i\ell_i + r$ for the full-batch bounds (the smaller over
            the two neighbouring datasets; for add/remove also without the canary), every
            batch objective $F_B = \sum_{i\in B}\ell_i + r$ for `noisy_sgd_rdp`.
        smoothness: $M \ge m$, of the same objective (the larger over the two).
        learning_rate: $\lambda > 0$, below the bound's own limit: $1/M$
            (`langevin_bound`), $2/M$ (`strongly_convex_gdp_bound`), $2/(M + m)$
            (`noisy_sgd_rdp`).
        num_examples: $n \ge 1$, the examples in the larger dataset (with the canary);
            the full-batch bounds do not depend on it (it maps the run to the papers'
            parameters), `noisy_sgd_rdp` needs $\lfloor n/b\rfloor \ge 2$.
    """

    noise_multiplier: float
    clip_norm: float
    lipschitz: float
    strong_convexity: float
    smoothness: float
    learning_rate: float
    num_examples: int


def check_strongly_convex_gd(
    caller: str,
    steps,
    run: dict,
    neighbouring: str,
    *,
    why: str,
    step_limit: int | None = None,
    paper: str = "",
) -> tuple:
    """The checks of a noisy GD run on an m-strongly convex, M-smooth objective.

    The keys of `run` (`check_keywords` against `StronglyConvexRun`), then
    `check_gradient_run`, `check_curvature`, `num_examples >= 1` and, given a
    `step_limit`, the step-size limit `learning_rate * M < step_limit`, exactly (in
    fractions).

    Args:
        caller: the bound's name, for a wrong keyword's message.
        steps: T (None: not checked).
        run: the bound's `StronglyConvexRun` keywords.
        neighbouring: one of `NEIGHBOURING`.
        why: what the bound needs clipping never to act for.
        step_limit: the bound on `learning_rate * smoothness` (strict); None: the caller
            checks its own.
        paper: the paper's form of the step-size limit, for the error message.

    Returns:
        `(steps, sigma, C, s_1, m, M, lr, n)`, with $s_1$ the one-step sensitivity of the
        summed gradient (`one_step_sensitivity`: L to add or remove, 2L to replace).

    Raises:
        TypeError: a key `StronglyConvexRun` does not have, or one of its keys missing.
        ValueError: naming the parameter, its value and the valid range.
    """
    check_keywords(caller, run, StronglyConvexRun)
    steps, sigma, c, lip, lr = check_gradient_run(
        steps=steps, noise_multiplier=run["noise_multiplier"], clip_norm=run["clip_norm"],
        lipschitz=run["lipschitz"], learning_rate=run["learning_rate"],
        neighbouring=neighbouring, why=why,
    )  # fmt: skip
    m, big_m = check_curvature(run["strong_convexity"], run["smoothness"])
    n = check_int("num_examples", run["num_examples"], minimum=1)
    if step_limit is not None and Fraction(lr) * Fraction(big_m) >= step_limit:
        raise ValueError(
            f"learning_rate must be in (0, {step_limit}/smoothness) = "
            f"(0, {step_limit / big_m:.6g}) ({paper}), got {lr!r}"
        )
    return steps, sigma, c, one_step_sensitivity(lip, neighbouring), m, big_m, lr, n


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

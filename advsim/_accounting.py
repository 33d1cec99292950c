"""What the bounds need to know about a run, kept apart from the mechanism that ran it."""

from __future__ import annotations

import dataclasses

import numpy as np

from advsim._limits import check_steps
from advsim._validation import check_canary_steps, check_positive, check_probability

__all__ = ["Accounting", "check_run_arguments"]

# Records longer than this are written by `to_dict` as a summary, not one entry per step.
_LISTED = 64


def _check_step_sizes(step_sizes, steps: int) -> tuple[float, ...] | None:
    """The step sizes as a tuple of floats, one per step, finite and > 0; None for a
    constant schedule (every step the same size), so one code path serves both."""
    if step_sizes is None:
        return None
    try:
        arr = np.asarray(step_sizes, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"step_sizes must be a sequence of {steps} real numbers (one learning rate per "
            f"step) or None, got {step_sizes!r}"
        ) from None
    if arr.ndim != 1 or arr.size != steps:
        raise ValueError(
            f"step_sizes must have one entry per step (steps = {steps}), got shape "
            f"{arr.shape}"
        )
    bad = ~(np.isfinite(arr) & (arr > 0))
    if np.any(bad):
        t = int(np.argmax(bad))
        raise ValueError(
            f"step_sizes must be finite and in (0, inf) (a learning rate per step), got "
            f"step_sizes[{t}] = {float(arr[t])!r} (step {t + 1})"
        )
    if np.all(arr == arr[0]):
        return None
    return tuple(arr.tolist())


def _summary(step_sizes: tuple[float, ...]) -> str:
    """A short description of a long schedule: its runs of equal sizes when there are
    few, else its range."""
    arr = np.asarray(step_sizes)
    starts = np.flatnonzero(np.concatenate(([True], arr[1:] != arr[:-1])))
    if starts.size <= 8:
        lengths = np.diff(np.append(starts, arr.size))
        runs = ", ".join(f"{arr[s]:.6g} x{n}" for s, n in zip(starts, lengths, strict=True))
        return f"{arr.size} step sizes: {runs}"
    return f"{arr.size} step sizes in [{arr.min():.6g}, {arr.max():.6g}]"


@dataclasses.dataclass(frozen=True)
class Accounting:
    r"""The public parameters of one DP-SGD run, as the privacy bounds see them.

    Attributes:
        steps: T, the number of noisy steps (noise accumulates over all of them), in
            [1, 10^7].
        sampling_prob: q, the probability that the canary is in the batch at a step that
            can carry it (1.0 for a fixed batch that always contains it).
        noise_multiplier: sigma; each step adds N(0, sigma^2 C^2 I).
        canary_steps: the 1-indexed steps at which the canary can be present, sorted.
        step_sizes: the learning rate $\eta_t$ of each step t = 1..T (finite, > 0), or
            None when every step has the same one. A tuple whose entries are all equal
            is stored as None: only the ratios of the step sizes matter to any bound, so
            a constant schedule is exactly the constant-rate case.

    The schedule does not change the composition bounds (every iterate released: each
    update is scaled by a public nonzero constant, an invertible post-processing of the
    iterates), but it changes the last iterate's: for a linear loss the last model is
    $m_0 + \sum_t \eta_t (b_t C + \sigma C \xi_t)$, so the last-iterate heuristic
    (Theorem 1 of arXiv:2410.06186) weights step t by $\eta_t$
    (`advsim.bounds.heuristic_epsilon`).

    Example:
        >>> Accounting(3, 1.0, 1.0, (1,), step_sizes=(0.5, 0.5, 0.5)).step_sizes is None
        True
        >>> Accounting(3, 1.0, 1.0, (1,), step_sizes=(1, 0.25, 0.25)).step_sizes
        (1.0, 0.25, 0.25)
    """

    steps: int
    sampling_prob: float
    noise_multiplier: float
    canary_steps: tuple[int, ...]
    step_sizes: tuple[float, ...] | None = None

    def __post_init__(self):
        steps = check_steps("steps", self.steps)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(
            self, "sampling_prob", check_probability("sampling_prob", self.sampling_prob)
        )
        object.__setattr__(
            self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier)
        )
        cs = check_canary_steps(self.canary_steps, steps, count=False)
        object.__setattr__(self, "canary_steps", cs)
        object.__setattr__(self, "step_sizes", _check_step_sizes(self.step_sizes, steps))

    @property
    def num_canary_steps(self) -> int:
        """How many steps can carry the canary (T when it can be in every step)."""
        return len(self.canary_steps)

    def describe_step_sizes(self) -> str:
        """The learning-rate schedule in words (for messages): "constant", the sizes, or a
        summary of a long schedule."""
        if self.step_sizes is None:
            return "constant"
        if self.steps <= _LISTED:
            return f"step_sizes = ({', '.join(f'{s:.6g}' for s in self.step_sizes)})"
        return f"step_sizes = {_summary(self.step_sizes)}"

    def refuse_schedule(self, name: str, why: str) -> None:
        """Raises a ValueError naming this run's learning-rate schedule, if it has one.

        For a function defined at one learning rate only (a bound, an exact epsilon, an
        audit): every such refusal reads the same, "`name` is not defined at a
        learning-rate schedule, but the accounting has one (...): `why`".

        Args:
            name: the function (or option) that refuses, e.g. "history_epsilon".
            why: why it cannot take a schedule, and what to use instead.

        Example:
            >>> Accounting(3, 1.0, 1.0, (1,)).refuse_schedule("my_bound", "...")  # none
            >>> run = Accounting(3, 1.0, 1.0, (1,), step_sizes=(1, 0.5, 0.5))
            >>> try:
            ...     run.refuse_schedule("my_bound", "it assumes one learning rate")
            ... except ValueError as e:
            ...     print(e)  # doctest: +NORMALIZE_WHITESPACE
            my_bound is not defined at a learning-rate schedule, but the accounting has one
            (step_sizes = (1, 0.5, 0.5)): it assumes one learning rate
        """
        if self.step_sizes is not None:
            raise ValueError(
                f"{name} is not defined at a learning-rate schedule, but the accounting has "
                f"one ({self.describe_step_sizes()}): {why}"
            )

    def to_dict(self) -> dict:
        """JSON-ready values; long `canary_steps` and `step_sizes` are summarised in a
        string (`step_sizes` is None for a constant learning rate)."""
        if self.step_sizes is None or self.steps <= _LISTED:
            sizes = None if self.step_sizes is None else list(self.step_sizes)
        else:
            sizes = _summary(self.step_sizes)
        return {
            "steps": self.steps,
            "sampling_prob": self.sampling_prob,
            "noise_multiplier": self.noise_multiplier,
            "num_canary_steps": self.num_canary_steps,
            "canary_steps": list(self.canary_steps)
            if self.num_canary_steps <= _LISTED
            else f"{self.num_canary_steps} steps",
            "step_sizes": sizes,
        }


def check_run_arguments(
    function: str | None, steps, sampling_prob, noise_multiplier, canary_steps=None
) -> Accounting | None:
    """Which of its two forms a call used: `f(..., accounting)` or `f(..., steps,
    sampling_prob, noise_multiplier, canary_steps=...)`, checked to be one of them.

    Args:
        function: the caller's name, which starts the messages (None: no name).
        steps: an `advsim.Accounting`, or T.
        sampling_prob, noise_multiplier, canary_steps: as the caller was given them
            (None where not given).

    Returns:
        The `Accounting` given as `steps`, or None for the numbers (`sampling_prob` and
        `noise_multiplier` both given; the caller checks their ranges).

    Raises:
        TypeError: an `Accounting` with numbers beside it; `sampling_prob` or
            `noise_multiplier` missing.
    """
    head = "" if function is None else f"{function}: "
    if isinstance(steps, Accounting):
        given = (("sampling_prob", sampling_prob), ("noise_multiplier", noise_multiplier),
                 ("canary_steps", canary_steps))  # fmt: skip
        extra = [name for name, value in given if value is not None]
        if extra:
            raise TypeError(
                f"{head}pass either an Accounting or steps, sampling_prob and "
                f"noise_multiplier, not both (got an Accounting and {', '.join(extra)})"
            )
        return steps
    numbers = {"sampling_prob": sampling_prob, "noise_multiplier": noise_multiplier}
    missing = [name for name, value in numbers.items() if value is None]
    if missing:
        raise TypeError(
            f"{head}missing {' and '.join(missing)} (or pass an advsim.Accounting as steps)"
        )
    return None

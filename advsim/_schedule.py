"""When the canary can be in the batch: the schedule of the steps that can carry it."""

from __future__ import annotations

import equinox as eqx
from jaxtyping import Array, Bool, Int

from advsim._validation import check_int

__all__ = ["CanarySchedule"]


class CanarySchedule(eqx.Module):
    """Which steps can carry the canary, and whether it is Poisson-sampled there.

    The canary can be present at steps `first, first + period, first + 2 period, ...` up
    to `last` (default: the last step), 1-indexed as in the papers. At those steps it is in
    the batch with probability `sampling_prob` when `sampled` is True (DP-SGD with Poisson
    sampling), or always when False (a crafted gradient inserted deterministically, or a
    fixed batch).

    Example:
        >>> CanarySchedule.every_step().steps(5)
        (1, 2, 3, 4, 5)
        >>> CanarySchedule.every(3).steps(10)
        (1, 4, 7, 10)
        >>> CanarySchedule.only(1, sampled=False).steps(10)
        (1,)
    """

    period: int = eqx.field(static=True, default=1)
    first: int = eqx.field(static=True, default=1)
    last: int | None = eqx.field(static=True, default=None)
    sampled: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if not isinstance(self.sampled, bool):
            raise TypeError(f"sampled must be True or False, got {self.sampled!r}")
        check_int("period", self.period, minimum=1)
        check_int("first", self.first, minimum=1)
        if self.last is not None:
            check_int("last", self.last, minimum=self.first)

    @classmethod
    def every_step(cls, *, sampled: bool = True) -> CanarySchedule:
        """The canary can be in every step (standard DP-SGD)."""
        return cls(period=1, first=1, last=None, sampled=sampled)

    @classmethod
    def every(cls, period: int, *, first: int = 1, sampled: bool = True) -> CanarySchedule:
        """Steps `first, first + period, ...` (e.g. a gradient canary every k-th step)."""
        return cls(period=period, first=first, last=None, sampled=sampled)

    @classmethod
    def only(cls, step: int, *, sampled: bool = True) -> CanarySchedule:
        """A single step, e.g. `only(1)` for a canary used at step 1 only."""
        return cls(period=1, first=step, last=step, sampled=sampled)

    @classmethod
    def parse(cls, text: str, *, sampled: bool = True) -> CanarySchedule:
        """The schedule a config writes as a string.

        Forms: `"every_step"`; `"every:K"` (steps 1, 1 + K, ...); `"every:K@F"` (steps F,
        F + K, ..., e.g. `"every:3@3"` for a gradient canary at steps 3, 6, ...);
        `"only:S"` (step S only).

        Example:
            >>> CanarySchedule.parse("every:3@3", sampled=False).steps(10)
            (3, 6, 9)

        Raises:
            ValueError: naming the text and the valid forms.
        """
        text = str(text).strip()
        kind, _, arg = text.partition(":")
        period, _, first = arg.partition("@")
        numbers = [period] + ([first] if first else [])
        try:
            if text == "every_step":
                return cls.every_step(sampled=sampled)
            if all(n.strip().isdigit() for n in numbers):
                if kind == "every":
                    return cls.every(int(period), first=int(first or 1), sampled=sampled)
                if kind == "only" and not first:
                    return cls.only(int(period), sampled=sampled)
        except ValueError as err:
            raise ValueError(f"canary_schedule {text!r}: {err}") from None
        raise ValueError(
            "canary_schedule must be 'every_step', 'every:K' (steps 1, 1+K, ...), 'every:K@F' "
            f"(steps F, F+K, ...) or 'only:S' (step S only), got {text!r}"
        )

    def steps(self, num_steps: int) -> tuple[int, ...]:
        """The 1-indexed steps in `[1, num_steps]` that can carry the canary."""
        last = num_steps if self.last is None else min(self.last, num_steps)
        return tuple(range(self.first, last + 1, self.period))

    def mask(self, t: Int[Array, ...]) -> Bool[Array, ...]:
        """Jittable membership test for 1-indexed steps `t`."""
        ok = (t >= self.first) & ((t - self.first) % self.period == 0)
        if self.last is not None:
            ok = ok & (t <= self.last)
        return ok

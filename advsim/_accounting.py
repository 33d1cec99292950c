"""What the bounds need to know about a run, kept apart from the mechanism that ran it."""

from __future__ import annotations

import dataclasses

from advsim._limits import check_steps
from advsim._validation import check_positive, check_probability

__all__ = ["Accounting"]


@dataclasses.dataclass(frozen=True)
class Accounting:
    """The public parameters of one DP-SGD run, as the privacy bounds see them.

    Attributes:
        steps: T, the number of noisy steps (noise accumulates over all of them), in
            [1, `advsim._limits.MAX_STEPS`].
        sampling_prob: q, the probability that the canary is in the batch at a step that
            can carry it (1.0 for a fixed batch that always contains it).
        noise_multiplier: sigma; each step adds N(0, sigma^2 C^2 I).
        canary_steps: the 1-indexed steps at which the canary can be present, sorted.
    """

    steps: int
    sampling_prob: float
    noise_multiplier: float
    canary_steps: tuple[int, ...]

    def __post_init__(self):
        steps = check_steps("steps", self.steps)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(
            self, "sampling_prob", check_probability("sampling_prob", self.sampling_prob)
        )
        object.__setattr__(
            self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier)
        )
        cs = tuple(sorted(int(s) for s in self.canary_steps))
        if not cs:
            raise ValueError("canary_steps must name at least one step, got ()")
        if cs[0] < 1 or cs[-1] > steps or len(set(cs)) != len(cs):
            raise ValueError(
                f"canary_steps must be distinct steps in [1, {steps}], got {self.canary_steps!r}"
            )
        object.__setattr__(self, "canary_steps", cs)

    @property
    def num_canary_steps(self) -> int:
        """How many steps can carry the canary (T when it can be in every step)."""
        return len(self.canary_steps)

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "sampling_prob": self.sampling_prob,
            "noise_multiplier": self.noise_multiplier,
            "num_canary_steps": self.num_canary_steps,
            "canary_steps": list(self.canary_steps)
            if self.num_canary_steps <= 64
            else f"{self.num_canary_steps} steps",
        }

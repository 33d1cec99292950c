"""The hyperparameters every DP-SGD mechanism shares, as one checked record.

`DPSGDParams` holds them (the scalars as traced 0-d float64 arrays, see
`advsim.validation.as_traced_float`)
and `DPSGDOptions` lists the keywords a mechanism forwards to it.
"""

from __future__ import annotations

from typing import Literal, TypedDict

import equinox as eqx
import numpy as np

from advsim._limits import check_steps
from advsim._schedule import CanarySchedule
from advsim._validation import as_traced_float, check_positive, check_probability

__all__ = ["DPSGDOptions", "DPSGDParams"]


class DPSGDOptions(TypedDict, total=False):
    """The keyword hyperparameters of `DPSGDParams`, as a mechanism forwards them.

    A mechanism whose run may use any of them takes `**dpsgd: Unpack[DPSGDOptions]` after
    its own keywords and builds `DPSGDParams(steps, sampling_prob, noise_multiplier,
    **dpsgd)`, so the four are spelled, defaulted and checked in one place. Sweep configs
    and `advsim.sweep.resolve` read these keys off the annotation, so an unknown key is
    still refused by name before anything runs.

    Keys:
        clip_norm: C > 0 (default 1.0).
        learning_rate: eta > 0 (default 1.0).
        canary_schedule: a `CanarySchedule` or its string form (default: every step,
            Poisson-sampled, unless the mechanism says otherwise).
        batching: "poisson" (default) or "fixed".
    """

    clip_norm: float
    learning_rate: float
    canary_schedule: CanarySchedule | str | None
    batching: Literal["poisson", "fixed"]


class DPSGDParams(eqx.Module):
    """The hyperparameters every DP-SGD mechanism shares, checked once.

    Every mechanism holds one as `params` (and reads it through the properties of
    `AbstractMechanism`: `mech.steps`, `mech.noise_multiplier`, ...), so the checks and the
    normalisation live here alone. The scalars are stored as 0-d float64 numpy arrays: they
    are traced by `eqx.filter_jit` (a sweep over sigma or q reuses one compiled function,
    e.g. through `eqx.tree_at(lambda m: m.params.noise_multiplier, mech, sigma)`), and
    float64 on the host keeps `accounting()` exact (q = 0.01 stays 0.01).

    Args:
        steps: T in [1, 10^7] (static: it sets the scan
            length).
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        clip_norm: C > 0.
        learning_rate: eta > 0.
        canary_schedule: a `CanarySchedule` (default: every step, Poisson-sampled), or its
            string form (`CanarySchedule.parse`).
        batching: "poisson" (default) or "fixed".

    Raises:
        ValueError: a value outside its range (the message names it and the range).
        TypeError: a canary_schedule that is neither a `CanarySchedule` nor a string.

    Example:
        >>> params = DPSGDParams(steps=100, sampling_prob=0.01, noise_multiplier=1.0)
        >>> params.steps, float(params.sampling_prob), params.canary_schedule.steps(3)
        (100, 0.01, (1, 2, 3))
    """

    steps: int = eqx.field(static=True)
    sampling_prob: np.ndarray
    noise_multiplier: np.ndarray
    clip_norm: np.ndarray
    learning_rate: np.ndarray
    canary_schedule: CanarySchedule
    batching: Literal["poisson", "fixed"] = eqx.field(static=True)

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        clip_norm: float = 1.0,
        learning_rate: float = 1.0,
        canary_schedule: CanarySchedule | str | None = None,
        batching: Literal["poisson", "fixed"] = "poisson",
    ):
        self.steps = check_steps("steps", steps)
        self.sampling_prob = as_traced_float("sampling_prob", sampling_prob, check_probability)
        self.noise_multiplier = as_traced_float(
            "noise_multiplier", noise_multiplier, check_positive
        )
        self.clip_norm = as_traced_float("clip_norm", clip_norm, check_positive)
        self.learning_rate = as_traced_float("learning_rate", learning_rate, check_positive)
        if canary_schedule is None:
            canary_schedule = CanarySchedule()
        elif isinstance(canary_schedule, str):
            canary_schedule = CanarySchedule.parse(canary_schedule)
        elif not isinstance(canary_schedule, CanarySchedule):
            raise TypeError(
                "canary_schedule must be a CanarySchedule or its string form, got "
                f"{type(canary_schedule).__name__}"
            )
        self.canary_schedule = canary_schedule
        if batching not in ("poisson", "fixed"):
            raise ValueError(f"batching must be 'poisson' or 'fixed', got {batching!r}")
        self.batching = batching

    @property
    def canary_sampled(self) -> bool:
        """Whether the canary is Poisson-sampled at its steps (else always present there)."""
        return self.canary_schedule.sampled and self.batching == "poisson"

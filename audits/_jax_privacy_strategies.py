"""jax_privacy's threshold strategies as values (`Split`, `MultiSplit`, `Bonferroni`,
`Explicit`), and `as_strategy`, which reads the names and records they are also given as."""

from __future__ import annotations

import dataclasses

import numpy as np

from . import _strategy_values as _values

__all__ = ["Bonferroni", "Explicit", "MultiSplit", "Split", "ThresholdStrategy", "as_strategy"]


@dataclasses.dataclass(frozen=True)
class ThresholdStrategy:
    """How a bound chooses its threshold (the base of `Explicit`, `Split`, `MultiSplit`,
    `Bonferroni`), as jax_privacy's `auditing.ThresholdStrategy`."""


@dataclasses.dataclass(frozen=True)
class Bonferroni(ThresholdStrategy):
    """The best threshold of the hull of (FN, TN) counts, each at level significance / K
    (K hull thresholds, counted on the scores themselves): jax_privacy's default."""


@dataclasses.dataclass(frozen=True)
class Explicit(ThresholdStrategy):
    """The bound at a given threshold, counted on all scores.

    Attributes:
        threshold: the test says "in" iff `score >= threshold`.
    """

    threshold: float


def _check_fraction(frac) -> None:
    if not 0.0 < frac < 1.0:
        raise ValueError(f"threshold_estimation_frac must be in (0, 1), got {frac!r}")


@dataclasses.dataclass(frozen=True)
class Split(ThresholdStrategy):
    """Choose the threshold on a random part of each world, count on the rest.

    Attributes:
        threshold_estimation_frac: the share of each world that chooses the threshold
            (the first `int(n * frac)` of a permutation), in (0, 1).
        seed: seed of `np.random.default_rng`; None draws one non-deterministically.
    """

    threshold_estimation_frac: float = 0.5
    seed: int | None = None

    def __post_init__(self):
        _check_fraction(self.threshold_estimation_frac)


@dataclasses.dataclass(frozen=True)
class MultiSplit(ThresholdStrategy):
    """The `np.median` of `num_samples` `Split` bounds, each at level significance / 2.

    Attributes:
        num_samples: the number of splits, >= 1.
        threshold_estimation_frac: each split's choosing share, in (0, 1).
        seed: seed of the generator that draws the splits' seeds; None draws one
            non-deterministically.
    """

    num_samples: int = 100
    threshold_estimation_frac: float = 0.5
    seed: int | None = None

    def __post_init__(self):
        _check_fraction(self.threshold_estimation_frac)
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int | np.integer):
            raise TypeError(f"num_samples must be an int, got {self.num_samples!r}")
        if self.num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {self.num_samples!r}")


_FIELDS = {
    "Bonferroni": (Bonferroni, ()),
    "Explicit": (Explicit, ("threshold",)),
    "Split": (Split, ("threshold_estimation_frac", "seed")),
    "MultiSplit": (MultiSplit, ("num_samples", "threshold_estimation_frac", "seed")),
}


def as_strategy(strategy) -> ThresholdStrategy:
    """This module's strategy for `strategy`: one of its own (returned as is),
    jax_privacy's `auditing.Explicit`, `Split`, `MultiSplit`, `Bonferroni` (read by class
    name and fields, without importing jax_privacy), or advsim's strategy values with the
    same statement (`advsim.audits.Split(fraction)`, `MultiSplit(num_splits, fraction)`,
    `Explicit(threshold)`: their split drawn as jax_privacy draws it, seed None).

    Raises:
        TypeError: anything else, with advsim's `Bonferroni()` (every distinct threshold,
            where jax_privacy's divides by the hull's), `RankSplit`, `ProjectedSplit`,
            `Same` and `BySampleSize` named: jax_privacy has no such strategy.

    Example:
        >>> as_strategy(Split(0.3, seed=1))
        Split(threshold_estimation_frac=0.3, seed=1)
    """
    if isinstance(strategy, ThresholdStrategy):
        return strategy
    if isinstance(strategy, _values.Split):
        return Split(float(strategy.fraction))
    if isinstance(strategy, _values.MultiSplit):
        return MultiSplit(int(strategy.num_splits), float(strategy.fraction))
    if isinstance(strategy, _values.Explicit):
        return Explicit(float(strategy.threshold))
    if isinstance(strategy, _values.ThresholdStrategy):
        raise TypeError(
            f"jax_privacy has no strategy {strategy!r}: the adapter takes advsim's Split, "
            "MultiSplit and Explicit (advsim's Bonferroni() divides by every distinct "
            "threshold, jax_privacy's by the hull's: use this module's Bonferroni()); run "
            "advsim's own strategies with advsim.audits.audit(..., threshold_selection=...)"
        )
    cls = type(strategy)
    if cls.__module__.startswith("jax_privacy") and cls.__name__ in _FIELDS:
        ours, fields = _FIELDS[cls.__name__]
        return ours(*(getattr(strategy, f) for f in fields))
    raise TypeError(
        "threshold_strategy must be Explicit, Split, MultiSplit or Bonferroni (this "
        f"module's or jax_privacy.auditing's), got {strategy!r}"
    )

"""AuditResult: what an audit found, with every number needed to check it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

__all__ = ["AuditResult"]


def _plain(value: Any) -> Any:
    """Converts numpy scalars/arrays (also inside dicts and lists) to plain Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """The outcome of one audit of a score set.

    Rates are those of the threshold test "canary in iff score >= threshold":
    FPR is the fraction of `canary_out` scores `>= threshold`, FNR the fraction of
    `canary_in` scores `< threshold`.

    Attributes:
        method: the audit's name (`"gdp"`, `"eps_delta"` or `"family"`).
        eps_lower: the epsilon lower bound at `delta`, with (joint) confidence `confidence`,
            under the method's assumption (`extras["assumption"]`). Always finite-or-inf,
            never NaN, and >= 0.
        eps_point: the same method with raw rates (no intervals) on all runs, at the best
            threshold with at least `min_count` false positives (and false negatives where
            the formula needs them); 0 when no threshold qualifies. For plots, not a bound.
            It is the maximum over ~1000 noisy thresholds, so it is biased upward, the
            more so the smaller `min_count`: at 10^6 runs per world with the default 50,
            measured +2% to +8% on Gaussian scores (GDP) and +2% to +26% above the true
            heuristic eps on scores drawn from the heuristic's own family (+1% to +3%
            with `min_count=10_000`).
        delta: the DP delta both epsilons are stated at.
        confidence: c; each of FPR and FNR got a one-sided Clopper-Pearson upper bound at
            level (1 - c)/2, so both hold together with probability >= c.
        rigorous: True iff the threshold was chosen on data disjoint from the data the
            rates were counted on (`threshold_selection="split"`), so that `eps_lower` is a
            valid lower bound with probability >= confidence, given the assumption.
        optimistic: True iff the threshold was chosen and the rates counted on the same
            runs (`threshold_selection="same"`): the papers' practice; the interval then
            ignores the selection and the bound can be too high.
        threshold: the chosen threshold tau.
        fpr, fnr: raw rates at `threshold`, counted on the runs that bound `eps_lower`.
        fpr_upper, fnr_upper: their Clopper-Pearson upper bounds.
        n_in, n_out: numbers of runs the rates were counted on (the held-out half of each
            world under `"split"`, all runs under `"same"`).
        extras: method-specific values (e.g. `mu_lower`, `sigma_upper`, the point
            estimate's threshold and parameter, the assumption in words).
    """

    method: str
    eps_lower: float
    eps_point: float
    delta: float
    confidence: float
    rigorous: bool
    optimistic: bool
    threshold: float
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    n_in: int
    n_out: int
    extras: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name in ("eps_lower", "eps_point"):
            value = float(getattr(self, name))
            if math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict:
        """All fields as plain Python values (floats, ints, bools, str, dict), JSON-ready."""
        return _plain(dataclasses.asdict(self))

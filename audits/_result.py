"""AuditResult: what an audit found, with every number needed to check it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ._guarantee import Guarantee

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
        method: the audit's name (`"gdp"`, `"eps_delta"`, `"family"` or `"tradeoff"`).
        eps_lower: the epsilon lower bound at `delta`, with (joint) confidence
            `confidence`, of the kind and under the assumption that `guarantee` names.
            A number >= 0 (possibly inf), never NaN; None only when the method's model
            does not fit the rates at all (the family audit's fit at the edge of the
            family), with the reason in `eps_lower_note`.
        eps_point: the same method with raw rates (no intervals), at the threshold chosen
            for `eps_lower` and counted on the same held-out runs: an estimate for
            plots, not a bound. None, with the reason in `eps_point_note`, when a count
            needed there is below `min_count` (too few errors to estimate a rate: e.g.
            perfectly separated scores), when the raw rates lie outside the method's model,
            or when the estimate would lie below `eps_lower` (which only a rate too small
            to estimate can cause). There is no fallback to a maximum over thresholds
            (such a maximum reached 10-50x the truth at small samples).
            Measured (`advsim figure point_estimate_bias`; median of eps_point / truth with
            the 10%-90% quantiles): GDP on exact Gaussian scores (mu = 1, 10^6 runs per
            world, 100 repeats) 1.001 [0.996, 1.005]; the family audit on the linear
            process it models (T = 10, q = 0.01, sigma = 0.3544, exact eps 2.0) at
            5 x 10^5 runs (20 repeats) 1.04 [0.91, 1.15], and None in 100 of 100
            repeats at 2000 runs (where the removed best-over-thresholds rule read up to
            82, median 12.9x); GDP on that linear process, whose assumption fails,
            0.17 at 2000 runs and 0.51 at 5 x 10^5 (an estimate of nothing there).
        eps_lower_note, eps_point_note: why the epsilon is None (else None).
        delta: the DP delta both epsilons are stated at (0: pure DP, where the method
            states it: `"eps_delta"`).
        confidence: c; each of FPR and FNR got a one-sided Clopper-Pearson upper bound at
            level (1 - c)/2, so both hold together with probability >= c (under either
            `extras["sides"]`: the one-sided statement needs both rates as well).
        guarantee: what `eps_lower` certifies (`audits.Guarantee`): the kind of statement,
            the assumption it needs, whether the threshold was held out.
        threshold: the chosen threshold tau.
        fpr, fnr: raw rates at `threshold`, counted on the runs that bound `eps_lower`.
        fpr_upper, fnr_upper: their Clopper-Pearson upper bounds.
        n_in, n_out: numbers of runs the rates were counted on (the held-out half of each
            world under `"split"`, all runs under `"same"`).
        extras: method-specific values (e.g. `mu_lower`, `sigma_upper`, the point
            estimate's threshold and parameter, the assumption in words), and `sides`
            ("two": both orders of the neighbouring pair; "one": only "score high means
            canary in").
        assumption_check: for audits whose `eps_lower` rests on an assumption about the
            trade-off curve (GDP, family), the test of that assumption on the held-out
            runs (`audits.AssumptionCheck`), else None. A rejection is also warned about
            (`AssumptionRejectedWarning`); a non-rejection does not make `eps_lower`
            assumption-free.
    """

    method: str
    eps_lower: float | None
    eps_point: float | None
    delta: float
    confidence: float
    guarantee: Guarantee
    threshold: float
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    n_in: int
    n_out: int
    extras: dict = dataclasses.field(default_factory=dict)
    eps_lower_note: str | None = None
    eps_point_note: str | None = None
    assumption_check: Any = None

    def __post_init__(self):
        for name in ("eps_lower", "eps_point"):
            value = getattr(self, name)
            note = getattr(self, f"{name}_note")
            if value is None:
                if not note:
                    raise ValueError(f"{name} is None: {name}_note must say why")
                continue
            value = float(value)
            if math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be a number >= 0 or None, got {value!r}")
            object.__setattr__(self, name, value)
        if not isinstance(self.guarantee, Guarantee):
            raise TypeError(f"guarantee must be an audits.Guarantee, got {self.guarantee!r}")

    @property
    def rigorous(self) -> bool:
        """True iff `eps_lower` is an assumption-free bound on a held-out threshold."""
        return self.guarantee.rigorous

    @property
    def optimistic(self) -> bool:
        """True iff the threshold was chosen on the runs its rates were counted on."""
        return not self.guarantee.held_out

    @property
    def assumption_rejected(self) -> bool | None:
        """The assumption check's verdict (None where the audit assumes nothing)."""
        return None if self.assumption_check is None else bool(self.assumption_check.rejected)

    def to_dict(self) -> dict:
        """All fields as plain Python values (floats, ints, bools, str, dict, None),
        JSON-ready, plus `rigorous`, `optimistic` and `assumption_rejected`."""
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("guarantee", "assumption_check")
        }
        out["guarantee"] = self.guarantee.to_dict()
        out["assumption_check"] = (
            None if self.assumption_check is None else self.assumption_check.to_dict()
        )
        out["rigorous"] = self.rigorous
        out["optimistic"] = self.optimistic
        out["assumption_rejected"] = self.assumption_rejected
        return _plain(out)

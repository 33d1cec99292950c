"""The threshold strategies by name: each `threshold_selection` value's audit and options."""

from __future__ import annotations

import inspect

from advsim import Scores

from ._base import (
    AbstractThresholdAudit,
)
from ._rank_split import rank_split_audit
from ._result import AuditResult
from ._strategies import (
    bonferroni_audit,
    explicit_audit,
    multi_split_audit,
    projected_split_audit,
)

__all__ = ["STRATEGIES", "STRATEGY_OPTIONS", "strategy_audit"]


#: Each strategy's audit, by its `threshold_selection` name.
_STRATEGY_AUDITS = {
    "explicit": explicit_audit,
    "multi_split": multi_split_audit,
    "projected_split": projected_split_audit,
    "bonferroni": bonferroni_audit,
    "rank_split": rank_split_audit,
}


#: The `threshold_selection` values this module adds to "split" and "same".
STRATEGIES: tuple[str, ...] = tuple(_STRATEGY_AUDITS)


#: Each strategy's options: its audit's parameters besides the audit, the scores, `delta`
#: and `accounting` (read off the signatures, so a new option is listed where it is taken).
STRATEGY_OPTIONS: dict[str, tuple[str, ...]] = {
    name: tuple(
        p
        for p in inspect.signature(func).parameters
        if p not in ("audit", "scores", "delta", "accounting")
    )
    for name, func in _STRATEGY_AUDITS.items()
}


def strategy_audit(
    strategy: str,
    audit: AbstractThresholdAudit,
    scores: Scores,
    *,
    delta,
    accounting=None,
    **options,
) -> AuditResult:
    """The audit of the named strategy (`STRATEGIES`) with its options (`STRATEGY_OPTIONS`)."""
    return _STRATEGY_AUDITS[strategy](audit, scores, delta=delta, accounting=accounting, **options)

"""The functional front door: `audit(scores, method, delta=...)` and `get_audit(name)`."""

from __future__ import annotations

from advsim._accounting import Accounting
from advsim._scores import Scores

from ._base import AbstractAudit
from ._eps_delta import EpsDeltaAudit
from ._family import HeuristicFamilyAudit
from ._gdp import GaussianDPAudit
from ._result import AuditResult
from ._tradeoff import TradeoffAudit

__all__ = ["AUDITS", "AUDIT_METHODS", "audit", "get_audit"]

#: Every audit by name; all share one contract (tests/audits/test_contract.py).
AUDITS: dict[str, type[AbstractAudit]] = {
    "gdp": GaussianDPAudit,
    "eps_delta": EpsDeltaAudit,
    "family": HeuristicFamilyAudit,
    "tradeoff": TradeoffAudit,
}
#: Every name `audit` / `get_audit` accept.
AUDIT_METHODS: tuple[str, ...] = tuple(sorted(AUDITS))


def get_audit(name: str, **kwargs) -> AbstractAudit:
    """Returns the audit called `name`, configured with `kwargs`.

    Args:
        name: one of `"gdp"` (`GaussianDPAudit`), `"eps_delta"` (`EpsDeltaAudit`),
            `"family"` (`HeuristicFamilyAudit`), `"tradeoff"` (`TradeoffAudit`, Algorithm
            2 of Annamalai 2024; needs `accounting`).
        **kwargs: the audit's fields (`confidence`, `threshold_selection`, `seed`,
            `min_count`; `num_thresholds`, ... for `"tradeoff"`).

    Raises:
        ValueError: unknown name (the message lists the valid ones) or bad field value.

    Example:
        >>> from advsim.audits import get_audit
        >>> get_audit("gdp", confidence=0.99).confidence
        0.99
    """
    try:
        cls = AUDITS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown audit method {name!r}; valid methods are {sorted(AUDITS)}"
        ) from None
    return cls(**kwargs)


def audit(
    scores: Scores,
    method: str = "gdp",
    *,
    delta: float,
    accounting: Accounting | None = None,
    confidence: float = 0.95,
    threshold_selection: str = "split",
    seed: int = 0,
    min_count: int = 50,
) -> AuditResult:
    """Audits `scores` with the named method; `get_audit(method, ...)(scores, ...)`.

    Args:
        scores: both worlds' scores (higher means "canary in").
        method: `"gdp"`, `"eps_delta"`, `"family"` or `"tradeoff"`; the result's
            `guarantee` says what its `eps_lower` certifies and assumes (only
            `"eps_delta"` and `"tradeoff"` assume nothing).
        delta: the DP delta, in (0, 1).
        accounting: the run's public parameters; required by `"family"` and
            `"tradeoff"`.
        confidence: c in (0.5, 1).
        threshold_selection: `"split"` (held out) or `"same"` (optimistic).
        seed: seed for the split.
        min_count: least counts at a threshold used by the point estimate.

    Returns:
        An `AuditResult`.

    Raises:
        ValueError: unknown method, bad delta/confidence, fewer than 2 scores per world,
            `"family"` without accounting.
        NonFiniteScoresError: some score is NaN or inf.

    Example:
        >>> import numpy as np
        >>> from advsim import Scores
        >>> from advsim.audits import audit
        >>> rng = np.random.default_rng(0)
        >>> s = Scores(rng.normal(1.0, 1.0, 10**4), rng.normal(0.0, 1.0, 10**4))
        >>> r = audit(s, "gdp", delta=1e-5)
        >>> (r.guarantee.assumption, r.rigorous, r.eps_lower > 0)
        ('gaussian_tradeoff', False, True)
    """
    auditor = get_audit(
        method,
        confidence=confidence,
        threshold_selection=threshold_selection,
        seed=seed,
        min_count=min_count,
    )
    return auditor(scores, delta=delta, accounting=accounting)

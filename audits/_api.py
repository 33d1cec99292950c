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

AUDITS: dict[str, type[AbstractAudit]] = {
    "gdp": GaussianDPAudit,
    "eps_delta": EpsDeltaAudit,
    "family": HeuristicFamilyAudit,
}
# The threshold audits above share one contract (tests/audits/test_contract.py); the
# trade-off audit reads the whole FPR-FNR curve instead and is reachable by name too.
_CURVE_AUDITS = {"tradeoff": TradeoffAudit}
#: Every name `audit` / `get_audit` accept.
AUDIT_METHODS: tuple[str, ...] = tuple(sorted(AUDITS)) + tuple(sorted(_CURVE_AUDITS))


def get_audit(name: str, **kwargs) -> AbstractAudit:
    """Returns the audit called `name`, configured with `kwargs`.

    Args:
        name: one of `"gdp"` (`GaussianDPAudit`), `"eps_delta"` (`EpsDeltaAudit`),
            `"family"` (`HeuristicFamilyAudit`), `"tradeoff"` (`TradeoffAudit`, Algorithm
            2 of Annamalai 2024; needs `accounting`).
        **kwargs: the audit's fields (`confidence`, `threshold_selection`, `seed`,
            `min_count`).

    Raises:
        ValueError: unknown name (the message lists the valid ones) or bad field value.

    Example:
        >>> from advsim.audits import get_audit
        >>> get_audit("gdp", confidence=0.99).confidence
        0.99
    """
    try:
        cls = AUDITS[name] if name in AUDITS else _CURVE_AUDITS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown audit method {name!r}; valid methods are {sorted(AUDITS)} "
            f"and {sorted(_CURVE_AUDITS)}"
        ) from None
    if cls is TradeoffAudit:
        # Its eps_lower is always certified on held-out runs, and its point estimate has
        # its own min_count (1, the paper's): the threshold-audit knobs do not apply.
        selection = kwargs.pop("threshold_selection", "split")
        if selection != "split":
            raise ValueError(
                f"threshold_selection must be 'split' for the tradeoff audit (its eps_lower "
                f"is always certified on held-out runs), got {selection!r}"
            )
        kwargs.pop("min_count", None)
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
        method: `"gdp"`, `"eps_delta"` or `"family"`; see the classes for what each
            assumes and when its `eps_lower` is a rigorous bound.
        delta: the DP delta, in (0, 1).
        accounting: the run's public parameters; required by `"family"` and
            `"tradeoff"`.
        confidence: c in (0.5, 1).
        threshold_selection: `"split"` (rigorous) or `"same"` (optimistic).
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
        >>> (r.rigorous, r.eps_lower > 0)
        (True, True)
    """
    auditor = get_audit(
        method,
        confidence=confidence,
        threshold_selection=threshold_selection,
        seed=seed,
        min_count=min_count,
    )
    return auditor(scores, delta=delta, accounting=accounting)

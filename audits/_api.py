"""The functional front door: `audit(scores, method, delta=...)` and `get_audit(name)`."""

from __future__ import annotations

from advsim import Accounting, Scores

from ._base import AbstractAudit, AbstractThresholdAudit
from ._eps_delta import EpsDeltaAudit
from ._family import HeuristicFamilyAudit
from ._gdp import GaussianDPAudit
from ._result import AuditResult
from ._strategies import STRATEGIES, STRATEGY_OPTIONS, strategy_audit
from ._tradeoff import TradeoffAudit

__all__ = ["AUDITS", "AUDIT_METHODS", "THRESHOLD_SELECTIONS", "audit", "get_audit"]

AUDITS: dict[str, type[AbstractAudit]] = {
    "gdp": GaussianDPAudit,
    "eps_delta": EpsDeltaAudit,
    "family": HeuristicFamilyAudit,
    "tradeoff": TradeoffAudit,
}
"""Every audit by name; all share one contract (tests/audits/test_contract.py)."""
AUDIT_METHODS: tuple[str, ...] = tuple(sorted(AUDITS))
"""Every name `audit` / `get_audit` accept."""


def _threshold_selections() -> dict[str, tuple[str, ...]]:
    own = {s: () for cls in AUDITS.values() for s in cls.threshold_selections}
    return {**own, **STRATEGY_OPTIONS}


THRESHOLD_SELECTIONS: dict[str, tuple[str, ...]] = _threshold_selections()
"""Every `threshold_selection` `audit` accepts, with the options of `audit` it takes: the
audits' own (`AbstractAudit.threshold_selections`: "split", "same"; no options), then the
strategies of `audits._strategies` ("explicit" takes `threshold`, "multi_split"
`num_splits`, "projected_split" `selection_fraction`, read off their signatures).
"""


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
    threshold: float | None = None,
    num_splits: int | None = None,
    selection_fraction: float | None = None,
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
        threshold_selection: one of `THRESHOLD_SELECTIONS`: `"split"` (held out),
            `"same"` (optimistic), or one of jax_privacy's strategies
            (`audits._strategies`): `"explicit"` (at `threshold`, all runs counted),
            `"multi_split"` (the lower median of `num_splits` split bounds at level
            (1 - c) / 2, Meinshausen et al. 2009; held out) or `"bonferroni"` (the best
            of all thresholds at level (1 - c) / K; placed at the observed scores, so not
            held out); or `"projected_split"` (two thresholds chosen on a
            `selection_fraction` of the runs with counts projected to the rest, counted
            on the others with Bonferroni over the two: held out).
        seed: seed for the split (the first split's under `"multi_split"`).
        min_count: least counts at a threshold used by the point estimate.
        threshold: the test's threshold, required by and only by `"explicit"`.
        num_splits: splits of `"multi_split"` (default 21); only with it.
        selection_fraction: the share of each world that chooses the thresholds of
            `"projected_split"`, in (0, 1) (default 0.15); only with it.

    Returns:
        An `AuditResult`.

    Raises:
        ValueError: unknown method or threshold_selection, bad delta/confidence, fewer
            than 2 scores per world, `"family"` without accounting, a `threshold`
            without `"explicit"` or `"explicit"` without one, another strategy's option.
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
    if threshold_selection not in THRESHOLD_SELECTIONS:
        raise ValueError(
            f"threshold_selection must be one of {tuple(THRESHOLD_SELECTIONS)}, got "
            f"{threshold_selection!r}"
        )
    if (threshold is not None) != (threshold_selection == "explicit"):
        raise ValueError(
            "threshold is given exactly when threshold_selection='explicit', got "
            f"threshold_selection={threshold_selection!r}, threshold={threshold!r}"
        )
    given = {
        "threshold": threshold,
        "num_splits": num_splits,
        "selection_fraction": selection_fraction,
    }
    options = {k: v for k, v in given.items() if v is not None}
    for key in options:
        if key not in THRESHOLD_SELECTIONS[threshold_selection]:
            takers = [s for s, opts in THRESHOLD_SELECTIONS.items() if key in opts]
            raise ValueError(
                f"{key} applies to threshold_selection={' or '.join(map(repr, takers))} "
                f"only, got threshold_selection={threshold_selection!r}"
            )
    strategy = threshold_selection if threshold_selection in STRATEGIES else None
    auditor = get_audit(
        method,
        confidence=confidence,
        threshold_selection="split" if strategy else threshold_selection,
        seed=seed,
        min_count=min_count,
    )
    if strategy is None:
        return auditor(scores, delta=delta, accounting=accounting)
    if not isinstance(auditor, AbstractThresholdAudit):
        raise ValueError(
            f"threshold_selection={strategy!r} needs a one-threshold audit "
            f"('eps_delta', 'gdp', 'family'), got method={method!r}"
        )
    return strategy_audit(strategy, auditor, scores, delta=delta, accounting=accounting, **options)

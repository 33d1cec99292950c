"""The functional front door: `audit(scores)` / `audit(in_scores, out_scores)` and
`get_audit(name)`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from advsim import Accounting, Scores

from ._base import SIDES, AbstractAudit, AbstractThresholdAudit, check_audit_delta
from ._eps_delta import EpsDeltaAudit
from ._family import HeuristicFamilyAudit
from ._gdp import GaussianDPAudit
from ._result import AuditResult
from ._strategy_registry import STRATEGIES, STRATEGY_OPTIONS, strategy_audit
from ._threshold import _check_real_scores
from ._tradeoff import TradeoffAudit

__all__ = [
    "AUDITS",
    "AUDIT_METHODS",
    "DEFAULT_DELTA",
    "DEFAULT_METHOD",
    "SIDES",
    "THRESHOLD_SELECTIONS",
    "audit",
    "get_audit",
]

AUDITS: dict[str, type[AbstractAudit]] = {
    "gdp": GaussianDPAudit,
    "eps_delta": EpsDeltaAudit,
    "family": HeuristicFamilyAudit,
    "tradeoff": TradeoffAudit,
}
"""Every audit by name; all share one contract (tests/audits/test_contract.py)."""
AUDIT_METHODS: tuple[str, ...] = tuple(sorted(AUDITS))
"""Every name `audit` / `get_audit` accept."""
DEFAULT_METHOD = "eps_delta"
"""`audit`'s method when none is named: the one that assumes nothing about the mechanism."""
DEFAULT_DELTA = 0.0
"""`audit`'s delta when none is given: pure DP, the one statement that needs no choice of
delta; the audits that cannot state it (their `pure_dp_refusal`) refuse it and say why."""


def _threshold_selections() -> dict[str, tuple[str, ...]]:
    own = {s: () for cls in AUDITS.values() for s in cls.threshold_selections}
    return {**own, **STRATEGY_OPTIONS}


THRESHOLD_SELECTIONS: dict[str, tuple[str, ...]] = _threshold_selections()
"""Every `threshold_selection` `audit` accepts, with the options of `audit` it takes: the
audits' own (`AbstractAudit.threshold_selections`: "split", "same"; no options), then the
threshold strategies ("explicit" takes `threshold`, "multi_split"
`num_splits`, "projected_split" `selection_fraction`, read off their signatures).
"""


def get_audit(name: str, **kwargs) -> AbstractAudit:
    """Returns the audit called `name`, configured with `kwargs`.

    Args:
        name: one of `"gdp"` (`GaussianDPAudit`), `"eps_delta"` (`EpsDeltaAudit`),
            `"family"` (`HeuristicFamilyAudit`), `"tradeoff"` (`TradeoffAudit`, Algorithm
            2 of Annamalai 2024; needs `accounting`).
        **kwargs: the audit's fields (`confidence`, `threshold_selection`, `seed`,
            `min_count`, `sides`; `num_thresholds`, ... for `"tradeoff"`).

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


def _score_array(name: str, value) -> np.ndarray:
    """One world's scores as a 1-D float array, or an error naming the argument."""
    if value is None or isinstance(value, str | bytes | Mapping | Scores):
        raise TypeError(
            f"{name} must be an array of scores (numpy, jax, a list), got {type(value).__name__}"
        )
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of scores: {err}") from None
    _check_real_scores(name, arr)
    return arr.astype(np.float64, copy=False)


def _as_scores(scores, out_scores, method) -> tuple[Scores, str]:
    """`(Scores, method)` from `audit`'s positional arguments: `(Scores[, method])` or
    `(in_scores, out_scores[, method])`; a string in the second place is the method."""
    if isinstance(out_scores, str):
        if method is not None:
            raise TypeError(
                f"method given twice: {out_scores!r} as the second argument and method={method!r}"
            )
        method, out_scores = out_scores, None
    method = DEFAULT_METHOD if method is None else method
    if out_scores is None:
        if isinstance(scores, Scores):
            return scores, method
        hint = (
            "; pass the two worlds as two arguments, audit(in_scores, out_scores)"
            if isinstance(scores, tuple | list) and len(scores) == 2
            else ""
        )
        raise TypeError(
            "scores must be an advsim.Scores, or the canary-in scores with the canary-out "
            f"scores as the second argument (out_scores), got {type(scores).__name__} alone" + hint
        )
    if isinstance(scores, Scores):
        raise TypeError(
            "scores is an advsim.Scores, which holds both worlds: give no out_scores (got "
            f"{type(out_scores).__name__}); the method goes second, audit(scores, method)"
        )
    in_arr = _score_array("in_scores (the first argument)", scores)
    out_arr = _score_array("out_scores (the second argument)", out_scores)
    return Scores(in_arr, out_arr), method


def audit(
    scores: Scores | np.ndarray,
    out_scores: np.ndarray | str | None = None,
    /,
    method: str | None = None,
    *,
    delta: float = DEFAULT_DELTA,
    accounting: Accounting | None = None,
    confidence: float = 0.95,
    threshold_selection: str = "split",
    sides: str = "two",
    seed: int = 0,
    min_count: int = 50,
    threshold: float | None = None,
    num_splits: int | None = None,
    selection_fraction: float | None = None,
) -> AuditResult:
    """Audits two worlds' scores with the named method; `get_audit(method, ...)(scores, ...)`.

    Two spellings: `audit(scores, method)` with an `advsim.Scores`, or
    `audit(in_scores, out_scores, method)` with the two worlds as arrays (numpy, jax,
    lists; 1-D, real numbers). A string in the second place is the method, as before;
    `method=` may also be given by keyword. With no other argument,
    `audit(in_scores, out_scores)` is assumption-free: method `"eps_delta"` at delta = 0.

    Args:
        scores: an `advsim.Scores` (both worlds; higher means "canary in"), or the
            canary-in scores when `out_scores` is given.
        out_scores: the canary-out scores (with array `scores`), or the method.
        method: `"eps_delta"` (default: None means it), `"tradeoff"`, `"gdp"` or
            `"family"`; the result's `guarantee` says what its `eps_lower` certifies and
            assumes (only `"eps_delta"` and `"tradeoff"` assume nothing).
        delta: the DP delta, in [0, 1). Default 0: pure DP, a statement that needs no
            choice of delta, the one for which the default method's bound (the log of a
            ratio of bounded rates) is exact. It is a lower bound on the eps of
            (eps, 0)-DP, the largest eps of any delta: compare it with a claimed eps at
            delta = 0 (infinite for Gaussian noise), and pass the claim's delta (e.g.
            `delta=1e-5`) to test a claimed (eps, delta). `"gdp"`, `"family"` and
            `"tradeoff"` refuse delta = 0 (a ValueError says why: their eps is infinite
            there for every mechanism they model) and need a delta in (0, 1).
        accounting: the run's public parameters; required by `"family"` and
            `"tradeoff"`.
        confidence: c in (0.5, 1); `eps_lower` holds with probability >= c.
        threshold_selection: one of `THRESHOLD_SELECTIONS`: `"split"` (held out),
            `"same"` (optimistic), or one of jax_privacy's strategies
            (`STRATEGIES`): `"explicit"` (at `threshold`, all runs counted),
            `"multi_split"` (the lower median of `num_splits` split bounds at level
            (1 - c) / 2, Meinshausen et al. 2009; held out) or `"bonferroni"` (the best
            of all thresholds at level (1 - c) / K; placed at the observed scores, so not
            held out); or advsim's own, held out: `"projected_split"` (two thresholds
            chosen on a `selection_fraction` of the runs with counts projected to the
            rest, counted on the others with Bonferroni over the two) and `"rank_split"`
            (up to two tests planned on a `selection_fraction` of the runs, each placed
            at a rank of the counting part; the best held-out strategy measured against
            jax_privacy's, `advsim figure threshold_vs_jax_privacy`).
        sides: `"two"` (default): both orders of the neighbouring pair, the larger of the
            two (eps, delta) inequalities of the test; `"one"`: only
            `P(score >= tau) <= e^eps Q(score >= tau) + delta` ("score high means canary
            in"; jax_privacy's `one_sided=True`). Both bound FPR and FNR at level
            (1 - c) / 2 each (the one inequality needs both rates too), with no split
            between the two inequalities: they are read off the same jointly valid
            bounds. `"gdp"` gives the same numbers under both (G_mu is symmetric);
            `"family"` takes only `"two"`.
        seed: seed for the split (the first split's under `"multi_split"`).
        min_count: least counts at a threshold used by the point estimate.
        threshold: the test's threshold, required by and only by `"explicit"`.
        num_splits: splits of `"multi_split"` (default 21); only with it.
        selection_fraction: the share of each world that plans the thresholds of
            `"projected_split"` (default 0.15) or `"rank_split"` (default 0.1), in
            (0, 1); only with them.

    Returns:
        An `AuditResult` (`extras["sides"]` records `sides`).

    Raises:
        TypeError: scores that are neither a `Scores` nor two arrays of real numbers (the
            message names the argument), the method given twice.
        ValueError: unknown method, threshold_selection or sides, bad delta/confidence, a
            score array that is not 1-D or empty, fewer than 2 scores per world,
            `"family"` without accounting, a `threshold` without `"explicit"` or
            `"explicit"` without one, another strategy's option, delta = 0 or
            `sides="one"` where the method refuses it.
        NonFiniteScoresError: some score is NaN or inf.

    Example:
        >>> import numpy as np
        >>> from advsim.audits import audit
        >>> rng = np.random.default_rng(0)
        >>> x_in, x_out = rng.normal(1.0, 1.0, 10**4), rng.normal(0.0, 1.0, 10**4)
        >>> r = audit(x_in, x_out)  # eps_delta at delta = 0: assumes nothing
        >>> (r.method, r.delta, r.guarantee.assumption, r.rigorous, r.eps_lower > 0)
        ('eps_delta', 0.0, 'none', True, True)
        >>> from advsim import Scores
        >>> g = audit(Scores(x_in, x_out), "gdp", delta=1e-5)
        >>> (g.guarantee.assumption, g.rigorous, g.eps_lower > r.eps_lower)
        ('gaussian_tradeoff', False, True)
    """
    scores, method = _as_scores(scores, out_scores, method)
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
        sides=sides,
    )
    delta = check_audit_delta(auditor, delta)
    if strategy is None:
        return auditor(scores, delta=delta, accounting=accounting)
    if not isinstance(auditor, AbstractThresholdAudit):
        raise ValueError(
            f"threshold_selection={strategy!r} needs a one-threshold audit "
            f"('eps_delta', 'gdp', 'family'), got method={method!r}"
        )
    return strategy_audit(strategy, auditor, scores, delta=delta, accounting=accounting, **options)

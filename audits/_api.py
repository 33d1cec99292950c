"""The functional front door: `audit(scores)` / `audit(in_scores, out_scores)` and
`get_audit(name)`."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Mapping

import numpy as np

from advsim import Accounting, Scores

from ._base import (
    SIDES,
    AbstractAudit,
    AbstractThresholdAudit,
    ScoreOrientationWarning,
    check_audit_delta,
    draw_seed,
)
from ._eps_delta import EpsDeltaAudit
from ._family import HeuristicFamilyAudit
from ._gdp import GaussianDPAudit
from ._result import AuditResult
from ._strategy_values import (
    ALIASES,
    BySampleSize,
    Same,
    Split,
    ThresholdStrategy,
    as_threshold_strategy,
)
from ._threshold import _check_real_scores
from ._tradeoff import TradeoffAudit

__all__ = [
    "AUDITS",
    "AUDIT_METHODS",
    "DEFAULT_DELTA",
    "DEFAULT_METHOD",
    "DEFAULT_THRESHOLD_SELECTION",
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


THRESHOLD_SELECTIONS: dict[str, tuple[str, ...]] = {
    alias: tuple(keywords) for alias, (_, keywords) in ALIASES.items()
}
"""Every `threshold_selection` alias `audit` accepts, with the options of `audit` it takes
("explicit" takes `threshold`, "multi_split" `num_splits`, "projected_split" and
"rank_split" `selection_fraction`); `audit` also takes a `ThresholdStrategy` value and a
class path `"module:Class"` of one.
"""
DEFAULT_THRESHOLD_SELECTION = "by_sample_size"
"""`audit`'s strategy when none is given: `BySampleSize()`, the best rigorous strategy for
the sample size (`RankSplit()` from 3 scores per world, else `Split()`)."""


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
    threshold_selection: str | ThresholdStrategy = DEFAULT_THRESHOLD_SELECTION,
    sides: str = "two",
    seed: int | None = 0,
    min_count: int = 50,
    threshold: float | None = None,
    num_splits: int | None = None,
    selection_fraction: float | None = None,
    check_orientation: bool = True,
) -> AuditResult:
    """Audits two worlds' scores with the named method; `get_audit(method, ...)(scores, ...)`.

    Two spellings: `audit(scores, method)` with an `advsim.Scores`, or
    `audit(in_scores, out_scores, method)` with the two worlds as arrays (numpy, jax,
    lists; 1-D, real numbers). A string in the second place is the method;
    `method=` may also be given by keyword. With no other argument,
    `audit(in_scores, out_scores)` is assumption-free and held out: method `"eps_delta"` at
    delta = 0, its threshold chosen by `BySampleSize()`.

    Args:
        scores: an `advsim.Scores` (both worlds; higher means "canary in"), or the
            canary-in scores when `out_scores` is given.
        out_scores: the canary-out scores (with array `scores`), or the method.
        method: `"eps_delta"` (default: None means it), `"tradeoff"`, `"gdp"` or
            `"family"`; the result's `guarantee` says what its `eps_lower` certifies and
            assumes (only `"eps_delta"` and `"tradeoff"` assume nothing).
        delta: the DP delta, in [0, 1). Default 0 (`DEFAULT_DELTA`): pure DP, a statement
            that needs no choice of delta, the one for which the default method's bound
            (the log of a ratio of bounded rates) is exact. It is a lower bound on the eps
            of (eps, 0)-DP, the largest eps of any delta: compare it with a claimed eps at
            delta = 0 (infinite for Gaussian noise), and pass the claim's delta (e.g.
            `delta=1e-5`, the default of `run_audit`, the sweeps and the command
            line, which audit a DP-SGD run against its claimed (eps, delta)) to test a
            claimed (eps, delta). `"gdp"`, `"family"` and `"tradeoff"` refuse delta = 0 (a
            ValueError says why: their eps is infinite there for every mechanism they
            model) and need a delta in (0, 1).
        accounting: the run's public parameters; required by `"family"` and
            `"tradeoff"`.
        confidence: c in (0.5, 1); `eps_lower` holds with probability >= c.
        threshold_selection: how the threshold is chosen: a `ThresholdStrategy` value
            (`BySampleSize()`, `Split(fraction)`, `Same()`, `Explicit(threshold,
            chosen_in_advance=...)`, `MultiSplit(num_splits, fraction)`,
            `ProjectedSplit(fraction)`, `RankSplit(fraction)`, `Bonferroni()`, or one of
            your own), its alias (`THRESHOLD_SELECTIONS`: `"by_sample_size"`, the default,
            `"split"`, `"same"`, `"explicit"`, `"multi_split"`, `"projected_split"`,
            `"rank_split"`, `"bonferroni"`), or the class path `"module:Class"` of a
            strategy of your own. `"tradeoff"` chooses its own thresholds: it takes only
            the default, `"split"` and `"same"` where it allows them.
        sides: `"two"` (default): both orders of the neighbouring pair, the larger of the
            two (eps, delta) inequalities of the test; `"one"`: only
            `P(score >= tau) <= e^eps Q(score >= tau) + delta` ("score high means canary
            in"; jax_privacy's `one_sided=True`). Both bound FPR and FNR at level
            (1 - c) / 2 each (the one inequality needs both rates too), with no split
            between the two inequalities: they are read off the same jointly valid
            bounds. Fix it before looking at the scores. `"gdp"` gives the same numbers
            under both (G_mu is symmetric); `"family"` takes only `"two"`.
        seed: seed of the strategy's random split (the first split's under
            `"multi_split"`); None draws one from the OS, recorded in the result
            (`extras["seed"]`, with `extras["seed_drawn"]` True).
        min_count: least counts at a threshold used by the point estimate.
        threshold: the test's threshold of the alias `"explicit"` (required by it, and
            only by it; `Explicit(threshold, chosen_in_advance=True)` declares it fixed in
            advance).
        num_splits: splits of `"multi_split"` (default 21); only with it.
        selection_fraction: the share of each world that plans the thresholds of
            `"projected_split"` (default 0.15) or `"rank_split"` (default 0.1), in
            (0, 1); only with them.
        check_orientation: when `eps_lower` is 0 (or None), audit the reversed scores
            too and, if they would certify a positive eps, say so in
            `extras["orientation_note"]` and warn (`ScoreOrientationWarning`): the scores
            look oriented the wrong way ("higher means canary in"). The reported number
            is not changed, and the reversed bound is not a result: an orientation chosen
            after looking at the scores is a choice on the counted runs.

    Returns:
        An `AuditResult` (`extras["sides"]` records `sides`, `extras["threshold_selection"]`
        the strategy's name and `extras["strategy"]` the strategy).

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
        >>> r.extras["chosen_strategy"]
        'RankSplit()'
        >>> from advsim import Scores
        >>> g = audit(Scores(x_in, x_out), "gdp", delta=1e-5)
        >>> (g.guarantee.assumption, g.rigorous, g.eps_lower > r.eps_lower)
        ('gaussian_tradeoff', False, True)
    """
    scores, method = _as_scores(scores, out_scores, method)
    given = {
        "threshold": threshold,
        "num_splits": num_splits,
        "selection_fraction": selection_fraction,
    }
    options = {k: v for k, v in given.items() if v is not None}
    strategy = as_threshold_strategy(threshold_selection, **options)
    drawn = seed is None
    if drawn:
        seed = draw_seed()
    auditor = get_audit(
        method,
        confidence=confidence,
        threshold_selection="same" if isinstance(strategy, Same) else "split",
        seed=seed,
        min_count=min_count,
        sides=sides,
    )
    delta = check_audit_delta(auditor, delta)
    if isinstance(auditor, AbstractThresholdAudit):
        run = functools.partial(strategy, auditor, delta=delta, accounting=accounting)
    elif _own_selection(strategy, auditor):
        run = functools.partial(auditor, delta=delta, accounting=accounting)
    else:
        raise ValueError(
            f"threshold_selection={strategy.label()!r} needs a one-threshold audit "
            f"('eps_delta', 'gdp', 'family'); the {method!r} audit chooses its thresholds "
            f"itself (it takes {list(auditor.threshold_selections)})"
        )
    result = run(scores)
    extras = dict(result.extras)
    if drawn:
        extras.update(seed=seed, seed_drawn=True)
    if check_orientation and not result.eps_lower:
        extras.update(_orientation(run, scores))
    return dataclasses.replace(result, extras=extras)


def _own_selection(strategy: ThresholdStrategy, auditor: AbstractAudit) -> bool:
    """Whether an audit that chooses its own thresholds can run `strategy`: the default
    and `Split()` where it splits, `Same()` where it allows it."""
    half = isinstance(strategy, Split) and strategy.fraction == 0.5
    if isinstance(strategy, BySampleSize) or half:
        return "split" in auditor.threshold_selections
    return isinstance(strategy, Same) and "same" in auditor.threshold_selections


def _orientation(run, scores: Scores) -> dict:
    """`{"orientation_note": ...}` and a `ScoreOrientationWarning` when the reversed
    scores would certify a positive eps where the scores as given certify none."""
    flipped = Scores(-np.asarray(scores.canary_in), -np.asarray(scores.canary_out))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reversed_eps = run(flipped).eps_lower
    if not reversed_eps:
        return {}
    note = (
        f"eps_lower is 0 with these scores, but the same audit of the negated scores gives "
        f"{reversed_eps:.4g}: the scores look oriented the wrong way (an audit reads "
        "'higher means canary in'). If lower scores mean 'in' for this adversary, negate "
        "them before auditing (audit(-x_in, -x_out)), a choice to fix before looking at "
        "the scores; the negated number is not a result of this audit"
    )
    warnings.warn(ScoreOrientationWarning(note), stacklevel=3)
    return {"orientation_note": note, "reversed_eps_lower": float(reversed_eps)}

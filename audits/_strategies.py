r"""Threshold strategies as jax_privacy names them, for the threshold audits.

jax_privacy's `CanaryScoreAuditor` takes a `threshold_strategy`: `Explicit(tau)`,
`Split(frac, seed)`, `MultiSplit(num_samples, frac, seed)` and `Bonferroni()`. The
threshold audits here choose on a split (`threshold_selection="split"`) or on the same
runs (`"same"`); this module adds the other three, reached through
`audits.audit(..., threshold_selection=...)`:

- `"explicit"`: the caller's `threshold`, all runs counted (`audit_at_threshold`). Valid
  only if the threshold was fixed without these scores; the guarantee says it is not
  known to be (held_out False).
- `"multi_split"` (Meinshausen, Meier & Buhlmann 2009, "p-values for high-dimensional
  regression", Theorem 3.1 with gamma = 1/2): `num_splits` independent `"split"` audits,
  each at level alpha / 2 (confidence 1 - (1 - c) / 2), and `eps_lower` their *lower*
  median: eps < the lower median means a strict majority of the split bounds exceed eps,
  i.e. more than half of the split p-values are below alpha / 2, which rejects at level
  alpha under any convention for the empirical median. jax_privacy reports `np.median`
  (the mean of the two middle bounds for an even count, slightly above); for an odd
  count both are the same order statistic. Held out, assumption-free for `"eps_delta"`.
- `"bonferroni"`: every distinct threshold (one between each pair of adjacent pooled
  scores, plus one above all: n_in + n_out + 1 tests at most) at level alpha / K, the
  best of them, counted on all runs. The tests sit at the observed scores, so the union
  bound is over a data-placed family (as jax_privacy's `Bonferroni()`, which moreover
  divides only by the number of thresholds on the Pareto frontier of (FN, TN) counts);
  the guarantee says held_out False.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from advsim._scores import Scores
from advsim._validation import check_delta, check_int

from ._base import AbstractThresholdAudit, audit_at_threshold
from ._guarantee import Guarantee
from ._result import AuditResult
from ._threshold import clopper_pearson_upper, counts_at

__all__ = ["STRATEGIES", "multi_split_audit", "bonferroni_audit", "explicit_audit"]

#: The `threshold_selection` values this module adds to "split" and "same".
STRATEGIES = ("explicit", "multi_split", "bonferroni")


def _with(result: AuditResult, *, confidence, held_out, multiplicity, extras) -> AuditResult:
    g = result.guarantee
    guarantee = Guarantee(
        statement=g.statement,
        assumption=g.assumption,
        held_out=held_out,
        multiplicity=multiplicity,
        certified=g.certified if held_out else None,
    )
    return dataclasses.replace(
        result,
        confidence=confidence,
        guarantee=guarantee,
        extras={**result.extras, **extras},
    )


def explicit_audit(
    audit: AbstractThresholdAudit, scores: Scores, threshold: float, *, delta, accounting=None
) -> AuditResult:
    """The audit's bound at the caller's `threshold`, counted on all runs."""
    threshold = float(threshold)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    return audit_at_threshold(audit, scores, threshold, delta=delta, accounting=accounting)


def multi_split_audit(
    audit: AbstractThresholdAudit,
    scores: Scores,
    *,
    delta,
    accounting=None,
    num_splits: int = 21,
) -> AuditResult:
    """The lower median of `num_splits` split bounds at level alpha / 2 (module docstring).

    Split i uses the seed `audit.seed + i`. Returns the split result whose `eps_lower` is
    the lower median, with the confidence `audit.confidence`, the guarantee's multiplicity
    naming the rule, and `extras["split_eps_lower"]` (all bounds, sorted).
    """
    num_splits = check_int("num_splits", num_splits, minimum=1)
    half = 1.0 - (1.0 - audit.confidence) / 2.0
    results = [
        dataclasses.replace(
            audit, confidence=half, threshold_selection="split", seed=audit.seed + i
        )(scores, delta=delta, accounting=accounting)
        for i in range(num_splits)
    ]
    values = np.array([-1.0 if r.eps_lower is None else r.eps_lower for r in results])
    order = np.argsort(values, kind="stable")
    lower_median = results[int(order[(num_splits - 1) // 2])]
    return _with(
        lower_median,
        confidence=audit.confidence,
        held_out=True,
        multiplicity=(
            f"lower median of {num_splits} split bounds, each at level (1 - c) / 2 "
            "(Meinshausen, Meier & Buhlmann 2009, Theorem 3.1)"
        ),
        extras={
            "threshold_selection": "multi_split",
            "num_splits": num_splits,
            "split_eps_lower": [float(v) for v in np.sort(values)],
        },
    )


def bonferroni_audit(
    audit: AbstractThresholdAudit, scores: Scores, *, delta, accounting=None
) -> AuditResult:
    """The best of all distinct thresholds, each bounded at level alpha / K (K of them)."""
    if not isinstance(scores, Scores):
        raise TypeError(f"scores must be an advsim.Scores, got {type(scores).__name__}")
    delta = check_delta("delta", delta)
    scores.check_finite()
    ctx = audit._context(accounting)
    cin = np.sort(np.asarray(scores.canary_in, np.float64))
    cout = np.sort(np.asarray(scores.canary_out, np.float64))
    pooled = np.unique(np.concatenate([cin, cout]))
    cands = np.concatenate([pooled, [np.nextafter(pooled[-1], np.inf)]])
    k = cands.size
    level = (1.0 - audit.confidence) / (2.0 * k)
    fp, fn = counts_at(cin, cout, cands)
    best = audit._select(
        clopper_pearson_upper(fp, cout.size, level),
        clopper_pearson_upper(fn, cin.size, level),
        delta,
        ctx,
    )
    strict = dataclasses.replace(audit, confidence=1.0 - (1.0 - audit.confidence) / k)
    result = audit_at_threshold(strict, scores, cands[best], delta=delta, accounting=accounting)
    return _with(
        result,
        confidence=audit.confidence,
        held_out=False,
        multiplicity=(
            f"Bonferroni over all {k} distinct thresholds, placed at the observed scores "
            "(a data-placed family: not held out)"
        ),
        extras={"threshold_selection": "bonferroni", "n_candidates": int(k)},
    )

r"""Membership-inference metrics beside epsilon: TPR at low FPR, AUROC, balanced accuracy.

Papers on membership inference report these numbers next to (or instead of) an epsilon.
Each is computed here from two score arrays, `in_scores` (runs with the canary) and
`out_scores` (runs without it), higher meaning "canary in", and each comes back labelled
with what it certifies (`Metric.certifies`), as every number in advsim:

- `tpr_at_fpr`, `auroc`, `balanced_accuracy`: empirical values on these runs. They are
  estimates of the population quantities, not bounds. Each reads the ROC curve one of
  two ways (`interpolation`, recorded in `Metric.definition`): `"empirical"` (default,
  sklearn's) or `"hull"` (jax_privacy's, below).
- `eps_from_counts`: the (eps, delta) lower bound of one threshold test from its raw
  counts, with Clopper-Pearson intervals (the bound of `EpsDeltaAudit` at a fixed
  threshold); an assumption-free bound at confidence c when the threshold was fixed
  without looking at those counts. With `confidence=None`, the plug-in estimate.
- `bootstrap_interval`: a percentile-bootstrap interval for any of the score metrics,
  returned as a `MetricEstimate`: an approximate interval with no guarantee, not a bound.

Convention (that of `advsim.audits`, see `audits._threshold`): a test is a deterministic
threshold test, "canary in" iff `score >= tau`; no randomised tests. Scores equal to `tau`
are all on the "in" side, so tied scores move together: the achievable operating points
are the vertices of the empirical ROC curve, one per distinct score (tau at that score)
plus the test above every score (FPR = TPR = 0). These are exactly the points of
`sklearn.metrics.roc_curve(..., drop_intermediate=False)`, with no interpolation
between them: `interpolation="empirical"`, the default.

`interpolation="hull"` admits randomised tests instead: "in" iff `score >= tau_1`, and
for scores in `[tau_2, tau_1)` "in" with probability p. They reach the segments between
the vertices, and the best of them the upper convex hull of the ROC points
(`audits._roc_hull`). This is jax_privacy's definition (`CanaryScoreAuditor`, whose
`tpr_at_given_fpr`, `attack_auroc` and `max_accuracy` read the hull): TPR at FPR and
AUROC are then never smaller, and larger where the empirical curve is not concave
(by 0.2 and 0.0625 on `tpr_at_fpr`'s four-and-four example at FPR 0.1); the best balanced
accuracy is the same number under both.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from advsim import NonFiniteScoresError
from advsim.validation import check_delta, check_in_interval

from ._bayes import _counts
from ._eps_delta import eps_delta_terms
from ._result import _plain
from ._roc_hull import check_interpolation, definition, hull_area2, hull_tpr, roc_hull
from ._threshold import _check_real_scores, clopper_pearson_upper

__all__ = [
    "Metric",
    "MetricEstimate",
    "auroc",
    "balanced_accuracy",
    "eps_from_counts",
    "tpr_at_fpr",
]

# What an empirical metric certifies.
_EMPIRICAL = "empirical value on these runs: an estimate, not a bound"


@dataclasses.dataclass(frozen=True)
class Metric:
    """One metric's value, labelled with what it certifies.

    Attributes:
        name: the metric (`"tpr_at_fpr"`, `"auroc"`, `"balanced_accuracy"`, `"eps_lower"`
            or `"eps_point"`).
        value: the number (a float, never NaN; `eps_point` may be inf).
        certifies: what `value` is, in one sentence: `"empirical value on these runs: an
            estimate, not a bound"` for the score metrics; for `eps_lower`, the confidence
            and the condition under which it is a bound.
        details: how it was computed: sizes, the operating point (threshold, rates), the
            parameters (target FPR, delta, confidence).
        definition: for the score metrics, which reading of the ROC curve `value`
            follows: `"empirical: ..."` or `"hull: ..."` (their `interpolation`, then a
            sentence); None for `eps_from_counts`, which has one definition.

    Example:
        >>> from advsim.audits import auroc
        >>> m = auroc([2.0, 3.0], [1.0, 2.0])
        >>> (m.name, m.value, m.certifies)
        ('auroc', 0.875, 'empirical value on these runs: an estimate, not a bound')
        >>> m.to_dict()["details"]
        {'n_in': 2, 'n_out': 2, 'mann_whitney_u': 3.5}
        >>> m.definition.split(":")[0], auroc([2.0, 3.0], [1.0, 2.0], interpolation="hull").value
        ('empirical', 0.875)
    """

    name: str
    value: float
    certifies: str
    details: dict = dataclasses.field(default_factory=dict)
    definition: str | None = None

    def __post_init__(self):
        value = float(self.value)
        if math.isnan(value):
            raise ValueError(f"value of metric {self.name!r} must be a number, got nan")
        object.__setattr__(self, "value", value)

    def __float__(self) -> float:
        return self.value

    def to_dict(self) -> dict:
        """All fields as plain Python values (str, float, int, dict), JSON-ready."""
        return _plain(dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class MetricEstimate:
    """An approximate interval for a metric: an ESTIMATE, not a bound.

    Made by `bootstrap_interval`. The percentile bootstrap comes with no guarantee: its
    coverage is only approximately `confidence`, and can be well below it for small
    samples or for metrics read at extreme operating points (TPR at an FPR below a few
    out of `n_out`). Nothing here is a lower bound on epsilon; use `eps_from_counts` or an
    audit for that.

    Attributes:
        name: the metric (`Metric.name`).
        value: the metric on the observed runs (not the bootstrap mean).
        low, high: the `(1 - confidence) / 2` and `(1 + confidence) / 2` quantiles of the
            metric over the resamples (numpy's default, linear interpolation).
        confidence: the nominal level of the interval.
        method: `"percentile_bootstrap"`.
        certifies: `"estimate: ..."`, saying that the interval is approximate, not a bound.
        details: the observed metric's details, `num_resamples`, `seed` and how the runs
            were resampled.
        definition: the observed metric's `definition` (`Metric.definition`).

    Example:
        >>> from advsim.audits import MetricEstimate
        >>> e = MetricEstimate("auroc", 0.76, 0.70, 0.81, 0.95)
        >>> e.certifies.startswith("estimate:"), e.to_dict()["method"]
        (True, 'percentile_bootstrap')
    """

    name: str
    value: float
    low: float
    high: float
    confidence: float
    method: str = "percentile_bootstrap"
    certifies: str = (
        "estimate: an approximate interval from resampling the runs, not a bound; its "
        "coverage is not guaranteed"
    )
    details: dict = dataclasses.field(default_factory=dict)
    definition: str | None = None

    def __post_init__(self):
        for field in ("value", "low", "high", "confidence"):
            object.__setattr__(self, field, float(getattr(self, field)))
        if not self.low <= self.high:
            raise ValueError(f"low must be <= high, got low={self.low}, high={self.high}")

    def to_dict(self) -> dict:
        """All fields as plain Python values (str, float, int, dict), JSON-ready."""
        return _plain(dataclasses.asdict(self))


# --- inputs -------------------------------------------------------------------------------


def _check_world(name: str, values) -> np.ndarray:
    arr = np.asarray(values)
    _check_real_scores(name, arr)
    arr = arr.astype(np.float64)
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise NonFiniteScoresError(
            f"{bad} of {arr.size} {name} are NaN or inf; no metric is computed from "
            "non-finite scores"
        )
    return arr


def _check_scores(in_scores, out_scores) -> tuple:
    return _check_world("in_scores", in_scores), _check_world("out_scores", out_scores)


_CLOSED = {"low_closed": True, "high_closed": True}


def _check_targets(fpr) -> tuple:
    """`(targets array, scalar?)` from a float or a sequence of floats, each in [0, 1]."""
    if np.ndim(fpr) == 0:
        return np.array([check_in_interval("fpr", fpr, 0.0, 1.0, **_CLOSED)]), True
    flat = list(np.ravel(np.asarray(fpr, dtype=object)))
    if np.ndim(fpr) != 1 or not flat:
        raise ValueError(f"fpr must be a float or a non-empty 1-D sequence of floats, got {fpr!r}")
    targets = [check_in_interval(f"fpr[{i}]", v, 0.0, 1.0, **_CLOSED) for i, v in enumerate(flat)]
    return np.array(targets), False


# --- ROC counts, vectorised over resamples ------------------------------------------------


def _positions(cin: np.ndarray, cout: np.ndarray) -> tuple:
    """The distinct scores of both worlds (sorted) and each score's index among them."""
    values = np.unique(np.concatenate([cin, cout]))
    return values, np.searchsorted(values, cin), np.searchsorted(values, cout)


def _histograms(pos: np.ndarray, m: int, idx: np.ndarray | None = None) -> np.ndarray:
    """Counts of each distinct score, shape (B, m): of the runs (B = 1, `idx` None) or of
    each resample `pos[idx[b]]` (`idx` of shape (B, n))."""
    if idx is None:
        return np.bincount(pos, minlength=m)[None, :]
    rows = pos[idx] + m * np.arange(idx.shape[0])[:, None]
    return np.bincount(rows.ravel(), minlength=m * idx.shape[0]).reshape(idx.shape[0], m)


def _tp_fp(hin: np.ndarray, hout: np.ndarray) -> tuple:
    """TP and FP of every test, shape (B, m + 1): column k < m is `score >= values[k]`,
    column m the test above every score (0, 0)."""
    zero = np.zeros((hin.shape[0], 1), dtype=np.int64)
    tp = np.concatenate([np.cumsum(hin[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
    fp = np.concatenate([np.cumsum(hout[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
    return tp, fp


def _u_statistic(hin: np.ndarray, hout: np.ndarray) -> np.ndarray:
    """2 U of Mann-Whitney (pairs in > out, ties counting 1/2), exact in int64, shape (B,)."""
    below = np.cumsum(hout, axis=1) - hout
    return np.sum(hin * (2 * below + hout), axis=1)


def _best_tpr_index(tp: np.ndarray, fp: np.ndarray, n_out: int, targets: np.ndarray):
    """Index (B, K) of the first test (largest TPR) whose empirical FPR is <= each target.

    FP only falls along the columns, so the valid tests are a suffix; the first of them
    has the largest TP. The FPR is `fp / n_out` in float64, as sklearn's `roc_curve`.
    """
    fpr = fp / n_out
    return np.stack([np.sum(fpr > target, axis=1) for target in targets], axis=1)


def _hull(hin: np.ndarray, hout: np.ndarray) -> tuple:
    """`(tp, fp, keep, prev)`: `_tp_fp` and the ROC convex hull of each row
    (`audits._roc_hull.roc_hull`); a score absent from a row is no point of its own."""
    tp, fp = _tp_fp(hin, hout)
    present = np.concatenate([(hin + hout) > 0, np.ones((hin.shape[0], 1), dtype=bool)], axis=1)
    return (tp, fp, *roc_hull(tp, fp, present))


# The batched metrics (for `bootstrap_interval`) take the metric's keywords, `interpolation`
# among them.


def _auroc_batch(hin, hout, n_in, n_out, interpolation="empirical") -> np.ndarray:
    if check_interpolation(interpolation) == "hull":
        return (hull_area2(*_hull(hin, hout)) / (2.0 * n_in * n_out))[:, None]
    return (_u_statistic(hin, hout) / (2.0 * n_in * n_out))[:, None]


def _tpr_batch(hin, hout, n_in, n_out, fpr, interpolation="empirical") -> np.ndarray:
    targets, _ = _check_targets(fpr)
    if check_interpolation(interpolation) == "hull":
        return hull_tpr(*_hull(hin, hout), n_in, n_out, targets)[0]
    tp, fp = _tp_fp(hin, hout)
    return np.take_along_axis(tp, _best_tpr_index(tp, fp, n_out, targets), axis=1) / n_in


def _balanced_batch(hin, hout, n_in, n_out, interpolation="empirical") -> np.ndarray:
    check_interpolation(interpolation)  # one number under both (`balanced_accuracy`)
    tp, fp = _tp_fp(hin, hout)
    return np.max(0.5 * (tp / n_in + (n_out - fp) / n_out), axis=1)[:, None]


def _threshold(values: np.ndarray, k: int) -> float:
    """tau of test k: the k-th distinct score, or just above the largest for k = m."""
    return float(values[k]) if k < values.size else float(np.nextafter(values[-1], np.inf))


# --- the metrics --------------------------------------------------------------------------


def tpr_at_fpr(
    in_scores, out_scores, fpr, *, interpolation: str = "empirical"
) -> Metric | tuple[Metric, ...]:
    """The TPR of the best threshold test whose empirical FPR is at most `fpr`.

    The metric Carlini et al. argue membership inference should be judged by ("Membership
    Inference Attacks From First Principles", IEEE S&P 2022, arXiv:2112.03570): the
    true-positive rate at a low false-positive rate, here read off the
    empirical ROC curve without interpolation. Among the deterministic tests "in iff
    `score >= tau`" (tau at every distinct score, and above all of them), it is the
    largest empirical TPR of those whose empirical FPR (`#{out >= tau} / n_out`) is
    `<= fpr`: the largest `tprs[i]` with `fprs[i] <= fpr` for `fprs, tprs, _ =
    sklearn.metrics.roc_curve(y, s, drop_intermediate=False)`. The test above every score
    always qualifies, so the value is 0 when no other does. No randomised test: tied
    scores are on one side of every tau.

    With `interpolation="hull"`, randomised tests too (jax_privacy's
    `CanaryScoreAuditor.tpr_at_given_fpr`): the upper convex hull of the ROC points at
    FPR `fpr`, linear between its two vertices around the target, reached by the test
    mixing their thresholds; at least the empirical value.

    Args:
        in_scores: scores of the runs with the canary (1-D, at least one, finite).
        out_scores: scores of the runs without it (1-D, at least one, finite).
        fpr: the target false-positive rate in [0, 1], or a sequence of them.
        interpolation: `"empirical"` (default) or `"hull"`, keyword only.

    Returns:
        A `Metric` named `"tpr_at_fpr"` (a tuple of them, one per target, for a sequence)
        with `details`: `fpr_target`, the operating point's `fpr` (achieved, `<=
        fpr_target`), `threshold` (the largest tau reaching that TPR), `n_in`, `n_out`;
        under `"hull"`, `fpr` is the target, and the randomised test says "in" iff
        `score >= threshold`, or with probability `p_next` if `threshold_next <= score <
        threshold` (two hull vertices). Its `definition` names the interpolation. It is
        an empirical value, not a bound: at targets below a few out of `n_out` it rests
        on a handful of runs.

    Raises:
        ValueError: a target outside [0, 1], an unknown `interpolation`, an empty world,
            scores not 1-D.
        NonFiniteScoresError: a score is NaN or inf.

    Example:
        >>> from advsim.audits import tpr_at_fpr
        >>> cin, cout = [3.0, 2.0, 1.5, 0.5], [2.0, 1.0, 0.0, -1.0]
        >>> m = tpr_at_fpr(cin, cout, 0.25)  # tau = 1.5: 3 of 4 in, 1 of 4 out
        >>> m.value, m.details["threshold"], m.details["fpr"]
        (0.75, 1.5, 0.25)
        >>> [t.value for t in tpr_at_fpr(cin, cout, [0.0, 0.5])]  # tau above 2.0; 0.5
        [0.25, 1.0]
        >>> h = tpr_at_fpr(cin, cout, 0.1, interpolation="hull")  # hull (0, 1/4)-(1/4, 3/4)
        >>> h.value, h.details["threshold"], h.details["threshold_next"], h.details["p_next"]
        (0.45, 3.0, 1.5, 0.4)
    """
    interpolation = check_interpolation(interpolation)
    label = definition("tpr_at_fpr", interpolation)
    cin, cout = _check_scores(in_scores, out_scores)
    targets, scalar = _check_targets(fpr)
    values, pin, pout = _positions(cin, cout)
    hin, hout = _histograms(pin, values.size), _histograms(pout, values.size)
    if interpolation == "hull":
        tprs, lo, hi, p = (a[0] for a in hull_tpr(*_hull(hin, hout), cin.size, cout.size, targets))
        out = [
            Metric(
                "tpr_at_fpr",
                tprs[j],
                _EMPIRICAL,
                {
                    "fpr_target": float(target),
                    "fpr": float(target),
                    "threshold": _threshold(values, int(lo[j])),
                    "threshold_next": _threshold(values, int(hi[j])),
                    "p_next": float(p[j]),
                    "n_in": cin.size,
                    "n_out": cout.size,
                },
                label,
            )
            for j, target in enumerate(targets)
        ]
        return out[0] if scalar else tuple(out)
    tp, fp = _tp_fp(hin, hout)
    first = _best_tpr_index(tp, fp, cout.size, targets)[0]
    out = []
    for target, k in zip(targets, first, strict=True):
        best = int(tp[0, k])
        # The largest tau with that TP (the lowest FPR reaching it): tp falls along columns.
        k_hi = int(np.count_nonzero(tp[0] >= best)) - 1
        out.append(
            Metric(
                "tpr_at_fpr",
                best / cin.size,
                _EMPIRICAL,
                {
                    "fpr_target": float(target),
                    "fpr": int(fp[0, k_hi]) / cout.size,
                    "threshold": _threshold(values, k_hi),
                    "n_in": cin.size,
                    "n_out": cout.size,
                },
                label,
            )
        )
    return out[0] if scalar else tuple(out)


def auroc(in_scores, out_scores, *, interpolation: str = "empirical") -> Metric:
    """The area under the empirical ROC curve, ties counted 1/2.

    The Mann-Whitney U statistic over `n_in * n_out` (Mann & Whitney 1947; Bamber 1975;
    Hanley & McNeil 1982, "The meaning and use of the area under a ROC curve"):

        AUROC = #{(i, j): in_i > out_j} + #{(i, j): in_i == out_j} / 2, over n_in n_out,

    the probability that a random in-score beats a random out-score, a tie counting
    half. It equals the trapezoidal area under the empirical ROC curve
    (`sklearn.metrics.roc_auc_score`) and `scipy.stats.mannwhitneyu(in, out).statistic /
    (n_in n_out)`; U is computed exactly in integers, in O(n log n).

    With `interpolation="hull"`, the area under the upper convex hull of the ROC points
    instead (jax_privacy's `CanaryScoreAuditor.attack_auroc`), the curve of the best
    randomised tests: at least the empirical area and at least 1/2 (the diagonal), equal
    where the empirical curve is concave; exact in integers too. It is biased upwards: by
    about 0.06 on average for two identical N(0, 1) worlds of 100 runs (0.02 at 1000).

    Args:
        in_scores: scores of the runs with the canary (1-D, at least one, finite).
        out_scores: scores of the runs without it (1-D, at least one, finite).
        interpolation: `"empirical"` (default) or `"hull"`, keyword only.

    Returns:
        A `Metric` named `"auroc"`, in [0, 1], with `details`: `n_in`, `n_out` and
        `mann_whitney_u` (U of the in-scores), under `"hull"` `hull_vertices` instead
        (the ROC points on the hull, (0, 0) and (1, 1) included); its `definition`
        names the interpolation. An empirical value, not a bound.

    Raises:
        ValueError: an unknown `interpolation`, an empty world, scores not 1-D.
        NonFiniteScoresError: a score is NaN or inf.

    Example:
        >>> from advsim.audits import auroc
        >>> auroc([3.0, 2.0, 1.0], [2.0, 0.0]).value  # (2 + 1.5 + 1) / 6
        0.75
        >>> auroc([3.0, 2.0, 1.0], [2.0, 0.0], interpolation="hull").value  # (1/3 + 1) / 4 + 1/2
        0.8333333333333334
    """
    interpolation = check_interpolation(interpolation)
    cin, cout = _check_scores(in_scores, out_scores)
    values, pin, pout = _positions(cin, cout)
    hin, hout = _histograms(pin, values.size), _histograms(pout, values.size)
    sizes = {"n_in": cin.size, "n_out": cout.size}
    if interpolation == "hull":
        tp, fp, keep, prev = _hull(hin, hout)
        area2, details = int(hull_area2(tp, fp, keep, prev)[0]), {"hull_vertices": int(keep.sum())}
    else:
        area2 = int(_u_statistic(hin, hout)[0])
        details = {"mann_whitney_u": area2 / 2.0}
    return Metric(
        "auroc",
        area2 / (2.0 * cin.size * cout.size),
        _EMPIRICAL,
        {**sizes, **details},
        definition("auroc", interpolation),
    )


def balanced_accuracy(in_scores, out_scores, *, interpolation: str = "empirical") -> Metric:
    """The best balanced accuracy (TPR + TNR) / 2 over threshold tests.

    The maximum over the deterministic tests "in iff `score >= tau`" (tau at every
    distinct score, and above all of them) of `(TPR + 1 - FPR) / 2`: with as many runs
    in each world, the largest membership-inference accuracy any threshold reaches on
    these runs. It is `(1 + advantage) / 2` for Yeom et al.'s membership advantage
    TPR - FPR ("Privacy Risk in Machine Learning", CSF 2018), maximised over thresholds:
    the maximal advantage is the one-sided Kolmogorov-Smirnov statistic of the two
    empirical laws. It is at least 1/2 (accept all, or reject all).

    `interpolation="hull"` maximises over the randomised tests (the ROC convex hull,
    jax_privacy's `CanaryScoreAuditor.max_accuracy(prevalence=0.5)`; its default
    prevalence `n_in / (n_in + n_out)` gives the plain accuracy instead): the same value
    and test, as a linear objective is largest at a vertex of the hull, a deterministic
    test (the best test with the largest tau is one). Only `definition` differs.

    Args:
        in_scores: scores of the runs with the canary (1-D, at least one, finite).
        out_scores: scores of the runs without it (1-D, at least one, finite).
        interpolation: `"empirical"` (default) or `"hull"`, keyword only.

    Returns:
        A `Metric` named `"balanced_accuracy"`, in [1/2, 1], with `details`: the best
        test's `threshold`, `tpr`, `fpr`, `advantage` (TPR - FPR), `n_in`, `n_out`; its
        `definition` names the interpolation. An empirical value, not a bound;
        maximised over thresholds on the same runs, it is biased upwards.

    Raises:
        ValueError: an unknown `interpolation`, an empty world, scores not 1-D.
        NonFiniteScoresError: a score is NaN or inf.

    Example:
        >>> from advsim.audits import balanced_accuracy
        >>> m = balanced_accuracy([3.0, 2.0, 1.5, 0.5], [2.0, 1.0, 0.0, -1.0])
        >>> m.value, m.details["threshold"]  # TPR 3/4, FPR 1/4 at tau = 1.5
        (0.75, 1.5)
    """
    interpolation = check_interpolation(interpolation)
    cin, cout = _check_scores(in_scores, out_scores)
    values, pin, pout = _positions(cin, cout)
    tp, fp = _tp_fp(_histograms(pin, values.size), _histograms(pout, values.size))
    tpr, fpr = tp[0] / cin.size, fp[0] / cout.size
    # The largest tau among the best (the first maximum from the top).
    k = fpr.size - 1 - int(np.argmax((0.5 * (tpr + 1.0 - fpr))[::-1]))
    return Metric(
        "balanced_accuracy",
        0.5 * (tp[0, k] / cin.size + (cout.size - fp[0, k]) / cout.size),
        _EMPIRICAL,
        {
            "threshold": _threshold(values, k),
            "tpr": float(tpr[k]),
            "fpr": float(fpr[k]),
            "advantage": float(tpr[k] - fpr[k]),
            "n_in": cin.size,
            "n_out": cout.size,
        },
        definition("balanced_accuracy", interpolation),
    )


def eps_from_counts(tp, fp, tn, fn, delta, confidence=0.95) -> Metric:
    r"""The (eps, delta) lower bound of one threshold test, from its raw counts.

    With canary-in runs split into TP (said "in") and FN, and canary-out runs into FP
    and TN, the one-sided Clopper-Pearson upper bounds (Clopper & Pearson 1934)
    $\overline{\mathrm{FPR}}$ on FPR = FP / (FP + TN) and $\overline{\mathrm{FNR}}$ on
    FNR = FN / (TP + FN), each at level (1 - c) / 2 (`clopper_pearson_upper`), hold
    together with probability >= c (union bound). Plugged into both (eps, delta)-DP
    inequalities of the test (Kairouz, Oh & Viswanath 2015; `eps_delta_terms`):

    $$\epsilon \ge \max\Big(0,
        \log\frac{1 - \delta - \overline{\mathrm{FNR}}}{\overline{\mathrm{FPR}}},
        \log\frac{1 - \delta - \overline{\mathrm{FPR}}}{\overline{\mathrm{FNR}}}\Big).$$

    This is `EpsDeltaAudit`'s bound at a given threshold (its `threshold_selection=
    "explicit"` strategy), from counts instead of scores. It assumes nothing about the
    mechanism, but it is a bound only if the threshold was fixed without looking at
    these counts (chosen on other runs, or before the runs); this function cannot check
    that. With `confidence=None` it returns the plug-in estimate instead: the same
    formula at the raw rates, inf when a rate is 0 with a positive numerator.

    Args:
        tp, fp, tn, fn: the test's counts, integers >= 0, with tp + fn >= 1 (canary-in
            runs) and fp + tn >= 1 (canary-out runs).
        delta: the DP delta, in [0, 1): 0 states pure DP, as the `eps_delta` audit does.
        confidence: c in (0.5, 1), the joint confidence of the two Clopper-Pearson
            bounds; or None for the point estimate.

    Returns:
        A `Metric` named `"eps_lower"` (`"eps_point"` with `confidence=None`) with
        `details`: the counts, `fpr`, `fnr` (raw), `fpr_upper`, `fnr_upper` (the
        bounds; absent for the estimate), the two terms `eps_tpr_fpr` and `eps_tnr_fnr`,
        `delta`, `confidence`.

    Raises:
        ValueError: a count that is not an integer >= 0, tp + fn = 0 or fp + tn = 0, delta
            outside (0, 1), confidence outside (0.5, 1).

    Example:
        >>> from advsim.audits import eps_from_counts
        >>> m = eps_from_counts(tp=9000, fp=100, tn=9900, fn=1000, delta=1e-5)
        >>> round(m.value, 3), m.name
        (4.298, 'eps_lower')
        >>> round(eps_from_counts(9000, 100, 9900, 1000, 1e-5, confidence=None).value, 3)
        4.5
    """
    tp, fn, fp, tn = _counts(tp, fn, fp, tn)
    delta = check_delta("delta", delta, allow_zero=True)
    n_in, n_out = tp + fn, fp + tn
    details = {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "fpr": fp / n_out, "fnr": fn / n_in}
    if confidence is None:
        terms = eps_delta_terms(details["fpr"], details["fnr"], delta)
        # A zero rate under a positive numerator: the raw rates allow no finite eps.
        nums = ((1.0 - details["fnr"]) - delta, (1.0 - details["fpr"]) - delta)
        dens = (details["fpr"], details["fnr"])
        eps_tpr, eps_tnr = (
            math.inf if den == 0 and num > 0 else float(t)
            for t, num, den in zip(terms, nums, dens, strict=True)
        )
        details.update(eps_tpr_fpr=eps_tpr, eps_tnr_fnr=eps_tnr, delta=delta, confidence=None)
        return Metric(
            "eps_point",
            max(0.0, eps_tpr, eps_tnr),
            "plug-in estimate from the raw rates (no confidence interval): an estimate, "
            "not a bound",
            details,
        )
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    alpha = (1.0 - confidence) / 2.0
    fpr_hi = float(clopper_pearson_upper(fp, n_out, alpha))
    fnr_hi = float(clopper_pearson_upper(fn, n_in, alpha))
    eps_tpr, eps_tnr = (float(t) for t in eps_delta_terms(fpr_hi, fnr_hi, delta))
    details.update(
        fpr_upper=fpr_hi,
        fnr_upper=fnr_hi,
        eps_tpr_fpr=eps_tpr,
        eps_tnr_fnr=eps_tnr,
        delta=delta,
        confidence=confidence,
    )
    return Metric(
        "eps_lower",
        max(0.0, eps_tpr, eps_tnr),
        f"an (eps, delta) lower bound at confidence {confidence:g}, assumption-free, valid "
        "when the threshold was fixed without these counts",
        details,
    )

"""Bootstrap intervals of the metrics (`bootstrap_interval`): each world resampled on its own,
batched where the metric has a vectorised form."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from advsim.validation import check_in_interval, check_int

from ._metrics import (
    Metric,
    MetricEstimate,
    _auroc_batch,
    _balanced_batch,
    _check_scores,
    _histograms,
    _positions,
    _tpr_batch,
    auroc,
    balanced_accuracy,
    eps_from_counts,
    tpr_at_fpr,
)

__all__ = ["bootstrap_interval"]


# At most about this many int64 entries per histogram array in a bootstrap chunk (16 MB).
_CHUNK_ENTRIES = 2**21


# The score metrics with a vectorised form over resamples (histograms of distinct scores).
_BATCHED: dict[Callable, Callable] = {
    tpr_at_fpr: _tpr_batch,
    auroc: _auroc_batch,
    balanced_accuracy: _balanced_batch,
}


def _resample_values(metric, cin, cout, kwargs, num_resamples, seed, k) -> np.ndarray:
    """The metric on `num_resamples` resamples, shape (num_resamples, k).

    Each world is resampled on its own (`n_in` in-scores with replacement, `n_out`
    out-scores with replacement), by its own generator from `SeedSequence(seed)`, in
    chunks of a size fixed by the sizes: the vectorised and the looped path see the same
    resamples.
    """
    seq_in, seq_out = np.random.SeedSequence(seed).spawn(2)
    rng_in, rng_out = np.random.default_rng(seq_in), np.random.default_rng(seq_out)
    n_in, n_out = cin.size, cout.size
    chunk = max(1, _CHUNK_ENTRIES // (n_in + n_out))
    batch = _BATCHED.get(metric)
    if batch is not None:
        values, pin, pout = _positions(cin, cout)
    out = np.empty((num_resamples, k))
    for start in range(0, num_resamples, chunk):
        size = min(chunk, num_resamples - start)
        idx_in = rng_in.integers(0, n_in, size=(size, n_in))
        idx_out = rng_out.integers(0, n_out, size=(size, n_out))
        if batch is not None:
            hin = _histograms(pin, values.size, idx_in)
            hout = _histograms(pout, values.size, idx_out)
            out[start : start + size] = batch(hin, hout, n_in, n_out, **kwargs)
            continue
        for row in range(size):
            result = metric(cin[idx_in[row]], cout[idx_out[row]], **kwargs)
            out[start + row] = [m.value for m in _as_metrics(result, metric)]
    return out


def _as_metrics(result, metric) -> tuple:
    metrics = (result,) if isinstance(result, Metric) else result
    if not (isinstance(metrics, tuple) and metrics and all(isinstance(m, Metric) for m in metrics)):
        raise TypeError(
            f"metric must return a Metric or a tuple of them, {metric!r} returned {result!r}"
        )
    return metrics


def bootstrap_interval(
    metric: Callable,
    in_scores,
    out_scores,
    *,
    confidence: float = 0.95,
    num_resamples: int = 1000,
    seed: int = 0,
    **metric_kwargs,
) -> MetricEstimate | tuple[MetricEstimate, ...]:
    """A percentile-bootstrap interval for a score metric: an estimate, not a bound.

    The percentile bootstrap (Efron & Tibshirani 1993, "An Introduction to the
    Bootstrap", Chapter 13): resample each world independently with replacement
    (`n_in` in-scores, `n_out` out-scores), compute the metric on each of
    `num_resamples` resamples, and report the `(1 - c) / 2` and `(1 + c) / 2`
    quantiles. Its coverage is only approximate (close to c for AUROC at a few hundred
    runs per world; worse at small samples and for TPR at an FPR of a few out of
    `n_out`), and the interval is no bound of any kind: the result is a
    `MetricEstimate`, whose `certifies` says so. `tpr_at_fpr`, `auroc` and
    `balanced_accuracy` are computed on all resamples at once (histograms of the
    distinct scores); any other function `metric(in_scores, out_scores, **kwargs)`
    returning a `Metric` (or a tuple) is called once per resample, on the same resamples.

    Args:
        metric: `tpr_at_fpr`, `auroc`, `balanced_accuracy`, or another function of the
            two score arrays returning a `Metric` or a tuple of them (not
            `eps_from_counts`, which takes counts and is already a confidence bound).
        in_scores: scores of the runs with the canary (1-D, at least one, finite).
        out_scores: scores of the runs without it (1-D, at least one, finite).
        confidence: the nominal level c, in (0, 1).
        num_resamples: number of bootstrap resamples, >= 2.
        seed: seed (>= 0) of the resampling (`np.random.SeedSequence(seed)`).
        **metric_kwargs: passed to `metric` (e.g. `fpr=` for `tpr_at_fpr`, `interpolation=`
            for the three score metrics, also on the vectorised path).

    Returns:
        A `MetricEstimate` (a tuple of them when `metric` returns a tuple, e.g.
        `tpr_at_fpr` with a sequence of targets), whose `value` is the metric on the
        observed runs.

    Raises:
        ValueError: `eps_from_counts` as metric, bad confidence, num_resamples or seed,
            an empty world, scores not 1-D, a bad metric argument.
        TypeError: `metric` not callable, or not returning `Metric`s.
        NonFiniteScoresError: a score is NaN or inf.

    Example:
        >>> import numpy as np
        >>> from advsim.audits import auroc, bootstrap_interval
        >>> rng = np.random.default_rng(0)
        >>> e = bootstrap_interval(auroc, rng.normal(1, 1, 500), rng.normal(0, 1, 500))
        >>> bool(e.low < e.value < e.high), e.method, e.certifies.split(":")[0]
        (True, 'percentile_bootstrap', 'estimate')
    """
    if metric is eps_from_counts:
        raise ValueError(
            "metric must be a function of the two score arrays (tpr_at_fpr, auroc, "
            "balanced_accuracy, ...), got eps_from_counts: it takes counts, and its "
            "eps_lower is already a confidence bound"
        )
    if not callable(metric):
        raise TypeError(f"metric must be a callable, got {metric!r}")
    cin, cout = _check_scores(in_scores, out_scores)
    confidence = check_in_interval("confidence", confidence, 0.0, 1.0)
    num_resamples = check_int("num_resamples", num_resamples, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    result = metric(cin, cout, **metric_kwargs)
    observed = _as_metrics(result, metric)
    samples = _resample_values(metric, cin, cout, metric_kwargs, num_resamples, seed, len(observed))
    low, high = np.quantile(samples, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0], axis=0)
    estimates = tuple(
        MetricEstimate(
            name=m.name,
            value=m.value,
            low=low[i],
            high=high[i],
            confidence=confidence,
            certifies=(
                f"estimate: an approximate {confidence:g} percentile-bootstrap interval for "
                f"{m.name} (each world resampled with replacement), not a bound; its "
                "coverage is not guaranteed"
            ),
            details={
                **m.details,
                "num_resamples": num_resamples,
                "seed": seed,
                "resampling": "each world independently, with replacement",
            },
            definition=m.definition,
        )
        for i, m in enumerate(observed)
    )
    return estimates[0] if isinstance(result, Metric) else estimates

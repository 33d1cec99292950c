"""Threshold tests on score sets: counts, Clopper-Pearson bounds, candidate thresholds.

Convention everywhere in `advsim.audits`: the test says "canary in" iff `score >= tau`, so
at a threshold `tau`

    FP(tau) = #{canary_out scores >= tau},   FN(tau) = #{canary_in scores < tau}.

These helpers are vectorised over many thresholds at once (`np.searchsorted` on sorted
scores), so a candidate set of a few thousand thresholds costs milliseconds even at
10^7 runs per world.
"""

from __future__ import annotations

import numpy as np
import scipy.stats

__all__ = [
    "candidate_thresholds",
    "clopper_pearson_upper",
    "counts_at",
    "split_halves",
]

# Points per grid in `candidate_thresholds` (four grids, so at most ~4 * 384 + 1 candidates).
_GRID_POINTS = 384


def clopper_pearson_upper(k, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper confidence bound on a binomial proportion.

    Returns `p_hat` with `Pr[p <= p_hat] >= 1 - alpha` when `k ~ Binomial(n, p)`:
    `Beta.ppf(1 - alpha; k + 1, n - k)` for `k < n`, and 1 for `k == n`. This is
    `jax_privacy.auditing._clopper_pearson_upper(k, n, alpha)` (same formula, same scipy
    call), so bounds agree bit for bit.

    Args:
        k: observed counts (array-like of ints in [0, n]).
        n: number of trials (>= 1).
        alpha: one-sided failure probability, in (0, 1).

    Returns:
        Array of upper bounds in (0, 1], shape of `k`.
    """
    k = np.asarray(k)
    out = np.ones(k.shape, dtype=np.float64)
    below = k < n
    if np.any(below):
        kb = k[below]
        out[below] = scipy.stats.beta.ppf(1 - alpha, kb + 1, n - kb)
    return out


def _check_real_scores(name: str, arr: np.ndarray) -> None:
    """Raises unless `arr` is a 1-D array of at least one real (bool, integer or float)
    score: a TypeError for another dtype, a ValueError for another shape; the message
    names `name`."""
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold real numbers (a bool, integer or float array), got dtype {arr.dtype}"
        )
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of scores, got shape {arr.shape}")
    if arr.size < 1:
        raise ValueError(f"{name} must hold at least one score, got 0")


def counts_at(sorted_in: np.ndarray, sorted_out: np.ndarray, thresholds) -> tuple:
    """Returns `(fp, fn)` int arrays at each threshold, from sorted score arrays."""
    thresholds = np.asarray(thresholds, dtype=np.float64)
    fn = np.searchsorted(sorted_in, thresholds, side="left")
    fp = sorted_out.size - np.searchsorted(sorted_out, thresholds, side="left")
    return fp.astype(np.int64), fn.astype(np.int64)


def candidate_thresholds(
    sorted_in: np.ndarray, sorted_out: np.ndarray, num: int = _GRID_POINTS
) -> np.ndarray:
    """A few hundred to a few thousand thresholds that cover every region that matters.

    Every distinct score is too many candidates at 10^6-10^7 runs. The kept set is:

    - out-scores at which `k` out-scores lie at or above, `k` on a log grid from 1 to
      `n_out` (FPR from `1/n_out` to 1: the small-FPR tail, where large epsilons live)
      and on a linear grid;
    - in-scores below which `j` in-scores lie, `j` on a log grid from 1 to `n_in - 1`
      (FNR from `1/n_in` up) and on a linear grid, plus `j = 0`;
    - one threshold just above the largest out-score (FP = 0).

    Args:
        sorted_in, sorted_out: the scores of each world, sorted ascending.
        num: points per grid.

    Returns:
        Sorted distinct thresholds.
    """
    n_in, n_out = sorted_in.size, sorted_out.size
    k = np.concatenate([np.geomspace(1, n_out, num), np.linspace(1, n_out, num)])
    k = np.unique(np.clip(np.rint(k).astype(np.int64), 1, n_out))
    j = np.concatenate(
        [[0.0], np.geomspace(1, max(n_in - 1, 1), num), np.linspace(0, n_in - 1, num)]
    )
    j = np.unique(np.clip(np.rint(j).astype(np.int64), 0, n_in - 1))
    above_all = np.nextafter(sorted_out[-1], np.inf)
    return np.unique(np.concatenate([sorted_out[n_out - k], sorted_in[j], [above_all]]))


def split_halves(scores: np.ndarray, rng: np.random.Generator, fraction: float = 0.5) -> tuple:
    """Shuffles `scores` with `rng` and returns (choosing part, counting part).

    The choosing part has `int(n * fraction)` scores (at least 1, at most n - 1; `n // 2`
    at the default 0.5), the counting part the rest, so each is non-empty for `n >= 2`.
    Called on canary_in, then canary_out, with one `np.random.default_rng(seed)`, this is
    the same partition as jax_privacy's `Split(threshold_estimation_frac=fraction, seed)`.
    """
    perm = rng.permutation(scores.size)
    cut = min(max(int(scores.size * fraction), 1), scores.size - 1)
    return scores[perm[:cut]], scores[perm[cut:]]

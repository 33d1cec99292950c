"""The arithmetic of the jax_privacy mirror's audits: the ROC's upper hull, the random
partition of the scores, and the epsilon each test's counts give."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from advsim.bounds import gdp_epsilon

from ._one_run import one_run_epsilon, one_run_p_value
from ._one_run_fdp import one_run_gdp_mu


def _upper_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points kept by jax_privacy's frontier: the first and last, and each
    point strictly above the segment joining its kept neighbours (integer arithmetic, so
    exact). A point on or below the segment joining its two immediate neighbours is
    below the hull and dropped first (vectorised); a monotone-chain scan over the rest
    (sorted by x) keeps the hull."""
    x, y = np.asarray(x, np.int64), np.asarray(y, np.int64)
    dx, dy = np.diff(x), np.diff(y)
    above = dy[:-1] * dx[1:] - dy[1:] * dx[:-1] > 0
    idx = np.flatnonzero(np.concatenate([[True], above, [True]]))
    xs, ys = x[idx].tolist(), y[idx].tolist()
    kept: list[int] = []
    for i in range(len(xs)):
        while len(kept) >= 2:
            j, k = kept[-2], kept[-1]
            turn = (ys[k] - ys[j]) * (xs[i] - xs[k]) - (ys[i] - ys[k]) * (xs[k] - xs[j])
            if turn > 0:
                break
            kept.pop()
        kept.append(i)
    return idx[kept]


def _partition(scores: np.ndarray, rng: np.random.Generator, frac: float) -> tuple:
    """(choosing part, counting part): the first `int(n * frac)` of a permutation."""
    perm = rng.permutation(len(scores))
    cut = int(len(scores) * frac)
    return scores[perm[:cut]], scores[perm[cut:]]


def _check_significance(significance, high: float) -> None:
    if not 0 < significance < high:
        raise ValueError(f"significance must be in (0, {high}), got {significance}.")


def _check_delta(delta, *, zero_ok: bool) -> None:
    ok = 0 <= delta <= 1 if zero_ok else 0 < delta <= 1
    if not ok:
        raise ValueError(f"delta must be in {'[' if zero_ok else '('}0, 1], got {delta}.")


@dataclasses.dataclass(frozen=True)
class _Found:
    """One bound at one threshold: eps, the threshold and what the bound read there."""

    eps: float
    threshold: float
    details: dict


def _best(terms: np.ndarray) -> tuple[float, int]:
    """`(max(0, best term), its index)`, or `(0.0, -1)` when no term bounds anything."""
    idx = int(np.argmax(terms))
    if not np.isfinite(terms[idx]):
        return 0.0, -1
    return max(0.0, float(terms[idx])), idx


def _precision_lower(tp: np.ndarray, fp: np.ndarray, level: float) -> np.ndarray:
    """1 - the Clopper-Pearson upper bound on the false share of the guesses (0 where no
    guess is made): the order in which the one-run searches visit thresholds."""
    total = tp + fp
    out = np.zeros(total.shape)
    ok = fp < total
    out[ok] = 1.0 - scipy.stats.beta.ppf(1 - level, fp[ok] + 1, total[ok] - fp[ok])
    return out


def _one_run_eps(m: int, r: int, v: int, level: float, delta: float, floor: float) -> float:
    """The one-run (eps, delta) bound of r guesses, v correct, if above `floor`; else
    `floor` (when the p-value at `floor`, first with delta = 0, the cheaper, then with
    `delta`, reaches the level: the p-value rises with eps, so nothing above is rejected)."""
    if one_run_p_value(m, r, v, floor, 0.0) >= level:
        return floor
    if floor > 0 and one_run_p_value(m, r, v, floor, delta) >= level:
        return floor
    return max(floor, one_run_epsilon(m, r, v, delta=delta, level=level))


def _fdp_eps(m: int, r: int, v: int, level: float, delta: float, floor: float) -> float:
    """The eps of G_mu at the largest mu the r guesses (v correct) reject, if above `floor`."""
    mu = one_run_gdp_mu(m, r, v, level=level)
    return max(floor, float(gdp_epsilon(delta, mu)) if mu > 0 else 0.0)


def _gdp_log_delta_gap(eps: float, mu: float, delta: float) -> float:
    """log delta(eps) - log delta for G_mu (Corollary 2.13 of arXiv:1905.02383, as
    log(Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)), in the log domain)."""
    a = scipy.stats.norm.logcdf(-(eps / mu) + mu / 2)
    b = eps + scipy.stats.norm.logcdf(-(eps / mu) - mu / 2)
    if b > a:
        return -math.inf
    with np.errstate(divide="ignore"):
        return float(a + np.log1p(-np.exp(b - a))) - math.log(delta)

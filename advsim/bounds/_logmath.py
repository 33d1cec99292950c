"""Log-space sums of weighted exponentials and a safeguarded Newton solve, for the mixture
bounds' tails."""

from __future__ import annotations

import math

import numpy as np

_XTOL = 1e-14  # absolute tolerance on the threshold u (in noise units)
_RTOL = 1e-14  # relative tolerance on the threshold u
_MAXITER = 200


def _logsumexp_weights(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise log-sum-exp as m + log1p(rest), with m the row maximum and rest the sum of
    the other terms relative to it, so that a privacy loss near 0 keeps its relative
    precision; also the softmax weights. Overwrites `a`; each row needs a finite entry."""
    idx = np.argmax(a, axis=1)
    rows = np.arange(a.shape[0])
    m = a[rows, idx]
    a -= m[:, None]
    np.exp(a, out=a)
    a[rows, idx] = 0.0
    rest = np.sum(a, axis=1)
    a[rows, idx] = 1.0
    a /= (1.0 + rest)[:, None]
    return m + np.log1p(rest), a


def _log_weighted_sum(log_a: np.ndarray, neg_w: np.ndarray) -> np.ndarray:
    """Row-wise log sum_k exp(log_a[k]) * w[k] for weights w = -neg_w in [0, 1].

    Overwrites `log_a`. A row whose weighted sum is 0 (or underflows) gives -inf.
    """
    m = np.max(log_a, axis=1)
    m = np.where(m > -np.inf, m, 0.0)
    log_a -= m[:, None]
    np.exp(log_a, out=log_a)
    log_a *= neg_w
    with np.errstate(divide="ignore", invalid="ignore"):
        return m + np.log(-np.sum(log_a, axis=1))


def _log1mexp(d: np.ndarray) -> np.ndarray:
    """log(1 - exp(d)) for d < 0, accurate for d near 0 and for d very negative; -inf for
    d >= 0 (a difference that cancelled to nothing)."""
    d = np.minimum(d, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(d > -math.log(2.0), np.log(-np.expm1(d)), np.log1p(-np.exp(d)))


def _newton(fun, lo, hi, x0):
    """Safeguarded Newton iteration for many increasing functions at once.

    `fun(x, idx) -> (f, df)` evaluates problem `idx[i]` at `x[i]`; each f is
    non-decreasing on `[lo, hi]` with f(lo) <= 0 <= f(hi). A Newton step that leaves the
    current bracket, or that does not halve the step before last, is replaced by
    bisection (as `rtsafe` in Numerical Recipes), so every problem converges, at worst
    linearly, to |step| <= _XTOL + _RTOL |x|.
    """
    lo = np.array(lo, dtype=np.float64)
    hi = np.array(hi, dtype=np.float64)
    x = np.array(x0, dtype=np.float64)
    out = x.copy()
    active = np.arange(x.size)
    step_old = np.abs(hi - lo)
    step = step_old.copy()
    for _ in range(_MAXITER):
        xa = x[active]
        f, df = fun(xa, active)
        la, ha = lo[active], hi[active]
        la = np.where(f < 0, xa, la)
        ha = np.where(f > 0, xa, ha)
        # At signal-to-noise ~150 and more f / df and 2 dx can overflow to inf; such a
        # step is rejected below (not finite, or outside the bracket) in favour of bisection.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            xn = xa - f / df
            tol = _XTOL + _RTOL * np.abs(xa)
            dx = np.abs(xn - xa)
            # A Newton step below the tolerance ends the iteration (it may round onto an
            # end of the bracket); otherwise it must stay strictly inside and shrink fast.
            small = np.isfinite(xn) & (dx <= tol)
            bad = ~small & (
                ~np.isfinite(xn) | (xn <= la) | (xn >= ha) | (2.0 * dx > step_old[active])
            )
        xn = np.where(bad, 0.5 * (la + ha), xn)
        xn = np.where(f == 0, xa, xn)
        dx = np.abs(xn - xa)
        done = small | (f == 0) | (ha - la <= tol)
        step_old[active] = step[active]
        step[active] = dx
        lo[active], hi[active], x[active] = la, ha, xn
        out[active[done]] = xn[done]
        active = active[~done]
        if active.size == 0:
            return out
    raise RuntimeError(
        f"threshold root-finder did not converge in {_MAXITER} iterations "
        f"for {active.size} row(s); please report the parameters"
    )

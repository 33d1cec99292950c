r"""Exact (eps, delta) of a Gaussian location mixture against a Gaussian.

The pair is $P = \mathcal{N}(X, s^2)$ against $Q = \mathcal{N}(0, s^2)$ with $X \ge 0$ a
finite random variable (atoms $x_k$ with probabilities $p_k$). Theorem 1 of
arXiv:2410.06186 is the case $X \sim \mathrm{Binomial}(n, q)$, $s = \sqrt{T}\sigma$; the
quadratic-regularizer example of its Section 4.2 is another.

Everything is computed in units of the noise, $u = y / s$ and $z_k = x_k / s$, where the
privacy loss is

$$L(u) = \log \frac{P(u)}{Q(u)} = \log \sum_k p_k \exp(z_k u - z_k^2 / 2),$$

convex and non-decreasing in $u$, so both optimal rejection sets of Appendix A.1 of
arXiv:2410.06186 are half-lines. For a threshold $u$,

$$\delta_+(u) = P(Y \ge u) - e^{L(u)} Q(Y \ge u), \quad \varepsilon_+ = L(u),$$
$$\delta_-(u) = Q(Y \le u) - e^{-L(u)} P(Y \le u), \quad \varepsilon_- = -L(u),$$

with $d\delta_+/du = -L'(u) e^{L(u)} \bar\Phi(u)$ and
$d\delta_-/du = L'(u) e^{-L(u)} P(Y \le u)$ (the density terms cancel). Every quantity is
parametrised by the threshold: $\delta(\varepsilon)$ solves $L(u) = \pm\varepsilon$ once,
$\varepsilon(\delta)$ solves $\log \delta_\pm(u) = \log \delta$ once (safeguarded Newton
steps with these derivatives, bisection as fallback); no root-finder is nested in another.

Since $e^{L(u)} = \sum_k p_k e^{s_k}$ with $s_k = z_k u - z_k^2/2$, both divergences are sums
of non-negative per-atom terms (each component's likelihood ratio is increasing):

$$\delta_+(u) = \sum_k p_k [\bar\Phi(u - z_k) - e^{s_k} \bar\Phi(u)], \qquad
\delta_-(u) = e^{-L(u)} \sum_k p_k [e^{s_k} \Phi(u) - \Phi(u - z_k)].$$

They are summed in that form, from `log_ndtr` values, so there is no cancellation between
atoms (an atom at 0 contributes exactly 0): a tiny delta next to a large tail mass, e.g.
$q = 10^{-12}$, keeps full relative precision. The only cancellation left is inside one
term, which limits relative accuracy for signal-to-noise ratios $z_k \lesssim 10^{-14}$.
$L$ is summed as $m + \mathrm{log1p}(\cdot)$, so a privacy loss near 0 keeps its relative
precision too. A delta below the smallest double is returned as 0.0.

The solver works on a batch of mixtures at once (rows of a padded array), which is what
makes `heuristic_epsilon_curve` fast; the scalar functions are batches of one.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtri

from advsim._validation import check_delta, check_nonnegative, check_positive
from advsim.bounds._logmath import (  # noqa: F401 (re-exported)
    _log1mexp,
    _log_weighted_sum,
    _logsumexp_weights,
    _newton,
)

__all__ = [
    "merge_atoms",
    "mixture_delta",
    "mixture_epsilon",
    "mixture_log_likelihood_ratio",
    "mixture_tradeoff",
]

# A floor for log(delta) inside the root finders: delta is at least the smallest double
# (log > -745) for any valid target, so clamping a cancelled (<= 0) difference here keeps
# the sign right without ever producing -inf or NaN.
_LOG_FLOOR = -1.0e4
# Thresholds below this many noise standard deviations have Q-mass Phi(-40) < 1e-349, so
# delta_- there is 0 in double precision.
_U_MIN = -40.0
# Largest signal-to-noise ratio x / s accepted: beyond it z^2 and epsilon (~ z^2 / 2) would
# overflow a double.
MAX_SNR = 1e100


# ----------------------------------------------------------------------------------------
# Validation


def _check_atoms(support, probs) -> tuple[np.ndarray, np.ndarray]:
    support = np.asarray(support, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    if support.ndim != 1 or support.size == 0:
        raise ValueError(f"support must be a non-empty 1-D array, got shape {support.shape}")
    if probs.shape != support.shape:
        raise ValueError(
            f"probs must have the same shape as support {support.shape}, got {probs.shape}"
        )
    if not np.all(np.isfinite(support)) or np.any(support < 0):
        bad = support[~(np.isfinite(support) & (support >= 0))][0]
        raise ValueError(f"support must be finite and >= 0, got an atom at {bad!r}")
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        bad = probs[~(np.isfinite(probs) & (probs >= 0))][0]
        raise ValueError(f"probs must be finite and >= 0, got {bad!r}")
    total = math.fsum(probs.tolist())
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"probs must sum to 1 (within 1e-9), got sum {total!r}")
    return support, probs


def merge_atoms(support, probs) -> tuple[np.ndarray, np.ndarray]:
    r"""Merges equal support values and drops zero-probability atoms.

    Args:
        support: atoms $x_k$ of a finite random variable, finite and $\ge 0$.
        probs: their probabilities, $\ge 0$, summing to 1 within 1e-9.

    Returns:
        `(support, probs)`: sorted distinct atoms with positive probability, the
        probabilities of equal atoms summed (not renormalised).

    Raises:
        ValueError: on a negative or non-finite atom or probability, mismatched shapes,
            or probabilities that do not sum to 1.

    Example:
        >>> merge_atoms([1.0, 0.0, 1.0, 2.0], [0.25, 0.5, 0.25, 0.0])
        (array([0., 1.]), array([0.5, 0.5]))
    """
    support, probs = _check_atoms(support, probs)
    keep = probs > 0
    values, inverse = np.unique(support[keep], return_inverse=True)
    merged = np.zeros(values.shape, dtype=np.float64)
    np.add.at(merged, inverse, probs[keep])
    return values, merged


# ----------------------------------------------------------------------------------------
# Batched core


#: Atoms with support / scale below this are treated as 0 (see `_batch_from_atoms`).
NEGLIGIBLE_SNR = 1e-150


class _Batch:
    """A batch of mixtures in noise units: row i has atoms `z[i]` with log-probabilities
    `logp[i]` (padding: logp = -inf, z = 0)."""

    def __init__(self, z: np.ndarray, logp: np.ndarray):
        """Rows of distinct atoms z >= 0 (at most one at 0) with log-probabilities logp."""
        self.z = np.ascontiguousarray(z, dtype=np.float64)
        self.logp = np.ascontiguousarray(logp, dtype=np.float64)
        real = np.isfinite(self.logp)
        zmax = float(np.max(np.where(real, self.z, 0.0)))
        if not zmax <= MAX_SNR:
            raise ValueError(
                f"signal-to-noise ratio (largest atom / noise scale) must be <= {MAX_SNR:g}, "
                f"got {zmax!r}; epsilon would overflow"
            )
        self.half_zsq = 0.5 * self.z * self.z
        pos = real & (self.z > 0)
        p = np.where(real, np.exp(self.logp), 0.0)
        # Kept in log space: for p0 = (1 - q)^T close to 1, log p0 is not log(exp(.)).
        self.log_p0 = np.max(np.where(real & (self.z == 0), self.logp, -np.inf), axis=1)
        self.trivial = ~np.any(pos, axis=1)  # P == Q
        self.m1 = np.sum(p * self.z, axis=1)
        self.m2 = np.sum(p * self.z * self.z, axis=1)
        self.zmax = np.max(np.where(pos, self.z, 0.0), axis=1)
        self.zmin = np.min(np.where(pos, self.z, np.inf), axis=1)
        # Rows with a single positive atom (plus, perhaps, one at 0) invert L in closed form.
        self.single = np.sum(pos, axis=1) == 1
        self.log_p1 = np.max(np.where(pos, self.logp, -np.inf), axis=1)

    @property
    def size(self) -> int:
        return self.z.shape[0]

    def _take(self, rows):
        """(z, logp, z^2/2) of the given rows; views when `rows` is every row in order."""
        if rows.size == self.size and np.array_equal(rows, np.arange(self.size)):
            return self.z, self.logp, self.half_zsq
        return self.z[rows], self.logp[rows], self.half_zsq[rows]

    # -- the privacy loss ------------------------------------------------------------

    def _log_ratio(self, u, z, logp, half_zsq):
        """Per-atom log likelihood ratios s_k = z_k u - z_k^2 / 2, L(u) and L'(u)."""
        s = z * u[:, None]
        s -= half_zsq
        a = s + logp
        lval, w = _logsumexp_weights(a)
        return s, lval, np.einsum("ij,ij->i", w, z)

    def loss(self, u, rows):
        """L(u) and L'(u) for rows `rows` at thresholds `u`."""
        return self._log_ratio(u, *self._take(rows))[1:]

    def solve_loss(self, target, rows):
        """The threshold u with L(u) = target, for targets in (log p0, inf)."""
        target = np.asarray(target, dtype=np.float64)
        rows = np.asarray(rows)
        log_p0 = self.log_p0[rows]
        # log((e^t - p0) / (1 - p0)), the value at which the bound
        # L(u) <= log(p0 + (1 - p0) e^{zmin u}) (u <= 0) reaches t.
        # over="ignore": an atom with signal-to-noise z_min ~ 1e-300 sends this bracket end
        # to -inf, which the safeguarded Newton below handles (it starts from `hi`).
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            shifted = target + _log1mexp(log_p0 - target)
            p_rest = -np.expm1(log_p0)
            lo_neg = (shifted - np.log(p_rest)) / self.zmin[rows]
        lo = np.where(target >= 0, target / self.zmax[rows], lo_neg)
        # Jensen: L(u) >= m1 u - m2 / 2.
        hi = (target + 0.5 * self.m2[rows]) / self.m1[rows]
        u = np.empty(target.shape)
        single = self.single[rows]
        if np.any(single):
            r = rows[single]
            z1 = self.zmax[r]
            u[single] = 0.5 * z1 + (shifted[single] - self.log_p1[r]) / z1
        multi = ~single
        if np.any(multi):
            rows_m, target_m = rows[multi], target[multi]

            def f(x, idx):
                lval, dl = self.loss(x, rows_m[idx])
                return lval - target_m[idx], dl

            # Newton from the right end converges monotonically on the convex L.
            u[multi] = _newton(f, lo[multi], hi[multi], hi[multi])
        return u

    # -- the two hockey-stick divergences at a threshold -----------------------------

    # Both divergences are sums of non-negative per-atom terms (the likelihood ratio of
    # each component N(z_k, 1) is increasing), so no cancellation happens across atoms:
    #   delta_+(u) = sum_k p_k [Phi(z_k - u) - e^{s_k} Phi(-u)],
    #   delta_-(u) = e^{-L(u)} sum_k p_k [e^{s_k} Phi(u) - Phi(u - z_k)],
    # with s_k = z_k u - z_k^2 / 2; the atom at 0 contributes exactly 0 to both. Each term
    # is a log_ndtr times (1 - e^r), r <= 0, whose log is needed only to absolute ~1e-16.

    def log_delta_plus(self, u, rows):
        """log delta_+(u), its u-derivative, and L(u)."""
        z, logp, half_zsq = self._take(rows)
        s, lval, dl = self._log_ratio(u, z, logp, half_zsq)
        log_q_tail = log_ndtr(-u)  # log Q(Y >= u)
        c = z - u[:, None]
        log_ndtr(c, out=c)  # log P_k(Y >= u)
        with np.errstate(invalid="ignore"):  # -inf - -inf: both tails underflow
            s += log_q_tail[:, None]
            s -= c  # r_k = log(e^{s_k} Q(Y >= u) / P_k(Y >= u)) <= 0
        np.fmin(s, 0.0, out=s)  # (NaN -> 0: a term with P_k(Y >= u) = 0 is 0)
        np.expm1(s, out=s)  # -(1 - e^{r_k})
        c += logp
        logd = _log_weighted_sum(c, s)
        log_b = lval + log_q_tail  # log e^L Q(Y >= u)
        with np.errstate(over="ignore", invalid="ignore"):
            dlogd = -dl * np.exp(log_b - logd)
        floor = logd <= _LOG_FLOOR
        return np.where(floor, _LOG_FLOOR, logd), np.where(floor, np.nan, dlogd), lval

    def log_delta_minus(self, u, rows):
        """log delta_-(u), its u-derivative, and L(u)."""
        z, logp, half_zsq = self._take(rows)
        s, lval, dl = self._log_ratio(u, z, logp, half_zsq)
        log_q_head = log_ndtr(u)  # log Q(Y <= u)
        c = u[:, None] - z
        log_ndtr(c, out=c)  # log P_k(Y <= u)
        with np.errstate(invalid="ignore"):  # -inf - -inf: both heads underflow
            c -= s
            c -= log_q_head[:, None]  # r_k = log(P_k(Y <= u) / (e^{s_k} Q(Y <= u))) <= 0
        np.fmin(c, 0.0, out=c)  # (NaN -> 0: a term with Q(Y <= u) = 0 is 0)
        np.expm1(c, out=c)  # -(1 - e^{r_k})
        s += logp
        logd = _log_weighted_sum(s, c) + log_q_head - lval
        # P(Y <= u) = e^L (Q(Y <= u) - delta_-): only for the Newton step.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            log_p_head = lval + log_q_head + np.log(-np.expm1(logd - log_q_head))
            dlogd = dl * np.exp(log_p_head - lval - logd)
        floor = logd <= _LOG_FLOOR
        return np.where(floor, _LOG_FLOOR, logd), np.where(floor, np.nan, dlogd), lval

    # -- the public quantities, row-wise ---------------------------------------------

    def _zeros_and_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """A zero per row (the answer of a trivial row, P == Q) and the other rows' indices."""
        return np.zeros(self.size), np.flatnonzero(~self.trivial)

    def delta(self, eps: float) -> np.ndarray:
        """max(H_{e^eps}(P, Q), H_{e^eps}(Q, P)) for every row."""
        out, rows = self._zeros_and_rows()
        if rows.size == 0:
            return out
        u_plus = self.solve_loss(np.full(rows.size, eps), rows)
        d_plus = np.exp(self.log_delta_plus(u_plus, rows)[0])
        d_plus = np.where(d_plus <= math.exp(_LOG_FLOOR), 0.0, d_plus)
        # delta_- vanishes for eps >= -log p0 (P >= p0 Q), and is below Phi(-40) (zero in
        # double precision) when the threshold lies below _U_MIN.
        d_minus = np.zeros(rows.size)
        m = -eps > self.log_p0[rows]
        if np.any(m):
            rm = rows[m]
            l_min, _ = self.loss(np.full(rm.size, _U_MIN), rm)
            m2 = l_min < -eps
            if np.any(m2):
                rm2 = rm[m2]
                u_minus = self.solve_loss(np.full(rm2.size, -eps), rm2)
                u_minus = np.maximum(u_minus, _U_MIN)
                dm = np.exp(self.log_delta_minus(u_minus, rm2)[0])
                sub = d_minus[m]
                sub[m2] = np.where(dm <= math.exp(_LOG_FLOOR), 0.0, dm)
                d_minus[m] = sub
        out[rows] = np.maximum(d_plus, d_minus)
        return out

    def epsilon(self, delta: float) -> np.ndarray:
        """min{eps >= 0 : delta(eps) <= delta} for every row."""
        out, rows = self._zeros_and_rows()
        if rows.size == 0:
            return out
        log_delta = math.log(delta)
        u0 = self.solve_loss(np.zeros(rows.size), rows)
        log_tv, dtv, _ = self.log_delta_plus(u0, rows)
        need = log_tv > log_delta  # delta(0) = TV > delta, so eps > 0
        rows, u0, log_tv, dtv = rows[need], u0[need], log_tv[need], dtv[need]
        if rows.size == 0:
            return out

        # Direction +: log delta_+ decreases from log TV at u0; P(Y >= u) <= Phi(zmax - u).
        def f_plus(x, idx):
            logd, dlogd, _ = self.log_delta_plus(x, rows[idx])
            return log_delta - logd, -dlogd

        hi = np.maximum(self.zmax[rows] - ndtri(delta), u0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x0 = u0 + (log_delta - log_tv) / dtv  # one Newton step from u0
        x0 = np.where(np.isfinite(x0) & (x0 > u0) & (x0 < hi), x0, 0.5 * (u0 + hi))
        u_plus = _newton(f_plus, u0, hi, x0)
        eps_plus, _ = self.loss(u_plus, rows)

        # Direction -: log delta_- increases to log TV at u0; Q(Y <= u) = Phi(u).
        def f_minus(x, idx):
            logd, dlogd, _ = self.log_delta_minus(x, rows[idx])
            return logd - log_delta, dlogd

        lo = np.minimum(ndtri(delta), u0)
        _, dtv_minus, _ = self.log_delta_minus(u0, rows)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x0 = u0 - (log_tv - log_delta) / dtv_minus  # one Newton step from u0
        x0 = np.where(np.isfinite(x0) & (x0 > lo) & (x0 < u0), x0, 0.5 * (lo + u0))
        u_minus = _newton(f_minus, lo, u0, x0)
        eps_minus, _ = self.loss(u_minus, rows)
        eps_minus = -eps_minus
        out[rows] = np.maximum(np.maximum(eps_plus, eps_minus), 0.0)
        return out


def _log_probs(support: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """log p_k of merged atoms, normalised to sum to 1; the atom at 0 (if any) gets
    log(1 - sum of the others), which keeps p0 = 1 - 1e-17 distinct from 1."""
    logp = np.log(probs / math.fsum(probs.tolist()))
    if support[0] == 0.0 and support.size > 1:
        rest = math.fsum(probs[1:].tolist()) / math.fsum(probs.tolist())
        if rest < 0.5:
            logp[0] = math.log1p(-rest)
    return logp


def _batch_from_atoms(support, probs, scale) -> _Batch:
    support, probs = merge_atoms(support, probs)
    scale = check_positive("scale", scale)
    with np.errstate(over="ignore", under="ignore"):
        z = support / scale
    tiny = (z > 0) & (z < NEGLIGIBLE_SNR)
    if np.any(tiny):
        # N(z, 1) with z < 1e-150 is N(0, 1) to float64: moving the atom to 0 changes every
        # hockey-stick divergence by at most TV = 2 Phi(z/2) - 1 < z / sqrt(2 pi) < 1e-150
        # (and eps(delta) by < 1e-148), where keeping it would send the threshold solver's
        # brackets to +-inf (z u with u ~ eps / z).
        support, probs = merge_atoms(np.where(tiny, 0.0, support), probs)
        with np.errstate(over="ignore"):
            z = support / scale
    return _Batch(z[None, :], _log_probs(support, probs)[None, :])


def _check_eps(eps) -> float:
    return check_nonnegative("eps", eps)


# ----------------------------------------------------------------------------------------
# Public API


def mixture_delta(eps, support, probs, scale) -> float:
    r"""delta(eps) of $\mathcal{N}(X, s^2)$ against $\mathcal{N}(0, s^2)$, both directions.

    $\delta(\varepsilon) = \max\{H_{e^\varepsilon}(P, Q), H_{e^\varepsilon}(Q, P)\}$
    with $P = \mathcal{N}(X, s^2)$, $Q = \mathcal{N}(0, s^2)$, evaluated with the half-line
    rejection sets of Appendix A.1 of arXiv:2410.06186 (Theorem 1 there is the case
    $X \sim \mathrm{Binomial}(T, q)$, $s = \sqrt{T}\sigma$).

    Args:
        eps: $\varepsilon \ge 0$, finite.
        support: atoms $x_k \ge 0$ of $X$ (finite).
        probs: $\Pr[X = x_k]$, non-negative, summing to 1 within 1e-9.
        scale: the noise standard deviation $s > 0$.

    Returns:
        delta in [0, 1]. 0 when $X = 0$ almost surely ($P = Q$).

    Raises:
        ValueError: on invalid inputs (the message names the parameter).

    Example:
        >>> round(mixture_delta(1.0, [1.0], [1.0], 1.0), 6)  # the Gaussian mechanism
        0.126937
    """
    eps = _check_eps(eps)
    batch = _batch_from_atoms(support, probs, scale)
    return float(batch.delta(eps)[0])


def mixture_epsilon(delta, support, probs, scale) -> float:
    r"""eps(delta) of $\mathcal{N}(X, s^2)$ against $\mathcal{N}(0, s^2)$, both directions.

    $\varepsilon(\delta) = \min\{\varepsilon \ge 0 : \delta(\varepsilon) \le \delta\}
    = \max(\varepsilon_+(\delta), \varepsilon_-(\delta))$ (Equation 3 of
    arXiv:2410.06186 for a general $X$). Each direction is one root find over the
    rejection threshold; no inversion of the privacy loss is nested in it.

    Args:
        delta: $\delta \in (0, 1)$.
        support: atoms $x_k \ge 0$ of $X$ (finite).
        probs: $\Pr[X = x_k]$, non-negative, summing to 1 within 1e-9.
        scale: the noise standard deviation $s > 0$.

    Returns:
        eps >= 0; exactly 0 when $\delta(0)$ (the total variation distance) is already
        $\le \delta$, in particular when $X = 0$ almost surely.

    Raises:
        ValueError: on invalid inputs (the message names the parameter).

    Example:
        >>> round(mixture_epsilon(1e-5, [1.0], [1.0], 1.0), 4)  # Gaussian, sigma = 1
        4.3772
    """
    delta = check_delta("delta", delta)
    batch = _batch_from_atoms(support, probs, scale)
    return float(batch.epsilon(delta)[0])


def mixture_log_likelihood_ratio(y, support, probs, scale) -> np.ndarray:
    r"""The privacy loss $\log P(y) / Q(y)$ of $\mathcal{N}(X, s^2)$ against $\mathcal{N}(0, s^2)$.

    $L(y) = \log \sum_k p_k \exp((2 x_k y - x_k^2) / (2 s^2))$ (Appendix A.1 of
    arXiv:2410.06186), a convex non-decreasing function of $y$, computed as a log-sum-exp.

    Args:
        y: outputs, any shape, finite.
        support: atoms $x_k \ge 0$ of $X$.
        probs: $\Pr[X = x_k]$, summing to 1 within 1e-9.
        scale: $s > 0$.

    Returns:
        An array of the shape of `y` (float64).

    Example:
        >>> float(mixture_log_likelihood_ratio(0.5, [1.0], [1.0], 1.0))
        0.0
    """
    support, probs = merge_atoms(support, probs)
    scale = check_positive("scale", scale)
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite, got a non-finite entry")
    batch = _batch_from_atoms(support, probs, scale)
    u = (y / scale).reshape(-1)
    z, logp = batch.z[0], batch.logp[0]
    if u.size and float(np.max(np.abs(u))) * float(z[-1]) > 1e300:
        raise ValueError("y * support / scale^2 must be at most 1e300 in magnitude (overflow)")
    a = np.multiply.outer(u, z) - 0.5 * z * z + logp
    lval, _ = _logsumexp_weights(a)
    return lval.reshape(y.shape)


def mixture_tradeoff(alpha, support, probs, scale) -> np.ndarray:
    r"""Trade-off curve of the optimal test of $Q$ (null) against $P$.

    With $P = \mathcal{N}(X, s^2)$ and $Q = \mathcal{N}(0, s^2)$ the likelihood ratio is
    increasing in $y$, so the Neyman-Pearson test rejects $Q$ when $y \ge c$ with
    $c / s = \Phi^{-1}(1 - \alpha)$, and its type-II error is

    $$\beta(\alpha) = \sum_k p_k \Phi(\Phi^{-1}(1 - \alpha) - x_k / s).$$

    For $X = \mu s$ a.s. this is the $\mu$-GDP curve $G_\mu$ of Dong, Roth and Su
    (arXiv:1905.02383, Definition 2.7).

    Args:
        alpha: type-I errors in [0, 1], any shape.
        support: atoms $x_k \ge 0$ of $X$.
        probs: $\Pr[X = x_k]$, summing to 1 within 1e-9.
        scale: $s > 0$.

    Returns:
        beta(alpha), an array of the shape of `alpha`; beta(0) = 1, beta(1) = 0.

    Example:
        >>> mixture_tradeoff([0.0, 1.0], [1.0], [1.0], 1.0)
        array([1., 0.])
    """
    support, probs = merge_atoms(support, probs)
    scale = check_positive("scale", scale)
    alpha = np.asarray(alpha, dtype=np.float64)
    if not np.all((alpha >= 0) & (alpha <= 1)):
        raise ValueError("alpha must be in [0, 1], got an entry outside it (or NaN)")
    c = -ndtri(alpha)  # = Phi^{-1}(1 - alpha) without the cancellation in 1 - alpha
    z = support / scale
    with np.errstate(invalid="ignore"):
        terms = log_ndtr(c[..., None] - z) + np.log(probs)
    m = np.max(terms, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        log_beta = (m + np.log(np.sum(np.exp(terms - m), axis=-1, keepdims=True)))[..., 0]
    beta = np.where(alpha == 0, 1.0, np.where(alpha == 1, 0.0, np.exp(log_beta)))
    return beta

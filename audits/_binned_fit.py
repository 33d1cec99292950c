r"""The binned likelihood-ratio test of the assumption checks (`advsim.audits._assumption`).

The simultaneous band of the checks bounds the ROC at every threshold at once, so it sees
a departure only once it exceeds the band's half width at some threshold. A trade-off
curve that differs from every $f_\theta$ by a small, *local* change of slope (the
threshold landscape at B = 16: the $\mu$ that one threshold test implies is 0.955 over
most of the ROC and 0.995 near FPR 0.3) stays inside the band at $5 \times 10^4$ scores
per world. This test looks at the slopes instead: how the scores of each world fall
into $K$ bins.

The families tested are probit-shift mixtures,

$$f_\theta(\alpha) = \sum_j p_j\, \Phi(\Phi^{-1}(1 - \alpha) - s_j \theta),$$

$G_\mu$ (one atom, $s = 1$, $\theta = \mu$; Dong, Roth & Su, arXiv:1905.02383,
Definition 2.7) and the heuristic family (the Binomial($n_c$, q) atoms $p_k$ at
$s_k = k / \sqrt T$, $\theta = 1/\sigma$; Theorem 1 of arXiv:2410.06186).

The test. Cut points $c_1 < \dots < c_{K-1}$ at the quantiles $i / K$ of the two worlds'
equal-weight mixture (the pooled scores' quantiles when both worlds have as many scores;
ties merge cut points); bin $k$ is $[c_{k-1}, c_k)$.
With $u_k = F_{out}(c_k-)$ and $v_k = F_{in}(c_k-)$, the null ("every threshold test
lies on $f_\theta$": $v_k = f_\theta(1 - u_k)$) says, whatever the score's distribution
(atoms included),

$$v_k = \sum_j p_j\, \Phi(z_k - s_j \theta), \qquad u_k = \Phi(z_k),$$

a model with $K - 1$ free $z_k$ (increasing) and one $\theta$ for the $2(K - 1)$ free
cell probabilities of the two multinomials. The statistic is the likelihood-ratio
(G) statistic, twice the log-likelihood of the saturated model (each world's observed
shares) minus that of the null fitted by maximum likelihood; under the null it is
asymptotically $\chi^2_{K-2}$ (Wilks; the cells are chosen from empirical quantiles,
which converge to fixed points, Moore and Spruill 1975, Ann. Statist. 3(3)). The
parameter is fitted over $\theta \in [-\theta_{max}, \theta_{max}]$, a superset of the
null's $[0, \infty)$ ($\theta < 0$ is the mirrored curve): the larger model can only
lower G, and keeps $\theta = 0$ (the two worlds alike) inside the parameter set, where
Wilks' $\chi^2_{K-2}$ applies rather than a boundary mixture. Bins are merged, from the
tails in, until each holds at least `_MIN_PER_BIN` scores of each world, so the $\chi^2$
approximation is not asked of near-empty cells; the test is skipped (None) when fewer
than 3 bins remain (G has no degrees of freedom).

Its level is asymptotic, not exact as the band's is: the checks measure it (`advsim
figure assumption_power`: Gaussian scores at $10^5$ and $10^6$ runs per world, the
linear process, 100 repeats each; see `advsim.audits._assumption`) and spend half of
their level on it.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

# Bins (before merging): enough to see a local change of slope, few
# enough that each holds ~N / 20 scores (2,500 per world at 5 x 10^4 per world).
_BINS = 20
# Each bin keeps at least this many scores of each world (merging from the tails in).
_MIN_PER_BIN = 20
# |s_j theta| stays below this (Phi is 0 or 1 to double precision beyond ~38).
_SHIFT_TOP = 40.0
# Increments exp(w) of the cut points' probits stay in [e^-30, e^4].
_W_RANGE = (-30.0, 4.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _phi(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / _SQRT_2PI


def _bin_counts(sorted_in: np.ndarray, sorted_out: np.ndarray, bins: int) -> tuple:
    """`(n_in, n_out, cuts)`: counts per bin [c_{k-1}, c_k) at the quantiles of the two
    worlds' equal-weight mixture, bins merged from both tails inwards until each holds
    `_MIN_PER_BIN` of each world."""
    # Quantiles of the equal-weight mixture of the two worlds: each in-score weighs n_out
    # and each out-score n_in, over their gcd (integers, so the sums are exact). With
    # worlds of one size these are the pooled scores of ranks floor(i N / K); with worlds
    # of unequal sizes the smaller one still has scores in every bin.
    pooled = np.concatenate([sorted_in, sorted_out])
    g = math.gcd(sorted_in.size, sorted_out.size)
    w_in, w_out = sorted_out.size // g, sorted_in.size // g
    exact = 2 * w_in * sorted_in.size * bins < 2**62  # else float64 sums (rounding only)
    weight = np.concatenate([np.full(sorted_in.size, w_in), np.full(sorted_out.size, w_out)])
    weight = weight.astype(np.int64 if exact else np.float64)
    order = np.argsort(pooled, kind="stable")
    pooled, cum = pooled[order], np.cumsum(weight[order])
    targets = np.arange(1, bins, dtype=weight.dtype) * cum[-1]  # i * total, vs cum * bins
    at = np.minimum(np.searchsorted(cum * bins, targets, side="right"), pooled.size - 1)
    cuts = np.unique(pooled[at])
    cuts = cuts[cuts > pooled[0]]  # a cut at the minimum leaves an empty first bin
    below_in = np.searchsorted(sorted_in, cuts, side="left")
    below_out = np.searchsorted(sorted_out, cuts, side="left")
    keep = list(range(cuts.size))

    def small(lo_cut, hi_cut):  # scores of each world between two kept cuts (None: an end)
        a_in = 0 if lo_cut is None else below_in[lo_cut]
        a_out = 0 if lo_cut is None else below_out[lo_cut]
        b_in = sorted_in.size if hi_cut is None else below_in[hi_cut]
        b_out = sorted_out.size if hi_cut is None else below_out[hi_cut]
        return min(b_in - a_in, b_out - a_out) < _MIN_PER_BIN

    while keep and small(None, keep[0]):  # the lowest bin: drop its upper cut
        keep.pop(0)
    while keep and small(keep[-1], None):
        keep.pop()
    i = 1
    while i < len(keep):  # inner bins, left to right
        if small(keep[i - 1], keep[i]):
            keep.pop(i)
        else:
            i += 1
    cuts = cuts[keep]
    c_in = np.concatenate([[0], below_in[keep], [sorted_in.size]])
    c_out = np.concatenate([[0], below_out[keep], [sorted_out.size]])
    return np.diff(c_in), np.diff(c_out), cuts


def _cells(w, shifts, weights) -> tuple:
    """The null's model at `w = (z_1, log dz_2, ..., log dz_{K-1}, theta)`: the cut
    points' probits z, `arg = z - s_j theta`, and each bin's probability in the out-world
    (`du`) and the in-world (`dv`)."""
    z = np.cumsum(np.concatenate([w[:1], np.exp(w[1:-1])]))
    arg = z[:, None] - shifts[None, :] * w[-1]
    du = np.diff(np.concatenate([[0.0], scipy.special.ndtr(z), [1.0]]))
    dv = np.diff(np.concatenate([[0.0], scipy.special.ndtr(arg) @ weights, [1.0]]))
    return z, arg, du, dv


def _negative_log_likelihood(w, n_in, n_out, shifts, weights):
    """Minus the null's log-likelihood and its gradient in `w` (`_cells`)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _nll_at(w, n_in, n_out, shifts, weights)


def _nll_at(w, n_in, n_out, shifts, weights):
    z, arg, du, dv = _cells(w, shifts, weights)
    if np.any(du[n_out > 0] <= 0) or np.any(dv[n_in > 0] <= 0):
        return 1e300, np.zeros_like(w)  # outside the model: the line search backs off
    ll = np.sum(n_out[n_out > 0] * np.log(du[n_out > 0]))
    ll += np.sum(n_in[n_in > 0] * np.log(dv[n_in > 0]))
    r_out = np.divide(n_out, du, out=np.zeros_like(du), where=n_out > 0)
    r_in = np.divide(n_in, dv, out=np.zeros_like(dv), where=n_in > 0)
    dens = _phi(arg)
    dv_dz = dens @ weights
    dv_dtheta = -(dens @ (weights * shifts))
    g_in = r_in[:-1] - r_in[1:]
    grad_z = _phi(z) * (r_out[:-1] - r_out[1:]) + dv_dz * g_in
    grad_theta = np.sum(dv_dtheta * g_in)
    tail = np.cumsum(grad_z[::-1])[::-1]  # d/dz_k enters every z_j, j >= k
    grad_w = np.concatenate([tail[:1], np.exp(w[1:-1]) * tail[1:], [grad_theta]])
    return -ll, -grad_w


def _fit(n_in, n_out, shifts, weights, starts) -> tuple:
    """The null's maximum log-likelihood and its argument w, from each start of theta (the
    best of the local maxima found: a missed global maximum can only raise G)."""
    cum_out = np.cumsum(n_out)[:-1] / n_out.sum()
    floor = 0.5 / n_out.sum()
    z0 = scipy.special.ndtri(np.clip(cum_out, floor, 1.0 - floor))
    dz0 = np.log(np.maximum(np.diff(z0), math.exp(_W_RANGE[0])))
    theta_top = _SHIFT_TOP / float(np.max(np.abs(shifts)))
    bounds = [(-_SHIFT_TOP, _SHIFT_TOP)] + [_W_RANGE] * dz0.size + [(-theta_top, theta_top)]
    # The optimiser sees G / (2N): (saturated - null log-likelihood) per score, of order
    # one and 0 at a perfect fit, so its tolerances are absolute in G / (2N).
    total, saturated = n_in.sum() + n_out.sum(), _saturated(n_in) + _saturated(n_out)

    def objective(w):
        value, grad = _negative_log_likelihood(w, n_in, n_out, shifts, weights)
        return (value + saturated) / total, grad / total

    best = (-math.inf, None)
    for theta0 in starts:
        w0 = np.concatenate([z0[:1], dz0, [float(np.clip(theta0, -theta_top, theta_top))]])
        if _negative_log_likelihood(w0, n_in, n_out, shifts, weights)[0] >= 1e300:
            continue
        res = scipy.optimize.minimize(
            objective, w0, jac=True, method="L-BFGS-B", bounds=bounds,
            options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-12},
        )  # fmt: skip
        ll = saturated - float(res.fun) * total
        if ll > best[0]:
            best = (ll, res.x)
    return best


def _saturated(n: np.ndarray) -> float:
    m = n > 0
    return float(np.sum(n[m] * np.log(n[m] / n.sum())))


def binned_mixture_test(
    sorted_in: np.ndarray,
    sorted_out: np.ndarray,
    shifts,
    weights,
    *,
    level: float,
    theta_guess: float,
    bins: int = _BINS,
) -> dict | None:
    """The binned likelihood-ratio test of the module docstring.

    Args:
        sorted_in, sorted_out: each world's scores, sorted ascending.
        shifts, weights: the mixture's $s_j$ and $p_j$ (weights summing to 1).
        level: the test's (asymptotic) level, in (0, 1).
        theta_guess: a start for the fit besides theta = 0 (the band's fit).
        bins: bins of pooled scores before merging.

    Returns:
        None when fewer than 3 bins remain; else a dict: `rejected`, `level`,
        `statistic` (G), `df` (bins - 2), `p_value`, `bins`, `theta_fit`, and `worst`,
        the bin that adds most to G: `low`, `high` (its score range; None at an end),
        `in_observed`, `in_expected`, `out_observed`, `out_expected` (counts, the
        expected ones under the fitted null).
    """
    shifts = np.asarray(shifts, np.float64)
    weights = np.asarray(weights, np.float64)
    n_in, n_out, cuts = _bin_counts(sorted_in, sorted_out, bins)
    if n_in.size < 3:
        return None
    starts = [theta_guess, 0.0] if math.isfinite(theta_guess) else [0.0]
    ll, w = _fit(n_in, n_out, shifts, weights, starts)
    statistic = max(0.0, 2.0 * (_saturated(n_in) + _saturated(n_out) - ll))
    statistic = float(statistic)
    df = n_in.size - 2
    p_value = float(scipy.stats.chi2.sf(statistic, df))
    worst = _worst_bin(n_in, n_out, cuts, shifts, weights, w)
    return {
        "rejected": bool(p_value < level),
        "level": float(level),
        "statistic": statistic,
        "df": int(df),
        "p_value": p_value,
        "bins": int(n_in.size),
        "theta_fit": float(w[-1]),
        "worst": worst,
    }


def _worst_bin(n_in, n_out, cuts, shifts, weights, w) -> dict:
    """The bin with the largest share of G (per-bin deviance) at the fitted null, with
    its observed and expected counts in each world."""
    _, _, du, dv = _cells(w, shifts, weights)
    e_in, e_out = n_in.sum() * dv, n_out.sum() * du

    def deviance(n, e):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(n > 0, n * np.log(n / e), 0.0) - (n - e)

    k = int(np.argmax(deviance(n_in, e_in) + deviance(n_out, e_out)))
    return {
        "low": None if k == 0 else float(cuts[k - 1]),
        "high": None if k == cuts.size else float(cuts[k]),
        "in_observed": int(n_in[k]),
        "in_expected": float(e_in[k]),
        "out_observed": int(n_out[k]),
        "out_expected": float(e_out[k]),
    }

r"""The exact law of the threshold landscape's last model (arXiv:2405.14457, Section 6).

The analysis of `advsim.mechanisms.ThresholdLandscape` (Eq. (3) there): $\theta_1 = bC +
Z_1$, $\theta_{t+1} = \theta_t + kC s(\theta_t) + W_t$ with $s = \pm 1$ by the side of the
threshold h, $k = +1$ ("reinforce") or $-1$ ("restore"), $Z_1 \sim \mathcal{N}(0,
\sigma^2 C^2)$ and $W_t \sim \mathcal{N}(0, \sigma^2 C^2 / B^2)$. These are the exact
references the audits of that landscape are read against; what they show:

Exact law at T = 2: $\theta_2 = \theta_1 + C s(\theta_1) + W$, $s = \pm 1$,
$W \sim \mathcal{N}(0, \sigma^2 C^2 / B^2)$, whose density is a sum of two truncated
Gaussian convolutions in closed form (`two_step_density`); `two_step_gdp_curve` gives
the population value of the GDP audit on $\theta_2$ for any threshold h, the reference
for the Algorithm-5 threshold search (`advsim.adversaries.ThresholdSearch`).
`two_step_epsilon` gives the exact $\varepsilon(\delta)$ of $\theta_2$. The two disagree
when B is small: at $\sigma = 1$, B = 1 the central tests have $\mu = 0.946$ (4.10 as
GDP at $\delta = 10^{-5}$) but the tails, which set $\varepsilon(10^{-5})$, are those of a
Gaussian shift with noise $\sqrt{2}\sigma C$ (exact 2.94): GDP auditing (the paper's,
Remark 3) then reports more than the truth. And over h, the GDP value is largest at
$h^* = C/2$ (flatly) while the exact $\varepsilon(\delta)$ is *smallest* there (a far
threshold makes a rare, very informative tail event: 3.80 at h = -3).

Exact law at any T: `advsim.mechanisms.landscape` (`landscape_epsilon`, ...) reads it off
the exact-law engine `advsim.exact`, which propagates both worlds' laws on a grid. Far
from h the model never changes side, so the tails that set
$\varepsilon(10^{-5})$ are those of a constant gradient (Example 1 of the paper, step
$1/B$): $\mu \approx 1 / (\sigma\sqrt{1 + (T - 1)/B^2})$, to 1e-3 for $B \ge 4$. The
GDP audits of Figure 4 read the central tests (which keep the side chosen at step 1) as a
Gaussian trade-off and can exceed this exact value by far (3.9 vs 1.09 at
$\sigma = 1$, B = 1, T = 25); the assumption-free (eps, delta) audit stays below it.
"""

from __future__ import annotations

import numpy as np
import scipy.stats
from scipy.integrate import cumulative_trapezoid
from scipy.optimize import brentq

from advsim._validation import check_delta, check_finite, check_int, check_positive
from advsim.bounds._gdp import gdp_epsilon

__all__ = [
    "ORIENTATIONS",
    "hockey_stick_epsilon",
    "two_step_density",
    "two_step_epsilon",
    "two_step_gdp_curve",
    "two_step_tradeoff",
]

ORIENTATIONS = ("reinforce", "restore")
"""The threshold landscape's orientations (see `advsim.mechanisms.ThresholdLandscape`)."""


# ------------------------------------------------------------------ exact law at T = 2


def _params(noise_multiplier, batch_size, threshold, clip_norm):
    sigma = check_positive("noise_multiplier", noise_multiplier)
    b = check_int("batch_size", batch_size, minimum=1)
    c = check_positive("clip_norm", clip_norm)
    h = c / 2.0 if threshold is None else check_finite("threshold", threshold)
    return sigma, b, h, c


def two_step_density(
    y,
    canary_in: bool,
    noise_multiplier: float,
    batch_size: int,
    *,
    threshold: float | None = None,
    clip_norm: float = 1.0,
    orientation: str = "reinforce",
) -> np.ndarray:
    r"""The density of $\theta_2$ (the release at T = 2) in closed form.

    With $\theta_1 \sim \mathcal{N}(\mu, s_1^2)$ ($\mu = bC$, $s_1 = \sigma C$) and
    $\theta_2 = \theta_1 + k\,C s(\theta_1) + W$, $W \sim \mathcal{N}(0, s_2^2)$,
    $s_2 = \sigma C / B$, $k = +1$ ("reinforce") or $-1$ ("restore"):

    $$p(y) = \sum_{\pm} \varphi_{S}(y \mp kC - \mu)\,
        \mathbb{P}\big(\pm(X_\pm - h) > 0\big),\quad
        X_\pm \sim \mathcal{N}\Big(\tfrac{\mu s_2^2 + (y \mp kC) s_1^2}{S^2},
        \tfrac{s_1^2 s_2^2}{S^2}\Big),$$

    $S^2 = s_1^2 + s_2^2$: the product of the two Gaussian densities in $\theta_1$
    factorises into a density in y and a Gaussian in $\theta_1$, truncated at h.

    Args:
        y: points (array-like).
        canary_in: the world (b = 1 or 0).
        noise_multiplier, batch_size, threshold, clip_norm, orientation: as
            `ThresholdLandscape`.

    Returns:
        p(y), float64, the shape of y.
    """
    sigma, b, h, c = _params(noise_multiplier, batch_size, threshold, clip_norm)
    if orientation not in ORIENTATIONS:
        raise ValueError(f"orientation must be one of {ORIENTATIONS}, got {orientation!r}")
    k = 1.0 if orientation == "reinforce" else -1.0
    y = np.asarray(y, np.float64)
    mu = c if canary_in else 0.0
    s1, s2 = sigma * c, sigma * c / b
    big = np.hypot(s1, s2)
    small = s1 * s2 / big
    out = np.zeros_like(y)
    for side in (1.0, -1.0):  # side +1: theta_1 > h, moved by +kC; side -1: by -kC
        shift = y - side * k * c
        mean = (mu * s2**2 + shift * s1**2) / big**2
        z = (mean - h) / small
        prob = scipy.stats.norm.cdf(side * z)
        out += scipy.stats.norm.pdf(shift, mu, big) * prob
    return out


def _grid(sigma, c, b, h, points):
    s1 = sigma * c
    half = 12.0 * s1 + 2.0 * c + abs(h)
    return np.linspace(-half, c + half, points)


def two_step_tradeoff(
    noise_multiplier: float,
    batch_size: int,
    *,
    threshold: float | None = None,
    clip_norm: float = 1.0,
    orientation: str = "reinforce",
    points: int = 200_001,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""FPR and FNR of the tests "in iff $\theta_2 \ge \tau$" over a fine grid of $\tau$.

    The CDFs are the cumulative trapezoid integrals of `two_step_density` on a uniform
    grid of `points` points covering 12 standard deviations beyond both laws (mass
    outside < 1e-30).

    Returns:
        `(tau, fpr, fnr)`: thresholds, $P_{out}(\theta_2 \ge \tau)$,
        $P_{in}(\theta_2 < \tau)$.
    """
    sigma, b, h, c = _params(noise_multiplier, batch_size, threshold, clip_norm)
    y = _grid(sigma, c, b, h, check_int("points", points, minimum=1001))
    kw = dict(threshold=h, clip_norm=c, orientation=orientation)
    p_in = two_step_density(y, True, sigma, b, **kw)
    p_out = two_step_density(y, False, sigma, b, **kw)
    cdf_in = cumulative_trapezoid(p_in, y, initial=0.0)
    cdf_out = cumulative_trapezoid(p_out, y, initial=0.0)
    fpr = np.clip(1.0 - cdf_out / cdf_out[-1], 0.0, 1.0)
    fnr = np.clip(cdf_in / cdf_in[-1], 0.0, 1.0)
    return y, fpr, fnr


def two_step_gdp_curve(
    thresholds,
    noise_multiplier: float,
    batch_size: int,
    *,
    delta: float = 1e-5,
    clip_norm: float = 1.0,
    min_rate: float = 1e-4,
    points: int = 20_001,
) -> dict[str, np.ndarray]:
    r"""The GDP audit's population value on $\theta_2$, for each landscape threshold h.

    For each h: $\mu(h) = \max_\tau \Phi^{-1}(1 - \mathrm{FPR}(\tau)) -
    \Phi^{-1}(\mathrm{FNR}(\tau))$ over the thresholds $\tau$ with both rates
    $\ge$ `min_rate` (an audit with $n$ runs per world cannot see rarer events; the
    GDP audit of `advsim.audits` maximises the same quantity on empirical rates), and
    $\varepsilon(h) = $ `gdp_epsilon(delta, mu)` (Corollary 2.13 of arXiv:1905.02383).
    The reference for Algorithm 5 of arXiv:2405.14457 (Appendix F), which should find
    its maximum near $h^* = C/2$.

    Returns:
        dict with "threshold", "mu", "eps" (arrays over `thresholds`).
    """
    delta = check_delta("delta", delta)
    hs = np.atleast_1d(np.asarray(thresholds, np.float64))
    mus = np.empty_like(hs)
    for i, h in enumerate(hs):
        _, fpr, fnr = two_step_tradeoff(
            noise_multiplier, batch_size, threshold=h, clip_norm=clip_norm, points=points
        )
        ok = (fpr >= min_rate) & (fnr >= min_rate)
        mu = scipy.stats.norm.isf(fpr[ok]) - scipy.stats.norm.ppf(fnr[ok])
        mus[i] = max(0.0, float(np.max(mu))) if mu.size else 0.0
    eps = np.array([0.0 if m <= 0 else gdp_epsilon(delta, m) for m in mus])
    return {"threshold": hs, "mu": mus, "eps": eps}


def two_step_epsilon(
    delta: float,
    noise_multiplier: float,
    batch_size: int,
    *,
    threshold: float | None = None,
    clip_norm: float = 1.0,
    orientation: str = "reinforce",
    points: int = 200_001,
) -> float:
    r"""The exact $\varepsilon(\delta)$ of the release $\theta_2$ (T = 2), both directions.

    $\delta(\varepsilon) = \max_{(P, Q)} \int (p - e^\varepsilon q)_+$ over
    $(P, Q) = (\theta_2^{in}, \theta_2^{out})$ and the reverse, with the densities of
    `two_step_density` integrated by the trapezoid rule on `points` points (12 standard
    deviations beyond both laws), and $\varepsilon$ found by bisection (brentq). It is
    at most the accounting's `gdp_epsilon(delta, 1 / sigma)` (post-processing of
    $\theta_1$ with independent noise).

    Returns:
        eps >= 0.
    """

    delta = check_delta("delta", delta)
    sigma, b, h, c = _params(noise_multiplier, batch_size, threshold, clip_norm)
    y = _grid(sigma, c, b, h, check_int("points", points, minimum=1001))
    kw = dict(threshold=h, clip_norm=c, orientation=orientation)
    # Trapezoid weights w >= 0 turn the densities into masses: the integral of
    # (p - e^eps q)_+ by the trapezoid rule is sum (w p - e^eps w q)_+.
    w = np.zeros_like(y)
    w[:-1] += 0.5 * np.diff(y)
    w[1:] += 0.5 * np.diff(y)
    p = w * two_step_density(y, True, sigma, b, **kw)
    q = w * two_step_density(y, False, sigma, b, **kw)
    return hockey_stick_epsilon(delta, p, q)


# ------------------------------------------------------------------ hockey-stick divergence


def hockey_stick_epsilon(delta: float, p: np.ndarray, q: np.ndarray) -> float:
    r"""$\varepsilon(\delta)$ of two discrete laws, both directions:
    the least $\varepsilon \ge 0$ with $\max(\sum (p - e^\varepsilon q)_+,
    \sum (q - e^\varepsilon p)_+) \le \delta$ (brentq)."""
    delta = check_delta("delta", delta)

    def excess(eps):
        w = np.exp(eps)
        return max(np.sum(np.maximum(p - w * q, 0.0)), np.sum(np.maximum(q - w * p, 0.0))) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
    return float(brentq(excess, 0.0, hi, xtol=1e-10))

r"""A Renyi-DP hidden-state bound for noisy mini-batch GD with shuffled batches on
strongly convex, smooth losses (Ye and Shokri, "Differentially private learning needs
hidden state (or much faster convergence)", NeurIPS 2022, arXiv:2203.05363):
`ye_shokri_rdp` (the authors' code's parameterisation), `noisy_sgd_rdp` /
`noisy_sgd_epsilon` (advsim's). The full-batch bound of the same line of work is in
`advsim.bounds._langevin`; the formula numbers below follow it.

**Source of formula 2.** The text of arXiv:2203.05363 could not be retrieved either, so
its theorem number is not quoted. The formula is the one the authors evaluate in their
code, github.com/privacytrustlab/dp_dynamics (commit 84a5cf9), `dp_utils.py`, functions
`first_epoch_guarantee`, `shuffle_guarantee` and `priv_dynamics_guarantees` ("Adding
support for privacy dynamics analysis under shuffle and partition"), which the README
uses to set the noise of its reported results. For Opacus-style noisy mini-batch GD
without momentum, $\theta \leftarrow \theta - \eta(\frac1b(\sum_{i\in B}
\mathrm{clip}_C(\nabla\ell_i) + \mathcal N(0, \sigma^2C^2 I)) + \lambda_{\rm p}\theta)$,
batches of size $b$ from a fresh shuffle-and-partition of the $n$ examples every epoch
($J = \lfloor n/b\rfloor$ batches; a last partial batch dropped), $K$ epochs, with
$c = 1 - \eta\lambda_{\rm p}$ and $h = \lfloor J/2\rfloor$:

$$\varepsilon_j = \frac{2\alpha}{\sigma^2}\,c^{2(j-1)}\frac{1 - c^2}{1 - c^{2j}}\
  (j = 1..J),\qquad
  \varepsilon_\alpha = \varepsilon_h\,\frac{1 - c^{2(K-1)(J-h)}}{1 - c^{2(J-h)}}
  + \frac{1}{\alpha-1}\log\Bigl(\frac1J\sum_{j=1}^J e^{(\alpha-1)\varepsilon_j}\Bigr).$$

$\varepsilon_j$ is the Renyi divergence of the two last models of a linear (quadratic)
model in which the differing example's batch is the $j$-th from the end of an epoch: a
shift followed by $j-1$ contractions by $c$, with fresh noise at each step; the last term
averages it over the shuffled position (joint convexity), the first term adds the earlier
epochs. The code requires $\lambda_{\rm p} > 0$ and $\eta < 2/(\beta + \lambda_{\rm p})$,
$\beta$ the smoothness of the regularised loss (the step is then a $c$-contraction), and
uses $2\alpha/\sigma^2$, the one-step Gaussian mechanism with sensitivity $2C$
(replace-one neighbours, clip norm as the gradient bound). The tests reproduce the noise
multipliers the README prints for its four privacy-dynamics runs to the printed digits,
and check the formula against exact Gaussian-mixture divergences of the linear model.

**Mapping onto an advsim run (formula 2).** advsim's step on batch $B$ is
$x \leftarrow x - \lambda(\sum_{i\in B}\nabla\ell_i(x) + \nabla r(x) + \mathcal N(0,
\sigma^2C^2 I))$; this is the code's step with $\lambda = \eta/b$ and $\nabla r =
b\lambda_{\rm p}\theta$. So $c = 1 - \lambda m$ and $\lambda < 2/(M + m)$, where $m$ and
$M$ bound the strong convexity and smoothness of every batch objective
$F_B = \sum_{i\in B}\ell_i + r$ (with only an $\ell_2$ regulariser strongly convex,
$m = b\lambda_{\rm p}$); the one-step term becomes $\alpha s_1^2/(2\sigma^2C^2)$ with
$s_1 = 2L$ (replace-one; $s_1 = 2C$ gives the code's $2\alpha/\sigma^2$). Adding or removing
an example changes the partition itself and is not covered.

Assumptions of formula 2, in advsim's vocabulary: m-strongly convex and M-smooth (every
batch objective $F_B$); G-Lipschitz with clipping inactive ($L \le C$); shuffled batching
(shuffle and partition into $\lfloor n/b\rfloor$ batches of size $b$ each epoch, at least
two batches); step-size limit $\lambda < 2/(M + m)$; constant step size; replace-one
neighbours; no projection (the code has none).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Unpack

import numpy as np

from advsim._validation import check_delta, check_int, check_positive
from advsim.bounds._langevin import _check_alpha
from advsim.bounds._renyi import RENYI_ORDERS, renyi_epsilon
from advsim.bounds._run_checks import (
    StronglyConvexRun,
    check_strongly_convex_gd,
)

__all__ = [
    "SGD_ASSUMPTIONS",
    "SGD_REFERENCE",
    "noisy_sgd_epsilon",
    "noisy_sgd_rdp",
    "ye_shokri_rdp",
]

#: What the shuffled noisy mini-batch GD bound (formula 2) assumes.
SGD_ASSUMPTIONS = (
    "m-strongly convex: every batch objective F_B = sum_{i in B} l_i + r is m-strongly "
    "convex, in both neighbouring datasets",
    "M-smooth: every batch objective F_B is M-smooth",
    "G-Lipschitz, clipping inactive: every per-example gradient has norm at most L and "
    "clip_norm C >= L",
    "shuffled batching: every epoch a fresh uniformly random permutation is cut into "
    "floor(n / b) batches of size b (a last partial batch dropped), at least two batches",
    "step-size limit: learning_rate < 2 / (M + m), one constant learning rate at every step",
    "replace-one neighbours (adding or removing an example changes the partition)",
    "no projection; the initial model does not depend on the data",
    "fresh Gaussian noise N(0, sigma^2 C^2 I) is added to the summed batch gradient every step",
    "only the last model is released",
)

SGD_REFERENCE = (
    "Ye & Shokri, 'Differentially private learning needs hidden state (or much faster "
    "convergence)', NeurIPS 2022, arXiv:2203.05363, shuffle and partition (theorem text not "
    "retrieved): the formula the authors evaluate, github.com/privacytrustlab/dp_dynamics"
    "@84a5cf9 dp_utils.py (first_epoch_guarantee, shuffle_guarantee, "
    "priv_dynamics_guarantees)"
)


# --------------------------------------------------------------------------------------
# Formula 2: noisy mini-batch GD, shuffle and partition (Ye & Shokri)
# --------------------------------------------------------------------------------------


def _shuffle_rdp(alpha: float, epochs: int, batches: int, c: float, one_step: float) -> float:
    """The authors' shuffle_guarantee with the one-step term `one_step` (their 2 alpha /
    sigma^2); the average over positions in log-sum-exp form (their base_eps shift)."""
    j = np.arange(1, batches + 1, dtype=np.float64)
    c2 = c * c
    # eps_j = one_step * c^(2(j-1)) (1 - c^2) / (1 - c^(2j))
    eps_j = (
        one_step
        * c2 ** (j - 1.0)
        * (-math.expm1(2.0 * math.log(c)))
        / -np.expm1(2.0 * j * math.log(c))
    )
    h = batches // 2
    rest = batches - h
    # eps_h (1 - c^(2 (K-1) (m-h))) / (1 - c^(2 (m-h)))
    first = eps_j[h - 1] * (
        -math.expm1(2.0 * (epochs - 1) * rest * math.log(c)) / -math.expm1(2.0 * rest * math.log(c))
    )
    a1 = alpha - 1.0
    top = float(eps_j.max())
    second = top + math.log(float(np.mean(np.exp(a1 * (eps_j - top))))) / a1
    return float(first + second)


def ye_shokri_rdp(
    alpha, *, epochs, batch_size, num_examples, l2_reg, lr, noise_multiplier, smoothness
) -> float:
    r"""$\varepsilon_\alpha$ of noisy mini-batch GD with shuffle and partition, in the
    parameterisation of the authors' code.

    For $\theta \leftarrow \theta - \eta(\frac1b(\sum_{i\in B}\mathrm{clip}_C(\nabla\ell_i)
    + \mathcal N(0,\sigma^2C^2I)) + \lambda_{\rm p}\theta)$, $J = \lfloor n/b \rfloor$
    batches per epoch from a fresh shuffle, $K$ epochs: the formula in the module docstring
    (github.com/privacytrustlab/dp_dynamics@84a5cf9, `dp_utils.shuffle_guarantee`, for
    Ye and Shokri, arXiv:2203.05363), with $c = 1 - \eta\lambda_{\rm p}$ and the one-step
    term $2\alpha/\sigma^2$ (replace-one, sensitivity $2C$).

    Args:
        alpha: the Renyi order $\alpha > 1$.
        epochs: $K \ge 1$.
        batch_size: $b \ge 1$.
        num_examples: $n$, with $\lfloor n/b\rfloor \ge 2$.
        l2_reg: $\lambda_{\rm p} > 0$ (the code's `l2_reg`).
        lr: $\eta > 0$, $\eta < 2/(\beta + \lambda_{\rm p})$.
        noise_multiplier: $\sigma > 0$ (Opacus' noise multiplier).
        smoothness: $\beta \ge \lambda_{\rm p}$, the smoothness of the regularised
            averaged batch loss (the code: $(D^2 + 1)/2 + \lambda_{\rm p}$ for logistic
            regression on features of norm at most $D$, with a bias).

    Returns:
        $\varepsilon_\alpha \ge 0$.

    Raises:
        ValueError: naming the parameter, for a value outside its range, fewer than two
            batches, $\beta < \lambda_{\rm p}$ or $\eta \ge 2/(\beta + \lambda_{\rm p})$.

    Example:
        >>> round(ye_shokri_rdp(2.0, epochs=10, batch_size=10, num_examples=100,
        ...                     l2_reg=0.1, lr=1.0, noise_multiplier=2.0,
        ...                     smoothness=1.0), 6)
        0.471486
    """
    alpha = _check_alpha(alpha)
    epochs = check_int("epochs", epochs, minimum=1)
    b = check_int("batch_size", batch_size, minimum=1)
    n = check_int("num_examples", num_examples, minimum=2 * b)
    lam = check_positive("l2_reg", l2_reg)
    eta = check_positive("lr", lr)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    beta = check_positive("smoothness", smoothness)
    if beta < lam:
        raise ValueError(f"smoothness must be >= l2_reg = {lam!r}, got {beta!r}")
    if Fraction(eta) * (Fraction(beta) + Fraction(lam)) >= 2:
        raise ValueError(
            f"lr must be in (0, 2/(smoothness + l2_reg)) = (0, {2.0 / (beta + lam):.6g}) "
            f"(the gradient step must be a (1 - lr l2_reg)-contraction), got {eta!r}"
        )
    return _shuffle_rdp(alpha, epochs, n // b, 1.0 - eta * lam, 2.0 * alpha / sigma**2)


def noisy_sgd_rdp(
    alpha,
    *,
    epochs,
    batch_size,
    neighbouring: str = "replace_one",
    **run: Unpack[StronglyConvexRun],
) -> float:
    r"""$\varepsilon_\alpha$ of the last model of shuffled noisy mini-batch GD (formula 2).

    advsim's step $x \leftarrow x - \lambda(\sum_{i\in B}\nabla\ell_i(x) + \nabla r(x) +
    \mathcal N(0,\sigma^2C^2I))$ on batches of size $b$ from a fresh shuffle and partition
    every epoch ($\lfloor n/b\rfloor$ batches, $T = K\lfloor n/b\rfloor$ steps): the
    authors' formula for Ye and Shokri (arXiv:2203.05363) with $c = 1 - \lambda m$ and the
    one-step term $\alpha s_1^2/(2\sigma^2C^2)$, $s_1 = 2L$ (see the module docstring).

    Args:
        alpha: the Renyi order $\alpha > 1$.
        epochs: $K \ge 1$.
        batch_size: $b \ge 1$.
        neighbouring: "replace_one" only.
        **run: the setting, a `StronglyConvexRun` (`noise_multiplier`, `clip_norm`,
            `lipschitz`, `strong_convexity` and `smoothness` of every batch objective
            $F_B = \sum_{i\in B}\ell_i + r$, `learning_rate` and `num_examples`), with
            $\lambda \in (0, 2/(M + m))$ and $\lfloor n/b\rfloor \ge 2$ here.

    Returns:
        $\varepsilon_\alpha \ge 0$, an upper bound under `SGD_ASSUMPTIONS`.

    Raises:
        TypeError: a keyword `StronglyConvexRun` does not have, or one of its keys missing.
        ValueError: naming the parameter, its value and the valid range; also for
            `neighbouring="add_remove"`, `clip_norm < lipschitz`,
            `smoothness < strong_convexity`, `learning_rate >= 2/(smoothness +
            strong_convexity)` and fewer than two batches per epoch.

    Example:
        >>> round(noisy_sgd_rdp(2.0, epochs=10, batch_size=10, noise_multiplier=2.0,
        ...                     clip_norm=1.0, lipschitz=1.0, strong_convexity=1.0,
        ...                     smoothness=10.0, learning_rate=0.1, num_examples=100), 6)
        0.471486
    """
    alpha = _check_alpha(alpha)
    epochs = check_int("epochs", epochs, minimum=1)
    b = check_int("batch_size", batch_size, minimum=1)
    _, sigma, c, s1, m, big_m, lr, n = check_strongly_convex_gd(
        "noisy_sgd_rdp", None, run, neighbouring, why="for each step to be a contraction"
    )
    n = check_int("num_examples", n, minimum=2 * b)
    if neighbouring != "replace_one":
        raise ValueError(
            "neighbouring must be 'replace_one' for the shuffle-and-partition bound (adding "
            f"or removing an example changes the partition), got {neighbouring!r}"
        )
    if Fraction(lr) * (Fraction(big_m) + Fraction(m)) >= 2:
        raise ValueError(
            f"learning_rate must be in (0, 2/(smoothness + strong_convexity)) = "
            f"(0, {2.0 / (big_m + m):.6g}) (the step must be a (1 - learning_rate m)-"
            f"contraction), got {lr!r}"
        )
    one_step = alpha * s1**2 / (2.0 * sigma**2 * c**2)  # replace-one: s1 = 2L
    return _shuffle_rdp(alpha, epochs, n // b, 1.0 - lr * m, one_step)


def noisy_sgd_epsilon(delta, *, orders=RENYI_ORDERS, **run) -> float:
    r"""$\varepsilon(\delta)$ of `noisy_sgd_rdp` by `renyi_epsilon`.

    Args:
        delta: $\delta \in (0, 1)$.
        orders: the Renyi orders to minimise over (default `RENYI_ORDERS`).
        **run: the keywords of `noisy_sgd_rdp` except `alpha`.

    Returns:
        eps >= 0, an upper bound under `SGD_ASSUMPTIONS`.

    Raises:
        ValueError: as `noisy_sgd_rdp`, and for a delta outside (0, 1).
    """
    delta = check_delta("delta", delta)
    noisy_sgd_rdp(2.0, **run)  # validate once, so that errors name the parameter
    return renyi_epsilon(delta, lambda a: noisy_sgd_rdp(a, **run), orders)

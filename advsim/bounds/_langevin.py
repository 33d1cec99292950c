r"""A Renyi-DP hidden-state bound for noisy full-batch GD on strongly convex, smooth
losses (only the last model released); its sibling for shuffled mini-batches (Ye and
Shokri) is `advsim.bounds._shuffled`.

1. **Noisy full-batch GD** (Chourasia, Ye and Shokri, "Differential privacy dynamics of
   Langevin diffusion and noisy gradient descent", NeurIPS 2021, arXiv:2102.05855):
   `chourasia_rdp` (the paper's parameterisation), `langevin_rdp` / `langevin_epsilon` /
   `langevin_bound` (advsim's).
2. **Noisy mini-batch GD with "shuffle and partition" batches** (Ye and Shokri,
   "Differentially private learning needs hidden state (or much faster convergence)",
   NeurIPS 2022, arXiv:2203.05363): `ye_shokri_rdp` (the authors' code's
   parameterisation), `noisy_sgd_rdp` / `noisy_sgd_epsilon` (advsim's).

**Source of formula 1 (read this before relying on it).** The text of arXiv:2102.05855
could not be retrieved for this implementation (only its abstract was reachable), so the
theorem is *not* quoted from the paper. The formula and its conditions are those of the
implementation of this bound by Ryffel, Bach and Pointcheval ("Differential privacy
guarantees for stochastic gradient Langevin dynamics", arXiv:2201.11980), file
`compute/privacy.py` of github.com/LaRiffle/langevin (commit 2fdd7c6, function
`get_privacy_spent`, constant step size branch), whose docstring lists the conditions
"ℓ(θ; x) be an L-Lipschitz, λ-strongly convex, and β-smooth loss function on closed convex
set C", "eta < 1/beta", "initialization of the weight: theta_0 ~ proj(N(0, 2 sigma^2 /
lambda))", and which evaluates

$$\varepsilon_\alpha = \frac{4\alpha L^2}{\lambda\sigma^2 n^2}
  \bigl(1 - e^{-\lambda\eta K/2}\bigr)
  = \frac{\alpha S_g^2}{\lambda\sigma^2 n^2}\bigl(1 - e^{-\lambda\eta K/2}\bigr),
  \qquad S_g = 2L,$$

for Algorithm 1 (ANoisy-GD) of arXiv:2102.05855,
$\theta_{k+1} = \Pi_C(\theta_k - \eta\nabla\mathcal L_D(\theta_k) + \sqrt{2\eta\sigma^2}\,
\mathcal N(0, I_d))$, $\mathcal L_D = \frac1n\sum_{x\in D}\ell(\theta; x)$, $K$ steps,
$D, D'$ of size $n$ differing in one record. This is, to the best of my recollection,
Theorem 2 ("Rényi DP guarantee for noisy GD") of the NeurIPS 2021 version, but neither
the theorem number nor the constant could be checked against the paper's text here. The
$S_g$ form (the largest $\|\nabla\ell(\theta;x) - \nabla\ell(\theta;x')\|$, so that
$\|\nabla\mathcal L_D - \nabla\mathcal L_{D'}\| \le S_g/n$; $S_g = 2L$ for $L$-Lipschitz
losses) is how the same code's comment writes it. The tests check the formula against
an exact Gaussian computation (where it must be an upper bound), not against a printed
number: the paper is theoretical and prints none that could be reached.

**Mapping onto an advsim run (formula 1).** advsim runs
$x_t = \Pi_K(x_{t-1} - \lambda(\nabla F(x_{t-1}) + \mathcal N(0, \sigma^2C^2 I)))$ with
$F = \sum_i \ell_i + r$ (full batch, clipping inactive: every per-example gradient has
norm at most $L \le C$), learning rate $\lambda$, noise multiplier $\sigma$. With
$\mathcal L_D = F/n$ this is ANoisy-GD with

$$\eta = \lambda n,\quad \sigma_{\rm p}^2 = \frac{\lambda\sigma^2C^2}{2n}
  \ (\text{so } \sqrt{2\eta\sigma_{\rm p}^2} = \lambda\sigma C),\quad
  \lambda_{\rm p} = m/n,\quad \beta = M/n,\quad S_g = s_1,\quad K = T,$$

where $m$ (`strong_convexity`) and $M$ (`smoothness`) are the strong-convexity and
smoothness constants of the *summed* objective $F$ (in each of the two neighbouring
datasets), and $s_1 = L$ when the datasets differ by adding or removing the canary
(read as replacing it by a record with no data loss) and $s_1 = 2L$ when one example is
replaced. The paper states strong convexity and smoothness per example
($\ell(\theta;x)$ $\lambda$-strongly convex and $\beta$-smooth, regulariser folded into
each example's loss as $r/n$): then $m = n\lambda_{\rm p}$, $M = n\beta$. Substituting,
$n$ cancels:

$$\varepsilon_\alpha = \frac{2\alpha s_1^2}{m\lambda\sigma^2C^2}
  \bigl(1 - e^{-\lambda m T/2}\bigr), \qquad \lambda M < 1\ (\eta < 1/\beta),$$

growing from about $\alpha s_1^2/(\sigma^2C^2)$ at $T = 1$ (twice the one-step Gaussian
mechanism's $\alpha s_1^2/(2\sigma^2C^2)$) to $2\alpha s_1^2/(m\lambda\sigma^2C^2)$; it is
at most twice composition, $T\alpha s_1^2/(2\sigma^2C^2)$, for every $T$, and can exceed
composition for small $T$ (the bound's slack is a factor of 2 at $T = 1$). The paper's
start distribution $\Pi_C(\mathcal N(0, \frac{2\sigma_{\rm p}^2}{\lambda_{\rm p}} I))$ is
$\Pi_K(\mathcal N(0, \frac{\lambda\sigma^2C^2}{m} I))$ here.

Assumptions of formula 1, in advsim's vocabulary: m-strongly convex (the summed objective
$F$ in both datasets; the paper: every per-example loss with the regulariser's share,
$m/n$-strongly convex); M-smooth (of $F$; the paper: per example, $M/n$); G-Lipschitz with
clipping inactive ($L \le C$); projection onto a closed convex set (bounded domain *not*
required, $K = \mathbb R^d$ allowed); full batching; step-size limit $\lambda M < 1$
(strict); constant step size; the start distribution above, independent of the data.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Unpack

from advsim._validation import (
    check_delta,
    check_in_interval,
    check_int,
    check_positive,
)
from advsim.bounds._closed_form import HiddenStateBound
from advsim.bounds._renyi import RENYI_ORDERS, renyi_epsilon
from advsim.bounds._run_checks import (
    NEIGHBOURING,
    StronglyConvexRun,
    check_strongly_convex_gd,
    optional_epsilon,
)

__all__ = [
    "ASSUMPTIONS",
    "NEIGHBOURING",
    "REFERENCE",
    "LangevinBound",
    "chourasia_rdp",
    "langevin_bound",
    "langevin_epsilon",
    "langevin_rdp",
]


#: What the noisy-GD bound (formula 1) assumes; it is an upper bound only where all hold.
ASSUMPTIONS = (
    "m-strongly convex: the summed objective F = sum_i l_i + r is m-strongly convex on K in "
    "both neighbouring datasets (the paper: every per-example loss, with its share r/n of "
    "the regulariser, is (m/n)-strongly convex)",
    "M-smooth: F is M-smooth on K in both datasets (the paper: per example, M/n)",
    "G-Lipschitz, clipping inactive: every per-example gradient has norm at most L on K "
    "and clip_norm C >= L",
    "full batch: every example in every step",
    "step-size limit: learning_rate * M < 1 (the paper's eta < 1/beta), one constant "
    "learning rate at every step",
    "after every step the model is projected onto a closed convex set K (K = R^d allowed; "
    "no bounded domain needed)",
    "the initial model is drawn from Pi_K(N(0, (learning_rate sigma^2 C^2 / m) I)), "
    "independently of the data (the paper's theta_0 ~ Pi_C(N(0, 2 sigma_p^2 / lambda I)))",
    "fresh Gaussian noise N(0, sigma^2 C^2 I) is added to the summed gradient every step",
    "only the last model is released",
)

REFERENCE = (
    "Chourasia, Ye & Shokri, 'Differential privacy dynamics of Langevin diffusion and "
    "noisy gradient descent', NeurIPS 2021, arXiv:2102.05855, the Renyi-DP guarantee for "
    "noisy GD (Theorem 2 as recalled; theorem text not retrieved): formula and conditions "
    "as implemented in github.com/LaRiffle/langevin@2fdd7c6 compute/privacy.py "
    "(Ryffel, Bach & Pointcheval, arXiv:2201.11980)"
)

# --------------------------------------------------------------------------------------
# Formula 1: noisy full-batch GD (Chourasia, Ye & Shokri)
# --------------------------------------------------------------------------------------


def _check_alpha(alpha) -> float:
    return check_in_interval("alpha", alpha, 1.0, math.inf)


def chourasia_rdp(alpha, *, eta, sigma, lam, beta, sensitivity, n, steps) -> float:
    r"""$\varepsilon_\alpha$ of ANoisy-GD's last iterate, in the paper's parameterisation.

    $\varepsilon_\alpha = \frac{\alpha S_g^2}{\lambda\sigma^2n^2}(1 - e^{-\lambda\eta K/2})$
    for $\theta_{k+1} = \Pi_C(\theta_k - \eta\nabla\mathcal L_D(\theta_k) +
    \sqrt{2\eta\sigma^2}\mathcal N(0, I))$, $\mathcal L_D$ the average of $n$
    $\lambda$-strongly convex, $\beta$-smooth per-example losses, $\eta < 1/\beta$,
    $\theta_0 \sim \Pi_C(\mathcal N(0, 2\sigma^2/\lambda\,I))$: Chourasia, Ye and Shokri,
    arXiv:2102.05855 (as implemented by github.com/LaRiffle/langevin, with
    $S_g = 2L$; see the module docstring for what could and could not be checked).

    Args:
        alpha: the Renyi order $\alpha > 1$.
        eta: the step size $\eta > 0$, $\eta < 1/\beta$.
        sigma: $\sigma > 0$, the noise is $\sqrt{2\eta\sigma^2}\,\mathcal N(0, I)$.
        lam: the per-example strong convexity $\lambda > 0$.
        beta: the per-example smoothness $\beta \ge \lambda$.
        sensitivity: $S_g > 0$, a bound on $\|\nabla\ell(\theta;x) -
            \nabla\ell(\theta;x')\|$ ($2L$ for $L$-Lipschitz losses).
        n: the dataset size $n \ge 1$.
        steps: $K \ge 1$.

    Returns:
        $\varepsilon_\alpha \ge 0$.

    Raises:
        ValueError: naming the parameter, for a value outside its range, $\beta < \lambda$
            or $\eta \ge 1/\beta$.

    Example:
        >>> round(chourasia_rdp(2.0, eta=0.1, sigma=1.0, lam=1.0, beta=2.0,
        ...                     sensitivity=2.0, n=10, steps=100), 6)
        0.079461
    """
    alpha = _check_alpha(alpha)
    eta = check_positive("eta", eta)
    sigma = check_positive("sigma", sigma)
    lam = check_positive("lam", lam)
    beta = check_positive("beta", beta)
    s_g = check_positive("sensitivity", sensitivity)
    n = check_int("n", n, minimum=1)
    steps = check_int("steps", steps, minimum=1)
    if beta < lam:
        raise ValueError(f"beta must be >= lam = {lam!r} (smoothness bounds strong convexity), "
                         f"got {beta!r}")  # fmt: skip
    if Fraction(eta) * Fraction(beta) >= 1:
        raise ValueError(f"eta must be in (0, 1/beta) = (0, {1.0 / beta:.6g}) (the theorem's "
                         f"step-size condition eta < 1/beta), got {eta!r}")  # fmt: skip
    return alpha * s_g**2 / (lam * sigma**2 * n**2) * -math.expm1(-lam * eta * steps / 2.0)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class LangevinBound(HiddenStateBound):
    r"""The hidden-state Renyi-DP bound of one full-batch DP-GD run (formula 1).

    The bound is linear in the order: $\varepsilon_\alpha = \rho\,\alpha$; `epsilon` is
    its $\varepsilon(\delta)$ by `renyi_epsilon`. With `HiddenStateBound`'s `epsilon`,
    `delta`, `steps`, `assumptions` (`ASSUMPTIONS`) and `reference`.

    Attributes:
        rho: $\rho = \frac{2 s_1^2}{m\lambda\sigma^2C^2}(1 - e^{-\lambda m T/2})$, so the run
            is $(\alpha, \rho\alpha)$-RDP (last model only) for every $\alpha > 1$.
        rho_limit: $\rho$ as $T \to \infty$, $2 s_1^2/(m\lambda\sigma^2C^2)$.
        rho_composition: $T s_1^2/(2\sigma^2C^2)$, composition over all $T$ steps (every
            iterate released; no assumption on the loss). `rho` is at most twice this.
    """

    assumptions = ASSUMPTIONS
    reference = REFERENCE

    rho: float
    rho_limit: float
    rho_composition: float


def langevin_bound(
    steps,
    *,
    neighbouring: str = "add_remove",
    delta=None,
    **run: Unpack[StronglyConvexRun],
) -> LangevinBound:
    r"""Hidden-state Renyi DP of full-batch DP-GD on a strongly convex smooth objective.

    $\varepsilon_\alpha = \frac{2\alpha s_1^2}{m\lambda\sigma^2C^2}(1 - e^{-\lambda mT/2})$:
    the noisy-GD bound of Chourasia, Ye and Shokri (arXiv:2102.05855; source and caveats in
    the module docstring) after the mapping $\eta = \lambda n$, $\sigma_{\rm p}^2 =
    \lambda\sigma^2C^2/(2n)$, $\lambda_{\rm p} = m/n$, $\beta = M/n$, $S_g = s_1$, $K = T$.

    Args:
        steps: $T \ge 1$.
        neighbouring: "add_remove" ($s_1 = L$) or "replace_one" ($s_1 = 2L$).
        delta: optional $\delta \in (0, 1)$ for `epsilon`.
        **run: the setting, a `StronglyConvexRun` (`noise_multiplier`, `clip_norm`,
            `lipschitz`, `strong_convexity` and `smoothness` of the summed objective $F$,
            `learning_rate` and `num_examples`), with $\lambda \in (0, 1/M)$ here;
            $n$ cancels (kept for the mapping and validation).

    Returns:
        A `LangevinBound`.

    Raises:
        TypeError: a keyword `StronglyConvexRun` does not have, or one of its keys missing.
        ValueError: naming the parameter, its value and the valid range; also for
            `clip_norm < lipschitz`, `smoothness < strong_convexity`,
            `learning_rate >= 1/smoothness` and an unknown `neighbouring`.

    Example:
        >>> b = langevin_bound(100, noise_multiplier=1.0, clip_norm=1.0, lipschitz=1.0,
        ...                    strong_convexity=1.0, smoothness=2.0, learning_rate=0.1,
        ...                    num_examples=10, delta=1e-5)
        >>> round(b.rho, 6), round(b.rho_limit, 6), b.rho_composition
        (19.865241, 20.0, 50.0)
    """
    steps, sigma, c, s1, m, _, lr, _ = check_strongly_convex_gd(
        "langevin_bound", steps, run, neighbouring, step_limit=1,
        why="for the run to be noisy GD on F", paper="the theorem's eta < 1/beta with "
        "eta = learning_rate * num_examples, beta = smoothness / num_examples",
    )  # fmt: skip
    rho_limit = 2.0 * s1**2 / (m * lr * sigma**2 * c**2)
    rho = rho_limit * -math.expm1(-lr * m * steps / 2.0)
    rho_composition = steps * s1**2 / (2.0 * sigma**2 * c**2)
    delta, epsilon = optional_epsilon(delta, lambda d: renyi_epsilon(d, lambda a: rho * a))
    return LangevinBound(
        rho=rho, epsilon=epsilon, delta=delta, steps=steps, rho_limit=rho_limit,
        rho_composition=rho_composition,
    )  # fmt: skip


def langevin_rdp(alpha, *, steps, **run) -> float:
    r"""$\varepsilon_\alpha$ of the last model of full-batch DP-GD (formula 1).

    $\frac{2\alpha s_1^2}{m\lambda\sigma^2C^2}(1 - e^{-\lambda mT/2})$; the arguments and
    conditions are those of `langevin_bound`.

    Args:
        alpha: the Renyi order $\alpha > 1$.
        steps: $T \ge 1$.
        **run: the other keywords of `langevin_bound` (its `StronglyConvexRun` and
            optional `neighbouring`), without `delta`.

    Returns:
        $\varepsilon_\alpha \ge 0$, an upper bound under `ASSUMPTIONS`.

    Raises:
        ValueError: as `langevin_bound`, and for `alpha <= 1`.

    Example:
        >>> round(langevin_rdp(2.0, steps=100, noise_multiplier=1.0, clip_norm=1.0,
        ...                    lipschitz=1.0, strong_convexity=1.0, smoothness=2.0,
        ...                    learning_rate=0.1, num_examples=10), 6)
        39.730482
    """
    alpha = _check_alpha(alpha)
    if "delta" in run:
        raise TypeError("langevin_rdp() takes no delta (langevin_epsilon does)")
    return alpha * langevin_bound(steps, **run).rho


def langevin_epsilon(delta, *, orders=RENYI_ORDERS, **run) -> float:
    r"""$\varepsilon(\delta)$ of `langevin_rdp` by `renyi_epsilon` (Proposition 12 of
    arXiv:2004.00010, minimised over `orders`).

    Args:
        delta: $\delta \in (0, 1)$.
        orders: the Renyi orders to minimise over (default `RENYI_ORDERS`).
        **run: the keywords of `langevin_rdp`: `steps`, a `StronglyConvexRun` and
            optional `neighbouring`.

    Returns:
        eps >= 0, an upper bound under `ASSUMPTIONS`.

    Raises:
        ValueError: as `langevin_bound`, and for a delta outside (0, 1).
    """
    delta = check_delta("delta", delta)
    steps = run.pop("steps")
    rho = langevin_bound(steps, **run).rho
    return renyi_epsilon(delta, lambda a: rho * a, orders)

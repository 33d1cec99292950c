r"""Renyi-DP hidden-state bounds for noisy GD and noisy shuffled mini-batch GD on strongly
convex, smooth losses (only the last model released).

Two bounds, from the "privacy dynamics" line of work of Shokri's group:

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

import dataclasses
import math
from fractions import Fraction

import numpy as np

from advsim._validation import (
    check_delta,
    check_in_interval,
    check_int,
    check_positive,
)
from advsim.bounds._renyi import RENYI_ORDERS, renyi_epsilon

__all__ = [
    "ASSUMPTIONS",
    "NEIGHBOURING",
    "REFERENCE",
    "SGD_ASSUMPTIONS",
    "SGD_REFERENCE",
    "LangevinBound",
    "chourasia_rdp",
    "langevin_bound",
    "langevin_epsilon",
    "langevin_rdp",
    "noisy_sgd_epsilon",
    "noisy_sgd_rdp",
    "ye_shokri_rdp",
]

NEIGHBOURING = ("add_remove", "replace_one")

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


@dataclasses.dataclass(frozen=True)
class LangevinBound:
    r"""The hidden-state Renyi-DP bound of one full-batch DP-GD run (formula 1).

    The bound is linear in the order: $\varepsilon_\alpha = \rho\,\alpha$.

    Attributes:
        rho: $\rho = \frac{2 s_1^2}{m\lambda\sigma^2C^2}(1 - e^{-\lambda m T/2})$, so the run
            is $(\alpha, \rho\alpha)$-RDP (last model only) for every $\alpha > 1$.
        epsilon: $\varepsilon(\delta)$ by `renyi_epsilon`, or None when no delta was given.
        delta: the delta of `epsilon`, or None.
        steps: $T$.
        rho_limit: $\rho$ as $T \to \infty$, $2 s_1^2/(m\lambda\sigma^2C^2)$.
        rho_composition: $T s_1^2/(2\sigma^2C^2)$, composition over all $T$ steps (every
            iterate released; no assumption on the loss). `rho` is at most twice this.
        assumptions: the conditions under which `rho` is an upper bound.
        reference: where the formula comes from.
    """

    rho: float
    epsilon: float | None
    delta: float | None
    steps: int
    rho_limit: float
    rho_composition: float
    assumptions: tuple[str, ...] = ASSUMPTIONS
    reference: str = REFERENCE


def _checked_gd(
    steps, noise_multiplier, clip_norm, lipschitz, strong_convexity, smoothness,
    learning_rate, num_examples, neighbouring,
):  # fmt: skip
    steps = check_int("steps", steps, minimum=1)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    c = check_positive("clip_norm", clip_norm)
    lip = check_positive("lipschitz", lipschitz)
    m = check_positive("strong_convexity", strong_convexity)
    big_m = check_positive("smoothness", smoothness)
    lr = check_positive("learning_rate", learning_rate)
    check_int("num_examples", num_examples, minimum=1)
    if neighbouring not in NEIGHBOURING:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING}, got {neighbouring!r}")
    if c < lip:
        raise ValueError(
            f"clip_norm must be >= lipschitz = {lip!r} (clipping must never act for the "
            f"run to be noisy GD on F), got {c!r}"
        )
    if big_m < m:
        raise ValueError(
            f"smoothness must be >= strong_convexity = {m!r} (M-smooth and m-strongly "
            f"convex need M >= m), got {big_m!r}"
        )
    if Fraction(lr) * Fraction(big_m) >= 1:
        raise ValueError(
            f"learning_rate must be in (0, 1/smoothness) = (0, {1.0 / big_m:.6g}) (the "
            f"theorem's eta < 1/beta with eta = learning_rate * num_examples, beta = "
            f"smoothness / num_examples), got {lr!r}"
        )
    s1 = lip if neighbouring == "add_remove" else 2.0 * lip
    return steps, sigma, c, m, lr, s1


def langevin_bound(
    steps,
    *,
    noise_multiplier,
    clip_norm,
    lipschitz,
    strong_convexity,
    smoothness,
    learning_rate,
    num_examples,
    neighbouring: str = "add_remove",
    delta=None,
) -> LangevinBound:
    r"""Hidden-state Renyi DP of full-batch DP-GD on a strongly convex smooth objective.

    $\varepsilon_\alpha = \frac{2\alpha s_1^2}{m\lambda\sigma^2C^2}(1 - e^{-\lambda mT/2})$:
    the noisy-GD bound of Chourasia, Ye and Shokri (arXiv:2102.05855; source and caveats in
    the module docstring) after the mapping $\eta = \lambda n$, $\sigma_{\rm p}^2 =
    \lambda\sigma^2C^2/(2n)$, $\lambda_{\rm p} = m/n$, $\beta = M/n$, $S_g = s_1$, $K = T$.

    Args:
        steps: $T \ge 1$.
        noise_multiplier: $\sigma > 0$ (noise $\mathcal N(0, \sigma^2C^2I)$ on the summed
            gradient).
        clip_norm: $C \ge$ `lipschitz`.
        lipschitz: $L > 0$, a bound on every per-example gradient norm on $K$.
        strong_convexity: $m > 0$, of the summed objective $F = \sum_i\ell_i + r$ in both
            neighbouring datasets (for add/remove, also without the canary).
        smoothness: $M \ge m$, of $F$ in both datasets.
        learning_rate: $\lambda \in (0, 1/M)$.
        num_examples: $n \ge 1$ (it cancels; kept for the mapping and validation).
        neighbouring: "add_remove" ($s_1 = L$) or "replace_one" ($s_1 = 2L$).
        delta: optional $\delta \in (0, 1)$ for `epsilon`.

    Returns:
        A `LangevinBound`.

    Raises:
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
    steps, sigma, c, m, lr, s1 = _checked_gd(
        steps, noise_multiplier, clip_norm, lipschitz, strong_convexity, smoothness,
        learning_rate, num_examples, neighbouring,
    )  # fmt: skip
    rho_limit = 2.0 * s1**2 / (m * lr * sigma**2 * c**2)
    rho = rho_limit * -math.expm1(-lr * m * steps / 2.0)
    rho_composition = steps * s1**2 / (2.0 * sigma**2 * c**2)
    if delta is not None:
        delta = check_delta("delta", delta)
        epsilon = renyi_epsilon(delta, lambda a: rho * a)
    else:
        epsilon = None
    return LangevinBound(
        rho=rho, epsilon=epsilon, delta=delta, steps=steps, rho_limit=rho_limit,
        rho_composition=rho_composition,
    )  # fmt: skip


def langevin_rdp(
    alpha,
    *,
    steps,
    noise_multiplier,
    clip_norm,
    lipschitz,
    strong_convexity,
    smoothness,
    learning_rate,
    num_examples,
    neighbouring: str = "add_remove",
) -> float:
    r"""$\varepsilon_\alpha$ of the last model of full-batch DP-GD (formula 1).

    $\frac{2\alpha s_1^2}{m\lambda\sigma^2C^2}(1 - e^{-\lambda mT/2})$; the arguments and
    conditions are those of `langevin_bound`.

    Args:
        alpha: the Renyi order $\alpha > 1$.
        **run: as `langevin_bound` (without `delta`).

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
    return alpha * langevin_bound(
        steps, noise_multiplier=noise_multiplier, clip_norm=clip_norm, lipschitz=lipschitz,
        strong_convexity=strong_convexity, smoothness=smoothness,
        learning_rate=learning_rate, num_examples=num_examples, neighbouring=neighbouring,
    ).rho  # fmt: skip


def langevin_epsilon(delta, *, orders=RENYI_ORDERS, **run) -> float:
    r"""$\varepsilon(\delta)$ of `langevin_rdp` by `renyi_epsilon` (Proposition 12 of
    arXiv:2004.00010, minimised over `orders`).

    Args:
        delta: $\delta \in (0, 1)$.
        orders: the Renyi orders to minimise over (default `RENYI_ORDERS`).
        **run: the keywords of `langevin_rdp` (`steps`, `noise_multiplier`, `clip_norm`,
            `lipschitz`, `strong_convexity`, `smoothness`, `learning_rate`,
            `num_examples`, optional `neighbouring`).

    Returns:
        eps >= 0, an upper bound under `ASSUMPTIONS`.

    Raises:
        ValueError: as `langevin_bound`, and for a delta outside (0, 1).
    """
    delta = check_delta("delta", delta)
    steps = run.pop("steps")
    rho = langevin_bound(steps, **run).rho
    return renyi_epsilon(delta, lambda a: rho * a, orders)


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
    noise_multiplier,
    clip_norm,
    lipschitz,
    strong_convexity,
    smoothness,
    learning_rate,
    num_examples,
    neighbouring: str = "replace_one",
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
        noise_multiplier: $\sigma > 0$.
        clip_norm: $C \ge$ `lipschitz`.
        lipschitz: $L > 0$, a bound on every per-example gradient norm.
        strong_convexity: $m > 0$, of every batch objective $F_B = \sum_{i\in B}\ell_i + r$.
        smoothness: $M \ge m$, of every batch objective.
        learning_rate: $\lambda \in (0, 2/(M + m))$.
        num_examples: $n$, with $\lfloor n/b\rfloor \ge 2$.
        neighbouring: "replace_one" only.

    Returns:
        $\varepsilon_\alpha \ge 0$, an upper bound under `SGD_ASSUMPTIONS`.

    Raises:
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
    n = check_int("num_examples", num_examples, minimum=2 * b)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    c = check_positive("clip_norm", clip_norm)
    lip = check_positive("lipschitz", lipschitz)
    m = check_positive("strong_convexity", strong_convexity)
    big_m = check_positive("smoothness", smoothness)
    lr = check_positive("learning_rate", learning_rate)
    if neighbouring not in NEIGHBOURING:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING}, got {neighbouring!r}")
    if neighbouring != "replace_one":
        raise ValueError(
            "neighbouring must be 'replace_one' for the shuffle-and-partition bound (adding "
            f"or removing an example changes the partition), got {neighbouring!r}"
        )
    if c < lip:
        raise ValueError(
            f"clip_norm must be >= lipschitz = {lip!r} (clipping must never act), got {c!r}"
        )
    if big_m < m:
        raise ValueError(f"smoothness must be >= strong_convexity = {m!r}, got {big_m!r}")
    if Fraction(lr) * (Fraction(big_m) + Fraction(m)) >= 2:
        raise ValueError(
            f"learning_rate must be in (0, 2/(smoothness + strong_convexity)) = "
            f"(0, {2.0 / (big_m + m):.6g}) (the step must be a (1 - learning_rate m)-"
            f"contraction), got {lr!r}"
        )
    s1 = 2.0 * lip
    one_step = alpha * s1**2 / (2.0 * sigma**2 * c**2)
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

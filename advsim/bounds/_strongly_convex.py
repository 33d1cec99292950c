r"""A rigorous hidden-state bound: full-batch DP-GD on a strongly convex, smooth objective.

When only the last model is released and the objective is strongly convex, every gradient
step is a contraction, so the influence of early steps fades geometrically and the privacy
loss of the last iterate converges as the number of steps grows. Bok, Su and Altschuler
("Shifted interpolation for differential privacy", ICML 2024, arXiv:2403.00278) give the
exact Gaussian-DP value for NoisyGD in the unconstrained strongly convex case; this module
gives it in advsim's DP-SGD parameterisation.

**Source of the formula.** The text of the theorem of arXiv:2403.00278 could not be
retrieved for this implementation (only the abstract of the paper was reachable), so its
number is not quoted here. The closed form is the one the authors evaluate as "Our Bound"
for NoisyGD in the strongly convex case in their reproduction code (function `ngd_fdp_sc`
of `plot_table_ngd_fdp.py`, github.com/jinhobok/shifted_interpolation_dp, commit 31fb075,
unchanged at a771c16; the README says the file draws Figures 6-7 and Tables 7-8 of the
latest arXiv version; the table it writes, label `tab:ngd-fdp-sc`, has the caption "GDP
parameters over different values of $t$ and $c$, with $L/(n\sigma) = 0.1$"; `plot_intro.py`
draws Figure 1 with the same line at $c = 0.95$, there labelled "Our $f$-DP bound
(optimal)"):

$$\mu_t = \mu_1\sqrt{\frac{(1 - c^t)(1 + c)}{(1 - c)(1 + c^t)}},
  \qquad \mu_1 = \frac{\bar L}{\sigma},$$

`mu0 = np.sqrt((1-c**t) / (1+c**t) * (1 + c) / (1 - c)) * mu` with `mu` $= L/(n\sigma)$, for
$x_{t+1} = x_t - \eta(\nabla F(x_t) + Z_t)$, $Z_t \sim \mathcal N(0, \sigma^2 I)$, $F$ the
average loss, $\bar L$ the largest change of $\nabla F$ when the datasets differ in one
example ($\bar L/\sigma$ is the one-step Gaussian mechanism, the code's "GDP Composition" is
$\sqrt t\,\bar L/\sigma$). The contraction factor is

$$c = \max\{|1 - \eta m|, |1 - \eta M|\} < 1, \qquad \eta \in (0, 2/M),$$

for an $m$-strongly convex, $M$-smooth objective: the definition and step-size range used
with this bound in Lemma 4.2 and Lemma B.2 of Li, Su, Wang, Long and Su, "Mitigating
privacy-utility trade-off in decentralized federated learning via f-differential privacy"
(NeurIPS 2025, arXiv:2510.19934; Weijie Su co-authored both papers), whose Lemma B.3
restates the shifted-interpolation lemma of arXiv:2403.00278 (cited there as its
Lemma C.3).

**Derivation (the assumptions it uses).** That lemma: for two contractive noisy iterations
$x_{k+1} = \Pi_K(\phi_{k+1}(x_k) + Z_{k+1})$, $x'_{k+1} = \Pi_K(\phi'_{k+1}(x'_k) + Z_{k+1})$
with every $\phi_k, \phi'_k$ $c$-Lipschitz, $\sup_x\|\phi_k(x) - \phi'_k(x)\| \le s_k$ and
$Z_k \sim \mathcal N(0, b^2 I)$, and any shifts $\gamma_k \in [0, 1]$ with $\gamma_t = 1$,
the last iterates are $G(\sqrt{\sum_k a_k^2}/b)$-indistinguishable, where
$a_{k+1} = \gamma_{k+1}(c\,b_k + s_{k+1})$, $b_{k+1} = (1 - \gamma_{k+1})(c\,b_k + s_{k+1})$
and $b_0 = 0$ (same start). With $s_k = s$ every step, the shifts only need
$\sum_k c^{t-k} a_k = s\sum_k c^{t-k}$, and Cauchy-Schwarz gives the smallest
$\sum_k a_k^2 = s^2(1-c^t)^2(1-c^2)/((1-c)^2(1-c^{2t}))$ at $a_k \propto c^{t-k}$, which is
$\mu_t^2 b^2$ above. The bound is tight: for a quadratic objective and a canary whose
gradient is a constant vector, the last iterate is Gaussian in both worlds and its exact
GDP parameter is this $\mu_t$ (the test file checks it).

So what the proof uses is that the whole gradient step $x \mapsto x - \eta\nabla F(x)$ is a
$c$-contraction on **both** neighbouring datasets, which holds when $F$ itself is
$m$-strongly convex and $M$-smooth; per-example strong convexity is one way to get it, not
a requirement of the argument. (The restatement in arXiv:2510.19934 assumes each loss
$\ell_i$ is $m$-strongly convex and $M$-smooth; with averaged losses that makes $F$ so.)

**DP-SGD parameterisation.** A run here is

$$x_t = x_{t-1} - \lambda\Bigl(\sum_{i=1}^n \mathrm{clip}_C(\nabla\ell_i(x_{t-1}))
  + \nabla r(x_{t-1}) + \mathcal N(0, \sigma^2C^2 I)\Bigr),$$

every example in every step (full batch), learning rate $\lambda$, noise multiplier
$\sigma$, clip norm $C \ge L$ so that clipping never acts. The objective is the **sum**
$F(x) = \sum_i \ell_i(x) + r(x)$, regularizer included; `strong_convexity` $m$ and
`smoothness` $M$ are constants of this $F$, and must hold for both datasets (with and
without the canary; e.g. with per-example constants $m_\ell, M_\ell$ and a regularizer
$m_r, M_r$: $m = (n-1)m_\ell + m_r$ for add/remove, $n m_\ell + m_r$ for replace-one, and
$M = n M_\ell + M_r$; a linear canary loss under an $a$-strongly convex regularizer has
$m = M = a$). In the paper's notation $\eta = \lambda n$, $F_{\text{paper}} = F/n$ (so
$m_{\text{paper}} = m/n$, $M_{\text{paper}} = M/n$, and $\eta m_{\text{paper}} = \lambda m$),
$\sigma_{\text{paper}} = \sigma C/n$, $\bar L = s_1/n$ with $s_1 = L$ when the datasets
differ by adding or removing the canary and $s_1 = 2L$ when one example is replaced. In
parameter space the canary moves a step by at most $s = \lambda s_1$, the noise has
standard deviation $b = \lambda\sigma C$, and

$$c = \max\{|1 - \lambda m|, |1 - \lambda M|\},\qquad
  \mu_1 = \frac{s}{b} = \frac{s_1}{\sigma C},\qquad
  \mu_T = \mu_1\sqrt{\frac{(1 - c^T)(1 + c)}{(1 - c)(1 + c^T)}}
  \ \xrightarrow{T\to\infty}\ \mu_1\sqrt{\frac{1 + c}{1 - c}}.$$

The number of examples cancels: $\lambda M < 2$ is the paper's $\eta < 2/M_{\text{paper}}$.

**One learning rate.** The closed form is derived for one $\lambda$ (one $c$) at every
step and does not apply as stated to a learning-rate schedule, so the bound takes its own
`learning_rate` and never an `advsim.Accounting`.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Unpack

from advsim._validation import (
    check_int,
    check_positive,
)
from advsim.bounds._closed_form import HiddenStateBound
from advsim.bounds._gdp import gdp_epsilon
from advsim.bounds._run_checks import (
    StronglyConvexRun,
    check_curvature,
    check_strongly_convex_gd,
    optional_epsilon,
)

__all__ = [
    "StronglyConvexGDPBound",
    "contraction_gdp_mu",
    "noisy_gd_strongly_convex_mu",
    "strongly_convex_gdp_bound",
    "strongly_convex_gdp_epsilon",
]


#: What the bound assumes; it is an upper bound only where all of these hold.
ASSUMPTIONS = (
    "the objective F(x) = sum_i loss_i(x) + r(x) (the sum over the examples, regularizer "
    "included) is m-strongly convex and M-smooth, with m > 0, on both neighbouring datasets "
    "(with and without the canary); per-example strong convexity is not needed",
    "every per-example gradient (the canary's too) has norm at most L, and clip_norm C >= L "
    "(clipping never acts)",
    "full batch: every example in every step (no Poisson or other sampling)",
    "one constant learning rate lr with lr * M < 2 (the paper's eta < 2/M); then each "
    "gradient step is a c-contraction, c = max(|1 - lr m|, |1 - lr M|) < 1",
    "unconstrained (the lemma behind it also allows a projection onto a closed convex set "
    "after each step)",
    "both runs start from the same data-independent initial model",
    "fresh Gaussian noise N(0, sigma^2 C^2 I) is added to the summed gradient every step",
    "only the last model is released",
)

REFERENCE = (
    "Bok, Su & Altschuler, 'Shifted interpolation for differential privacy', ICML 2024, "
    "arXiv:2403.00278: NoisyGD, unconstrained strongly convex case, the closed form "
    "evaluated as 'Our Bound' by the authors' code (plot_table_ngd_fdp.py: ngd_fdp_sc, "
    "github.com/jinhobok/shifted_interpolation_dp@31fb075); theorem text not retrieved; "
    "c = max(|1 - eta m|, |1 - eta M|), eta in (0, 2/M) as restated in arXiv:2510.19934 "
    "(Lemmas 4.2, B.2, B.3)"
)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class StronglyConvexGDPBound(HiddenStateBound):
    r"""The hidden-state GDP bound of one full-batch DP-GD run on a strongly convex objective.

    `epsilon` is $\varepsilon(\delta)$ of $\mu$-GDP (Corollary 2.13 of arXiv:1905.02383).
    With `HiddenStateBound`'s `epsilon`, `delta`, `steps`, `assumptions` and `reference`.

    Attributes:
        mu: the run is $\mu$-GDP (last model only), an upper bound under `assumptions`.
        contraction: $c = \max\{|1 - \lambda m|, |1 - \lambda M|\} \in [0, 1)$.
        mu_one_step: $\mu_1 = s_1/(\sigma C)$, one step (the Gaussian mechanism).
        mu_composition: $\sqrt{T}\,\mu_1$, every iterate released.
        mu_limit: $\mu_1\sqrt{(1+c)/(1-c)}$, the value as $T \to \infty$ (never exceeded).
        paper_step_size: $\eta = \lambda n$.
        paper_noise: $\sigma_{\text{paper}} = \sigma C / n$.
        paper_sensitivity: $\bar L = s_1 / n$ (the paper's $L/n$).
        paper_strong_convexity: $m/n$, of the average objective.
        paper_smoothness: $M/n$, of the average objective.
    """

    assumptions = ASSUMPTIONS
    reference = REFERENCE

    mu: float
    contraction: float
    mu_one_step: float
    mu_composition: float
    mu_limit: float
    paper_step_size: float
    paper_noise: float
    paper_sensitivity: float
    paper_strong_convexity: float
    paper_smoothness: float


def _gap(x: float) -> float:
    """1 - |1 - x| for x in (0, 2), without cancellation for small x."""
    return x if x <= 1.0 else 2.0 - x


def _mu_from_gap(steps: int, one_minus_c: float, one_step_mu: float) -> float:
    """mu_T from 1 - c in (0, 1], computed without cancellation when c is near 1."""
    if one_minus_c >= 1.0:  # c = 0: the last step alone carries the canary's shift
        return one_step_mu
    log_c = math.log1p(-one_minus_c)
    c_t = math.exp(steps * log_c)
    ratio = -math.expm1(steps * log_c) / (1.0 + c_t)  # (1 - c^T) / (1 + c^T)
    return one_step_mu * math.sqrt((2.0 - one_minus_c) / one_minus_c * ratio)


def contraction_gdp_mu(steps, contraction, one_step_mu) -> float:
    r"""$\mu_T = \mu_1\sqrt{(1 - c^T)(1 + c)/((1 - c)(1 + c^T))}$, the bare closed form.

    The expression the authors' `ngd_fdp_sc` evaluates (plot_table_ngd_fdp.py,
    github.com/jinhobok/shifted_interpolation_dp@31fb075), parameterised as there by the
    contraction factor and the one-step GDP parameter ($L/(n\sigma)$ in their table).

    Args:
        steps: $T \ge 1$.
        contraction: $c \in [0, 1)$.
        one_step_mu: $\mu_1 > 0$.

    Returns:
        $\mu_T$.

    Raises:
        ValueError: naming the parameter, its value and the valid range.

    Example:
        >>> round(contraction_gdp_mu(100, 0.98, 0.1), 3)
        0.871
    """
    steps = check_int("steps", steps, minimum=1)
    c = float(contraction)
    if not 0.0 <= c < 1.0:
        raise ValueError(f"contraction must be in [0, 1), got {contraction!r}")
    mu1 = check_positive("one_step_mu", one_step_mu)
    return _mu_from_gap(steps, 1.0 - c, mu1)


def _contraction_gap(step_size: float, m: float, big_m: float) -> float:
    return min(_gap(step_size * m), _gap(step_size * big_m))


def noisy_gd_strongly_convex_mu(
    steps, *, step_size, strong_convexity, smoothness, sensitivity, noise
) -> float:
    r"""$\mu_T$ of NoisyGD in the paper's parameterisation (arXiv:2403.00278).

    NoisyGD is $x_{t+1} = x_t - \eta(\nabla F(x_t) + Z_t)$, $Z_t \sim \mathcal N(0,
    \sigma^2 I)$, with $F$ the average loss, $m$-strongly convex and $M$-smooth, and
    $\sup_x\|\nabla F_S(x) - \nabla F_{S'}(x)\| \le \bar L$ for neighbouring datasets.
    Then $c = \max\{|1 - \eta m|, |1 - \eta M|\}$ and
    $\mu_T = (\bar L/\sigma)\sqrt{(1 - c^T)(1 + c)/((1 - c)(1 + c^T))}$.

    Args:
        steps: $T \ge 1$.
        step_size: $\eta \in (0, 2/M)$.
        strong_convexity: $m \in (0, M]$.
        smoothness: $M > 0$.
        sensitivity: $\bar L > 0$ (the code's $L/n$).
        noise: $\sigma > 0$ (standard deviation of the noise added to $\nabla F$).

    Returns:
        $\mu_T$.

    Raises:
        ValueError: naming the parameter, its value and the valid range.

    Example:
        >>> # eta m = 0.05, eta M = 0.5: c = 0.95, one step L/(n sigma) = 0.1 (Figure 1).
        >>> round(noisy_gd_strongly_convex_mu(
        ...     160, step_size=0.5, strong_convexity=0.1, smoothness=1.0,
        ...     sensitivity=0.1, noise=1.0), 4)
        0.6243
    """
    steps = check_int("steps", steps, minimum=1)
    eta = check_positive("step_size", step_size)
    m, big_m = check_curvature(strong_convexity, smoothness)
    lbar = check_positive("sensitivity", sensitivity)
    sigma = check_positive("noise", noise)
    if Fraction(eta) * Fraction(big_m) >= 2:
        raise ValueError(
            f"step_size must be in (0, 2 / smoothness) = (0, {2.0 / big_m:.6g}), got {eta!r}"
        )
    return _mu_from_gap(steps, _contraction_gap(eta, m, big_m), lbar / sigma)


def strongly_convex_gdp_bound(
    steps,
    *,
    neighbouring: str = "add_remove",
    delta=None,
    **run: Unpack[StronglyConvexRun],
) -> StronglyConvexGDPBound:
    r"""Hidden-state $\mu$-GDP of full-batch DP-GD on a strongly convex, smooth objective.

    $\mu_T = \mu_1\sqrt{(1 - c^T)(1 + c)/((1 - c)(1 + c^T))}$ with
    $c = \max\{|1 - \lambda m|, |1 - \lambda M|\}$ and $\mu_1 = s_1/(\sigma C)$ ($s_1 = L$
    to add or remove the canary, $2L$ to replace one example): Bok, Su and Altschuler
    (arXiv:2403.00278), NoisyGD in the unconstrained strongly convex case, in the closed
    form their code evaluates as "Our Bound" (see the module docstring for the source, the
    mapping $\eta = \lambda n$, $\sigma_{\text{paper}} = \sigma C/n$, $\bar L = s_1/n$,
    $m_{\text{paper}} = m/n$, $M_{\text{paper}} = M/n$, and the derivation). It increases
    in $T$ to $\mu_1\sqrt{(1+c)/(1-c)}$ and is exact (tight) for a quadratic objective
    with a canary of constant gradient.

    Assumptions (checked where they are numbers, otherwise named in the result): the
    summed objective $F = \sum_i \ell_i + r$ is $m$-strongly convex and $M$-smooth on both
    neighbouring datasets; every per-example gradient has norm at most $L \le C$ (so
    clipping never acts); full batch; one constant learning rate with $\lambda M < 2$;
    unconstrained (or projected onto a closed convex set); a data-independent start; only
    the last model released.

    Args:
        steps: $T \ge 1$.
        neighbouring: "add_remove" (advsim's canary in/out) or "replace_one".
        delta: optional $\delta \in (0, 1)$ for `epsilon`.
        **run: the setting, a `StronglyConvexRun` (`noise_multiplier`, `clip_norm`,
            `lipschitz`, `strong_convexity` and `smoothness` of the summed objective $F$,
            regularizer included, `learning_rate` and `num_examples`), with
            $\lambda \in (0, 2/M)$ here; the bound does not depend on $n$, which only maps
            the run to the paper's parameters.

    Returns:
        A `StronglyConvexGDPBound` (mu, epsilon, the contraction, the one-step, composition
        and limiting values, the paper's parameters, the assumptions).

    Raises:
        TypeError: a keyword `StronglyConvexRun` does not have, or one of its keys missing.
        ValueError: naming the parameter, its value and the valid range: non-positive
            `strong_convexity`, `strong_convexity > smoothness`, `clip_norm < lipschitz`,
            `learning_rate >= 2/smoothness`, an unknown `neighbouring`, a `delta` outside
            (0, 1).

    References:
        Bok, Su, Altschuler, "Shifted interpolation for differential privacy", ICML 2024,
        arXiv:2403.00278 (Section 4, NoisyGD; the authors' plot_table_ngd_fdp.py).

    Example:
        >>> b = strongly_convex_gdp_bound(
        ...     100, noise_multiplier=10.0, clip_norm=1.0, lipschitz=1.0,
        ...     strong_convexity=0.2, smoothness=1.0, learning_rate=0.1, num_examples=10)
        >>> round(b.contraction, 4), round(b.mu, 4), round(b.mu_limit, 4)
        (0.98, 0.8707, 0.995)
    """
    steps, sigma, c, s1, m, big_m, lr, n = check_strongly_convex_gd(
        "strongly_convex_gdp_bound", steps, run, neighbouring, step_limit=2,
        why="for the gradient step to stay a contraction", paper="smoothness of the summed "
        "objective; the paper's eta < 2/M with eta = learning_rate * num_examples",
    )  # fmt: skip
    mu1 = s1 / (sigma * c)  # s / b: the learning rate cancels
    gap = _contraction_gap(lr, m, big_m)  # 1 - c
    mu = _mu_from_gap(steps, gap, mu1)
    mu_limit = mu1 * math.sqrt((2.0 - gap) / gap)
    delta, epsilon = optional_epsilon(delta, lambda d: gdp_epsilon(d, mu))
    return StronglyConvexGDPBound(
        mu=mu, epsilon=epsilon, delta=delta, steps=steps, contraction=1.0 - gap,
        mu_one_step=mu1, mu_composition=mu1 * math.sqrt(steps), mu_limit=mu_limit,
        paper_step_size=lr * n, paper_noise=sigma * c / n, paper_sensitivity=s1 / n,
        paper_strong_convexity=m / n, paper_smoothness=big_m / n,
    )  # fmt: skip


def strongly_convex_gdp_epsilon(delta, steps, **run) -> float:
    r"""$\varepsilon(\delta)$ of `strongly_convex_gdp_bound` (its `epsilon`).

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$.
        **run: the keywords of `strongly_convex_gdp_bound`: a `StronglyConvexRun` and
            optional `neighbouring`.

    Returns:
        eps >= 0, an upper bound under the assumptions `strongly_convex_gdp_bound` names.

    Raises:
        ValueError: as `strongly_convex_gdp_bound`.

    Example:
        >>> round(strongly_convex_gdp_epsilon(
        ...     1e-5, 1, noise_multiplier=1.0, clip_norm=1.0, lipschitz=1.0,
        ...     strong_convexity=0.5, smoothness=1.0, learning_rate=0.5,
        ...     num_examples=4), 4)
        4.3772
    """
    return strongly_convex_gdp_bound(steps, delta=delta, **run).epsilon

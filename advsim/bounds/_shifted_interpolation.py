r"""A rigorous hidden-state bound: projected full-batch DP-GD on a convex, smooth loss.

When only the last model is released, projected noisy gradient descent on a convex,
Lipschitz, smooth loss over a bounded set leaks no more after a burn-in: the privacy loss
stops growing with the number of steps (Altschuler and Talwar, "Privacy of noisy
stochastic gradient descent: more iterations without more privacy loss", NeurIPS 2022,
arXiv:2205.13710, in Renyi DP; Bok, Su and Altschuler, "Shifted interpolation for
differential privacy", ICML 2024, arXiv:2403.00278, in Gaussian DP). This module gives the
Gaussian-DP form for NoisyGD in the constrained convex case.

**Source of the formula.** The text of the theorem of arXiv:2403.00278 could not be
retrieved for this implementation (only the abstract was reachable), so its number is not
quoted here. The closed form is the one the authors evaluate as "Our Bound" for NoisyGD in
the constrained convex case in their reproduction code (function `ngd_fdp_proj` of
`plot_table_ngd_fdp.py`, github.com/jinhobok/shifted_interpolation_dp, commit 31fb075;
the README says the file draws Figures 6-7 and Tables 7-8 of the latest arXiv version),
written there with $D = 1$ and $\bar L = L/n$:

$$\mu_t = \min\Bigl\{\tfrac{\bar L}{\sigma}\sqrt t,\;
  \tfrac1\sigma\sqrt{3\bar L/\eta + \bar L^2 \lceil 1/(\bar L\eta) \rceil}\Bigr\},
  \qquad t^* = \bigl\lceil (3\bar L/\eta + \bar L^2\lceil 1/(\bar L\eta)\rceil)/\bar L^2
  \bigr\rceil ,$$

for $x_{t+1} = \Pi_K(x_t - \eta(\nabla F(x_t) + Z_t))$, $Z_t \sim \mathcal N(0,
\sigma^2 I)$, $F$ the average loss, $\bar L/\sigma$ the one-step Gaussian-mechanism
parameter (the code's composition curve is $\sqrt t\,\bar L/\sigma$). Rescaling the
parameter space $x \mapsto x/D$ (loss $f(Dx)/D$: same gradients, smoothness $DM$, steps
$\eta/D$, so $\eta M$ is unchanged) gives any diameter: $\eta \to \eta/D$.

It is re-derived here from the shifted-interpolation argument, so that each assumption
is visible: both runs start at the same $x_0$; from step $\tau = T - k$, when the runs
are at most $D$ apart, an auxiliary process that moves from one run onto the other in
$k$ equal shifts turns the last iterate into $k$ Gaussian mechanisms, each with shift
$(D + k s)/k$ against noise $b$ in parameter space ($s$: the sensitivity of one step;
the gradient steps are non-expansive and the projection a contraction, so distances
never grow), hence $\mu^2 = (D/\sqrt k + s\sqrt k)^2/b^2$; at
$k = \lceil D/s \rceil$, $D^2/k \le Ds$ gives the closed form
$\mu^2 \le (3Ds + s^2\lceil D/s\rceil)/b^2$; with $k = T$ (no shift from $D$) it is
composition. The test file checks both the authors' formula and this derivation.

**DP-SGD parameterisation.** A run here is

$$x_{t+1} = \Pi_K\Bigl(x_t - \lambda\Bigl(\sum_i \mathrm{clip}_C(\nabla\ell_i(x_t))
  + \mathcal N(0, \sigma^2C^2 I)\Bigr)\Bigr),$$

every example in every step (full batch), learning rate $\lambda$, noise multiplier
$\sigma$, clip norm $C \ge L$ so that clipping never acts. In the paper's notation
$\eta = \lambda n$, $\sigma_{\text{paper}} = \sigma C/n$, $\bar L = s_1/n$ with
$s_1 = L$ when the datasets differ by adding or removing one example (advsim's canary
in/out) and $s_1 = 2L$ when one example is replaced, and $\eta \le 2/M$ is
$\lambda n M \le 2$. In parameter space the canary moves a step by at most
$s = \lambda s_1$, the noise has standard deviation $b = \lambda\sigma C$, and

$$\mu_T = \min\Bigl\{\tfrac{s}{b}\sqrt T,\ \tfrac1b\sqrt{3Ds + s^2\lceil D/s\rceil}\Bigr\};
  \qquad \text{one step: } \mu_1 = s/b = s_1/(\sigma C).$$

The number of examples cancels: only how far one step can move the model ($s$), the
noise ($b$) and the diameter ($D$) matter, once $\lambda n M \le 2$ holds.

**One learning rate.** Unlike the composition bounds, this one depends on the step size:
the one-step ratio $s/b = s_1/(\sigma C)$ does not, but the walk $k = \lceil D/s \rceil$
of equal shifts of size $s = \lambda s_1$ against the fixed diameter $D$ does, and so does
the non-expansiveness condition $\lambda n M \le 2$ at every step. The closed form is
derived for one $\lambda$ at every step and does not apply as stated to a learning-rate
schedule. So the bound takes its own `learning_rate` (a number) and never an
`advsim.Accounting`, whose `step_sizes` it could not honour; the mechanisms that call it
(`advsim.mechanisms.ProjectedLinearCanary`, `advsim.testing`'s projected field
constructions) keep the default `step_size`, one rate at every step.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from advsim._validation import (
    check_int,
    check_nonnegative,
    check_positive,
)
from advsim.bounds._closed_form import HiddenStateBound
from advsim.bounds._gdp import gdp_epsilon
from advsim.bounds._run_checks import (
    check_gradient_run,
    one_step_sensitivity,
    optional_epsilon,
)

__all__ = [
    "ShiftedInterpolationBound",
    "shifted_interpolation_bound",
    "shifted_interpolation_epsilon",
]


#: What the bound assumes; it is an upper bound only where all of these hold.
ASSUMPTIONS = (
    "every example's loss (the canary's too) is convex, differentiable and M-smooth on K",
    "every per-example gradient has norm at most L on K, and clip_norm C >= L (clipping "
    "never acts)",
    "full batch: every example in every step, constant learning rate lr, "
    "lr * num_examples * M <= 2 (each gradient step is non-expansive)",
    "after every step the model is projected onto a closed convex set K of diameter D",
    "the initial model lies in K and does not depend on the data",
    "fresh Gaussian noise N(0, sigma^2 C^2 I) is added to the summed gradient every step",
    "only the last model is released",
)

REFERENCE = (
    "Bok, Su & Altschuler, 'Shifted interpolation for differential privacy', ICML 2024, "
    "arXiv:2403.00278: NoisyGD, constrained convex case, the closed form evaluated as "
    "'Our Bound' by the authors' code (plot_table_ngd_fdp.py: ngd_fdp_proj, "
    "github.com/jinhobok/shifted_interpolation_dp@31fb075); theorem text not retrieved"
)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class ShiftedInterpolationBound(HiddenStateBound):
    r"""The hidden-state GDP bound of one projected full-batch DP-GD run.

    `epsilon` is $\varepsilon(\delta)$ of $\mu$-GDP (Corollary 2.13 of arXiv:1905.02383).
    With `HiddenStateBound`'s `epsilon`, `delta`, `steps`, `assumptions` and `reference`.

    Attributes:
        mu: the run is $\mu$-GDP (last model only), an upper bound under `assumptions`.
        mu_composition: $\sqrt{T}\,s/b$, every iterate released (the same run, no
            assumption on the loss).
        mu_plateau: the value the bound keeps for every $T \ge$ `plateau_steps`.
        plateau_steps: $t^*$, the first $T$ from which `mu` equals `mu_plateau`.
        walk_steps: $k = \lceil D/s \rceil$, the shifts that carry one run onto the other.
    """

    assumptions = ASSUMPTIONS
    reference = REFERENCE

    mu: float
    mu_composition: float
    mu_plateau: float
    plateau_steps: int
    walk_steps: int


def _checked(
    steps, noise_multiplier, clip_norm, lipschitz, smoothness, learning_rate, num_examples,
    diameter, neighbouring,
):  # fmt: skip
    steps, sigma, c, lip, lr = check_gradient_run(
        steps=steps, noise_multiplier=noise_multiplier, clip_norm=clip_norm,
        lipschitz=lipschitz, learning_rate=learning_rate, neighbouring=neighbouring,
        why="for the gradient step to stay non-expansive",
    )  # fmt: skip
    m = check_nonnegative("smoothness", smoothness)
    n = check_int("num_examples", num_examples, minimum=1)
    d = check_positive("diameter", diameter)
    if Fraction(lr) * n * Fraction(m) > 2:
        raise ValueError(
            f"learning_rate must be in (0, 2 / (num_examples * smoothness)] = "
            f"(0, {2.0 / (n * m):.6g}] (eta <= 2/M with eta = learning_rate * num_examples: "
            f"a non-expansive gradient step), got {lr!r}"
        )
    return steps, sigma, c, lip, lr, d


def shifted_interpolation_bound(
    steps,
    *,
    noise_multiplier,
    clip_norm,
    lipschitz,
    smoothness,
    learning_rate,
    num_examples,
    diameter,
    neighbouring: str = "add_remove",
    delta=None,
) -> ShiftedInterpolationBound:
    r"""Hidden-state $\mu$-GDP of projected full-batch DP-GD on a convex smooth loss.

    $\mu_T = \min\{\sqrt T\, s/b,\ \sqrt{3Ds + s^2\lceil D/s\rceil}/b\}$ with
    $s = \lambda s_1$ (the largest move of one step caused by the differing example:
    $s_1 = L$ to add or remove it, $2L$ to replace it) and $b = \lambda\sigma C$: Bok, Su and
    Altschuler (arXiv:2403.00278), NoisyGD in the constrained convex case, in the closed
    form their code evaluates (see the module docstring for the source, the mapping
    $\eta = \lambda n$, $\sigma_{\text{paper}} = \sigma C/n$, $\bar L = s_1/n$, and the
    derivation). For $T \ge t^*$ the bound no longer grows; before that it is
    composition.

    Assumptions (checked where they are numbers, otherwise named in the result): each
    example's loss convex, differentiable, $M$-smooth, with gradients of norm at most
    $L \le C$ on $K$ (so clipping never acts); full batch with a constant learning
    rate and $\lambda n M \le 2$ (the paper's $\eta \le 2/M$: each gradient step is
    non-expansive); projection onto a closed convex $K$ of diameter $D$ after every step;
    a data-independent start in $K$; only the last model released.

    Args:
        steps: $T \ge 1$.
        noise_multiplier: $\sigma > 0$ (noise $\mathcal N(0, \sigma^2C^2I)$ on the summed
            gradient).
        clip_norm: $C \ge$ `lipschitz`.
        lipschitz: $L > 0$, a bound on every per-example gradient norm on $K$ (for
            logistic regression, the largest feature norm, bias included).
        smoothness: $M \ge 0$, the per-example smoothness (logistic regression: $L^2/4$).
        learning_rate: $\lambda \in (0, 2/(nM)]$.
        num_examples: $n$, the examples in the larger dataset (with the canary).
        diameter: $D > 0$, the diameter of $K$ (twice the radius of a ball).
        neighbouring: "add_remove" (advsim's canary in/out) or "replace_one".
        delta: optional $\delta \in (0, 1)$ for `epsilon`.

    Returns:
        A `ShiftedInterpolationBound` (mu, epsilon, the composition value, the plateau,
        the assumptions).

    Raises:
        ValueError: naming the parameter, its value and the valid range: non-positive
            `diameter`, `clip_norm < lipschitz`, `learning_rate > 2/(num_examples *
            smoothness)`, an unknown `neighbouring`, a `delta` outside (0, 1).

    References:
        Bok, Su, Altschuler, "Shifted interpolation for differential privacy", ICML 2024,
        arXiv:2403.00278 (Section 4, NoisyGD; the authors' plot_table_ngd_fdp.py).
        Altschuler, Talwar, NeurIPS 2022, arXiv:2205.13710 (the Renyi-DP form, up to
        constants; not implemented here).

    Example:
        >>> b = shifted_interpolation_bound(
        ...     1000, noise_multiplier=8.0, clip_norm=1.0, lipschitz=1.0, smoothness=1.0,
        ...     learning_rate=0.1, num_examples=2, diameter=1.0)
        >>> b.walk_steps, b.plateau_steps, round(b.mu, 4), round(b.mu_composition, 4)
        (10, 40, 0.7906, 3.9528)
    """
    steps, sigma, c, lip, lr, d = _checked(
        steps, noise_multiplier, clip_norm, lipschitz, smoothness, learning_rate,
        num_examples, diameter, neighbouring,
    )  # fmt: skip
    s1 = one_step_sensitivity(lip, neighbouring)
    one_step = s1 / (sigma * c)  # s / b: the learning rate cancels
    # k = ceil(D / s), exactly for the given floats: rounding k down would break the bound.
    walk = math.ceil(Fraction(d) / (Fraction(lr) * Fraction(s1)))
    walk_over_d = d / (lr * s1)  # D / s
    # mu_plateau^2 = (3 D s + s^2 k) / b^2 = (s/b)^2 (3 D/s + k)
    plateau_sq_units = 3.0 * walk_over_d + walk
    mu_plateau = one_step * math.sqrt(plateau_sq_units)
    mu_composition = one_step * math.sqrt(steps)
    plateau_steps = math.ceil(plateau_sq_units)
    mu = min(mu_composition, mu_plateau)
    delta, epsilon = optional_epsilon(delta, lambda d: gdp_epsilon(d, mu))
    return ShiftedInterpolationBound(
        mu=mu, epsilon=epsilon, delta=delta, steps=steps, mu_composition=mu_composition,
        mu_plateau=mu_plateau, plateau_steps=plateau_steps, walk_steps=walk,
    )  # fmt: skip


def shifted_interpolation_epsilon(delta, steps, **run) -> float:
    r"""$\varepsilon(\delta)$ of `shifted_interpolation_bound` (its `epsilon`).

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$.
        **run: the keywords of `shifted_interpolation_bound` (`noise_multiplier`,
            `clip_norm`, `lipschitz`, `smoothness`, `learning_rate`, `num_examples`,
            `diameter`, optional `neighbouring`).

    Returns:
        eps >= 0, an upper bound under the assumptions `shifted_interpolation_bound`
        names.

    Raises:
        ValueError: as `shifted_interpolation_bound`.

    Example:
        >>> round(shifted_interpolation_epsilon(
        ...     1e-5, 1, noise_multiplier=1.0, clip_norm=1.0, lipschitz=1.0,
        ...     smoothness=1.0, learning_rate=0.5, num_examples=4, diameter=1.0), 4)
        4.3772
    """
    return shifted_interpolation_bound(steps, delta=delta, **run).epsilon

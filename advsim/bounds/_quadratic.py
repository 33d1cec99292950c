r"""The exact privacy of the linear loss with a quadratic regularizer (Section 4.2).

DP-SGD in one dimension on a linear loss with canary gradient $-C$ and the regularizer
$r(m) = \alpha m^2 / 2$ updates $m_t = \beta m_{t-1} + \eta (C b_t + \sigma C \xi_t)$ with
$\beta = 1 - \eta\alpha$. The last model, in units of $\eta C$, is

$$P = \mathcal{N}\Big(X, \hat\sigma^2\Big), \quad
X = \sum_{i=1}^{T} \beta^{i-1} b_{T-i+1}, \quad
\hat\sigma^2 = \sigma^2 \sum_{i=1}^{T} \beta^{2(i-1)}$$

against $Q = \mathcal{N}(0, \hat\sigma^2)$, with $b_t \sim \mathrm{Bernoulli}(q)$ at the
steps that can carry the canary (Section 4.2 of arXiv:2410.06186; $\eta = 1$ there). The
pair is a Gaussian location mixture, so its $(\varepsilon, \delta)$ is
`advsim.bounds.mixture_epsilon` of the law of $X$.

The support of $X$ has up to $2^T$ atoms. For small $T$ (or when equal atoms merge, as
for $\alpha \in \{0, 1/\eta\}$) it is enumerated exactly. Otherwise it is rounded as in
Section 4.2 of arXiv:2410.06186: every atom below 0.0005 is raised to 0.0005, then every
atom is raised to the next integer power of 1.05, and equal atoms are merged. Raising atoms
can only increase epsilon: if $X \le Y$ almost surely then distinguishing
$\mathcal{N}(X, s^2)$ from $\mathcal{N}(0, s^2)$ is no easier than distinguishing
$\mathcal{N}(Y, s^2)$ from $\mathcal{N}(0, s^2)$ (Lemma 4.5 of Choquette-Choo, Ganesh,
Steinke & Thakurta 2024, "Privacy amplification for matrix mechanisms", arXiv:2310.15526),
so the rounded epsilon is an upper bound. The paper expects it within a factor 1.05 of the
exact one; we measured 3% to 7% above it where both can be computed (T <= 16).

To reach the rounded law without listing $2^T$ atoms, $X$ is built step by step as the
model is, $V_0 = 0$, $V_t = \beta V_{t-1} + b_t$, $X = V_T$, with every $V_t$ raised to a
fine additive grid of spacing $h$ (a probability vector over the grid, two `bincount`s per
step). Each step raises by less than $2h$ and an earlier raise is shrunk by $\beta$ at
every later step, so the final atoms exceed the exact ones by less than
$2h \min(T, 1/(1 - \beta))$. $h$ is the power of two just below $2^{-16}$ of the largest
atom, so that integers (1 = 1.05^0 among them) are grid points and are not pushed to the
next power of 1.05. The grid only raises atoms, so the result stays an upper bound; the
paper's coarser rounding is applied on top (`rounding="fine"` stops at the grid).
"""

from __future__ import annotations

import math

import numpy as np

from advsim._validation import (
    check_canary_steps,
    check_delta,
    check_in_interval,
    check_int,
    check_probability,
)
from advsim.bounds._mixture import merge_atoms, mixture_epsilon

__all__ = ["quadratic_exact_epsilon", "quadratic_law", "round_support"]

#: Exact enumeration is used while the merged support has at most this many atoms.
MAX_EXACT_ATOMS = 2**16
#: Section 4.2 of arXiv:2410.06186: atoms below FLOOR are raised to FLOOR, then every atom
#: to the next integer power of BASE.
FLOOR = 0.0005
BASE = 1.05
_GRID_POINTS = 2**16


def round_support(support, probs, *, floor: float = FLOOR, base: float = BASE):
    """Raises every atom to max(atom, floor), then to the next integer power of `base`.

    The rounding of Section 4.2 of arXiv:2410.06186; equal atoms are merged afterwards.
    Raising atoms only increases epsilon (Lemma 4.5 of arXiv:2310.15526), so the result is
    a pessimistic stand-in for the original law.

    Args:
        support: atoms >= 0.
        probs: their probabilities (summing to 1).
        floor: the smallest atom after rounding, > 0.
        base: the grid ratio, > 1.

    Returns:
        `(support, probs)`, merged and sorted.

    Example:
        >>> [round(x, 6) for x in round_support([0.0, 1.0], [0.5, 0.5])[0].tolist()]
        [0.00052, 1.0]
    """
    support, probs = merge_atoms(support, probs)
    floor = check_in_interval("floor", floor, 0.0, math.inf)
    base = check_in_interval("base", base, 1.0, math.inf)
    log_base = math.log(base)
    k = np.ceil(np.log(np.maximum(support, floor)) / log_base)
    rounded = np.exp(k * log_base)
    # exp(k log b) can land a hair below an atom that sat exactly on the grid; never lower
    # an atom (the bound must stay pessimistic).
    rounded = np.where(rounded < support, np.exp((k + 1) * log_base), rounded)
    return merge_atoms(rounded, probs)


def _check(steps, sampling_prob, noise_multiplier, alpha, learning_rate, canary_steps):
    steps = check_int("steps", steps, minimum=1)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_in_interval("noise_multiplier", noise_multiplier, 0.0, math.inf)
    lr = check_in_interval("learning_rate", learning_rate, 0.0, math.inf)
    alpha = check_in_interval("alpha", alpha, 0.0, 1.0 / lr, low_closed=True, high_closed=True)
    if canary_steps is None:
        canary_steps = range(1, steps + 1)
    canary = list(check_canary_steps(canary_steps, steps, count=False))
    return steps, q, sigma, alpha, lr, canary


def _weights(steps: int, beta: float) -> np.ndarray:
    """beta^(T - t) for t = 1..T: how much of step t's update survives to m_T."""
    return beta ** np.arange(steps - 1, -1, -1, dtype=np.float64)


def _exact_support(weights, probs_canary, max_atoms):
    """Merged atoms of sum_t w_t b_t, b_t ~ Bernoulli(p_t); None beyond max_atoms."""
    support, probs = np.array([0.0]), np.array([1.0])
    for w, p in zip(weights, probs_canary, strict=True):
        if p == 0.0:
            continue
        support = np.concatenate([support, support + w])
        probs = np.concatenate([probs * (1.0 - p), probs * p])
        support, probs = merge_atoms(support, probs / math.fsum(probs.tolist()))
        if support.size > max_atoms:
            return None
    return support, probs


def _grid_support(beta, probs_canary):
    """Atoms of X raised to a fine additive grid by Horner's rule (module docstring).

    `probs_canary[t - 1]` is the canary's probability at step t. The steps are taken in
    the order t = 1..T, each mapping the value V to beta V + b_t, so that the coefficient
    of b_t at the end is beta^(T - t); a raise made at step t is shrunk by beta^(T - t).
    """
    steps = len(probs_canary)
    top = float(np.sum(beta ** np.arange(steps)))  # the largest atom, all b_t = 1
    # A power of two, so that 1 (and every integer) is a grid point: the atoms that the
    # paper's rounding keeps exactly (1 = 1.05^0) are not pushed to the next power.
    h = 2.0 ** math.floor(math.log2(top / _GRID_POINTS))
    # Every step raises by less than 2 grid points (one for beta V, one for + 1).
    size = int(math.ceil(top / h)) + 2 * steps + 2
    k = np.arange(size, dtype=np.float64)
    shrunk = np.ceil(beta * k).astype(np.int64)  # beta k h raised to the grid
    one = int(math.ceil(1.0 / h))  # 1 raised to the grid
    p = np.zeros(size)
    p[0] = 1.0
    for pt in probs_canary:
        base = np.bincount(shrunk, weights=p, minlength=size)
        if pt == 0.0:
            p = base
            continue
        moved = np.zeros(size)
        moved[one:] = base[: size - one]
        p = (1.0 - pt) * base + pt * moved
    keep = p > 0
    return k[keep] * h, p[keep] / math.fsum(p[keep].tolist())


def quadratic_law(
    steps,
    sampling_prob,
    noise_multiplier,
    alpha,
    *,
    learning_rate=1.0,
    canary_steps=None,
    rounding: str = "auto",
) -> tuple[np.ndarray, np.ndarray, float, bool]:
    r"""The last model's law, $\mathcal{N}(X, \hat\sigma^2)$, in units of $\eta C$.

    Args:
        steps: $T \ge 1$.
        sampling_prob: $q \in (0, 1]$, the canary's probability at each of its steps
            (1 for a canary that is always present).
        noise_multiplier: $\sigma > 0$.
        alpha: the regularizer's strength, $0 \le \eta\alpha \le 1$.
        learning_rate: $\eta > 0$ (Section 4.2 uses 1).
        canary_steps: the 1-indexed steps that can carry the canary, distinct, in $[1, T]$
            (default all).
        rounding: "exact" (enumerate, merging equal atoms; fails beyond 2^16 atoms),
            "paper" (the rounding of Section 4.2, see the module docstring), "auto"
            (exact when the merged support has at most 2^16 atoms, else "paper") or
            "fine" (exact when it fits, else the fine grid of the module docstring alone:
            an upper bound too, about 2^-16 of the largest atom above the exact one
            instead of a few percent, with up to 2^16 atoms).

    Returns:
        `(support, probs, scale, rounded)`: the atoms of $X$ (or of its rounded
        version), their probabilities, $\hat\sigma$, and whether rounding was applied.
    """
    steps, q, sigma, alpha, lr, canary = _check(
        steps, sampling_prob, noise_multiplier, alpha, learning_rate, canary_steps
    )
    if rounding not in ("auto", "exact", "paper", "fine"):
        raise ValueError(f"rounding must be 'auto', 'exact', 'paper' or 'fine', got {rounding!r}")
    beta = 1.0 - lr * alpha
    weights = _weights(steps, beta)
    scale = sigma * math.sqrt(math.fsum((weights**2).tolist()))
    p_canary = np.zeros(steps)
    p_canary[np.asarray(canary) - 1] = q
    exact = _exact_support(weights, p_canary, MAX_EXACT_ATOMS)
    if exact is None and rounding == "exact":
        raise ValueError(
            f"the support has more than {MAX_EXACT_ATOMS} atoms for steps={steps}, "
            f"alpha={alpha}; use rounding='paper' (or 'auto')"
        )
    if exact is not None and rounding != "paper":
        return exact[0], exact[1], scale, False
    support, probs = exact if exact is not None else _grid_support(beta, p_canary)
    if rounding != "fine":
        support, probs = round_support(support, probs)
    return support, probs, scale, True


def quadratic_exact_epsilon(
    delta,
    steps,
    sampling_prob,
    noise_multiplier,
    alpha,
    *,
    learning_rate=1.0,
    canary_steps=None,
    rounding: str = "auto",
) -> float:
    r"""eps(delta) of the last model of DP-SGD on a linear loss with $r(m) = \alpha m^2/2$.

    Section 4.2 of arXiv:2410.06186: distinguishing
    $\mathcal{N}(\sum_i (1-\alpha)^{i-1} \mathrm{Bernoulli}(q), \hat\sigma^2)$ from
    $\mathcal{N}(0, \hat\sigma^2)$, $\hat\sigma^2 = \sigma^2 \sum_i (1-\alpha)^{2(i-1)}$
    (with $\eta = 1$; in general $1 - \eta\alpha$ replaces $1 - \alpha$), computed by
    `advsim.bounds.mixture_epsilon` (both hockey-stick directions). Exact for small $T$;
    for large $T$ the support is rounded up as in the paper (see the module docstring),
    which gives an upper bound a few percent high (Lemma 4.5 of arXiv:2310.15526).

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$.
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        alpha: $\alpha$ with $0 \le \eta\alpha \le 1$; 0 is the linear loss (the
            heuristic), 1 forgets all but the last step.
        learning_rate: $\eta$ (default 1, as in the paper).
        canary_steps: the 1-indexed steps that can carry the canary, distinct, in $[1, T]$
            (default all T).
        rounding: "auto" (default), "exact", "paper" or "fine"; see `quadratic_law`.

    Returns:
        eps >= 0.

    Example:
        >>> [round(quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, a), 4) for a in (0, 0.5, 1)]
        [2.2224, 2.2749, 2.1817]

        Section 4.2 reports (2.222, 1e-6)-DP for alpha = 0, (2.182, 1e-6)-DP for alpha = 1
        and "not (eps, 1e-6)-DP for eps < 2.274" for alpha = 1/2.
    """
    delta = check_delta("delta", delta)
    support, probs, scale, _ = quadratic_law(
        steps,
        sampling_prob,
        noise_multiplier,
        alpha,
        learning_rate=learning_rate,
        canary_steps=canary_steps,
        rounding=rounding,
    )
    return mixture_epsilon(delta, support, probs, scale)

r"""Privacy of a pair of discrete laws: epsilon, privacy profile and trade-off curve.

The exact-law engine ends with the last model's law in both worlds as masses on one grid,
$P = (p_i)$ (canary in) and $Q = (q_i)$ (canary out). Everything here reads privacy off such
a pair, exactly for the discrete laws:

- sort the cells by likelihood ratio $p_i / q_i$, largest first, and take the prefix sums
  $P_k = \sum_{i \le k} p_i$, $Q_k = \sum_{i \le k} q_i$;
- the hockey-stick divergence is $H_{e^\varepsilon}(P \| Q) = \sum_i (p_i - e^\varepsilon
  q_i)_+ = \max_k (P_k - e^\varepsilon Q_k)$ (the optimal set is a likelihood-ratio level
  set, a prefix), so the least $\varepsilon \ge 0$ with $H \le \delta$ is
  $\max\big(0, \max_{k: P_k > \delta} \log\frac{P_k - \delta}{Q_k}\big)$: no root finding,
  and differentiable almost everywhere in the masses;
- the trade-off curve (Neyman-Pearson, randomised tests between the prefixes) is the
  polygon through $(\alpha_k, \beta_k) = (Q_k, 1 - P_k)$.

$\varepsilon(\delta)$ of the release is the larger of the two directions $(P, Q)$ and $(Q, P)$
(add/remove neighbours), as in Definition 2.1 of arXiv:2410.06186.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "discrete_epsilon",
    "discrete_privacy_profile",
    "discrete_tradeoff",
    "grid_delta",
    "grid_epsilon",
    "grid_epsilon_host",
]

#: Bisection for `grid_epsilon`: epsilon in [0, EPS_MAX], halved this many times.
EPS_MAX = 100.0
BISECTIONS = 64


def _log_ratio(p, q, xp):
    """log(p / q) with 0/0 -> -inf (the cell carries no mass) and p/0 -> +inf."""
    safe_p = xp.where(p > 0, p, 1.0)
    safe_q = xp.where(q > 0, q, 1.0)
    ratio = xp.log(safe_p) - xp.log(safe_q)
    ratio = xp.where(q > 0, ratio, xp.inf)
    return xp.where(p > 0, ratio, -xp.inf)


def _one_way_epsilon(p, q, delta):
    order = jnp.argsort(-_log_ratio(p, q, jnp))
    big_p = jnp.cumsum(p[order])
    big_q = jnp.cumsum(q[order])
    excess = big_p - delta
    ok = excess > 0
    safe_excess = jnp.where(ok, excess, 1.0)
    # Q_k = 0 with P_k > delta: no finite epsilon (log(0) = -inf gives +inf here).
    candidates = jnp.where(ok, jnp.log(safe_excess) - jnp.log(big_q), -jnp.inf)
    return jnp.maximum(0.0, jnp.max(candidates))


def discrete_epsilon(p: Float[Array, " n"], q: Float[Array, " n"], delta) -> Float[Array, ""]:
    r"""$\varepsilon(\delta)$ of two discrete laws on the same cells, both directions.

    The least $\varepsilon \ge 0$ with $\max(H_{e^\varepsilon}(P\|Q), H_{e^\varepsilon}(Q\|P))
    \le \delta$, in closed form over the likelihood-ratio prefixes (see the module).
    Jittable, vmappable and differentiable almost everywhere in `p`, `q`; `+inf` when more
    than `delta` of one law's mass sits where the other has none.

    Args:
        p, q: non-negative masses (sub-probability vectors are allowed).
        delta: $\delta \ge 0$.

    Example:
        >>> import jax.numpy as jnp
        >>> p, q = jnp.array([0.99, 0.01]), jnp.array([0.01, 0.99])
        >>> round(float(discrete_epsilon(p, q, 0.0)), 4)  # log 99 (randomised response)
        4.5951
    """
    p = jnp.maximum(jnp.asarray(p), 0.0)
    q = jnp.maximum(jnp.asarray(q), 0.0)
    return jnp.maximum(_one_way_epsilon(p, q, delta), _one_way_epsilon(q, p, delta))


def _prefix_sums(p, q):
    order = np.argsort(-_log_ratio(p, q, np), kind="stable")
    return np.cumsum(p[order]), np.cumsum(q[order])


def discrete_privacy_profile(p, q, epsilons) -> np.ndarray:
    r"""$\delta(\varepsilon) = \max(H_{e^\varepsilon}(P\|Q), H_{e^\varepsilon}(Q\|P))$ at each
    of `epsilons` (host, float64): the privacy profile of the two discrete laws."""
    p = np.maximum(np.asarray(p, np.float64), 0.0)
    q = np.maximum(np.asarray(q, np.float64), 0.0)
    eps = np.atleast_1d(np.asarray(epsilons, np.float64))
    out = np.zeros_like(eps)
    for a, b in ((p, q), (q, p)):
        big_a, big_b = _prefix_sums(a, b)
        for i, e in enumerate(eps):
            out[i] = max(out[i], float(np.max(big_a - np.exp(e) * big_b, initial=0.0)))
    return out


def discrete_tradeoff(p, q) -> tuple[np.ndarray, np.ndarray]:
    r"""The trade-off curve of the test "canary in" between the two discrete laws.

    The Neyman-Pearson tests reject "out" on the cells of largest $p_i / q_i$; their
    errors are $\alpha_k = Q_k$ (type I: out-world mass rejected) and $\beta_k = 1 - P_k$
    (type II), and randomised tests fill the segments between them.

    Returns:
        `(alpha, beta)`: increasing type-I errors from 0 and the matching type-II errors.
    """
    p = np.maximum(np.asarray(p, np.float64), 0.0)
    q = np.maximum(np.asarray(q, np.float64), 0.0)
    big_p, big_q = _prefix_sums(p, q)
    total_p = big_p[-1] if big_p.size else 1.0
    alpha = np.concatenate([[0.0], np.minimum(big_q, 1.0)])
    beta = np.concatenate([[1.0], np.maximum(total_p - big_p, 0.0) + (1.0 - total_p)])
    return alpha, np.clip(beta, 0.0, 1.0)


def _grid_hockey_stick(p, q, w, atoms: int, xp):
    r"""$\int (p - w q)_+$ for two laws given on a uniform grid: node masses (density x h),
    then `atoms` point masses (0, or 2 for a projection's end atoms, whose end nodes carry
    the trapezoid weight h/2). The lattice sum, with each cell where $p - wq$ changes sign
    integrated by the linear interpolant (its positive part exactly), so a threshold
    between two nodes costs no first-order error; atoms count as themselves."""
    n = p.shape[0] - atoms
    g = p[:n] - w * q[:n]
    weight = xp.ones_like(g)
    if atoms:
        weight = xp.concatenate([xp.full((1,), 0.5), xp.ones(n - 2), xp.full((1,), 0.5)])
    v = g / weight  # density x h at every node
    left, right = v[:-1], v[1:]
    change = (left < 0) != (right < 0)
    span = xp.where(change, xp.abs(right - left), 1.0)
    top = xp.maximum(left, right)  # the cell's non-negative end
    # The cell's share of the lattice sum (half of each end's value) replaced by the
    # linear interpolant's positive area, top^2 / (2 |right - left|).
    correction = xp.where(change, top * top / (2.0 * span) - 0.5 * top, 0.0)
    total = xp.sum(xp.maximum(g, 0.0)) + xp.sum(correction)
    if atoms:
        total = total + xp.sum(xp.maximum(p[n:] - w * q[n:], 0.0))
    return total


def grid_delta(p, q, epsilon, *, atoms: int = 0, xp=np):
    r"""$\delta(\varepsilon) = \max(\int (p - e^\varepsilon q)_+, \int (q - e^\varepsilon
    p)_+)$ of two laws given as masses on the nodes of a uniform grid (density x spacing)
    followed by `atoms` point masses, with the sign changes between nodes integrated by
    linear interpolation (`grid_epsilon`). `xp` is numpy (default) or jax.numpy."""
    w = xp.exp(epsilon)
    return xp.maximum(
        _grid_hockey_stick(p, q, w, atoms, xp), _grid_hockey_stick(q, p, w, atoms, xp)
    )


def grid_epsilon(
    p: Float[Array, " n"], q: Float[Array, " n"], delta, *, atoms: int = 0
) -> Float[Array, ""]:
    r"""$\varepsilon(\delta)$ of two laws sampled on the nodes of a uniform grid.

    The masses are read as a quadrature of two densities (node mass = density x spacing),
    followed by `atoms` point masses (a projection's two end atoms): the hockey-stick
    integrals are the lattice sums, except in the cells where $p - e^\varepsilon q$ changes
    sign, which are integrated by the linear interpolant. Unlike `discrete_epsilon` of the
    same masses (which puts the optimal threshold on a node, a first-order error that
    oscillates with the grid's offset), the error is then of the second order in the
    spacing and smooth in it, so the refinement of `last_iterate_epsilon` measures it.
    Bisection on $[0, 100]$ (64 halvings); `+inf` if $\delta(100) > \delta$. Jittable and
    vmappable.
    """
    p = jnp.maximum(jnp.asarray(p), 0.0)
    q = jnp.maximum(jnp.asarray(q), 0.0)

    def excess(eps):
        return grid_delta(p, q, eps, atoms=atoms, xp=jnp) > delta

    return bisect_epsilon(excess, EPS_MAX, p.dtype)


def bisect_epsilon(excess, eps_max, dtype) -> Float[Array, ""]:
    r"""The smallest $\varepsilon \in [0, \varepsilon_{\max}]$ with `excess(eps)` False
    ($\delta(\varepsilon) \le \delta$), to `BISECTIONS` halvings, rounded up: 0 where
    `excess(0)` is False, `+inf` where `excess(eps_max)` is True. Jittable."""

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        above = excess(mid)
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    zero = jnp.zeros((), dtype)
    _, hi = jax.lax.fori_loop(0, BISECTIONS, body, (zero, zero + eps_max))
    return jnp.where(~excess(zero), 0.0, jnp.where(excess(zero + eps_max), jnp.inf, hi))


def grid_epsilon_host(p, q, delta: float, *, atoms: int = 0) -> float:
    """`grid_epsilon` on the host (numpy, float64): the same quadrature and bisection,
    without a compilation."""
    p = np.maximum(np.asarray(p, np.float64), 0.0)
    q = np.maximum(np.asarray(q, np.float64), 0.0)
    if grid_delta(p, q, 0.0, atoms=atoms) <= delta:
        return 0.0
    if grid_delta(p, q, EPS_MAX, atoms=atoms) > delta:
        return float("inf")
    lo, hi = 0.0, EPS_MAX
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        if grid_delta(p, q, mid, atoms=atoms) > delta:
            lo = mid
        else:
            hi = mid
    return hi

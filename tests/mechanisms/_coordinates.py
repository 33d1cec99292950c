"""An independent reference for last models made of independent coordinates.

The history regularizer and the repeaters leave a last model whose coordinates are
independent (Equation 8 and Appendix C of arXiv:2410.06186): each a Gaussian observation
of the canary's presence at one step (in: (1 - p) N(0, s^2) + p N(1, s^2), out: N(0, s^2))
or a binary decision (in: Bernoulli(p_in), out: Bernoulli(p_out)). Here the privacy loss of
each coordinate is put on a fine grid (numpy, float64), the product law's hockey-stick
divergence is summed over the outer product of the grids (in the order of the privacy
loss), and eps(delta) is its root (scipy's brentq), for both orders of the pair; no
dp_accounting, which the package uses.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.stats

#: Grid points per Gaussian coordinate, over 12 noise sds beyond 0 and 1. Halving the
#: spacing (3001 points) moves eps by 2e-7 relative at test_history's setting, and 6001
#: points by 3e-7: the reference is good to about 1e-6, against tests' tolerance of 2e-4.
POINTS = 1501


def gaussian(p: float, s: float):
    """The Gaussian coordinate: `(log p_in, log p_out, grid weights)` on its grid."""
    x = np.linspace(-12.0 * s, 1.0 + 12.0 * s, POINTS)
    h = x[1] - x[0]
    log_out = scipy.stats.norm.logpdf(x, 0.0, s) + np.log(h)
    log_moved = scipy.stats.norm.logpdf(x, 1.0, s) + np.log(h)
    if p == 1.0:
        return log_moved, log_out
    return np.logaddexp(np.log1p(-p) + log_out, np.log(p) + log_moved), log_out


def bit(p_in: float, p_out: float):
    """The binary decision: `(log p_in, log p_out)` over {0, 1}."""
    return np.log([1.0 - p_in, p_in]), np.log([1.0 - p_out, p_out])


def product_epsilon(delta: float, coordinates) -> float:
    """eps(delta) of the product of two independent coordinates, the larger of the two
    orders (canary in against out, and out against in), as add-or-remove accounting."""
    (a_in, a_out), (b_in, b_out) = coordinates
    log_in = a_in[:, None] + b_in[None, :]
    log_out = a_out[:, None] + b_out[None, :]
    eps = []
    for lp, lq in ((log_in, log_out), (log_out, log_in)):
        # delta(e) = P(L > e) - e^e Q(L > e) with L = log(p / q): the tails, summed once in
        # the order of L, are read at each e by a binary search.
        loss = (lp - lq).ravel()
        order = np.argsort(-loss)
        loss = loss[order]
        p_tail = np.cumsum(np.exp(lp.ravel()[order]))
        q_tail = np.cumsum(np.exp(lq.ravel()[order]))

        def excess(e, loss=loss, p_tail=p_tail, q_tail=q_tail):
            k = int(np.searchsorted(-loss, -e, side="left"))  # the k largest losses are > e
            return (p_tail[k - 1] - np.exp(e) * q_tail[k - 1] if k else 0.0) - delta

        root = 0.0 if excess(0.0) <= 0 else scipy.optimize.brentq(excess, 0.0, 50.0, xtol=1e-12)
        eps.append(root)
    return max(eps)

r"""From a Renyi-DP curve to $\varepsilon(\delta)$.

Several hidden-state bounds (Chourasia, Ye and Shokri, arXiv:2102.05855; Ye and Shokri,
arXiv:2203.05363; Altschuler and Talwar, arXiv:2205.13710) are stated in Renyi DP: the
last model's Renyi divergence of order $\alpha$ is at most $\varepsilon_\alpha$. To
compare them with an exact $\varepsilon(\delta)$ they are converted with

$$\varepsilon(\delta) = \min_{\alpha > 1}\ \varepsilon_\alpha
  + \log\bigl(1 - 1/\alpha\bigr) - \frac{\log\delta + \log\alpha}{\alpha - 1},$$

Proposition 12 of Canonne, Kamath and Steinke, "The discrete Gaussian for differential
privacy" (NeurIPS 2020, arXiv:2004.00010), which is never larger than the classical
$\varepsilon_\alpha + \log(1/\delta)/(\alpha - 1)$ (Mironov 2017, Proposition 3) and is
what dp_accounting's RDP accountant uses. The minimum is taken over a fixed list of
orders, so the value is an upper bound (every order gives one), possibly a little above
the continuous minimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from advsim._validation import check_delta

__all__ = ["RENYI_ORDERS", "renyi_epsilon"]

RENYI_ORDERS: tuple[float, ...] = tuple(
    sorted(
        set(np.round(np.concatenate([
            1.0 + np.geomspace(0.01, 0.5, 40),
            np.geomspace(1.5, 100.0, 200),
            np.geomspace(100.0, 1e4, 60),
        ]), 10).tolist())
    )
)  # fmt: skip
"""The orders over which `renyi_epsilon` minimises by default: 1.01 to 10^4, about 300
points, denser where the minimum usually falls (alpha in 1.5-100)."""


def renyi_epsilon(
    delta,
    rdp: Callable[[float], float] | Sequence[float],
    orders: Sequence[float] = RENYI_ORDERS,
) -> float:
    r"""$\varepsilon(\delta)$ of a Renyi-DP curve (Proposition 12 of arXiv:2004.00010).

    Args:
        delta: $\delta \in (0, 1)$.
        rdp: $\alpha \mapsto \varepsilon_\alpha$ (a callable), or the values at `orders`.
            An order where the curve is infinite (or NaN: no guarantee) is skipped.
        orders: the orders $\alpha > 1$ to minimise over (default `RENYI_ORDERS`).

    Returns:
        The smallest epsilon over `orders` (never below 0), inf if no order gives a finite
        value.

    Raises:
        ValueError: naming the parameter, for a delta outside (0, 1), an order <= 1, or
            values that do not match the orders.

    Example:
        >>> # The Gaussian mechanism of sensitivity 1 and sd 2: eps_alpha = alpha / 8.
        >>> round(renyi_epsilon(1e-5, lambda a: a / 8.0), 4)
        2.1657
    """
    delta = check_delta("delta", delta)
    alphas = np.asarray(orders, np.float64).reshape(-1)
    if alphas.size == 0 or not np.all(alphas > 1.0) or not np.all(np.isfinite(alphas)):
        raise ValueError(f"orders must be finite and > 1, got {orders!r}")
    if callable(rdp):
        values = np.array([float(rdp(float(a))) for a in alphas], np.float64)
    else:
        values = np.asarray(rdp, np.float64).reshape(-1)
        if values.shape != alphas.shape:
            raise ValueError(
                f"rdp must have one value per order ({alphas.size}), got {values.size}"
            )
    if np.any(values < 0):
        raise ValueError(f"rdp values must be >= 0, got min {values.min()!r}")
    eps = values + np.log1p(-1.0 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1.0)
    eps = eps[np.isfinite(eps)]
    if eps.size == 0:
        return math.inf
    return float(max(0.0, eps.min()))

"""The Neyman-Pearson score of a scalar construction, read off its exact law."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from advsim import AbstractAdversary, AbstractMechanism
from advsim.exact import ExactEpsilon

__all__ = ["GridLikelihoodRatio"]

#: Masses below this are read as this when taking the log ratio (the grid's rounding
#: floor is ~1e-16 of the total mass; a node below it carries no information).
MASS_FLOOR = 1e-300


class GridLikelihoodRatio(AbstractAdversary):
    r"""Score = $\log p_{in}(m_T) / p_{out}(m_T)$, from the last model's exact law on a grid.

    `advsim.exact.last_iterate_epsilon` gives the last model's masses in both worlds on the
    nodes of a grid; the log ratio of the two is the Neyman-Pearson statistic of the
    release (every threshold on it is a likelihood-ratio test), read at $m_T$ by linear
    interpolation between the nodes (constant beyond the ends). An audit that thresholds it
    reads the trade-off curve the exact epsilon is computed from, so its `eps_lower`
    approaches that epsilon as the runs grow: the confirmation by simulation of a
    construction whose law is known (`advsim.search.confirm`). Unprojected laws only (no
    atoms).

    Args:
        grid: the nodes (increasing).
        log_ratio: the log ratio at each node.

    Example:
        >>> from advsim.exact import last_iterate_epsilon
        >>> from advsim.mechanisms import LinearProcess
        >>> mech = LinearProcess(steps=3, sampling_prob=0.5, noise_multiplier=1.0)
        >>> adv = GridLikelihoodRatio.from_exact(last_iterate_epsilon(mech, 1e-5))
        >>> bool(adv.score(mech, jnp.ones(1)) > adv.score(mech, jnp.zeros(1)))
        True
    """

    grid: np.ndarray
    log_ratio: np.ndarray

    def __init__(self, grid, log_ratio):
        grid = np.asarray(grid, np.float64).reshape(-1)
        log_ratio = np.asarray(log_ratio, np.float64).reshape(-1)
        if grid.size < 2 or grid.shape != log_ratio.shape:
            raise ValueError(
                f"grid and log_ratio must be two arrays of one length >= 2, got shapes "
                f"{grid.shape} and {log_ratio.shape}"
            )
        if not (np.all(np.isfinite(grid)) and np.all(np.diff(grid) > 0)):
            raise ValueError("grid must be finite and strictly increasing")
        if not np.all(np.isfinite(log_ratio)):
            raise ValueError("log_ratio must be finite")
        self.grid = grid
        self.log_ratio = log_ratio

    @classmethod
    def from_exact(cls, exact: ExactEpsilon) -> GridLikelihoodRatio:
        """The score of an `ExactEpsilon`'s finest grid (unprojected: `atoms == 0`)."""
        if exact.atoms:
            raise ValueError("GridLikelihoodRatio reads unprojected laws (no atoms)")
        p = np.maximum(np.asarray(exact.mass_in, np.float64), MASS_FLOOR)
        q = np.maximum(np.asarray(exact.mass_out, np.float64), MASS_FLOOR)
        return cls(exact.grid, np.log(p) - np.log(q))

    @classmethod
    def contract_examples(cls) -> dict[str, GridLikelihoodRatio]:
        """Small instances, keyed by the mechanism they score (the contract suite)."""
        grid = np.linspace(-10.0, 10.0, 41)
        return {"LinearProcess:1d": cls(grid, grid - 0.5)}

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        m = (release if release.ndim == 1 else release[-1])[0]
        grid = jnp.asarray(self.grid, m.dtype)
        return jnp.interp(m, grid, jnp.asarray(self.log_ratio, m.dtype))

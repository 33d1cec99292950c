r"""The exact epsilon on one fixed grid, as a differentiable function of the construction.

`last_iterate_epsilon` plans its grids on the host from a mechanism's concrete values and
reads epsilon by bisection, so it cannot be differentiated. A search over a family of
constructions (`advsim.search`) needs $\partial\varepsilon / \partial\theta$ for the
family's parameters $\theta$. `FixedGridEpsilon` fixes the grid once, from a template
mechanism and an interval wide enough for every member, and then evaluates
$\varepsilon_\theta(\delta)$ of any member with the same structure as a pure JAX function
of its arrays: the same propagation as `last_iterate_epsilon` (`advance`'s step, one
grid), the same quadrature of the hockey-stick divergence.

The derivative of epsilon is exact for the grid's value, by the implicit function
theorem: epsilon solves $\delta_\theta(\varepsilon) = \delta$, so
$$\frac{\partial\varepsilon}{\partial\theta} = -\frac{\partial_\theta
\delta_\theta(\varepsilon)}{\partial_\varepsilon \delta_\theta(\varepsilon)},$$
both partial derivatives taken at the bisected $\varepsilon$ by automatic
differentiation of `grid_delta` ($\partial_\varepsilon\delta < 0$ wherever
$0 < \varepsilon < \infty$). The gradient is that of a grid value: one grid, no
refinement, no error estimate. What a search finds is re-evaluated by
`last_iterate_epsilon`.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from advsim._mechanism import AbstractMechanism, AbstractProjected
from advsim._validation import check_delta, check_positive
from advsim.exact._divergence import grid_delta, grid_epsilon
from advsim.exact._plan import combine, layout
from advsim.exact._propagate import GridState, _advance_one

__all__ = ["FixedGridEpsilon"]


def implicit_epsilon(p, q, delta, *, atoms: int = 0) -> Float[Array, ""]:
    r"""`grid_epsilon(p, q, delta)` with the derivative of the implicit function theorem
    (module docstring): the value is the bisection's, the derivative with respect to the
    masses is $-\partial_{p,q}\delta / \partial_\varepsilon\delta$ at it (zero where
    epsilon is 0 or infinite)."""
    eps = jax.lax.stop_gradient(grid_epsilon(p, q, delta, atoms=atoms))
    finite = jnp.isfinite(eps) & (eps > 0)
    at = jnp.where(finite, eps, 1.0)
    fixed_p, fixed_q = jax.lax.stop_gradient(p), jax.lax.stop_gradient(q)
    slope = jax.grad(lambda e: grid_delta(fixed_p, fixed_q, e, atoms=atoms, xp=jnp))(at)
    moved = grid_delta(p, q, at, atoms=atoms, xp=jnp)
    safe = jnp.where(finite & (slope < 0), slope, -1.0)
    tangent = (moved - jax.lax.stop_gradient(moved)) / -safe
    return eps + jnp.where(finite & (slope < 0), tangent, 0.0)


class FixedGridEpsilon:
    r"""$\varepsilon(\delta)$ of a construction's last model on one grid, jittable and
    differentiable in the construction's arrays (module docstring).

    The grid is planned once from `template` (`cells_per_sd` nodes per smallest noise sd,
    over `support`); every mechanism passed to `__call__` must have the template's
    structure (the same class, static fields, shapes, steps, count windows and
    breakpoints' count); its traced values (fields, init) may differ. The count mixture,
    the step sizes and sigma are the template's: they set the grid.

    Args:
        template: an `advsim.AbstractScalarLaw` mechanism, not projected.
        delta: $\delta \in (0, 1)$.
        cells_per_sd: nodes per noise sd, >= 2 (a search may run coarse: what it finds is
            re-evaluated by `last_iterate_epsilon`).
        support: (lo, hi), the interval the grid covers; it must hold every member's law
            (mass leaving it is counted in `lost`, never dropped unseen).

    Example:
        >>> import jax
        >>> from advsim.mechanisms import LinearProcess
        >>> mech = LinearProcess(steps=3, sampling_prob=0.5, noise_multiplier=1.0)
        >>> objective = FixedGridEpsilon(mech, 1e-5, support=(-15.0, 18.0))
        >>> with jax.enable_x64(True):
        ...     eps, lost = objective(mech)
        >>> # One grid at 4 nodes per sd: within 0.3% of the exact 5.821 (the heuristic,
        >>> # exact for this process: Theorem 1 of arXiv:2410.06186).
        >>> abs(float(eps) / 5.821 - 1) < 0.005
        True
    """

    def __init__(
        self,
        template: AbstractMechanism,
        delta: float,
        *,
        cells_per_sd: float = 4.0,
        support: tuple[float, float] | None = None,
    ):
        self.delta = check_delta("delta", delta)
        cells_per_sd = check_positive("cells_per_sd", cells_per_sd)
        if cells_per_sd < 2:
            raise ValueError(
                f"cells_per_sd must be >= 2 (nodes per noise sd), got {cells_per_sd!r}"
            )
        if isinstance(template, AbstractProjected):
            raise TypeError(
                f"{type(template).__name__} is projected: FixedGridEpsilon carries unprojected "
                "constructions only (use last_iterate_epsilon)"
            )
        with jax.enable_x64(True):
            lay = layout(template, cells_per_sd, support)
            steps = template.steps
            plan, lo, spacing, counts, probs = combine([lay], steps, False, mechs=[template])
            self.plan = plan
            self.steps = steps
            self.lo = float(lo[0])
            self.spacing = float(spacing[0])
            self.counts = np.asarray(counts[0])
            self.probs = np.asarray(probs[0])
            self.m0 = float(np.asarray(template.init_model(), np.float64).reshape(()))
        self.structure = eqx.partition(template, eqx.is_array)[1]

    @property
    def nodes(self) -> int:
        """The grid's nodes."""
        return self.plan.nodes

    def grid(self) -> np.ndarray:
        """The nodes' positions."""
        return self.lo + self.spacing * np.arange(self.plan.nodes)

    def laws(self, mech: AbstractMechanism):
        """The last model's masses on the grid in both worlds and the mass each lost:
        `(mass_in, mass_out, lost (2,))`, jittable (call under `jax.enable_x64(True)`)."""
        if eqx.partition(mech, eqx.is_array)[1] != self.structure:
            raise ValueError(
                f"{type(mech).__name__} differs from the template in a static field or its "
                "structure: plan a FixedGridEpsilon for it"
            )
        dtype = jnp.float64
        state0 = _start(self.plan, self.lo, self.spacing, self.m0)
        state, _ = _advance_one(
            mech, self.plan, jnp.asarray(self.lo, dtype), jnp.asarray(self.spacing, dtype),
            jnp.asarray(self.m0, dtype), jnp.asarray(self.counts, dtype),
            jnp.asarray(self.probs, dtype), jnp.asarray(self.delta, dtype),
            jnp.asarray(math.inf, dtype), state0, jnp.int32(1), jnp.int32(self.steps),
        )  # fmt: skip
        return state.mass_in, state.mass_out, jnp.stack([state.lost_in, state.lost_out])

    def __call__(self, mech: AbstractMechanism):
        r"""`(epsilon, lost)`: $\varepsilon(\delta)$ of the last model on this grid (with the
        implicit derivative) and the mass each world lost (2,). Jittable, differentiable
        in `mech`'s arrays; call under `jax.enable_x64(True)`."""
        p, q, lost = self.laws(mech)
        return implicit_epsilon(p, q, self.delta), lost


def _start(plan, lo: float, spacing: float, m0: float):
    """Both worlds' masses at step 0: m_0 shared between its two nodes."""
    u = (m0 - lo) / spacing
    j = min(max(int(math.floor(u)), 0), plan.nodes - 2)
    f = min(max(u - j, 0.0), 1.0)
    mass = np.zeros(plan.nodes)
    mass[j] += 1.0 - f
    mass[j + 1] += f
    mass_j = jnp.asarray(mass, jnp.float64)
    zero = jnp.zeros((), jnp.float64)
    return GridState(mass_j, mass_j, zero, zero)

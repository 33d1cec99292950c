r"""`ScalarField`: a gradient field of a scalar model as a sum of smooth and kinked terms.

Constants, affine, ramps at knots, tanh bumps, Holder roots and jumps, with float
parameters that are traced (fields of one shape share one compiled propagation in
`advsim.exact`), and host-side certificates of what bounds assume: a bound on |g| on an
interval, a Lipschitz constant of g, bounds on its slope, monotonicity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim.mechanisms._field import AbstractField
from advsim.validation import as_traced_float, check_finite

__all__ = ["ScalarField"]

#: The array parameters of a `ScalarField`, besides its offset and slope (`to_dict`).
_TERMS = (
    "knots", "knot_slopes", "bump_centres", "bump_heights", "bump_widths", "roots",
    "root_heights", "root_exponents", "jumps", "jump_heights",
)  # fmt: skip


def _vector(name: str, values, size: int | None = None) -> np.ndarray:
    arr = np.asarray(values, np.float64).reshape(-1)
    if size is not None and arr.size != size:
        raise ValueError(f"{name} must have {size} entries, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr!r}")
    return arr


def _relu(x):
    return np.maximum(x, 0.0)


class ScalarField(AbstractField):
    r"""A gradient field of a scalar model: a sum of simple terms with traced parameters.

    $$g(m) = a + b\,m + \sum_k c_k\,(m - \kappa_k)_+ + \sum_j d_j \tanh\frac{m - e_j}{w_j}
        + \sum_l h_l\,\mathrm{sign}(m - \rho_l)\,|m - \rho_l|^{\gamma_l}
        + \sum_i s_i\,\mathbf{1}[m \ge z_i].$$

    Constants and affine fields (linear and quadratic losses), piecewise-linear fields
    with knots $\kappa_k$ (piecewise-quadratic losses), tanh bumps (smooth, bounded
    gradients, e.g. of log-cosh losses) and jumps at $z_i$ (a loss with kinks, like the
    threshold landscape of arXiv:2405.14457; `breakpoints` tells the exact engine where).
    A root term $h\,\mathrm{sign}(m - \rho)|m - \rho|^{\gamma}$, $\gamma \in (0, 1]$, is
    continuous and $\gamma$-Holder (constant $|h|\,2^{1-\gamma}$) but, for $\gamma < 1$,
    not Lipschitz at $\rho$: the gradients of Holder-smooth losses that are not smooth.
    Every parameter is a float64 numpy array, so fields of one shape share one compiled
    propagation and batch in `advsim.exact.last_iterate_epsilons`. The field is the same
    at every step (`t` is ignored).

    The host-side methods certify what bounds assume, on an interval: `sup_abs` (a bound
    on $|g|$: the Lipschitz constant $L$ of the loss), `lipschitz` (a bound on $|g'|$: the
    loss's smoothness $M$; infinite with a jump), `slope_bounds` (a lower and an upper
    bound on $g'$), `is_nondecreasing` (a sufficient condition for a convex loss: every
    term nondecreasing).

    Args:
        offset: a.
        slope: b.
        knots, knot_slopes: $\kappa_k$ and $c_k$ (same length).
        bump_centres, bump_heights, bump_widths: $e_j$, $d_j$ and $w_j > 0$.
        roots, root_heights, root_exponents: $\rho_l$, $h_l$ and $\gamma_l \in (0, 1]$.
        jumps, jump_heights: $z_i$ and $s_i$.

    Example:
        >>> import jax.numpy as jnp
        >>> g = ScalarField(offset=-1.0, knots=[0.0], knot_slopes=[2.0])
        >>> [float(v) for v in g(jnp.array([-1.0, 1.0]))]
        [-1.0, 1.0]
        >>> g.sup_abs(-1.0, 1.0), g.lipschitz(), g.is_nondecreasing()
        (1.0, 2.0, True)
    """

    offset: np.ndarray
    slope: np.ndarray
    knots: np.ndarray
    knot_slopes: np.ndarray
    bump_centres: np.ndarray
    bump_heights: np.ndarray
    bump_widths: np.ndarray
    roots: np.ndarray
    root_heights: np.ndarray
    root_exponents: np.ndarray
    jumps: np.ndarray
    jump_heights: np.ndarray

    def __init__(
        self,
        offset: float = 0.0,
        slope: float = 0.0,
        *,
        knots: Sequence[float] = (),
        knot_slopes: Sequence[float] = (),
        bump_centres: Sequence[float] = (),
        bump_heights: Sequence[float] = (),
        bump_widths: Sequence[float] = (),
        roots: Sequence[float] = (),
        root_heights: Sequence[float] = (),
        root_exponents: Sequence[float] = (),
        jumps: Sequence[float] = (),
        jump_heights: Sequence[float] = (),
    ):
        self.offset = as_traced_float("offset", offset, check_finite)
        self.slope = as_traced_float("slope", slope, check_finite)
        self.knots = _vector("knots", knots)
        self.knot_slopes = _vector("knot_slopes", knot_slopes, self.knots.size)
        self.bump_centres = _vector("bump_centres", bump_centres)
        self.bump_heights = _vector("bump_heights", bump_heights, self.bump_centres.size)
        self.bump_widths = _vector("bump_widths", bump_widths, self.bump_centres.size)
        if np.any(self.bump_widths <= 0):
            raise ValueError(f"bump_widths must be > 0, got {self.bump_widths!r}")
        self.roots = _vector("roots", roots)
        self.root_heights = _vector("root_heights", root_heights, self.roots.size)
        self.root_exponents = _vector("root_exponents", root_exponents, self.roots.size)
        if np.any((self.root_exponents <= 0) | (self.root_exponents > 1)):
            raise ValueError(f"root_exponents must be in (0, 1], got {self.root_exponents!r}")
        self.jumps = _vector("jumps", jumps)
        self.jump_heights = _vector("jump_heights", jump_heights, self.jumps.size)

    @classmethod
    def constant(cls, value: float) -> ScalarField:
        """g(m) = value: the gradient of the linear loss value * m."""
        return cls(offset=value)

    def __call__(self, m: Float[Array, "*s"], t: Int[Array, ""] | int = 1) -> Float[Array, "*s"]:
        """g(m), elementwise, in the dtype of `m` (jittable; the same at every step t)."""

        def f(a):
            return jnp.asarray(a, m.dtype)

        x = m[..., None]
        out = f(self.offset) + f(self.slope) * m
        out = out + jnp.sum(f(self.knot_slopes) * jnp.maximum(x - f(self.knots), 0.0), -1)
        bumps = jnp.tanh((x - f(self.bump_centres)) / f(self.bump_widths))
        out = out + jnp.sum(f(self.bump_heights) * bumps, -1)
        r = x - f(self.roots)
        out = out + jnp.sum(
            f(self.root_heights) * jnp.sign(r) * jnp.abs(r) ** f(self.root_exponents), -1
        )
        steps = (x >= f(self.jumps)).astype(m.dtype)
        return out + jnp.sum(f(self.jump_heights) * steps, -1)

    def values(self, m) -> np.ndarray:
        """g(m) on the host, float64 numpy (the same formula as `__call__`)."""
        x = np.asarray(m, np.float64)[..., None]
        out = float(self.offset) + float(self.slope) * x[..., 0]
        out = out + np.sum(self.knot_slopes * _relu(x - self.knots), -1)
        out = out + np.sum(
            self.bump_heights * np.tanh((x - self.bump_centres) / self.bump_widths), -1
        )
        r = x - self.roots
        out = out + np.sum(self.root_heights * np.sign(r) * np.abs(r) ** self.root_exponents, -1)
        return out + np.sum(self.jump_heights * (x >= self.jumps), -1)

    def breakpoints(self) -> np.ndarray:
        """The jump positions $z_i$ (where the field is discontinuous)."""
        return self.jumps

    def slope_bounds(self) -> tuple[float, float]:
        r"""A lower and an upper bound on $g'$ everywhere: $b + \sum_k \min(c_k, 0) +
        \sum_j \min(d_j, 0)/w_j$ and likewise with max, plus $h_l$ for each root of
        exponent 1; a jump, or a root of exponent below 1, makes the bound on its side
        infinite."""
        lo = hi = float(self.slope)
        lo += float(np.sum(np.minimum(self.knot_slopes, 0.0)))
        hi += float(np.sum(np.maximum(self.knot_slopes, 0.0)))
        ratio = self.bump_heights / self.bump_widths
        lo += float(np.sum(np.minimum(ratio, 0.0)))
        hi += float(np.sum(np.maximum(ratio, 0.0)))
        if np.any(self.jump_heights < 0):
            lo = -math.inf
        if np.any(self.jump_heights > 0):
            hi = math.inf
        # h sign(r)|r|^gamma: slope h at gamma = 1; below 1, slopes in [0, inf) times h.
        h, gamma = self.root_heights, self.root_exponents
        lo += float(np.sum(h[gamma >= 1.0]))
        hi += float(np.sum(h[gamma >= 1.0]))
        if np.any((h > 0) & (gamma < 1.0)):
            hi = math.inf
        if np.any((h < 0) & (gamma < 1.0)):
            lo = -math.inf
        return lo, hi

    def is_constant(self) -> bool:
        """Whether g is constant (every term but the offset is zero): a linear loss."""
        return (
            float(self.slope) == 0.0
            and not np.any(self.knot_slopes)
            and not np.any(self.bump_heights)
            and not np.any(self.root_heights)
            and not np.any(self.jump_heights)
        )

    def is_nondecreasing(self) -> bool:
        """Whether every term is nondecreasing (b, c_k, d_j, s_i >= 0): then g is, and its
        loss is convex. A sufficient condition only."""
        return bool(
            float(self.slope) >= 0
            and np.all(self.knot_slopes >= 0)
            and np.all(self.bump_heights >= 0)
            and np.all(self.root_heights >= 0)
            and np.all(self.jump_heights >= 0)
        )

    def lipschitz(self) -> float:
        r"""A bound on $|g'|$ everywhere: $|b| + \sum|c_k| + \sum |d_j|/w_j$ (the loss is
        that smooth, a root of exponent 1 adding |h|); inf if a jump, or a root of exponent
        below 1, is non-zero."""
        if np.any(self.jump_heights) or np.any(self.root_heights[self.root_exponents < 1]):
            return math.inf
        return float(
            abs(float(self.slope))
            + np.sum(np.abs(self.knot_slopes))
            + np.sum(np.abs(self.bump_heights) / self.bump_widths)
            + np.sum(np.abs(self.root_heights))
        )

    def sup_abs(self, lo: float, hi: float) -> float:
        """A bound on |g| over [lo, hi]: exact (the larger end value) when
        `is_nondecreasing()`, else the sum of each term's largest magnitude there."""
        lo, hi = float(lo), float(hi)
        if self.is_nondecreasing():
            return float(max(abs(self.values(lo)), abs(self.values(hi))))
        return float(
            abs(float(self.offset))
            + abs(float(self.slope)) * max(abs(lo), abs(hi))
            + np.sum(np.abs(self.knot_slopes) * _relu(hi - self.knots))
            + np.sum(np.abs(self.bump_heights))
            + np.sum(
                np.abs(self.root_heights)
                * np.maximum(np.abs(lo - self.roots), np.abs(hi - self.roots))
                ** self.root_exponents
            )
            + np.sum(np.abs(self.jump_heights))
        )

    def scaled(self, factor: float) -> ScalarField:
        """The field times `factor` (every term's weight scaled; positions kept)."""
        return ScalarField(
            float(self.offset) * factor,
            float(self.slope) * factor,
            knots=self.knots,
            knot_slopes=self.knot_slopes * factor,
            bump_centres=self.bump_centres,
            bump_heights=self.bump_heights * factor,
            bump_widths=self.bump_widths,
            roots=self.roots,
            root_heights=self.root_heights * factor,
            root_exponents=self.root_exponents,
            jumps=self.jumps,
            jump_heights=self.jump_heights * factor,
        )

    def padded(self, *, knots: int, bumps: int, jumps: int, roots: int = 0) -> ScalarField:
        """The same field with zero-weight terms appended up to `knots` knots, `bumps`
        bumps, `jumps` jumps and `roots` roots, so fields of different families share one
        shape (and batch together in `advsim.exact.last_iterate_epsilons`)."""

        def pad(arr, size, fill):
            if arr.size > size:
                raise ValueError(f"cannot pad {arr.size} terms to {size}")
            return np.concatenate([arr, np.full(size - arr.size, fill)])

        return ScalarField(
            float(self.offset),
            float(self.slope),
            knots=pad(self.knots, knots, 0.0),
            knot_slopes=pad(self.knot_slopes, knots, 0.0),
            bump_centres=pad(self.bump_centres, bumps, 0.0),
            bump_heights=pad(self.bump_heights, bumps, 0.0),
            bump_widths=pad(self.bump_widths, bumps, 1.0),
            roots=pad(self.roots, max(roots, self.roots.size), 0.0),
            root_heights=pad(self.root_heights, max(roots, self.roots.size), 0.0),
            root_exponents=pad(self.root_exponents, max(roots, self.roots.size), 1.0),
            jumps=pad(self.jumps, jumps, 0.0),
            jump_heights=pad(self.jump_heights, jumps, 0.0),
        )

    def to_dict(self) -> dict[str, Any]:
        """The field as JSON-ready lists (every float exact: JSON keeps float64's shortest
        repr); `from_dict` reads it back."""
        out = {"offset": float(self.offset), "slope": float(self.slope)}
        out.update({k: np.asarray(getattr(self, k), np.float64).tolist() for k in _TERMS})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScalarField:
        """The field `to_dict` wrote."""
        unknown = sorted(set(data) - {"offset", "slope", *_TERMS})
        if unknown:
            raise ValueError(
                f"a ScalarField has entries offset, slope, {', '.join(_TERMS)}; unknown: {unknown}"
            )
        return cls(data["offset"], data["slope"], **{k: data[k] for k in _TERMS if k in data})

    def describe(self) -> str:
        """The non-zero terms, for reports."""
        parts = [f"{float(self.offset):.6g}"]
        if float(self.slope):
            parts.append(f"{float(self.slope):.6g} m")
        for c, k in zip(self.knot_slopes, self.knots, strict=True):
            if c:
                parts.append(f"{c:.6g} (m - {k:.6g})+")
        for d, e, w in zip(self.bump_heights, self.bump_centres, self.bump_widths, strict=True):
            if d:
                parts.append(f"{d:.6g} tanh((m - {e:.6g}) / {w:.6g})")
        for h, rho, g in zip(self.root_heights, self.roots, self.root_exponents, strict=True):
            if h:
                parts.append(f"{h:.6g} sign(m - {rho:.6g}) |m - {rho:.6g}|^{g:.6g}")
        for s, z in zip(self.jump_heights, self.jumps, strict=True):
            if s:
                parts.append(f"{s:.6g} [m >= {z:.6g}]")
        return " + ".join(parts)

r"""`PiecewiseField`: a gradient field of a scalar model, piecewise linear between knots with
a jump allowed at each knot, optionally one row of values per step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim.mechanisms._field import AbstractField

__all__ = ["PiecewiseField"]


def _matrix(name: str, values, knots: int, steps: int | None) -> np.ndarray:
    """`values` as a float64 (rows, knots) array: one row (every step) or one per step."""
    arr = np.asarray(values, np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != knots:
        raise ValueError(
            f"{name} must have shape ({knots},) or (rows, {knots}) for {knots} knot(s), got "
            f"shape {np.shape(values)}"
        )
    if steps is not None and arr.shape[0] not in (1, steps):
        raise ValueError(
            f"{name} must have 1 row (every step) or {steps} rows (one per step), got "
            f"{arr.shape[0]}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr.tolist()!r}")
    return arr


class PiecewiseField(AbstractField):
    r"""A gradient field of a scalar model, piecewise linear with jumps at its knots.

    $$g(m, t) = \mathrm{PL}_t(m) + \sum_k s_{t,k}\,\mathbf{1}[m > \kappa_k],$$

    where $\mathrm{PL}_t$ interpolates the row `values[t]` linearly between the knots
    $\kappa_1 < \dots < \kappa_K$ and is constant beyond the end knots, and $s_{t,k}$ is
    the jump at knot k (`jumps[t]`). So $g(\kappa_k) = \mathrm{PL}_t(\kappa_k) + \sum_{j<k}
    s_{t,j}$: the field is continuous from the left at a jump. A field with one row is the
    same at every step; one with T rows uses row t - 1 at step t. Every array is float64
    numpy, so fields of one shape share a compiled propagation or simulation. A field given
    `jumps` (even zeros) declares its knots as its `breakpoints`, which the construction
    hands to `advsim.exact` (it splits the grid cell holding each); one without is
    continuous.

    Args:
        knots: $\kappa$, strictly increasing, K >= 1.
        values: (K,) or (rows, K).
        jumps: same shape as `values`, or None (default: a continuous field).
        steps: T, when known: then the rows must be 1 or T.

    Raises:
        ValueError: knots not increasing, shapes that disagree, values not finite.

    Example:
        >>> g = PiecewiseField(knots=[0.5], values=[1.0], jumps=[-2.0])  # +1, then -1
        >>> [float(v) for v in g(jnp.array([0.0, 0.5, 1.0]), 1)]
        [1.0, 1.0, -1.0]
    """

    knots: np.ndarray
    values: np.ndarray
    jumps: np.ndarray | None

    def __init__(self, knots: Sequence[float], values, jumps=None, *, steps: int | None = None):
        k = np.asarray(knots, np.float64).reshape(-1)
        if k.size == 0 or not np.all(np.isfinite(k)) or np.any(np.diff(k) <= 0):
            raise ValueError(
                f"knots must be one or more finite, strictly increasing values, got {k.tolist()!r}"
            )
        self.knots = k
        self.values = _matrix("values", values, k.size, steps)
        self.jumps = None if jumps is None else _matrix("jumps", jumps, k.size, steps)
        if self.jumps is not None and self.jumps.shape != self.values.shape:
            raise ValueError(
                f"jumps must have the shape of values {self.values.shape}, got {self.jumps.shape}"
            )

    @classmethod
    def constant(cls, value: float) -> PiecewiseField:
        """g(m) = value everywhere (a linear loss's gradient)."""
        return cls(knots=[0.0], values=[value])

    @classmethod
    def linear(cls, slope: float, *, radius: float) -> PiecewiseField:
        """g(m) = slope * m on [-radius, radius], constant beyond (a quadratic loss or
        regularizer, exact wherever the model stays within the radius)."""
        return cls(knots=[-radius, radius], values=[-slope * radius, slope * radius])

    @property
    def rows(self) -> int:
        """1 (the same field every step) or T (one row per step)."""
        return int(self.values.shape[0])

    def __call__(self, m: Float[Array, "*s"], t: Int[Array, ""] | int = 1) -> Float[Array, "*s"]:
        """g(m, t), elementwise, in the dtype of `m` (jittable; row t - 1 of a field with
        one row per step)."""
        row = jnp.clip(jnp.asarray(t, jnp.int32) - 1, 0, self.rows - 1)
        knots = jnp.asarray(self.knots, m.dtype)
        values = jnp.asarray(self.values, m.dtype)[row]
        out = jnp.interp(m, knots, values)
        if self.jumps is None:
            return out
        jumps = jnp.asarray(self.jumps, m.dtype)[row]
        steps = (m[..., None] > knots).astype(m.dtype)
        return out + jnp.sum(jumps * steps, axis=-1)

    def breakpoints(self) -> np.ndarray:
        """The knots if the field has jumps (even zeros), else none: where it may jump."""
        return self.knots if self.jumps is not None else np.zeros(0)

    def slope_bounds(self) -> tuple[float, float]:
        """A lower and an upper bound on g' over every step's row: the slopes between the
        knots and 0 beyond them (-inf / inf where a row jumps down / up)."""
        slopes = np.diff(self.values, axis=1) / np.diff(self.knots)
        lo = float(min(0.0, slopes.min(initial=0.0)))
        hi = float(max(0.0, slopes.max(initial=0.0)))
        if self.jumps is not None and np.any(self.jumps < 0):
            lo = -np.inf
        if self.jumps is not None and np.any(self.jumps > 0):
            hi = np.inf
        return lo, hi

    def sup_abs(self) -> float:
        """max |g| over the line and every step (at the knots' one-sided limits: the field
        is linear between them and constant beyond)."""
        jumps = np.zeros_like(self.values) if self.jumps is None else self.jumps
        before = np.cumsum(jumps, axis=1) - jumps  # the jumps of the knots to the left
        left = self.values + before
        return float(max(np.abs(left).max(), np.abs(left + jumps).max()))

    def to_dict(self) -> dict[str, Any]:
        """The field as JSON-ready lists."""
        return {
            "knots": self.knots.tolist(),
            "values": self.values.tolist(),
            "jumps": None if self.jumps is None else self.jumps.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, steps: int | None = None) -> PiecewiseField:
        """The field `to_dict` wrote."""
        unknown = sorted(set(data) - {"knots", "values", "jumps"})
        if unknown:
            raise ValueError(f"a field has entries knots, values, jumps; unknown: {unknown}")
        return cls(data["knots"], data["values"], data.get("jumps"), steps=steps)

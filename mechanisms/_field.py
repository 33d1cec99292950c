r"""The two abstractions of the fields-as-data vocabulary: a gradient field of a scalar
model (`AbstractField`) and the DP-SGD run whose gradients are such fields
(`AbstractFieldConstruction`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import AbstractScalarLaw
from advsim.validation import as_traced_float, check_finite, check_int

__all__ = ["AbstractField", "AbstractFieldConstruction"]


class AbstractField(eqx.Module):
    r"""A gradient field $g(m, t)$ of a scalar model, held as data.

    Every parameter of a field is a float64 numpy array, so fields of one shape share one
    compiled propagation in `advsim.exact` and one compiled simulation, and a search varies
    them as arrays (`advsim.search`). A field declares where it jumps (`breakpoints`): the
    construction built from it gathers them, so no jump is left undeclared to the exact
    engine. Implementations: `ScalarField` (a sum of smooth and kinked terms: affine, ramps
    at knots, tanh bumps, Holder roots, jumps) and `PiecewiseField` (piecewise linear
    between knots, a jump allowed at each knot, optionally one row per step).
    """

    @abc.abstractmethod
    def __call__(self, m: Float[Array, "*s"], t: Int[Array, ""] | int = 1) -> Float[Array, "*s"]:
        """g(m, t), elementwise, in the dtype of `m` (jittable; t is the step, 1 to T, and a
        field that is the same at every step ignores it)."""

    @abc.abstractmethod
    def breakpoints(self) -> np.ndarray:
        """The model values where the field may jump: every jump the field's data holds
        (a declared jump of height 0 is listed too, so that fields of one shape declare
        alike)."""

    @abc.abstractmethod
    def slope_bounds(self) -> tuple[float, float]:
        """A lower and an upper bound on $g'$ over the line and every step (-inf / inf
        where the field jumps down / up)."""

    @classmethod
    @abc.abstractmethod
    def constant(cls, value: float) -> AbstractField:
        """g(m, t) = value: the gradient of the linear loss value * m."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The field as JSON-ready lists, every float exact (`from_dict` reads it back)."""


class AbstractFieldConstruction(AbstractScalarLaw):
    r"""A scalar DP-SGD run whose gradients are fields (`AbstractField`): the canary's, one
    per data group (`counts` identical examples each), and the regularizer's.

    Step t (Algorithm 1 of arXiv:2410.06186 in one dimension):
    $m_t = m_{t-1} - \eta_t\big(b_t\,\mathrm{clip}_C(g_c(m_{t-1}, t)) + \sum_j n_{j,t}\,
    \mathrm{clip}_C(g_j(m_{t-1}, t)) + r'(m_{t-1}, t) + \sigma C \xi_t\big)$: the engine
    clips the canary's and the groups' fields, samples the batch and adds the noise; the
    regularizer's field is applied unclipped. `field_breakpoints` is the union of the
    fields' own `breakpoints()`, so the exact engine sees every jump the fields declare.

    A subclass holds `params`, `init`, `canary`, `groups`, `counts` and `regularizer`,
    says which fields it takes (`as_field`), and sets the last five in its `__init__`
    with `_set_fields` (which checks them).
    """

    init: eqx.AbstractVar[np.ndarray]
    canary: eqx.AbstractVar[AbstractField]
    groups: eqx.AbstractVar[tuple[AbstractField, ...]]
    counts: eqx.AbstractVar[np.ndarray]
    regularizer: eqx.AbstractVar[AbstractField]

    @abc.abstractmethod
    def as_field(self, name: str, value: Any) -> AbstractField:
        """`value` as one of this construction's fields (None: the zero field), refusing
        a value of another kind with an error naming `name`."""

    def _set_fields(
        self,
        *,
        init: float,
        canary: Any,
        groups: Sequence[Any],
        counts: Sequence[int] | None,
        regularizer: Any,
    ) -> None:
        """Sets m_0 and the fields, each read by `as_field`; the counts default to 1 per
        group (each an integer in [0, 2^31 - 1])."""
        self.init = as_traced_float("init", init, check_finite)
        self.canary = self.as_field("canary", canary)
        self.groups = tuple(self.as_field(f"groups[{i}]", g) for i, g in enumerate(groups))
        counts = [1] * len(self.groups) if counts is None else np.asarray(counts, object).tolist()
        if not isinstance(counts, list) or len(counts) != len(self.groups):
            raise ValueError(
                f"counts must have one entry per group ({len(self.groups)}), got {counts!r}"
            )
        checked = [
            check_int(f"counts[{i}]", n, minimum=0, maximum=2**31 - 1) for i, n in enumerate(counts)
        ]
        self.counts = np.asarray(checked, np.int64)
        self.regularizer = self.as_field("regularizer", regularizer)

    def fields(self) -> tuple[AbstractField, ...]:
        """The canary's field, every group's, the regularizer's, in that order."""
        return (self.canary, *self.groups, self.regularizer)

    def init_model(self) -> Float[Array, " d"]:
        return jnp.reshape(jnp.asarray(self.init, jnp.float32), (1,))

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        return self.canary(model, t)

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        if not self.groups:
            return jnp.zeros((0, 1), model.dtype)
        return jnp.stack([g(model, t) for g in self.groups])

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.counts, jnp.int32)

    def regularizer_gradient(
        self, model: Float[Array, " d"], t: Int[Array, ""]
    ) -> Float[Array, " d"]:
        return self.regularizer(model, t)

    def field_breakpoints(self) -> Float[Array, " k"]:
        """Every field's `breakpoints()`: where a field may jump (`advsim.exact`)."""
        return jnp.concatenate([jnp.asarray(f.breakpoints()) for f in self.fields()])

r"""Scalar gradient fields and the DP-SGD constructions built from them (`advsim.testing`).

- `ScalarField`: a small parametric family of gradient fields $g(m)$ of a scalar model
  (constants, affine, piecewise-linear with knots, tanh bumps, jumps), with traced
  float parameters, and host-side certificates (sup norm, Lipschitz constant,
  monotonicity) of the assumptions bounds need;
- `ScalarFieldConstruction` and `ProjectedScalarFieldConstruction`: the DP-SGD run whose
  canary, data groups and regularizer are such fields (the engine clips, samples and adds
  the noise), optionally projected onto $[-R, R]$ (`advsim.AbstractProjected`), with the
  `ConvexityCertificate` of a projected one. `advsim.testing._exact` draws them at random.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Unpack

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim._mechanism import AbstractProjected, AbstractScalarLaw
from advsim._records import DPSGDOptions, DPSGDParams
from advsim._validation import (
    as_traced_float,
    check_finite,
    check_positive,
)
from advsim.bounds import ShiftedInterpolationBound, shifted_interpolation_bound

__all__ = [
    "ConvexityCertificate",
    "ProjectedScalarFieldConstruction",
    "ScalarField",
    "ScalarFieldConstruction",
]


# ----------------------------------------------------------------------------------------
# Gradient fields


def _vector(name: str, values, size: int | None = None) -> np.ndarray:
    arr = np.asarray(values, np.float64).reshape(-1)
    if size is not None and arr.size != size:
        raise ValueError(f"{name} must have {size} entries, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr!r}")
    return arr


def _relu(x):
    return np.maximum(x, 0.0)


class ScalarField(eqx.Module):
    r"""A gradient field of a scalar model: a sum of simple terms with traced parameters.

    $$g(m) = a + b\,m + \sum_k c_k\,(m - \kappa_k)_+ + \sum_j d_j \tanh\frac{m - e_j}{w_j}
        + \sum_i s_i\,\mathbf{1}[m \ge z_i].$$

    Constants and affine fields (linear and quadratic losses), piecewise-linear fields
    with knots $\kappa_k$ (piecewise-quadratic losses), tanh bumps (smooth, bounded
    gradients, e.g. of log-cosh losses) and jumps at $z_i$ (a loss with kinks, like the
    threshold landscape of arXiv:2405.14457; `breakpoints` tells the exact engine where).
    Every parameter is a float64 numpy array, so fields of one shape share one compiled
    propagation and batch in `advsim.exact.last_iterate_epsilons`.

    The host-side methods certify what bounds assume, on an interval: `sup_abs` (a bound
    on $|g|$: the Lipschitz constant $L$ of the loss), `lipschitz` (a bound on $|g'|$: the
    loss's smoothness $M$; infinite with a jump), `is_nondecreasing` (a sufficient
    condition for a convex loss: every term nondecreasing).

    Args:
        offset: a.
        slope: b.
        knots, knot_slopes: $\kappa_k$ and $c_k$ (same length).
        bump_centres, bump_heights, bump_widths: $e_j$, $d_j$ and $w_j > 0$.
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
        self.jumps = _vector("jumps", jumps)
        self.jump_heights = _vector("jump_heights", jump_heights, self.jumps.size)

    @classmethod
    def constant(cls, value: float) -> ScalarField:
        """g(m) = value: the gradient of the linear loss value * m."""
        return cls(offset=value)

    def __call__(self, m: Float[Array, "*s"]) -> Float[Array, "*s"]:
        """g(m), elementwise, in the dtype of `m` (jittable)."""

        def f(a):
            return jnp.asarray(a, m.dtype)

        x = m[..., None]
        out = f(self.offset) + f(self.slope) * m
        out = out + jnp.sum(f(self.knot_slopes) * jnp.maximum(x - f(self.knots), 0.0), -1)
        bumps = jnp.tanh((x - f(self.bump_centres)) / f(self.bump_widths))
        out = out + jnp.sum(f(self.bump_heights) * bumps, -1)
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
        return out + np.sum(self.jump_heights * (x >= self.jumps), -1)

    def breakpoints(self) -> np.ndarray:
        """The jump positions $z_i$ (where the field is discontinuous)."""
        return self.jumps

    def is_constant(self) -> bool:
        """Whether g is constant (every term but the offset is zero): a linear loss."""
        return (
            float(self.slope) == 0.0
            and not np.any(self.knot_slopes)
            and not np.any(self.bump_heights)
            and not np.any(self.jump_heights)
        )

    def is_nondecreasing(self) -> bool:
        """Whether every term is nondecreasing (b, c_k, d_j, s_i >= 0): then g is, and its
        loss is convex. A sufficient condition only."""
        return bool(
            float(self.slope) >= 0
            and np.all(self.knot_slopes >= 0)
            and np.all(self.bump_heights >= 0)
            and np.all(self.jump_heights >= 0)
        )

    def lipschitz(self) -> float:
        r"""A bound on $|g'|$ everywhere: $|b| + \sum|c_k| + \sum |d_j|/w_j$ (the loss is
        that smooth); inf if a jump is non-zero."""
        if np.any(self.jump_heights):
            return math.inf
        return float(
            abs(float(self.slope))
            + np.sum(np.abs(self.knot_slopes))
            + np.sum(np.abs(self.bump_heights) / self.bump_widths)
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
            jumps=self.jumps,
            jump_heights=self.jump_heights * factor,
        )

    def padded(self, *, knots: int, bumps: int, jumps: int) -> ScalarField:
        """The same field with zero-weight terms appended up to `knots` knots, `bumps`
        bumps and `jumps` jumps, so fields of different families share one shape (and
        batch together in `advsim.exact.last_iterate_epsilons`)."""

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
            jumps=pad(self.jumps, jumps, 0.0),
            jump_heights=pad(self.jump_heights, jumps, 0.0),
        )

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
        for s, z in zip(self.jump_heights, self.jumps, strict=True):
            if s:
                parts.append(f"{s:.6g} [m >= {z:.6g}]")
        return " + ".join(parts)


# ----------------------------------------------------------------------------------------
# The construction


class _AbstractFieldConstruction(AbstractScalarLaw):
    """What the two field constructions share: the fields, the counts, m_0."""

    params: eqx.AbstractVar[DPSGDParams]
    init: eqx.AbstractVar[np.ndarray]
    canary: eqx.AbstractVar[ScalarField]
    groups: eqx.AbstractVar[tuple[ScalarField, ...]]
    counts: eqx.AbstractVar[np.ndarray]
    regularizer: eqx.AbstractVar[ScalarField]

    def init_model(self) -> Float[Array, " d"]:
        return jnp.reshape(jnp.asarray(self.init, jnp.float32), (1,))

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        return self.canary(model)

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        if not self.groups:
            return jnp.zeros((0, 1), model.dtype)
        return jnp.stack([g(model) for g in self.groups])

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.counts, jnp.int32)

    def regularizer_gradient(
        self, model: Float[Array, " d"], t: Int[Array, ""]
    ) -> Float[Array, " d"]:
        return self.regularizer(model)

    def field_breakpoints(self) -> Float[Array, " k"]:
        fields = (self.canary, *self.groups, self.regularizer)
        return jnp.concatenate([jnp.asarray(f.breakpoints()) for f in fields])

    # Host-side descriptions ---------------------------------------------------------

    def facts(self):
        """What this run certifies for the bounds' assumptions (`advsim.bounds.ProcessFacts`,
        read off the fields term by term: `advsim.testing._facts`)."""
        from advsim.testing._facts import field_facts

        return field_facts(self)

    def _data_fields(self) -> list[ScalarField]:
        return [g for g, n in zip(self.groups, np.asarray(self.counts), strict=True) if n > 0]

    def is_linear(self) -> bool:
        """Every field constant: linear losses, the family of Theorem 1 of arXiv:2410.06186
        (the last model is m_0 plus sampled constant gradients and the noise)."""
        fields = (self.canary, *self._data_fields(), self.regularizer)
        return all(f.is_constant() for f in fields) and not isinstance(self, AbstractProjected)

    def heuristic_is_tight(self) -> bool:
        """Whether the last-iterate heuristic is this run's exact epsilon, not only a bound:
        linear, the canary's clipped gradient of norm C, and the other examples' sum
        deterministic (a fixed batch, q = 1, or zero gradients), so the last model is the
        heuristic's pair shifted by a constant (proof of Theorem 1 of arXiv:2410.06186)."""
        if not self.is_linear():
            return False
        c = float(self.clip_norm)
        if abs(float(self.canary.offset)) < c:
            return False
        deterministic = self.batching == "fixed" or float(self.sampling_prob) == 1.0
        return deterministic or all(float(g.offset) == 0.0 for g in self._data_fields())

    def composition_is_tight(self) -> bool:
        """Whether composition is this run's exact epsilon (up to its PLD grid): one step,
        no projection, the canary's clipped gradient at m_0 of norm C, the other examples'
        sum at m_0 deterministic (fixed batch, q = 1, or zero gradients there). The last
        model is then m_0 minus a constant, minus the canary's shift with probability q,
        minus the Gaussian noise: one Poisson-subsampled Gaussian mechanism."""
        if self.steps != 1 or isinstance(self, AbstractProjected):
            return False
        m0 = float(np.float32(self.init))
        c = float(self.clip_norm)
        if abs(float(self.canary.values(m0))) < c:
            return False
        deterministic = self.batching == "fixed" or float(self.sampling_prob) == 1.0
        return deterministic or all(float(g.values(m0)) == 0.0 for g in self._data_fields())

    def describe(self) -> str:
        """The run in one paragraph, for reports and replays."""
        acc = self.accounting()
        groups = ", ".join(
            f"{int(n)} x [{g.describe()}]" for g, n in zip(self.groups, self.counts, strict=True)
        )
        text = (
            f"{type(self).__name__}: T={self.steps}, q={float(self.sampling_prob):.6g}, "
            f"sigma={float(self.noise_multiplier):.6g}, C={float(self.clip_norm):.6g}, "
            f"lr={float(self.learning_rate):.6g}, batching={self.batching}, canary steps "
            f"{list(acc.canary_steps)} (sampled: {self.params.canary_sampled}), "
            f"m0={float(self.init):.6g}\n    canary: {self.canary.describe()}\n"
            f"    groups: {groups or 'none'}\n    regularizer: {self.regularizer.describe()}"
        )
        if isinstance(self, AbstractProjected):
            text += f"\n    projected onto [-{float(self.radius):.6g}, {float(self.radius):.6g}]"
        return text


def _init_fields(self, init, canary, groups, counts, regularizer):
    self.init = as_traced_float("init", init, check_finite)
    if not isinstance(canary, ScalarField):
        raise TypeError(f"canary must be a ScalarField, got {type(canary).__name__}")
    groups = tuple(groups)
    if not all(isinstance(g, ScalarField) for g in groups):
        raise TypeError("groups must be ScalarFields")
    counts = np.asarray(counts if counts is not None else [1] * len(groups))
    if counts.shape != (len(groups),) or (
        counts.size and not np.all((counts >= 0) & (counts == np.round(counts)))
    ):
        raise ValueError(
            f"counts must be {len(groups)} non-negative integers (one per group), got {counts!r}"
        )
    self.canary = canary
    self.groups = groups
    self.counts = counts.astype(np.int64)
    self.regularizer = ScalarField() if regularizer is None else regularizer
    if not isinstance(self.regularizer, ScalarField):
        raise TypeError(f"regularizer must be a ScalarField, got {type(regularizer).__name__}")


class ScalarFieldConstruction(_AbstractFieldConstruction):
    r"""A scalar DP-SGD run whose gradients are `ScalarField`s: a random construction for
    property tests against the exact engine (`advsim.exact`).

    Step t (Algorithm 1 of arXiv:2410.06186, as `advsim.AbstractMechanism` states it):
    $m_t = m_{t-1} - \eta(\sum_j n_{j,t}\,\mathrm{clip}_C(g_j(m_{t-1})) +
    b_t\,\mathrm{clip}_C(g_c(m_{t-1})) + r'(m_{t-1}) + \sigma C\xi_t)$, with $g_c$ the
    canary's field, $g_j$ group j's (`counts[j]` identical examples, Poisson-sampled or all
    present), $r'$ the regularizer's field (never clipped).

    Args:
        steps, sampling_prob, noise_multiplier: T, q, sigma.
        canary: the canary's gradient field.
        groups: the other examples' fields, one per group (default none).
        counts: examples per group (default 1 each).
        regularizer: the regularizer's gradient field (default 0).
        init: m_0 (default 0).
        **dpsgd: clip_norm, learning_rate, canary_schedule, batching (`DPSGDOptions`).

    Example:
        >>> from advsim.exact import last_iterate_epsilon
        >>> from advsim.bounds import heuristic_epsilon
        >>> mech = ScalarFieldConstruction(3, 0.5, 1.0, canary=ScalarField.constant(-1.0))
        >>> mech.heuristic_is_tight()
        True
        >>> exact = last_iterate_epsilon(mech, 1e-5, refinements=2)
        >>> abs(exact.epsilon / heuristic_epsilon(1e-5, mech.accounting()) - 1) < 1e-3
        True
    """

    params: DPSGDParams
    init: np.ndarray
    canary: ScalarField
    groups: tuple[ScalarField, ...]
    counts: np.ndarray
    regularizer: ScalarField

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        canary: ScalarField,
        groups: Sequence[ScalarField] = (),
        counts: Sequence[int] | None = None,
        regularizer: ScalarField | None = None,
        init: float = 0.0,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        _init_fields(self, init, canary, groups, counts, regularizer)


@dataclasses.dataclass(frozen=True)
class ConvexityCertificate:
    """What a projected field construction meets of the shifted-interpolation bound's
    assumptions (`advsim.bounds.shifted_interpolation_bound`), read off its fields.

    Attributes:
        lipschitz: L, the largest |gradient| of any example (canary, groups, the
            regularizer counted as one more example) on [-R, R].
        smoothness: M, the largest per-example smoothness (a bound on |g'|).
        num_examples: n = 1 (canary) + the group counts (+ 1 for a non-zero regularizer).
        diameter: D = 2R.
        failures: the assumptions that do not hold (empty: the bound applies).
    """

    lipschitz: float
    smoothness: float
    num_examples: int
    diameter: float
    failures: tuple[str, ...]

    @property
    def holds(self) -> bool:
        """Whether every assumption holds."""
        return not self.failures


class ProjectedScalarFieldConstruction(AbstractProjected, _AbstractFieldConstruction):
    r"""`ScalarFieldConstruction` followed, after every step, by the projection onto
    $[-R, R]$ (`advsim.AbstractProjected`): projected DP-SGD, the algorithm of the
    hidden-state bounds (Altschuler and Talwar 2022; Bok, Su and Altschuler,
    arXiv:2403.00278). `m_0` must lie in $[-R, R]$.

    Its arguments are those of `ScalarFieldConstruction` (`steps`, `sampling_prob`,
    `noise_multiplier`, `canary`, `groups`, `counts`, `regularizer`, `init`, `**dpsgd`),
    and the keyword `radius`, R > 0.

    Example:
        >>> mech = ProjectedScalarFieldConstruction(
        ...     5, 1.0, 2.0, radius=1.0, canary=ScalarField.constant(-1.0), batching="fixed")
        >>> cert = mech.convexity()
        >>> cert.holds, cert.lipschitz, cert.num_examples, cert.diameter
        (True, 1.0, 1, 2.0)
    """

    params: DPSGDParams
    init: np.ndarray
    canary: ScalarField
    groups: tuple[ScalarField, ...]
    counts: np.ndarray
    regularizer: ScalarField
    radius: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        radius: float,
        canary: ScalarField,
        groups: Sequence[ScalarField] = (),
        counts: Sequence[int] | None = None,
        regularizer: ScalarField | None = None,
        init: float = 0.0,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        _init_fields(self, init, canary, groups, counts, regularizer)
        self.radius = as_traced_float("radius", radius, check_positive)
        if not abs(float(np.float32(self.init))) <= float(self.radius):
            raise ValueError(
                f"init must lie in [-radius, radius] = [-{float(self.radius):g}, "
                f"{float(self.radius):g}], got {float(self.init)!r}"
            )

    @property
    def diameter(self) -> float:
        return 2.0 * float(self.radius)

    def project(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        r = jnp.asarray(self.radius, model.dtype)
        return jnp.clip(model, -r, r)

    def convexity(self) -> ConvexityCertificate:
        """Which assumptions of the shifted-interpolation bound hold, and its constants.

        Checked: full batch (fixed batching, the canary in every step), constant learning
        rate (this class has no schedule), every field nondecreasing (convex losses) and
        continuous, |g| <= L <= C on [-R, R] (clipping never acts), lr * n * M <= 2, m_0 in
        [-R, R] (checked when built).
        """
        r = float(self.radius)
        fields = [self.canary, *self._data_fields()]
        if not (self.regularizer.is_constant() and float(self.regularizer.offset) == 0.0):
            fields.append(self.regularizer)
        n = 1 + int(np.sum(self.counts)) + (len(fields) - 1 - len(self._data_fields()))
        lip = max(f.sup_abs(-r, r) for f in fields)
        smooth = max(f.lipschitz() for f in fields)
        lr, c = float(self.learning_rate), float(self.clip_norm)
        failures = []
        if self.batching != "fixed":
            failures.append("full batch: batching must be 'fixed'")
        if self.accounting().num_canary_steps != self.steps:
            failures.append("full batch: the canary must be in every step")
        if not all(f.is_nondecreasing() for f in fields):
            failures.append("convex losses: every field must be nondecreasing")
        if not math.isfinite(smooth):
            failures.append("smooth losses: no field may jump")
        if lip > c * (1.0 + 1e-12):
            failures.append(f"|gradient| <= L <= C on K: L = {lip:.6g} > C = {c:.6g}")
        if not lip > 0:
            failures.append("L > 0: some gradient must be non-zero on K")
        if math.isfinite(smooth) and lr * n * smooth > 2.0 * (1.0 + 1e-12):
            failures.append(f"lr * n * M <= 2: {lr:.6g} * {n} * {smooth:.6g} > 2")
        return ConvexityCertificate(lip, smooth, n, self.diameter, tuple(failures))

    def shifted_interpolation_bound(self, delta=None) -> ShiftedInterpolationBound:
        """`advsim.bounds.shifted_interpolation_bound` with this run's certified constants.

        Raises:
            ValueError: naming the assumptions that do not hold (`convexity`).
        """
        cert = self.convexity()
        if not cert.holds:
            raise ValueError(
                "the shifted-interpolation bound's assumptions do not hold: "
                + "; ".join(cert.failures)
            )
        return shifted_interpolation_bound(
            self.steps,
            noise_multiplier=float(self.noise_multiplier),
            clip_norm=float(self.clip_norm),
            lipschitz=cert.lipschitz,
            smoothness=cert.smoothness,
            learning_rate=float(self.learning_rate),
            num_examples=cert.num_examples,
            diameter=cert.diameter,
            delta=delta,
        )

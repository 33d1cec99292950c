r"""Random scalar constructions with a ground truth, for property tests (`advsim.testing`).

`advsim.exact.last_iterate_epsilon` computes the exact $\varepsilon(\delta)$ of the last
model of any scalar DP-SGD construction (`advsim.AbstractScalarLaw`). With it, a bound
or an audit can be tested against the truth on *random* constructions, not only on the
few with a closed form. This module supplies:

- `ScalarField`: a small parametric family of gradient fields $g(m)$ of a scalar model
  (constants, affine, piecewise-linear with knots, tanh bumps, jumps), with traced
  float parameters, and host-side certificates (sup norm, Lipschitz constant,
  monotonicity) of the assumptions bounds need;
- `ScalarFieldConstruction` and `ProjectedScalarFieldConstruction`: the DP-SGD run whose
  canary, data groups and regularizer are such fields (the engine clips, samples and adds
  the noise), optionally projected onto $[-R, R]$ (`advsim.AbstractProjected`);
- strategies that draw constructions meeting a bound's assumptions:
  `linear_constructions` (constant fields: Theorem 1 of arXiv:2410.06186, the
  last-iterate heuristic), `convex_constructions` (projected full-batch DP-GD on convex,
  Lipschitz, smooth losses: the shifted-interpolation bound of arXiv:2403.00278) and
  `scalar_constructions` (any field: composition, and audits);
- `assert_exact_below`: the exact epsilon of a batch of constructions never exceeds a
  bound, with the engine's own error estimate in the tolerance;
- `ExactLikelihoodScore`: the adversary that scores a release by the exact law's
  log-likelihood ratio (the Neyman-Pearson test), so that an audit of simulated runs can
  come close to the truth.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Unpack

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jaxtyping import Array, Float, Int

from advsim._adversary import AbstractAdversary
from advsim._mechanism import (
    AbstractMechanism,
    AbstractProjected,
    AbstractScalarLaw,
    CanarySchedule,
    DPSGDOptions,
    DPSGDParams,
    as_traced_float,
)
from advsim._validation import (
    check_delta,
    check_finite,
    check_int,
    check_nonnegative,
    check_positive,
)
from advsim.bounds import ShiftedInterpolationBound, shifted_interpolation_bound
from advsim.exact import ExactEpsilon, last_iterate_epsilons
from advsim.testing._strategies import _field, _log_uniform

__all__ = [
    "ConvexityCertificate",
    "ExactLikelihoodScore",
    "ProjectedScalarFieldConstruction",
    "ScalarField",
    "ScalarFieldConstruction",
    "assert_exact_below",
    "construction_batches",
    "convex_constructions",
    "linear_constructions",
    "scalar_constructions",
    "scalar_fields",
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


# ----------------------------------------------------------------------------------------
# Strategies

_STEPS = (1, 2, 5, 10)


def _spec(value, default: st.SearchStrategy, make: Callable) -> st.SearchStrategy:
    return _field(value, default, make)


def _uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats on a grid of 2^16 + 1 points of [lo, hi], both ends included: no subnormal
    or nearly-zero oddities (hypothesis's floats favour them); hypothesis's integers lean
    towards 0, here the midpoint, which is also where they shrink."""
    lo, hi = float(lo), float(hi)
    half = 1 << 15
    return st.integers(-half, half).map(lambda k: lo + (hi - lo) * ((k + half) / (2 * half)))


def _logs(lo: float, hi: float):
    return lambda *, min_value=lo, max_value=hi: _log_uniform(min_value, max_value)


def _ints(lo: int, hi: int):
    return lambda *, min_value=lo, max_value=hi: st.integers(min_value, max_value)


def _choice(value, options: tuple) -> st.SearchStrategy:
    if value is None:
        return st.sampled_from(options)
    if isinstance(value, st.SearchStrategy):
        return value
    return st.just(value)


@st.composite
def _general_field(
    draw,
    *,
    scale: float,
    centre: float,
    spread: float,
    knots: int,
    bumps: int,
    jumps: int,
    monotone: bool,
    jump_margin: float,
) -> ScalarField:
    """Any field of the family, of fixed shape (unused terms get weight 0), values of the
    order of `scale`, features within `spread` of `centre`, jumps at least `jump_margin`
    from `centre`."""
    signs = st.just(1.0) if monotone else st.sampled_from((-1.0, 1.0))

    def weight():
        # Each term on or off; when on, of weight 1/4 to 1 (signed), so that it shows.
        return draw(signs) * draw(_uniform(0.25, 1.0)) if draw(st.booleans()) else 0.0

    def position():
        return centre + spread * draw(_uniform(-1.0, 1.0))

    # |offset| in [scale / 2, 3 scale / 2] (its midpoint, where draws lean, is `scale`).
    offset = scale * draw(st.sampled_from((-1.0, 1.0))) * draw(_uniform(0.5, 1.5))
    slope = scale / spread * weight()
    ks = [position() for _ in range(knots)]
    cs = [2.0 * scale / spread * weight() for _ in range(knots)]
    es = [position() for _ in range(bumps)]
    ds = [scale * weight() for _ in range(bumps)]
    ws = [spread * draw(_log_uniform(0.05, 1.0)) for _ in range(bumps)]
    zs = [position() for _ in range(jumps)]
    zs = [
        z if abs(z - centre) >= jump_margin else centre + math.copysign(jump_margin, z - centre)
        for z in zs
    ]
    ss = [scale * weight() for _ in range(jumps)]
    return ScalarField(
        offset,
        slope,
        knots=ks,
        knot_slopes=cs,
        bump_centres=es,
        bump_heights=ds,
        bump_widths=ws,
        jumps=zs,
        jump_heights=ss,
    )


def scalar_fields(
    *,
    scale: float = 1.0,
    centre: float = 0.0,
    spread: float = 1.0,
    knots: int = 2,
    bumps: int = 1,
    jumps: int = 1,
    monotone: bool = False,
    jump_margin: float = 0.0,
) -> st.SearchStrategy[ScalarField]:
    """`ScalarField`s of one shape: `knots` knots, `bumps` tanh bumps, `jumps` jumps (each
    term switched on or off at random, so constants, affine, piecewise-linear, bumpy and
    discontinuous fields all come up), values of the order of `scale`, knots, bump centres
    and jumps within `spread` of `centre`. `monotone=True` draws nondecreasing terms
    only (convex losses). Jumps lie at least `jump_margin` from `centre`. Fields of one
    shape share the exact engine's compilations.
    """
    scale = check_positive("scale", scale)
    spread = check_positive("spread", spread)
    centre = check_finite("centre", centre)
    sizes = [
        check_int(n, v, minimum=0)
        for n, v in (("knots", knots), ("bumps", bumps), ("jumps", jumps))
    ]
    return _general_field(
        scale=scale,
        centre=centre,
        spread=spread,
        knots=sizes[0],
        bumps=sizes[1],
        jumps=sizes[2],
        monotone=bool(monotone),
        jump_margin=check_nonnegative("jump_margin", jump_margin),
    )


def linear_constructions(
    *,
    steps=None,
    sampling_prob=(0.05, 1.0),
    noise_multiplier=(0.5, 4.0),
    clip_norm=1.0,
    learning_rate=1.0,
    groups=(0, 2),
    period=1,
    batching=None,
    tight=None,
) -> st.SearchStrategy[ScalarFieldConstruction]:
    """Linear losses: every field constant (`ScalarFieldConstruction.is_linear`), the family
    of Theorem 1 of arXiv:2410.06186, whose exact epsilon is at most the last-iterate
    heuristic of its accounting, and equal to it when `heuristic_is_tight()`.

    The canary's gradient is drawn in [-2C, 2C] (more than half of the draws at norm >= C:
    the tight case when the data are deterministic), each data group's (1-4 examples) in
    [-2C, 2C],
    the regularizer's in [-C, C], m_0 in [-1, 1]. Keywords follow `dpsgd_params` (None,
    (lo, hi), a strategy or a fixed value); `groups` is the number of data groups,
    `batching` "poisson", "fixed" or None (either), `tight` True (only the heuristic's
    tight case: canary of norm C, zero data gradients and regularizer), False or None
    (either, half and half).
    T is static in the exact engine, so by default it is one of 1, 2, 5, 10.
    """
    steps_s = _spec(steps, st.sampled_from(_STEPS), _ints(1, 10))
    q_s = _spec(sampling_prob, _log_uniform(0.05, 1.0), _logs(0.05, 1.0))
    sigma_s = _spec(noise_multiplier, _log_uniform(0.5, 4.0), _logs(0.5, 4.0))
    c_s = _spec(clip_norm, st.just(1.0), _logs(0.1, 10.0))
    lr_s = _spec(learning_rate, st.just(1.0), _logs(0.1, 10.0))
    g_s = _spec(groups, st.integers(0, 2), _ints(0, 2))
    period_s = _spec(period, st.just(1), _ints(1, 3))
    batching_s = _choice(batching, ("poisson", "fixed"))

    @st.composite
    def draw_one(draw):
        t, q, sigma, c, lr = (draw(s) for s in (steps_s, q_s, sigma_s, c_s, lr_s))
        is_tight = draw(st.booleans()) if tight is None else bool(tight)
        n = draw(g_s)
        counts = [draw(st.integers(1, 4)) for _ in range(n)]
        if is_tight:  # the same shapes (zero data gradients), so it batches with the rest
            canary = c * draw(st.sampled_from((-2.0, -1.0, 1.0, 2.0)))
            fields, reg = [0.0] * n, 0.0
        else:
            canary = c * draw(st.one_of(st.sampled_from((-1.0, 1.0)), _uniform(-2.0, 2.0)))
            fields = [c * draw(_uniform(-2.0, 2.0)) for _ in range(n)]
            reg = c * draw(_uniform(-1.0, 1.0))
        return ScalarFieldConstruction(
            t,
            q,
            sigma,
            canary=ScalarField.constant(canary),
            groups=[ScalarField.constant(v) for v in fields],
            counts=counts,
            regularizer=ScalarField.constant(reg),
            init=draw(_uniform(-1.0, 1.0)),
            clip_norm=c,
            learning_rate=lr,
            batching=draw(batching_s),
            canary_schedule=CanarySchedule.every(draw(period_s)),
        )

    return draw_one()


def convex_constructions(
    *,
    steps=None,
    noise_multiplier=(0.5, 4.0),
    clip_norm=1.0,
    learning_rate=(0.1, 1.0),
    radius=(0.5, 20.0),
    groups=(0, 2),
    knots: int = 1,
    bumps: int = 1,
    regularizer: bool | None = None,
) -> st.SearchStrategy[ProjectedScalarFieldConstruction]:
    """Projected full-batch DP-GD on convex, Lipschitz, smooth losses over [-R, R]: every
    assumption of the shifted-interpolation bound (Bok, Su and Altschuler,
    arXiv:2403.00278; `ProjectedScalarFieldConstruction.convexity()` holds for every draw),
    so the exact epsilon is at most `mech.shifted_interpolation_bound(delta).epsilon`.

    Fixed batching, the canary in every step; the canary's field is, in half of the draws,
    the constant -C or -C/2 (the linear canary: the bound is then composition for T below
    its plateau, and nearly tight when R is large), else a nondecreasing field with `knots`
    knots and
    `bumps` tanh bumps; each data group (1-3 examples) likewise; a convex regularizer
    (nondecreasing affine, counted as one more example) in half of the draws
    (`regularizer`: True, False, None = either). Every field is rescaled so that
    |g| <= L <= C on [-R, R] (L drawn in [C/4, C]) and lr * n * M <= 2.

    `radius` is in units of the step's noise sd lr * sigma * C (drawn log-uniformly);
    `learning_rate` is lr.
    """
    steps_s = _spec(steps, st.sampled_from(_STEPS), _ints(1, 10))
    sigma_s = _spec(noise_multiplier, _log_uniform(0.5, 4.0), _logs(0.5, 4.0))
    c_s = _spec(clip_norm, st.just(1.0), _logs(0.1, 10.0))
    lr_s = _spec(learning_rate, _log_uniform(0.1, 1.0), _logs(0.1, 1.0))
    r_s = _spec(radius, _log_uniform(0.5, 20.0), _logs(0.5, 20.0))
    g_s = _spec(groups, st.integers(0, 2), _ints(0, 2))
    reg_s = st.booleans() if regularizer is None else st.just(bool(regularizer))

    @st.composite
    def draw_one(draw):
        t, sigma, c, lr = (draw(s) for s in (steps_s, sigma_s, c_s, lr_s))
        radius = draw(r_s) * lr * sigma * c
        n_groups = draw(g_s)
        counts = [draw(st.integers(1, 3)) for _ in range(n_groups)]
        with_reg = draw(reg_s)
        n = 1 + sum(counts) + int(with_reg)
        m_budget = 2.0 / (lr * n)  # lr * n * M <= 2

        def convex_field():
            raw = draw(
                scalar_fields(
                    scale=1.0,
                    centre=0.0,
                    spread=radius,
                    knots=knots,
                    bumps=bumps,
                    jumps=0,
                    monotone=True,
                )
            )
            lip = c * draw(_uniform(0.25, 1.0))
            sup, smooth = raw.sup_abs(-radius, radius), raw.lipschitz()
            factor = min(
                lip / sup if sup > 0 else 1.0, m_budget / smooth if smooth > 0 else math.inf
            )
            return raw.scaled(factor * (1.0 - 1e-9))

        if draw(st.booleans()):
            canary = ScalarField.constant(-c * draw(st.sampled_from((1.0, 0.5))))
            canary = canary.padded(knots=knots, bumps=bumps, jumps=0)
        else:
            canary = convex_field()
        fields = [convex_field() for _ in range(n_groups)]
        if with_reg:
            alpha = m_budget * draw(_uniform(0.0, 1.0))
            lip = c * draw(_uniform(0.25, 1.0))
            alpha = min(alpha, lip / (2.0 * radius))
            centre = radius * draw(_uniform(-1.0, 1.0))
            reg = ScalarField(-alpha * centre, alpha)
        else:
            reg = ScalarField()
        init = radius * draw(_uniform(-1.0, 1.0)) * (1.0 - 1e-6)  # in [-R, R] in float32
        return ProjectedScalarFieldConstruction(
            t,
            1.0,
            sigma,
            radius=radius,
            canary=canary,
            groups=fields,
            counts=counts,
            regularizer=reg,
            init=init,
            clip_norm=c,
            learning_rate=lr,
            batching="fixed",
            canary_schedule=CanarySchedule.every_step(sampled=False),
        )

    return draw_one()


def scalar_constructions(
    *,
    steps=None,
    sampling_prob=(0.05, 1.0),
    noise_multiplier=(0.5, 4.0),
    clip_norm=1.0,
    learning_rate=1.0,
    groups=(0, 2),
    knots: int = 2,
    bumps: int = 1,
    jumps: int = 1,
    batching=None,
    projected=None,
    schedule=None,
) -> st.SearchStrategy[ScalarFieldConstruction | ProjectedScalarFieldConstruction]:
    """Any construction of the family: every field (canary, 0-2 data groups of 1-4
    examples, the unclipped regularizer) a random `ScalarField` with `knots`, `bumps` and
    `jumps` terms (non-monotone, discontinuous: no assumption beyond DP-SGD's), Poisson or
    fixed batching, projected onto [-R, R] or not, the canary at every step, every k-th or
    at one step. The exact epsilon is then at most composition (`composition_epsilon` of
    `mech.accounting()`: releasing every iterate), for every draw.

    The canary's and the groups' fields take values up to ~1.5 C (clipping acts at times),
    their features lie within a few noise sds of the model's reach, the jumps at least
    half a noise sd from m_0 (`advsim.exact` spreads the initial point mass over its grid
    cell, so a jump closer than a cell to m_0 would be misread); the regularizer is
    affine with lr * slope in [-0.2, 1.5] (expanding to oscillating) plus, at times, a
    bump. Keywords as `linear_constructions`; `projected` and `batching` True/False /
    "poisson"/"fixed" or None (either); `schedule` a `CanarySchedule`, a strategy of them,
    or None (every step in two draws of five, else every(2), only(1) or only(T)).
    """
    steps_s = _spec(steps, st.sampled_from(_STEPS), _ints(1, 10))
    q_s = _spec(sampling_prob, _log_uniform(0.05, 1.0), _logs(0.05, 1.0))
    sigma_s = _spec(noise_multiplier, _log_uniform(0.5, 4.0), _logs(0.5, 4.0))
    c_s = _spec(clip_norm, st.just(1.0), _logs(0.1, 10.0))
    lr_s = _spec(learning_rate, st.just(1.0), _logs(0.1, 10.0))
    g_s = _spec(groups, st.integers(0, 2), _ints(0, 2))
    batching_s = _choice(batching, ("poisson", "fixed"))
    projected_s = _choice(projected, (False, True))

    @st.composite
    def draw_one(draw):
        t, q, sigma, c, lr = (draw(s) for s in (steps_s, q_s, sigma_s, c_s, lr_s))
        init = lr * c * draw(_uniform(-1.0, 1.0))
        spread = lr * c * (2.0 + 2.0 * math.sqrt(t) * sigma)

        def field(scale):
            return draw(
                scalar_fields(
                    scale=scale,
                    centre=init,
                    spread=spread,
                    knots=knots,
                    bumps=bumps,
                    jumps=jumps,
                    jump_margin=0.5 * lr * sigma * c,
                )
            )

        canary = field(c)
        n_groups = draw(g_s)
        fields = [field(c) for _ in range(n_groups)]
        counts = [draw(st.integers(1, 4)) for _ in range(n_groups)]
        alpha = draw(_uniform(-0.2, 1.5)) / lr
        reg = ScalarField(
            c * draw(_uniform(-0.5, 0.5)) - alpha * init,
            alpha,
            bump_centres=[init],
            bump_heights=[c * draw(_uniform(-0.5, 0.5))],
            bump_widths=[spread],
        )
        if isinstance(schedule, CanarySchedule):
            sched = schedule
        elif isinstance(schedule, st.SearchStrategy):
            sched = draw(schedule)
        else:
            sched = draw(
                st.sampled_from(
                    (
                        CanarySchedule.every_step(),
                        CanarySchedule.every_step(),
                        CanarySchedule.every(2),
                        CanarySchedule.only(1),
                        CanarySchedule.only(t),
                    )
                )
            )
        kwargs = dict(
            canary=canary,
            groups=fields,
            counts=counts,
            regularizer=reg,
            init=init,
            clip_norm=c,
            learning_rate=lr,
            batching=draw(batching_s),
            canary_schedule=sched,
        )
        if draw(projected_s):
            radius = abs(init) + spread * draw(_uniform(0.1, 1.0))
            return ProjectedScalarFieldConstruction(t, q, sigma, radius=radius, **kwargs)
        return ScalarFieldConstruction(t, q, sigma, **kwargs)

    return draw_one()


def construction_batches(
    make: Callable[..., st.SearchStrategy], *, size: int = 4, skip_simplest: bool = True, **static
) -> st.SearchStrategy[list]:
    """Lists of `size` constructions that share their static fields, for one vmapped
    `advsim.exact.last_iterate_epsilons` call (one compilation per grid for the batch).

    Each keyword of `static` is drawn once per batch (a strategy) or fixed (any other
    value) and passed, fixed, to `make` (e.g. `linear_constructions`) for every member;
    the members' traced values (fields, q, sigma, counts, m_0, ...) are drawn apart, and
    no two members are the same construction (`describe()`).

    Hypothesis tries its simplest draw first (every choice minimal): here a batch of one
    construction repeated with tiny variations. Each batch costs an exact propagation (a
    compilation, seconds), so by default (`skip_simplest`) that draw is rejected before
    the test runs, and the examples a property runs are all random draws.
    Fix whatever is static in the engine: `steps`, `groups`, `batching`, `projected`,
    `schedule` or `period` (a batch may differ only in traced values).

    Example:
        >>> from hypothesis import strategies as st
        >>> batches = construction_batches(
        ...     linear_constructions, size=3, steps=st.sampled_from((1, 4)), groups=1,
        ...     batching="fixed")
    """
    size = check_int("size", size, minimum=1)
    fixed = {k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in static.items()}
    batches = st.fixed_dictionaries(fixed).flatmap(
        lambda kw: st.lists(make(**kw), min_size=size, max_size=size, unique_by=_identity)
    )
    if not skip_simplest:
        return batches
    # A leading choice that is 0 only in (essentially) the simplest draw.
    salted = st.tuples(st.integers(0, 1 << 16), batches).filter(lambda pair: pair[0] != 0)
    return salted.map(lambda pair: pair[1])


def _identity(mech) -> str:
    return mech.describe()


# ----------------------------------------------------------------------------------------
# Checks against the exact engine


def assert_exact_below(
    mechanisms: Sequence[AbstractMechanism],
    upper: Callable[[AbstractMechanism], float] | Sequence[float],
    *,
    delta: float,
    rtol: float = 1e-3,
    error_factor: float = 2.0,
    label: str = "bound",
    equal: bool | Sequence[bool] = False,
    cells_per_sd: float = 8.0,
    refinements: int = 2,
    **exact_kwargs,
) -> list[ExactEpsilon]:
    """Asserts that the exact epsilon of each mechanism never exceeds an upper bound.

    Computes `advsim.exact.last_iterate_epsilons(mechanisms, delta, ...)` (one vmapped
    call, so the mechanisms must share their static fields) and asserts, for each,
    `exact.epsilon <= bound * (1 + rtol) + error_factor * exact.error`: the engine's
    value within its refinement error estimate (`ExactEpsilon.error`, an estimate, hence
    the factor) and a relative tolerance for the last digits of both. Where `equal` is
    True (a tight case) it also asserts `exact.epsilon >= bound * (1 - rtol) -
    error_factor * exact.error`. A result the engine flags unresolved (`resolved` False:
    an epsilon beyond `advsim.exact.resolution_limit(delta)`, set by masses at the float64
    rounding floor) is not compared; the caller can count them in the returned results.

    Args:
        mechanisms: `advsim.AbstractScalarLaw` mechanisms sharing static fields.
        upper: `mech -> bound`, or the bounds in order.
        delta: delta in (0, 1).
        rtol, error_factor: the tolerance (see above).
        label: what the bound is, for the report.
        equal: True (all), False, or one flag per mechanism: where the bound is exact.
        cells_per_sd, refinements, **exact_kwargs: passed to `last_iterate_epsilons`
            (coarse by default, for fast properties; the engine's accuracy is then
            ~1e-3 relative on smooth cases). With `refinements=1` there is no error
            estimate and `rtol` alone is the tolerance.

    Returns:
        The `ExactEpsilon` results.

    Raises:
        AssertionError: naming the mechanism, both values, the error estimate and the
            tolerance.
    """
    mechs = list(mechanisms)
    delta = check_delta("delta", delta)
    rtol = check_nonnegative("rtol", rtol)
    error_factor = check_nonnegative("error_factor", error_factor)
    flags = [bool(equal)] * len(mechs) if isinstance(equal, bool) else [bool(e) for e in equal]
    if len(flags) != len(mechs):
        raise ValueError(f"equal has {len(flags)} flags for {len(mechs)} mechanisms")
    bounds = [float(upper(m)) for m in mechs] if callable(upper) else [float(b) for b in upper]
    if len(bounds) != len(mechs):
        raise ValueError(f"upper has {len(bounds)} values for {len(mechs)} mechanisms")
    results = last_iterate_epsilons(
        mechs, delta, cells_per_sd=cells_per_sd, refinements=refinements, **exact_kwargs
    )
    for i, (mech, res, bound, eq) in enumerate(zip(mechs, results, bounds, flags, strict=True)):
        if not res.resolved:
            continue  # beyond the float64 grid's resolution: no value to compare
        # refinements=1 gives no estimate (nan): rtol alone then.
        error = res.error if math.isfinite(res.error) else 0.0
        slack = bound * rtol + error_factor * error
        above = not res.epsilon <= bound + slack  # also True for NaN
        below = eq and not res.epsilon >= bound - slack
        if above or below:
            what = "exceeds" if above else "is below the tight"
            describe = getattr(mech, "describe", lambda m=mech: repr(m))
            raise AssertionError(
                f"exact epsilon {what} the {label} (mechanism {i} of {len(mechs)})\n"
                f"  exact: {res.epsilon!r} (error estimate {res.error:.3g}; grids "
                f"{[round(e, 6) for e in res.epsilons]}, lost mass {res.lost_mass})\n"
                f"  {label}: {bound!r}{' (tight: equality expected)' if eq else ''}\n"
                f"  excess: {res.epsilon - bound!r} (allowed {slack:.3g} = rtol {rtol:g} x "
                f"bound + {error_factor:g} x error)\n"
                f"  delta: {delta!r}\n  {describe()}"
            )
    return results


class ExactLikelihoodScore(AbstractAdversary):
    r"""Scores a scalar release by $\log p_{in}(m) / p_{out}(m)$ of the exact laws.

    Built from an `advsim.exact.ExactEpsilon` (`from_exact`): the log-ratio of the two
    worlds' masses at the finest grid's nodes, interpolated linearly in between; a
    projected run's release at an end of its interval scores the ratio of the atoms'
    masses there. Thresholding it is the Neyman-Pearson test of the two laws (up to the
    grid), so an (eps, delta) audit of simulated runs scored by it can reach the exact
    epsilon (both orders of the pair: the audit tests the score's upper and lower sets).
    The score is a fixed function of the release, so audits stay valid whatever the
    grid's accuracy.

    Attributes:
        grid: the nodes (float32).
        log_ratio: the log-ratio at each node, clipped to [-`CLIP`, `CLIP`].
        ends: the interval's ends (projected) or (-inf, inf).
        end_log_ratio: the atoms' log-ratios (projected) or zeros.
    """

    grid: np.ndarray
    log_ratio: np.ndarray
    ends: np.ndarray
    end_log_ratio: np.ndarray

    #: The log-ratios are clipped to [-CLIP, CLIP] (cells where one world has no mass).
    CLIP = 60.0

    @classmethod
    def from_exact(cls, exact: ExactEpsilon) -> ExactLikelihoodScore:
        """The score of the laws in `exact` (its finest grid)."""
        nodes = exact.nodes
        p, q = np.asarray(exact.mass_in, np.float64), np.asarray(exact.mass_out, np.float64)
        tiny = 1e-300

        def log_ratio(a, b):
            return np.clip(np.log(a + tiny) - np.log(b + tiny), -cls.CLIP, cls.CLIP)

        grid = np.asarray(exact.grid[:nodes], np.float64)
        ratio = log_ratio(p[:nodes], q[:nodes])
        if exact.atoms:
            ends = np.asarray(exact.grid[nodes:], np.float64)
            end_ratio = log_ratio(p[nodes:], q[nodes:])
        else:
            ends, end_ratio = np.array([-np.inf, np.inf]), np.zeros(2)
        return cls(grid, ratio, ends, end_ratio)

    def __init__(self, grid, log_ratio, ends=(-np.inf, np.inf), end_log_ratio=(0.0, 0.0)):
        self.grid = np.asarray(grid, np.float32)
        self.log_ratio = np.asarray(log_ratio, np.float32)
        self.ends = np.asarray(ends, np.float32)
        self.end_log_ratio = np.asarray(end_log_ratio, np.float32)

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        m = (release if release.ndim == 1 else release[-1])[0]
        grid = jnp.asarray(self.grid, m.dtype)
        inner = jnp.interp(m, grid, jnp.asarray(self.log_ratio, m.dtype))
        ends = jnp.asarray(self.ends, m.dtype)
        end_ratio = jnp.asarray(self.end_log_ratio, m.dtype)
        return jnp.where(m <= ends[0], end_ratio[0], jnp.where(m >= ends[1], end_ratio[1], inner))

r"""The DP-SGD constructions built from scalar gradient fields (`advsim.testing`).

`ScalarFieldConstruction` and `ProjectedScalarFieldConstruction`: the DP-SGD run whose
canary, data groups and regularizer are `ScalarField`s (an `AbstractFieldConstruction` of
`advsim.mechanisms.fields`: the engine clips, samples and adds the noise), optionally
projected onto $[-R, R]$ (`advsim.AbstractProjected`), with the `ConvexityCertificate` of
a projected one. The property tests' strategies draw them at random.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NotRequired, Required, Unpack

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from advsim._mechanism import AbstractProjected
from advsim._records import DPSGDOptions, DPSGDParams
from advsim._validation import as_traced_float, check_positive
from advsim.bounds import ShiftedInterpolationBound, shifted_interpolation_bound
from advsim.mechanisms.fields import AbstractFieldConstruction, ScalarField

__all__ = [
    "ConvexityCertificate",
    "ProjectedScalarFieldConstruction",
    "ScalarField",
    "ScalarFieldConstruction",
]


# ----------------------------------------------------------------------------------------
# The construction


class _AbstractScalarFieldConstruction(AbstractFieldConstruction):
    """What the two scalar field constructions share: their fields, `ScalarField`s, and
    what their terms certify."""

    params: DPSGDParams
    init: np.ndarray
    canary: ScalarField
    groups: tuple[ScalarField, ...]
    counts: np.ndarray
    regularizer: ScalarField

    def as_field(self, name: str, value) -> ScalarField:
        """`value`, checked to be a `ScalarField` (None: the zero field)."""
        if value is None:
            return ScalarField()
        if not isinstance(value, ScalarField):
            raise TypeError(f"{name} must be a ScalarField, got {type(value).__name__}")
        return value

    # Host-side descriptions ---------------------------------------------------------

    def facts(self):
        """What this run certifies for the bounds' assumptions (`advsim.bounds.ProcessFacts`,
        read off the fields term by term)."""
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


class ScalarFieldOptions(DPSGDOptions, total=False):
    """The keywords of a scalar field construction besides T, q and sigma: its fields, m_0
    and `DPSGDOptions`."""

    canary: Required[ScalarField]
    groups: NotRequired[Sequence[ScalarField]]
    counts: NotRequired[Sequence[int] | None]
    regularizer: NotRequired[ScalarField | None]
    init: NotRequired[float]


def _init_run(mech, steps, sampling_prob, noise_multiplier, *, canary, groups=(), counts=None,
              regularizer=None, init=0.0, **dpsgd) -> None:  # fmt: skip
    mech.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
    mech._set_fields(
        init=init, canary=canary, groups=groups, counts=counts, regularizer=regularizer
    )


class ScalarFieldConstruction(_AbstractScalarFieldConstruction):
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

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        **fields: Unpack[ScalarFieldOptions],
    ):
        _init_run(self, steps, sampling_prob, noise_multiplier, **fields)


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


class ProjectedScalarFieldConstruction(AbstractProjected, _AbstractScalarFieldConstruction):
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

    radius: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        radius: float,
        **fields: Unpack[ScalarFieldOptions],
    ):
        _init_run(self, steps, sampling_prob, noise_multiplier, **fields)
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

r"""The literature's hidden-state bounds as `AbstractBound` values.

- `StronglyConvexGDP`: full-batch noisy GD on a strongly convex, smooth objective,
  $\mu_T = \mu_1\sqrt{(1 - c^T)(1 + c)/((1 - c)(1 + c^T))}$ (Bok, Su and Altschuler,
  arXiv:2403.00278; `strongly_convex_gdp_bound`).
- `ShiftedInterpolation` (in `advsim.bounds._instances`): their constrained convex case.

Each declares its assumptions; the constants it needs (m, M, G, n, R) are read from the
process's `ProcessFacts`, never assumed.
"""

from __future__ import annotations

from advsim.bounds._abstract import AbstractBound
from advsim.bounds._assumptions import (
    ConstantStepSize,
    FullBatch,
    LipschitzWithinClip,
    ProcessFacts,
    Smooth,
    StepSizeAtMost,
    StronglyConvex,
)
from advsim.bounds._strongly_convex import REFERENCE as _SC_REFERENCE
from advsim.bounds._strongly_convex import strongly_convex_gdp_bound

__all__ = ["StronglyConvexGDP"]


class StronglyConvexGDP(AbstractBound):
    r"""Full-batch noisy GD on an m-strongly convex, M-smooth objective $F$ (in both
    worlds), every example's gradient within C: $\mu_T$-GDP with
    $c = \max\{|1 - \lambda m|, |1 - \lambda M|\}$, $\mu_1 = G/(\sigma C)$
    (`strongly_convex_gdp_bound`, add/remove neighbours). A projection after each step
    is allowed (it is non-expansive)."""

    assumptions = (
        StronglyConvex(of="objective"),
        Smooth(),
        LipschitzWithinClip(),
        FullBatch(),
        ConstantStepSize(),
        StepSizeAtMost(2.0 * (1.0 - 1e-12), of="objective"),
    )
    reference = _SC_REFERENCE

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return strongly_convex_gdp_bound(
            facts.steps,
            noise_multiplier=facts.noise_multiplier,
            clip_norm=facts.clip_norm,
            lipschitz=max(facts.lipschitz, 1e-300),
            strong_convexity=facts.strong_convexity,
            smoothness=max(facts.objective_smoothness, facts.strong_convexity),
            learning_rate=facts.learning_rate,
            num_examples=facts.num_examples,
            delta=delta,
        ).epsilon

r"""Today's bounds as `AbstractBound` values: each the function it wraps, unchanged in
value, with its assumptions declared.

- `LastIterateHeuristic`: Theorem 1 of arXiv:2410.06186 (`heuristic_epsilon`), an upper
  bound on linear losses (and their exact epsilon in the tight case).
- `HeuristicMaxOverSteps`: its maximum over horizons $t \le T$ (Section 4.1 there;
  `heuristic_epsilon_max_over_steps`), never below the heuristic at $T$.
- `Composition`: every iterate released, by dp_accounting's PLD accountant
  (`composition_epsilon`); it assumes nothing of the losses (the engine clips every
  example, the regularizer is public, and the last model is post-processing).
- `FullBatchGDP`: full-batch DP-GD, $\sqrt{T}/\sigma$-GDP (`full_batch_epsilon`).
- `ShiftedInterpolation`: projected full-batch DP-GD on convex smooth losses (Bok, Su and
  Altschuler, arXiv:2403.00278; `shifted_interpolation_bound`).
"""

from __future__ import annotations

import math

from advsim.bounds._abstract import AbstractBound
from advsim.bounds._assumptions import (
    BoundedDomain,
    ConstantStepSize,
    Convex,
    FullBatch,
    Linear,
    LipschitzWithinClip,
    ProcessFacts,
    RegularizerAsExample,
    Smooth,
    StepSizeAtMost,
)
from advsim.bounds._composition import composition_delta, composition_epsilon
from advsim.bounds._gdp import full_batch_epsilon
from advsim.bounds._heuristic import (
    heuristic_delta,
    heuristic_epsilon,
    heuristic_epsilon_max_over_steps,
)
from advsim.bounds._shifted_interpolation import REFERENCE as _SI_REFERENCE
from advsim.bounds._shifted_interpolation import shifted_interpolation_bound

__all__ = [
    "Composition",
    "FullBatchGDP",
    "HeuristicMaxOverSteps",
    "LastIterateHeuristic",
    "ShiftedInterpolation",
]


class LastIterateHeuristic(AbstractBound):
    r"""The last-iterate heuristic: $\mathrm{Binomial}(n, q) + \mathcal N(0, T\sigma^2)$
    against $\mathcal N(0, T\sigma^2)$ (with a schedule, its weighted form), an upper bound
    for linear losses (Theorem 1 of arXiv:2410.06186). Beyond linear losses it is a
    heuristic, which counterexamples break; this value refuses them."""

    assumptions = (Linear(),)
    reference = "Annamalai et al., arXiv:2410.06186, Theorem 1 (heuristic_epsilon)"

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return heuristic_epsilon(delta, facts.accounting)

    def delta_value(self, facts: ProcessFacts, epsilon: float) -> float:
        return heuristic_delta(epsilon, facts.accounting)


class HeuristicMaxOverSteps(AbstractBound):
    r"""$\max_{t \le T}$ of the heuristic (`heuristic_epsilon_max_over_steps`), the
    benchmark of Section 4.1 of arXiv:2410.06186; at least the heuristic at $T$, so an
    upper bound under the same assumption, with one learning rate."""

    assumptions = (Linear(), ConstantStepSize())
    reference = "Annamalai et al., arXiv:2410.06186, Section 4.1 and Theorem 1"

    def value(self, facts: ProcessFacts, delta: float) -> float:
        acc = facts.accounting
        if acc.num_canary_steps != acc.steps:
            # The benchmark is stated for the canary at every step; at fewer steps the
            # heuristic over its own steps (t = T) is the bound.
            return heuristic_epsilon(delta, acc)
        return heuristic_epsilon_max_over_steps(
            delta, acc.steps, acc.sampling_prob, acc.noise_multiplier
        )


class Composition(AbstractBound):
    """Every iterate released: the PLD composition of the canary's subsampled Gaussian
    mechanisms (`composition_epsilon`). It assumes nothing of the losses."""

    assumptions = ()
    reference = (
        "every iterate released: composition of the canary's Poisson-subsampled Gaussian "
        "mechanisms (dp_accounting PLD)"
    )

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return composition_epsilon(delta, facts.accounting)

    def delta_value(self, facts: ProcessFacts, epsilon: float) -> float:
        return composition_delta(epsilon, facts.accounting)


class FullBatchGDP(AbstractBound):
    r"""Full-batch DP-GD: $\sqrt{T}/\sigma$-GDP (Corollary 3.3 of arXiv:1905.02383,
    `full_batch_epsilon` with $q = 1$), every iterate released."""

    assumptions = (FullBatch(),)
    reference = (
        "sqrt(T)/sigma-GDP of full-batch DP-GD, every iterate released: Dong, Roth and Su, "
        "arXiv:1905.02383, Corollary 3.3 (full_batch_epsilon)"
    )

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return full_batch_epsilon(delta, facts.accounting)


class ShiftedInterpolation(AbstractBound):
    r"""Projected full-batch DP-GD on convex, smooth, Lipschitz losses: $\mu$-GDP with
    $\mu_T = \min\{\sqrt T\,s/b, \sqrt{3Ds + s^2\lceil D/s\rceil}/b\}$
    (`shifted_interpolation_bound`; a non-zero regularizer counted as one more example,
    as `advsim.testing`'s `ConvexityCertificate` does)."""

    assumptions = (
        Convex(),
        Smooth(),
        LipschitzWithinClip(),
        RegularizerAsExample(),
        BoundedDomain(),
        FullBatch(),
        ConstantStepSize(),
        StepSizeAtMost(2.0, of="examples"),
    )
    reference = _SI_REFERENCE

    def value(self, facts: ProcessFacts, delta: float) -> float:
        n, lip, smooth = _with_regularizer(facts)
        return shifted_interpolation_bound(
            facts.steps,
            noise_multiplier=facts.noise_multiplier,
            clip_norm=facts.clip_norm,
            lipschitz=max(lip, 1e-300),
            smoothness=smooth,
            learning_rate=facts.learning_rate,
            num_examples=n,
            diameter=2.0 * facts.radius,
            delta=delta,
        ).epsilon


def _with_regularizer(facts: ProcessFacts) -> tuple[int, float, float]:
    """(n, G, M) with a non-zero regularizer counted as one more example."""
    n, lip, smooth = facts.num_examples, facts.lipschitz, facts.smoothness
    if not facts.regularizer_zero:
        n += 1
        lip = max(lip, facts.regularizer_lipschitz)
        smooth = max(smooth, facts.regularizer_smoothness)
    if not math.isfinite(smooth):
        raise ValueError("the smoothness must be finite")
    return n, lip, smooth

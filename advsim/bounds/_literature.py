r"""The literature's hidden-state bounds as `AbstractBound` values.

- `StronglyConvexGDP`: full-batch noisy GD on a strongly convex, smooth objective,
  $\mu_T = \mu_1\sqrt{(1 - c^T)(1 + c)/((1 - c)(1 + c^T))}$ (Bok, Su and Altschuler,
  arXiv:2403.00278; `strongly_convex_gdp_bound`).
- `ShiftedInterpolation` (in `advsim.bounds._instances`): their constrained convex case.
- `LangevinRDP`: full-batch noisy GD on a strongly convex, smooth objective, Renyi DP
  $\varepsilon_\alpha = 2\alpha s_1^2/(m\lambda\sigma^2C^2)(1 - e^{-\lambda m T/2})$
  (Chourasia, Ye and Shokri, arXiv:2102.05855; `langevin_epsilon`). Its theorem starts
  from a Gaussian draw; advsim's runs start at a fixed point, so on them the value is
  checked (`advsim.testing.check_bound`), not proved: its `kind` says so.

Not implemented, because the formula could not be recovered from what is reachable (the
papers' theorem text was not, and no code of the authors' prints it): Altschuler and
Talwar (arXiv:2205.13710; their abstract states the result up to a constant factor),
Chien and Li (arXiv:2410.01068; Holder gradients), Kong and Ribero (arXiv:2407.05237;
cyclic batches). Ye and Shokri's shuffled mini-batch bound (arXiv:2203.05363,
`noisy_sgd_epsilon`, from the authors' code) is a function only: its batches (shuffle and
partition, replace-one neighbours) are not a batching advsim's engine runs.

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
from advsim.bounds._langevin import REFERENCE as _LANGEVIN_REFERENCE
from advsim.bounds._langevin import langevin_epsilon
from advsim.bounds._strongly_convex import REFERENCE as _SC_REFERENCE
from advsim.bounds._strongly_convex import strongly_convex_gdp_bound

__all__ = ["LangevinRDP", "StronglyConvexGDP"]


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


class LangevinRDP(AbstractBound):
    r"""Full-batch noisy GD on an m-strongly convex, M-smooth objective (both worlds),
    $\lambda M < 1$, every gradient within C: the Renyi-DP curve of Chourasia, Ye and
    Shokri converted to $\varepsilon(\delta)$ (`langevin_epsilon`, add/remove
    neighbours)."""

    assumptions = (
        StronglyConvex(of="objective"),
        Smooth(),
        LipschitzWithinClip(),
        FullBatch(),
        ConstantStepSize(),
        StepSizeAtMost(1.0 - 1e-12, of="objective"),
    )
    reference = _LANGEVIN_REFERENCE
    kind = (
        "upper bound under its theorem's Gaussian start; from a fixed start (advsim's "
        "runs) checked, not proved"
    )

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return langevin_epsilon(
            delta,
            steps=facts.steps,
            noise_multiplier=facts.noise_multiplier,
            clip_norm=facts.clip_norm,
            lipschitz=max(facts.lipschitz, 1e-300),
            strong_convexity=facts.strong_convexity,
            smoothness=max(facts.objective_smoothness, facts.strong_convexity),
            learning_rate=facts.learning_rate,
            num_examples=facts.num_examples,
        )

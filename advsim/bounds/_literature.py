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


def _strongly_convex_gd(step_limit: float) -> tuple:
    """What both strongly convex full-batch bounds assume, up to their step-size limit.

    Args:
        step_limit: the theorem's strict limit on lr * M (M the objective's smoothness);
            the assumption checks lr * M <= step_limit * (1 - 1e-12).

    Returns:
        The assumptions: m-strongly convex and M-smooth objective, gradients within the
        clip norm, full batch, one constant step size, the step-size limit.
    """
    return (
        StronglyConvex(of="objective"),
        Smooth(),
        LipschitzWithinClip(),
        FullBatch(),
        ConstantStepSize(),
        StepSizeAtMost(step_limit * (1.0 - 1e-12), of="objective"),
    )


def _strongly_convex_run(facts: ProcessFacts) -> dict:
    """The keywords both strongly convex full-batch bounds take, read from `facts`.

    Args:
        facts: the process's constants.

    Returns:
        `steps`, `noise_multiplier`, `clip_norm`, `lipschitz` (kept above 0), the
        objective's `strong_convexity` and `smoothness` (at least the strong convexity),
        `learning_rate` and `num_examples`.
    """
    return dict(
        steps=facts.steps,
        noise_multiplier=facts.noise_multiplier,
        clip_norm=facts.clip_norm,
        lipschitz=max(facts.lipschitz, 1e-300),
        strong_convexity=facts.strong_convexity,
        smoothness=max(facts.objective_smoothness, facts.strong_convexity),
        learning_rate=facts.learning_rate,
        num_examples=facts.num_examples,
    )


class StronglyConvexGDP(AbstractBound):
    r"""Full-batch noisy GD on an m-strongly convex, M-smooth objective $F$ (in both
    worlds), every example's gradient within C: $\mu_T$-GDP with
    $c = \max\{|1 - \lambda m|, |1 - \lambda M|\}$, $\mu_1 = G/(\sigma C)$
    (`strongly_convex_gdp_bound`, add/remove neighbours). A projection after each step
    is allowed (it is non-expansive)."""

    assumptions = _strongly_convex_gd(step_limit=2.0)
    reference = _SC_REFERENCE

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return strongly_convex_gdp_bound(**_strongly_convex_run(facts), delta=delta).epsilon


class LangevinRDP(AbstractBound):
    r"""Full-batch noisy GD on an m-strongly convex, M-smooth objective (both worlds),
    $\lambda M < 1$, every gradient within C: the Renyi-DP curve of Chourasia, Ye and
    Shokri converted to $\varepsilon(\delta)$ (`langevin_epsilon`, add/remove
    neighbours)."""

    assumptions = _strongly_convex_gd(step_limit=1.0)
    reference = _LANGEVIN_REFERENCE
    kind = (
        "upper bound under its theorem's Gaussian start; from a fixed start (advsim's "
        "runs) checked, not proved"
    )

    def value(self, facts: ProcessFacts, delta: float) -> float:
        return langevin_epsilon(delta, **_strongly_convex_run(facts))

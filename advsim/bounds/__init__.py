r"""Privacy bounds for DP-SGD: the last-iterate heuristic, composition, full batch, GDP.

Everything here is numpy/scipy on the host, float64, computed in log space.

- `heuristic_*`: Theorem 1 of arXiv:2410.06186 (linear losses, only the last iterate
  released): $P = \mathrm{Binomial}(n, q) + \mathcal{N}(0, T\sigma^2)$ against
  $Q = \mathcal{N}(0, T\sigma^2)$.
- `mixture_*`: the same exact computation for any $\mathcal{N}(X, s^2)$ against
  $\mathcal{N}(0, s^2)$ with $X \ge 0$ finite (e.g. the quadratic-regularizer example of
  Section 4.2 there).
- `composition_*`, `calibrate_noise_multiplier` (`calibrate_noise_multipliers`: several
  horizons at once): every iterate released, by dp_accounting's PLD accountant.
- `gdp_*`, `full_batch_epsilon`: Gaussian DP (Corollary 2.13 of arXiv:1905.02383) and
  full-batch DP-GD (Appendix B of arXiv:2410.06186).
- `composition_tradeoff_curve`, `linear_loss_tradeoff`, `gdp_tradeoff`: trade-off curves
  (type-II error against type-I error) of composition (PLD), the linear-loss last
  iterate and GDP, for the trade-off audit of Annamalai (2024, "It's Our Loss").
- `two_step_*`: the exact law of the threshold landscape's last model at T = 2 in closed
  form (Section 6 of arXiv:2405.14457; `advsim.mechanisms.ThresholdLandscape`; at any T,
  `advsim.exact`); `hockey_stick_epsilon` of two discrete laws.
- `quadratic_law`, `quadratic_exact_epsilon`: the exact law and epsilon of the last model
  under a quadratic regularizer (Section 4.2 of arXiv:2410.06186;
  `advsim.mechanisms.QuadraticRegularizer`).
- `bounds_for`: the three reference epsilons of an `advsim.Accounting`.
- `shifted_interpolation_*`: a rigorous hidden-state bound for projected full-batch DP-GD
  on a convex, Lipschitz, smooth loss (Bok, Su and Altschuler, arXiv:2403.00278), with
  its assumptions named in the result.
- `strongly_convex_gdp_*` (Bok, Su and Altschuler), `langevin_*` (Chourasia, Ye and
  Shokri) and `noisy_sgd_*` (Ye and Shokri's shuffled mini-batches): hidden-state bounds
  for noisy GD on a strongly convex, smooth objective; each reads one setting, a
  `StronglyConvexRun`. They and `shifted_interpolation_bound` return a
  `HiddenStateBound` (the epsilon at a delta, the assumptions, the source) with their own
  values.
- `*_curve_lower` (`LowerCurve`): trade-off curves of the heuristic, its maximum over
  horizons, composition and GDP that are never above the exact ones, for certifying a
  violation (`advsim.audits.certify_violation`).

**A bound is a value plus what it assumes.** `AbstractBound` (with `Assumption` values
such as `Convex`, `StronglyConvex`, `Smooth`, `LipschitzWithinClip`, `HolderGradients`,
`BoundedDomain`, `FullBatch`, `PoissonBatches`, `CyclicBatches`, `ConstantStepSize`,
`StepSizeAtMost`) takes a process and refuses one outside its assumptions
(`AssumptionError`, naming each that fails); `ProcessFacts` is what a process certifies.
Today's bounds are instances: `LastIterateHeuristic`, `HeuristicMaxOverSteps`,
`Composition`, `FullBatchGDP`, `ShiftedInterpolation`, and from the literature
`StronglyConvexGDP` (Bok, Su and Altschuler's strongly convex case) and `LangevinRDP`
(Chourasia, Ye and Shokri); `advsim.testing.check_bound`
checks any of them against the exact epsilon. `renyi_epsilon` converts a Renyi-DP curve.

The bounds of a DP-SGD run take either numbers, `heuristic_epsilon(delta, steps,
sampling_prob, noise_multiplier, canary_steps=n)`, or the record of the run,
`heuristic_epsilon(delta, mechanism.accounting())`. A record with a learning-rate schedule
(`Accounting.step_sizes`) gives the heuristic at that schedule ($\mathcal{N}(X, s^2)$ vs
$\mathcal{N}(0, s^2)$ with $X = \sum_t \eta_t b_t$, $s = \sigma\sqrt{\sum_t \eta_t^2}$);
composition and full batch do not depend on it; the bounds that assume one rate refuse it.
"""

from advsim.bounds._abstract import AbstractBound, AssumptionError
from advsim.bounds._assumptions import (
    Assumption,
    BoundedDomain,
    ConstantStepSize,
    Convex,
    CyclicBatches,
    FullBatch,
    HolderGradients,
    Linear,
    LipschitzWithinClip,
    PoissonBatches,
    ProcessFacts,
    RegularizerAsExample,
    Smooth,
    StepSizeAtMost,
    StronglyConvex,
    process_facts,
    run_facts,
)
from advsim.bounds._calibrate import calibrate_noise_multiplier, calibrate_noise_multipliers
from advsim.bounds._closed_form import HiddenStateBound
from advsim.bounds._composition import (
    bounds_for,
    composition_delta,
    composition_epsilon,
)
from advsim.bounds._gdp import full_batch_epsilon, gdp_delta, gdp_epsilon, gdp_mu
from advsim.bounds._heuristic import (
    binomial_mixture,
    heuristic_delta,
    heuristic_epsilon,
    heuristic_epsilon_curve,
    heuristic_epsilon_max_over_steps,
)
from advsim.bounds._instances import (
    Composition,
    FullBatchGDP,
    HeuristicMaxOverSteps,
    LastIterateHeuristic,
    ShiftedInterpolation,
)
from advsim.bounds._landscape import (
    ORIENTATIONS,
    hockey_stick_epsilon,
    two_step_density,
    two_step_epsilon,
    two_step_gdp_curve,
    two_step_tradeoff,
)
from advsim.bounds._langevin import (
    LangevinBound,
    chourasia_rdp,
    langevin_bound,
    langevin_epsilon,
    langevin_rdp,
)
from advsim.bounds._literature import LangevinRDP, StronglyConvexGDP
from advsim.bounds._mixture import (
    merge_atoms,
    mixture_delta,
    mixture_epsilon,
    mixture_log_likelihood_ratio,
    mixture_tradeoff,
)
from advsim.bounds._quadratic import quadratic_exact_epsilon, quadratic_law
from advsim.bounds._renyi import RENYI_ORDERS, renyi_epsilon
from advsim.bounds._run_checks import StronglyConvexRun
from advsim.bounds._shifted_interpolation import (
    ShiftedInterpolationBound,
    shifted_interpolation_bound,
    shifted_interpolation_epsilon,
)
from advsim.bounds._shuffled import noisy_sgd_epsilon, noisy_sgd_rdp, ye_shokri_rdp
from advsim.bounds._strongly_convex import (
    StronglyConvexGDPBound,
    contraction_gdp_mu,
    noisy_gd_strongly_convex_mu,
    strongly_convex_gdp_bound,
    strongly_convex_gdp_epsilon,
)
from advsim.bounds._tradeoff import (
    TRADEOFF_VDI,
    TradeoffCurve,
    composition_epsilon_from_pld,
    composition_pld,
    composition_tradeoff,
    composition_tradeoff_curve,
    gdp_tradeoff,
    linear_loss_tradeoff,
)
from advsim.bounds._violation_curves import (
    CURVE_MARGIN,
    LowerCurve,
    composition_curve_lower,
    gdp_curve_lower,
    heuristic_curve_lower,
    heuristic_max_over_steps_curve_lower,
    horizon_canary_counts,
)

__all__ = [
    "AbstractBound",
    "Assumption",
    "AssumptionError",
    "BoundedDomain",
    "Composition",
    "ConstantStepSize",
    "Convex",
    "CyclicBatches",
    "FullBatch",
    "FullBatchGDP",
    "HeuristicMaxOverSteps",
    "HolderGradients",
    "LastIterateHeuristic",
    "Linear",
    "LipschitzWithinClip",
    "PoissonBatches",
    "ProcessFacts",
    "RENYI_ORDERS",
    "RegularizerAsExample",
    "ShiftedInterpolation",
    "Smooth",
    "StepSizeAtMost",
    "StronglyConvex",
    "StronglyConvexGDP",
    "StronglyConvexGDPBound",
    "StronglyConvexRun",
    "LangevinBound",
    "HiddenStateBound",
    "LangevinRDP",
    "chourasia_rdp",
    "langevin_bound",
    "langevin_epsilon",
    "langevin_rdp",
    "noisy_sgd_epsilon",
    "noisy_sgd_rdp",
    "ye_shokri_rdp",
    "contraction_gdp_mu",
    "noisy_gd_strongly_convex_mu",
    "strongly_convex_gdp_bound",
    "strongly_convex_gdp_epsilon",
    "process_facts",
    "renyi_epsilon",
    "run_facts",
    "CURVE_MARGIN",
    "LowerCurve",
    "ORIENTATIONS",
    "ShiftedInterpolationBound",
    "TRADEOFF_VDI",
    "TradeoffCurve",
    "binomial_mixture",
    "bounds_for",
    "calibrate_noise_multiplier",
    "calibrate_noise_multipliers",
    "composition_delta",
    "composition_epsilon",
    "composition_curve_lower",
    "composition_epsilon_from_pld",
    "composition_pld",
    "composition_tradeoff",
    "composition_tradeoff_curve",
    "full_batch_epsilon",
    "gdp_curve_lower",
    "gdp_tradeoff",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "heuristic_curve_lower",
    "heuristic_delta",
    "heuristic_epsilon",
    "heuristic_epsilon_curve",
    "heuristic_epsilon_max_over_steps",
    "heuristic_max_over_steps_curve_lower",
    "hockey_stick_epsilon",
    "horizon_canary_counts",
    "linear_loss_tradeoff",
    "merge_atoms",
    "mixture_delta",
    "mixture_epsilon",
    "mixture_log_likelihood_ratio",
    "mixture_tradeoff",
    "quadratic_exact_epsilon",
    "quadratic_law",
    "shifted_interpolation_bound",
    "shifted_interpolation_epsilon",
    "two_step_density",
    "two_step_epsilon",
    "two_step_gdp_curve",
    "two_step_tradeoff",
]

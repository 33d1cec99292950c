r"""The exact privacy of the last model of a scalar DP-SGD construction.

When the model is a scalar and every gradient is a function of the current model value and
the step (`advsim.AbstractScalarLaw`), the last iterate is a one-dimensional Markov chain.
Its law in both worlds (canary in, canary out) is propagated on a grid, step by step, for
any gradient fields, and $\varepsilon(\delta)$, the privacy profile and the trade-off curve
of the last model are read off the two laws: the ground truth that audits and bounds are
read against. `last_iterate_epsilon` returns the value on three grids, each twice as fine,
so its numerical error is measured, not assumed (or, with a relative tolerance `rtol`, on as
few grids as reach it: at least two, at most `refinements`). Every T of a mechanism whose
methods do not read T runs in the same compiled programs.

- `last_iterate_epsilon`, `last_iterate_epsilons` (a batch vmapped in one call),
  `ExactEpsilon` (the result);
- `grid_epsilon`, `grid_delta`: privacy of two laws sampled on the nodes of a grid (the
  threshold cell integrated by interpolation);
- `discrete_epsilon`, `discrete_privacy_profile`, `discrete_tradeoff`: privacy of two
  discrete laws on the same cells;
- `FixedGridEpsilon`: the value on one fixed grid as a jittable, differentiable function of
  the construction (for searches over a family of constructions);
- `check_scalar_law` (whether a mechanism has what the engine needs) and `grid_work` (the
  coarsest grid's nodes x steps x count components, known before any work);
- `grid_reach` (the model values the grid spans) and `undeclared_jumps` (the jumps of
  the fields that `field_breakpoints()` leaves out, which the engine warns of with an
  `UndeclaredJumpWarning` before any work);
- `estimate_seconds` (a call's predicted wall time, before any work) and
  `ExactCostWarning` (warned before a call predicted to take more than a minute).

Beyond `resolution_limit(delta)` (20.7 at $\delta = 10^{-5}$), where the grid's masses
would be read off float64 rounding, the laws are propagated as log-masses instead
(`ExactEpsilon.log_space`), which resolves $\varepsilon$ up to 512.
"""

from advsim.exact import _api
from advsim.exact._api import *  # noqa: F403 (the public call and its result)
from advsim.exact._cost import ExactCostWarning, estimate_seconds
from advsim.exact._divergence import (
    discrete_epsilon,
    discrete_privacy_profile,
    discrete_tradeoff,
    grid_delta,
    grid_epsilon,
)
from advsim.exact._gradient import FixedGridEpsilon
from advsim.exact._jumps import UndeclaredJump, UndeclaredJumpWarning, undeclared_jumps
from advsim.exact._plan import check_scalar_law, grid_reach, grid_work

__all__ = [
    *_api.__all__,
    "ExactCostWarning",
    "FixedGridEpsilon",
    "UndeclaredJump",
    "UndeclaredJumpWarning",
    "check_scalar_law",
    "discrete_epsilon",
    "discrete_privacy_profile",
    "discrete_tradeoff",
    "estimate_seconds",
    "grid_delta",
    "grid_epsilon",
    "grid_reach",
    "grid_work",
    "undeclared_jumps",
]

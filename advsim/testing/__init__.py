r"""Property testing of privacy bounds and audits: hypothesis strategies and checks.

A researcher who proposes a bound (or a counterexample to one) states it as a property and
lets hypothesis search the parameter space for a violation:

- strategies for valid DP-SGD parameters (`dpsgd_params`, a `DrawnDPSGDParams` record, and one
  strategy per field: `steps`, `sampling_probs`, `noise_multipliers`, `deltas`,
  `epsilons`, `clip_norms`, `batch_sizes`, `alphas`, `periods`), for Gaussian location
  mixtures (`mixtures`, a `Mixture` record) and for built mechanisms
  (`linear_mechanisms`);
- checks that fail with a readable report: `assert_bound_below` (one bound never exceeds
  another), `assert_monotone`, `assert_audit_below` (simulate, audit, and compare the
  audit's lower bound with an upper bound, naming the seed to replay);
- `calibration_fraction`: repeat an audit on independent score sets with a known truth
  (`gaussian_sampler`, `mixture_sampler`, `simulation_sampler`) and measure how often its
  lower bound exceeds the truth, with a Clopper-Pearson interval (`Calibration`);
- random scalar constructions with a ground truth (`advsim.exact` computes the exact
  epsilon of their last model): `ScalarField` (a parametric gradient field, from the
  fields-as-data vocabulary `advsim.mechanisms.fields`),
  `ScalarFieldConstruction` / `ProjectedScalarFieldConstruction` (the run), strategies
  that meet a bound's assumptions (`linear_constructions`: the last-iterate heuristic,
  Theorem 1 of arXiv:2410.06186; `convex_constructions`: the shifted-interpolation bound,
  arXiv:2403.00278; `scalar_constructions`: any field, composition), `scalar_fields`,
  `construction_batches` (batches for one vmapped exact call), the check
  `assert_exact_below` and the Neyman-Pearson adversary `ExactLikelihoodScore`;
- the contract every mechanism and adversary satisfies, as checks to run on a user's own
  class: `check_mechanism` (shapes, the engine's clipping to lr * C, accounting, one
  compiled program for every T (`steps_readers` names the methods that read T), no float
  field that jit treats as static (a warning, `advsim.sweep.RecompileWarning`, naming the
  field and the fix), determinism, finite scores, chunk-size invariance) and
  `check_adversary` (craft, shapes,
  one scalar score per run, determinism, finite scores, the sign: higher means "canary
  in"), which raise an AssertionError naming the check that failed (`MECHANISM_CHECKS`,
  `ADVERSARY_CHECKS` and `SIGN_LEVEL` name the checks and the sign test's level);
- `check_bound(bound, examples=N)`: draws constructions meeting an
  `advsim.bounds.AbstractBound`'s declared assumptions (`constructions`, built to have
  each property), compares the bound with each exact epsilon, raises `BoundViolation`
  with a shrunk counterexample saved to a file (`load_construction` replays it) and
  reports the tightness (`BoundCheck`);
- `SETTINGS`, the hypothesis profile registered as `PROFILE = "advsim"` (derandomized, no
  deadline, no example database), so a property explores the same examples in every run.
  Importing this module registers the profile but loads nothing: use it explicitly,
  `@settings(SETTINGS, max_examples=30)`.

Needs `hypothesis` (`pip install "advsim[test]"`).

Example:
    >>> from hypothesis import given, settings
    >>> from advsim.bounds import composition_epsilon, heuristic_epsilon
    >>> from advsim.testing import SETTINGS, assert_bound_below, dpsgd_params
    >>> @settings(SETTINGS, max_examples=5)
    ... @given(dpsgd_params(steps=(1, 20), noise_multiplier=(0.5, 5.0)))
    ... def test_heuristic_below_composition(p):
    ...     assert_bound_below(heuristic_epsilon, composition_epsilon, p, rtol=1e-9)
    >>> test_heuristic_below_composition()
"""

try:
    import hypothesis  # noqa: F401
except ImportError as err:  # pragma: no cover - only without the test extras
    raise ImportError(
        'advsim.testing needs hypothesis: pip install "advsim[test]" (or pip install hypothesis)'
    ) from err

from advsim._simulate import steps_readers
from advsim.testing._check_bound import BoundCheck, BoundViolation, check_bound
from advsim.testing._checks import (
    Calibration,
    assert_audit_below,
    assert_bound_below,
    assert_monotone,
    calibration_fraction,
    clopper_pearson_interval,
    gaussian_sampler,
    mixture_sampler,
    simulation_sampler,
)
from advsim.testing._construction_files import (
    construction_to_dict,
    load_construction,
    save_construction,
)
from advsim.testing._contract import (
    ADVERSARY_CHECKS,
    MECHANISM_CHECKS,
    SIGN_LEVEL,
    check_adversary,
    check_mechanism,
)
from advsim.testing._drawn import constructions
from advsim.testing._exact import (
    ExactLikelihoodScore,
    RunRanges,
    assert_exact_below,
    construction_batches,
    convex_constructions,
    linear_constructions,
    scalar_constructions,
    scalar_fields,
)
from advsim.testing._fields import (
    ConvexityCertificate,
    ProjectedScalarFieldConstruction,
    ScalarField,
    ScalarFieldConstruction,
)
from advsim.testing._strategies import (
    PROFILE,
    SETTINGS,
    DrawnDPSGDParams,
    Mixture,
    alphas,
    batch_sizes,
    clip_norms,
    deltas,
    dpsgd_params,
    epsilons,
    linear_mechanisms,
    mixtures,
    noise_multipliers,
    periods,
    sampling_probs,
    steps,
)

__all__ = [
    "BoundCheck",
    "BoundViolation",
    "check_bound",
    "construction_to_dict",
    "constructions",
    "load_construction",
    "save_construction",
    "ADVERSARY_CHECKS",
    "MECHANISM_CHECKS",
    "PROFILE",
    "SETTINGS",
    "SIGN_LEVEL",
    "Calibration",
    "ConvexityCertificate",
    "DrawnDPSGDParams",
    "ExactLikelihoodScore",
    "Mixture",
    "ProjectedScalarFieldConstruction",
    "ScalarField",
    "RunRanges",
    "ScalarFieldConstruction",
    "alphas",
    "assert_audit_below",
    "assert_bound_below",
    "assert_exact_below",
    "assert_monotone",
    "batch_sizes",
    "calibration_fraction",
    "check_adversary",
    "check_mechanism",
    "clip_norms",
    "clopper_pearson_interval",
    "construction_batches",
    "convex_constructions",
    "deltas",
    "dpsgd_params",
    "epsilons",
    "gaussian_sampler",
    "linear_constructions",
    "linear_mechanisms",
    "mixture_sampler",
    "mixtures",
    "noise_multipliers",
    "periods",
    "sampling_probs",
    "scalar_constructions",
    "scalar_fields",
    "simulation_sampler",
    "steps",
    "steps_readers",
]

"""Score sets in, epsilon out: empirical privacy auditing of simulated runs.

Every audit returns an `AuditResult` whose `guarantee` (`Guarantee`) says what its
`eps_lower` certifies, the assumption it needs and whether the threshold was held out;
`rigorous` is true only for an assumption-free, held-out bound. The methods:

- `EpsDeltaAudit` (`"eps_delta"`): eps straight from the (eps, delta)-DP inequalities of
  one threshold test; assumes nothing (rigorous). `audit`'s default method, at its default
  delta = 0 (pure DP): `audit(in_scores, out_scores)` assumes nothing.
- `TradeoffAudit` (`"tradeoff"`, Algorithm 2 of Annamalai 2024, "It's Our Loss"): the same
  (eps, delta) statement from held-out witnesses chosen against composition's trade-off
  curves (rigorous); the composition curve the rates violate is reported as an index.
- `GaussianDPAudit` (`"gdp"`): a lower bound on the GDP parameter mu (assumption-free),
  converted to eps assuming the trade-off curve is Gaussian (Nasr et al. 2023,
  arXiv:2302.07956; Dong, Roth & Su, arXiv:1905.02383).
- `HeuristicFamilyAudit` (`"family"`): an upper bound on the noise multiplier assuming the
  run is in the last-iterate heuristic's family, reported as its heuristic eps (Steinke et
  al., arXiv:2410.06186, Section 3.1).

The GDP and family audits test their assumption on the held-out runs
(`check_gaussian_tradeoff`, `check_heuristic_family`) and warn
(`AssumptionRejectedWarning`) when it fails. `certify_violation` certifies, assuming
nothing, that a release's trade-off curve lies below a bound's (the heuristic's,
composition's, GDP's): what a counterexample claim needs.

The threshold is chosen by a strategy (`ThresholdStrategy`), passed to `audit` as a value
or its alias: `BySampleSize()` (`"by_sample_size"`, `audit`'s default: `RankSplit()` from 3
scores per world, else `Split()`, the best rigorous strategy measured at each size,
`advsim figure threshold_vs_jax_privacy`), `Split(fraction)` (`"split"`: one threshold
chosen on a random share of each world, counted on the rest), `RankSplit(fraction)`
(`"rank_split"`: up to two tests planned on 10% of the runs, placed at ranks of the
counting part), `ProjectedSplit(fraction)` (`"projected_split"`), `MultiSplit`
(`"multi_split"`: lower median of split bounds at level alpha / 2), all held out;
`Explicit(threshold, chosen_in_advance=...)` (`"explicit"`; held out only when declared
fixed in advance), `Bonferroni()` (`"bonferroni"`: every threshold at level alpha / K; not
held out) and `Same()` (`"same"`: the papers' practice, marked optimistic). A strategy of
your own subclasses `ThresholdStrategy` and is named by its class path.

`bayesian_estimate` / `bayesian_audit` (Zanella-Beguelin et al. 2023) give a credible
interval for eps (`BayesianEstimate`, Jeffreys priors): a statement about a posterior, not
a confidence bound, so it has no `eps_lower` and is never `rigorous`.

`one_run_audit(scores, included, delta=...)` (Steinke, Nasr & Jagielski 2023) audits one
training run from m canaries' scores and inclusion bits (`OneRunResult`); its guarantee
says how k+ and k- were chosen; `one_run_fdp_audit` (Mahloujifar, Melis & Chaudhuri 2024)
rejects a trade-off claim from the same guesses: G_mu (`mu_lower`, assumption-free; its
eps assumes the curve is Gaussian) or, with `bound=` and the run's `accounting`, the
heuristic's or composition's curve (`sigma_star`: the run is not f-DP for that curve at
any noise multiplier >= sigma_star, assumption-free).

- Metrics papers report beside epsilon, each a labelled `Metric`:
  `tpr_at_fpr` (Carlini et al. 2022), `auroc` (Mann-Whitney) and `balanced_accuracy`
  (empirical values, not bounds); `eps_from_counts` (the (eps, delta) lower bound of one
  test's counts, Clopper-Pearson); `bootstrap_interval` (a `MetricEstimate`: an
  approximate percentile-bootstrap interval, not a bound).
"""

from ._api import (
    AUDIT_METHODS,
    AUDITS,
    DEFAULT_DELTA,
    DEFAULT_METHOD,
    DEFAULT_THRESHOLD_SELECTION,
    SIDES,
    THRESHOLD_SELECTIONS,
    audit,
    get_audit,
)
from ._assumption import AssumptionCheck, check_tradeoff_fit
from ._assumption_families import check_gaussian_tradeoff, check_heuristic_family
from ._base import (
    AbstractAssumedAudit,
    AbstractAudit,
    AbstractThresholdAudit,
    AssumptionRejectedWarning,
    ScoreOrientationWarning,
    draw_seed,
)
from ._bayes import BayesianEstimate, bayesian_audit, bayesian_estimate, posterior_eps_cdf
from ._bootstrap import bootstrap_interval
from ._certify import VIOLATION_BOUNDS, ViolationCertificate, certify_violation
from ._eps_delta import EpsDeltaAudit, eps_delta_terms
from ._family import HeuristicFamilyAudit
from ._gdp import GaussianDPAudit
from ._guarantee import ASSUMPTIONS, STATEMENTS, Guarantee
from ._metrics import (
    Metric,
    MetricEstimate,
    auroc,
    balanced_accuracy,
    eps_from_counts,
    tpr_at_fpr,
)
from ._one_run import (
    COIN_TEST_LEVEL,
    K_SELECTIONS,
    OneRunResult,
    default_k_candidates,
    one_run_audit,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)
from ._one_run_fdp import (
    FDP_BOUNDS,
    fdp_one_run_margin,
    gdp_one_run_rejects,
    one_run_fdp_audit,
    one_run_gdp_mu,
)
from ._one_run_order import (
    OrderAuditResult,
    ScoreProfile,
    channel_epsilon,
    expected_mistakes,
    gaussian_channel,
    one_run_order_audit,
    one_run_order_epsilon,
    order_tail_probability,
    subsampled_gaussian_channel,
)
from ._result import AuditResult
from ._strategy_values import (
    Bonferroni,
    BySampleSize,
    Explicit,
    MultiSplit,
    ProjectedSplit,
    RankSplit,
    Same,
    Split,
    ThresholdStrategy,
    as_threshold_strategy,
)
from ._streaming import DEFAULT_NUM_TESTS, TestPlan, counts_audit, fixed_tests, plan_tests
from ._threshold import candidate_thresholds, clopper_pearson_upper, counts_at, split_halves
from ._tradeoff import PAPER_EPS_GRID, TradeoffAudit, observed_tradeoff, tradeoff_audit

__all__ = [
    "ASSUMPTIONS",
    "AUDITS",
    "AUDIT_METHODS",
    "AbstractAssumedAudit",
    "AbstractAudit",
    "AbstractThresholdAudit",
    "AssumptionCheck",
    "AssumptionRejectedWarning",
    "AuditResult",
    "BayesianEstimate",
    "Bonferroni",
    "BySampleSize",
    "COIN_TEST_LEVEL",
    "DEFAULT_DELTA",
    "DEFAULT_METHOD",
    "DEFAULT_NUM_TESTS",
    "DEFAULT_THRESHOLD_SELECTION",
    "EpsDeltaAudit",
    "Explicit",
    "FDP_BOUNDS",
    "GaussianDPAudit",
    "Guarantee",
    "HeuristicFamilyAudit",
    "K_SELECTIONS",
    "Metric",
    "MetricEstimate",
    "MultiSplit",
    "OneRunResult",
    "OrderAuditResult",
    "PAPER_EPS_GRID",
    "ProjectedSplit",
    "RankSplit",
    "SIDES",
    "STATEMENTS",
    "Same",
    "ScoreOrientationWarning",
    "ScoreProfile",
    "Split",
    "THRESHOLD_SELECTIONS",
    "TestPlan",
    "ThresholdStrategy",
    "TradeoffAudit",
    "VIOLATION_BOUNDS",
    "ViolationCertificate",
    "as_threshold_strategy",
    "audit",
    "auroc",
    "balanced_accuracy",
    "bayesian_audit",
    "bayesian_estimate",
    "bootstrap_interval",
    "candidate_thresholds",
    "certify_violation",
    "channel_epsilon",
    "check_gaussian_tradeoff",
    "check_heuristic_family",
    "check_tradeoff_fit",
    "clopper_pearson_upper",
    "counts_at",
    "counts_audit",
    "default_k_candidates",
    "draw_seed",
    "eps_delta_terms",
    "eps_from_counts",
    "expected_mistakes",
    "fdp_one_run_margin",
    "fixed_tests",
    "gaussian_channel",
    "gdp_one_run_rejects",
    "get_audit",
    "observed_tradeoff",
    "one_run_audit",
    "one_run_epsilon",
    "one_run_fdp_audit",
    "one_run_gdp_mu",
    "one_run_guesses",
    "one_run_order_audit",
    "one_run_order_epsilon",
    "one_run_p_value",
    "order_tail_probability",
    "plan_tests",
    "posterior_eps_cdf",
    "split_halves",
    "subsampled_gaussian_channel",
    "tpr_at_fpr",
    "tradeoff_audit",
]

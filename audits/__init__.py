"""Score sets in, epsilon out: empirical privacy auditing of simulated runs.

Every audit here reads one threshold test ("canary in" iff `score >= tau`) and bounds its
false-positive and false-negative rates with one-sided Clopper-Pearson intervals (joint
confidence `confidence`). The methods differ in the privacy statement they read off:

- `GaussianDPAudit` (`"gdp"`): a lower bound on the GDP parameter mu, converted to eps
  (Nasr et al. 2023, arXiv:2302.07956; Dong, Roth & Su, arXiv:1905.02383).
- `EpsDeltaAudit` (`"eps_delta"`): eps straight from the (eps, delta)-DP inequalities;
  assumes nothing about the mechanism.
- `HeuristicFamilyAudit` (`"family"`): an upper bound on the noise multiplier within the
  last-iterate heuristic's family, reported as its heuristic eps (Steinke et al.,
  arXiv:2410.06186, Section 3.1).

`TradeoffAudit` (Algorithm 2 of Annamalai 2024, "It's Our Loss") instead compares the
whole observed FPR-FNR curve with the trade-off curves of DP-SGD with composition on a grid
of epsilons; its `eps_point` is the paper's estimate, its `eps_lower` a held-out
Clopper-Pearson bound.

With `threshold_selection="split"` (default) the threshold is chosen on half the runs and
the rates counted on the other half, so `eps_lower` is a rigorous bound under the
method's assumption; `"same"` reproduces the papers' practice and is marked optimistic.
"""

from ._api import AUDIT_METHODS, AUDITS, audit, get_audit
from ._base import AbstractAudit, AbstractThresholdAudit, AssumptionRejectedWarning
from ._certify import VIOLATION_BOUNDS, ViolationCertificate, certify_violation
from ._eps_delta import EpsDeltaAudit
from ._family import HeuristicFamilyAudit
from ._gdp import GaussianDPAudit
from ._guarantee import ASSUMPTIONS, STATEMENTS, Guarantee
from ._result import AuditResult
from ._tradeoff import PAPER_EPS_GRID, TradeoffAudit, observed_tradeoff, tradeoff_audit

__all__ = [
    "ASSUMPTIONS",
    "AUDITS",
    "AUDIT_METHODS",
    "AbstractAudit",
    "AbstractThresholdAudit",
    "AssumptionRejectedWarning",
    "AuditResult",
    "EpsDeltaAudit",
    "GaussianDPAudit",
    "Guarantee",
    "HeuristicFamilyAudit",
    "PAPER_EPS_GRID",
    "STATEMENTS",
    "TradeoffAudit",
    "VIOLATION_BOUNDS",
    "ViolationCertificate",
    "audit",
    "certify_violation",
    "get_audit",
    "observed_tradeoff",
    "tradeoff_audit",
]

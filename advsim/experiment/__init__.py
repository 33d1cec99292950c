"""One audit end to end: simulate both worlds, audit the scores, read the bounds beside it.

`run_audit` is the unit every driver uses (the sweep runner, and through it the `advsim
audit` command and the figures): it returns one flat record with the parameters, the
empirical epsilon (a lower bound at the stated confidence and a point estimate) and the
heuristic, composition and full-batch bounds computed from `mechanism.accounting()` of
the mechanism actually run. `run_threshold_search` is the experiment loop of Algorithm 5
of arXiv:2405.14457 (one audit per threshold of an `advsim.adversaries.ThresholdSearch`,
the best kept).

Where the mechanism has the capability (`advsim.AbstractScalarLaw`: a scalar model whose
gradients are functions of (m, t)), `run_audit(..., exact=True)` also reads the exact
epsilon(delta) of the last model (`advsim.exact.last_iterate_epsilon`) beside the bounds:
`exact_columns` gives those columns for any mechanism (empty, with the reason, where it
lacks the capability), each distinct mechanism computed once per process.

`run_audit(..., streaming=True)` audits the cell by `advsim.streaming.audit_streaming`
instead: a pilot of its own plans up to 6 threshold tests, the main run of `trials` runs
per world is only counted (memory independent of `trials`), and `eps_lower` is the
assumption-free (eps, delta) bound, held out by construction.
"""

from advsim._audit_record import AuditRecord, record_columns
from advsim._exact_columns import (
    EXACT_COLUMNS,
    EXACT_MAX_WORK,
    EXACT_REFINEMENTS,
    EXACT_RTOL,
    exact_columns,
)
from advsim.experiment._run_audit import (
    DEFAULT_STEPS,
    STREAMING,
    check_streaming_options,
    default_audit_method,
    run_audit,
)
from advsim.experiment._threshold_search import (
    ThresholdSearchResult,
    run_threshold_search,
    threshold_search,
)

__all__ = [
    "EXACT_COLUMNS",
    "EXACT_MAX_WORK",
    "EXACT_REFINEMENTS",
    "EXACT_RTOL",
    "STREAMING",
    "AuditRecord",
    "DEFAULT_STEPS",
    "ThresholdSearchResult",
    "check_streaming_options",
    "exact_columns",
    "record_columns",
    "default_audit_method",
    "run_audit",
    "run_threshold_search",
    "threshold_search",
]

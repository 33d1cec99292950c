"""advsim: simulate and audit DP-SGD when only the last model is released.

The flow (see the README): a mechanism (one DP-SGD run, `advsim.mechanisms`) and an
adversary (`advsim.adversaries`) go through `simulate`, which returns the scores of both
worlds; an audit (`advsim.audits`) turns them into an empirical epsilon, read beside the
heuristic, composition and full-batch bounds (`advsim.bounds`, re-exported here).

A new mechanism or adversary is built from the names here (the bases, their capabilities,
`DPSGDParams`, `clip_gradients`, ...) and the constructor checks of `advsim.validation`.
"""

from advsim._accounting import Accounting
from advsim._adversary import AbstractAdversary
from advsim._dpsgd import bernoulli_from_bits, clip_gradients, dpsgd_update, run_mechanism
from advsim._mechanism import (
    AbstractCanaryExample,
    AbstractCoordinateLaws,
    AbstractDirectedCanary,
    AbstractMechanism,
    AbstractMultiCanary,
    AbstractPerExampleData,
    AbstractProjected,
    AbstractProjectionLaw,
    AbstractScalarLaw,
    AbstractSumEncoding,
    AbstractThresholdLandscape,
    CanarySchedule,
    DPSGDOptions,
    DPSGDParams,
    poisson_batch_bound,
)
from advsim._scores import NonFiniteScoresError, Scores
from advsim._simulate import block_size, default_chunk_size, simulate

__version__ = "0.1.0"

__all__ = [
    "AbstractAdversary",
    "AbstractCanaryExample",
    "AbstractCoordinateLaws",
    "AbstractDirectedCanary",
    "AbstractMechanism",
    "AbstractMultiCanary",
    "AbstractPerExampleData",
    "AbstractProjected",
    "AbstractProjectionLaw",
    "AbstractScalarLaw",
    "AbstractSumEncoding",
    "AbstractThresholdLandscape",
    "Accounting",
    "CanarySchedule",
    "DPSGDOptions",
    "DPSGDParams",
    "NonFiniteScoresError",
    "Scores",
    "bernoulli_from_bits",
    "block_size",
    "clip_gradients",
    "default_chunk_size",
    "dpsgd_update",
    "poisson_batch_bound",
    "run_mechanism",
    "simulate",
]

"""Mechanisms: one file per construction; a new counterexample is a new file here.

The real models are split by role: `datasets` (the bundled data), `networks` (the equinox
models on a flat vector), `real_models` (the two mechanisms) and `accuracy` (the test
accuracy reported beside an audit).
"""

from advsim.bounds import (  # the exact laws of ThresholdLandscape's release
    two_step_density,
    two_step_epsilon,
    two_step_gdp_curve,
)
from advsim.mechanisms.accuracy import accuracy_report, heldout_accuracy
from advsim.mechanisms.datasets import load_dataset
from advsim.mechanisms.gradient_canary import GradientCanary, logistic_dataset
from advsim.mechanisms.history import HistoryRegularizer, history_epsilon
from advsim.mechanisms.landscape import (
    ThresholdLandscape,
    landscape_epsilon,
    landscape_epsilon_curve,
    landscape_law,
)
from advsim.mechanisms.likelihood_encoding import LikelihoodEncodingLoss
from advsim.mechanisms.linear import LinearProcess
from advsim.mechanisms.one_run import OneRunGradientCanaries
from advsim.mechanisms.projected import ProjectedLinearCanary
from advsim.mechanisms.real_models import RealModelGradientCanary, RealModelInputCanary
from advsim.mechanisms.regularizers import (
    QuadraticRegularizer,
    ZeroingRegularizer,
    nonmonotone_heuristic_parameters,
    quadratic_exact_epsilon,
)
from advsim.mechanisms.repeaters import MaliciousRepeaters, repeaters_epsilon

__all__ = ["LinearProcess"]
__all__ += [
    "GradientCanary",
    "HistoryRegularizer",
    "LikelihoodEncodingLoss",
    "MaliciousRepeaters",
    "QuadraticRegularizer",
    "ZeroingRegularizer",
    "history_epsilon",
    "logistic_dataset",
    "nonmonotone_heuristic_parameters",
    "quadratic_exact_epsilon",
    "repeaters_epsilon",
]
__all__ += ["OneRunGradientCanaries"]
__all__ += ["ProjectedLinearCanary"]
__all__ += ["ThresholdLandscape", "landscape_epsilon", "landscape_epsilon_curve", "landscape_law"]
__all__ += ["two_step_density", "two_step_epsilon", "two_step_gdp_curve"]
__all__ += ["RealModelGradientCanary", "RealModelInputCanary"]
__all__ += ["accuracy_report", "heldout_accuracy", "load_dataset"]

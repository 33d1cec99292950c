"""Mechanisms: one file per construction; a new counterexample is a new file here."""

from advsim.mechanisms.history import HistoryRegularizer, history_epsilon
from advsim.mechanisms.linear import LinearProcess
from advsim.mechanisms.regularizers import (
    QuadraticRegularizer,
    ZeroingRegularizer,
    nonmonotone_heuristic_parameters,
    quadratic_exact_epsilon,
)
from advsim.mechanisms.repeaters import MaliciousRepeaters, repeaters_epsilon

__all__ = ["LinearProcess"]
__all__ += [
    "HistoryRegularizer",
    "MaliciousRepeaters",
    "QuadraticRegularizer",
    "ZeroingRegularizer",
    "history_epsilon",
    "nonmonotone_heuristic_parameters",
    "quadratic_exact_epsilon",
    "repeaters_epsilon",
]

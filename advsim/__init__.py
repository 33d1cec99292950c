"""advsim: simulate and audit DP-SGD when only the last model is released."""

from advsim._accounting import Accounting
from advsim._scores import NonFiniteScoresError, Scores

__version__ = "0.1.0"

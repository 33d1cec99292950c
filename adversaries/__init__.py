"""Adversaries: one file per family (projection / likelihood-ratio scores, canaries, ...)."""

from advsim.adversaries.gradient_canary import (
    BiasedCoordinate,
    RandomDirection,
    SimulatedBiasedDimension,
)
from advsim.adversaries.history import CoordinateLikelihoodRatio
from advsim.adversaries.landscape import ThresholdAdversary, ThresholdSearch
from advsim.adversaries.likelihood_encoding import LikelihoodSumDecoder
from advsim.adversaries.projection import LikelihoodRatioScore, ProjectionScore
from advsim.adversaries.real_models import CanaryGradientProjection, CanaryLoss
from advsim.adversaries.repeaters import RepeaterDecoder

__all__ = ["LikelihoodRatioScore", "ProjectionScore"]
__all__ += ["CoordinateLikelihoodRatio", "RepeaterDecoder"]
__all__ += ["LikelihoodSumDecoder"]
__all__ += ["ThresholdAdversary", "ThresholdSearch"]
__all__ += ["BiasedCoordinate", "RandomDirection", "SimulatedBiasedDimension"]
__all__ += ["CanaryGradientProjection", "CanaryLoss"]

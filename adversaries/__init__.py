"""Adversaries: one file per family (projection / likelihood-ratio scores, canaries, ...)."""

from advsim.adversaries.history import CoordinateLikelihoodRatio
from advsim.adversaries.projection import LikelihoodRatioScore, ProjectionScore
from advsim.adversaries.repeaters import RepeaterDecoder

__all__ = ["LikelihoodRatioScore", "ProjectionScore"]
__all__ += ["CoordinateLikelihoodRatio", "RepeaterDecoder"]

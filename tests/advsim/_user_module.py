"""A user's own mechanism and adversary, as the text of a module of their own.

The tests that use it write it to a temporary folder and name its classes by path
(`module:Class`), as a user outside the repository would; nothing in the repository imports
it. `Cubic` is a scalar DP-SGD run on the loss -C m plus a restoring force alpha m^3 (alpha
traced: a sweep over it compiles once; no closed form: only the exact engine knows its last
model's epsilon), `LastValue` the adversary that scores the last model's value.
"""

USER_MODULE = """
from typing import Unpack

import jax.numpy as jnp
import numpy as np

import advsim
from advsim.validation import as_traced_float, check_nonnegative


class Cubic(advsim.AbstractScalarLaw):
    params: advsim.DPSGDParams
    alpha: np.ndarray

    def __init__(self, steps, sampling_prob, noise_multiplier, alpha=0.01,
                 **dpsgd: Unpack[advsim.DPSGDOptions]):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        self.alpha = as_traced_float("alpha", alpha, check_nonnegative)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        return jnp.asarray(self.alpha, model.dtype) * model**3


class LastValue(advsim.AbstractAdversary):
    def score(self, mechanism, release):
        return release[0]
"""

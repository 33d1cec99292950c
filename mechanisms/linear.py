"""The linear DP-SGD process: the last-iterate heuristic's tight case.

With a linear loss every gradient is constant, so the last model is m_0 plus the sum of
the sampled clipped gradients and the noise. With the canary's gradient of norm C and all
other gradients zero, the last model projected on the canary's descent direction is, in
units of eta * C, exactly P = Binomial(n, q) + N(0, T sigma^2) with the canary and
Q = N(0, T sigma^2) without it (proof of Theorem 1 of arXiv:2410.06186, n = number of steps
that can carry the canary).
"""

from __future__ import annotations

from typing import Literal, Unpack

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import (
    AbstractProjectionLaw,
    AbstractScalarLaw,
    CanarySchedule,
    DPSGDOptions,
    DPSGDParams,
)
from advsim.bounds import run_facts
from advsim.validation import check_int, check_nonnegative

__all__ = ["LinearProcess"]


class LinearProcess(AbstractProjectionLaw, AbstractScalarLaw):
    """DP-SGD on a linear loss: canary gradient -C e_j, other examples' gradients constant.

    In 1-D with no other data (the default) this is the worst case of Theorem 1 of
    arXiv:2410.06186. In `dim` dimensions the canary is a Dirac (one-coordinate) gradient
    and the other examples' gradients are rows of `data_gradients` (each row a group of
    `data_counts` identical examples, Poisson-sampled like any data), so the last-iterate
    paper's "zero gradients" and "natural data" settings can both be run; see
    `LinearProcess.with_data`.

    The canary's loss is l(m) = -C m_j, so its gradient is -C e_j and a step that includes it
    moves coordinate j up by eta * C.

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        dim: model dimension d >= 1.
        canary_coordinate: j, the canary's coordinate (0-indexed).
        data_gradients: optional `(g, d)` array of the other examples' (constant) gradients.
        data_counts: optional `(g,)` integer counts (default: one example per row).
        **dpsgd: clip_norm (C > 0), learning_rate (eta > 0), canary_schedule (default:
            every step, sampled), batching ("poisson" default, or "fixed"): `DPSGDOptions`.

    Example:
        >>> mech = LinearProcess(steps=100, sampling_prob=0.1, noise_multiplier=1.0)
        >>> mech.accounting().num_canary_steps
        100
    """

    #: The heuristic's tight case: sweeps audit it with the family audit by default.

    params: DPSGDParams
    dim: int = eqx.field(static=True)
    canary_coordinate: int = eqx.field(static=True)
    other_gradients: np.ndarray
    other_counts: np.ndarray
    has_data: bool = eqx.field(static=True)

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        dim: int = 1,
        canary_coordinate: int = 0,
        data_gradients=None,
        data_counts=None,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        self.dim = check_int("dim", dim, minimum=1)
        self.canary_coordinate = check_int(
            "canary_coordinate", canary_coordinate, minimum=0, maximum=self.dim - 1
        )
        if data_gradients is None:
            grads = np.zeros((0, self.dim), np.float32)
        else:
            grads = np.asarray(data_gradients, np.float32)
            if grads.ndim != 2 or grads.shape[1] != self.dim:
                raise ValueError(
                    f"data_gradients must have shape (groups, dim={self.dim}), got {grads.shape}"
                )
            if not np.all(np.isfinite(grads)):
                raise ValueError("data_gradients must be finite")
        if data_counts is None:
            counts = np.ones(grads.shape[0], np.int32)
        else:
            counts = np.asarray(data_counts)
            int_max = np.iinfo(np.int32).max
            if (
                counts.shape != (grads.shape[0],)
                or not np.all(np.isfinite(counts))
                or np.any(counts != np.round(counts))
                or np.any(counts < 0)
                or np.any(counts > int_max)
            ):
                raise ValueError(
                    f"data_counts must be {grads.shape[0]} integers in [0, {int_max}], "
                    f"got {counts!r}"
                )
            counts = counts.astype(np.int32)
        self.other_gradients = grads
        self.other_counts = counts
        # Static, so that projection_law can refuse data even inside jit.
        self.has_data = bool(np.any(grads != 0) and np.any(counts > 0))

    @classmethod
    def with_data(
        cls,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        dim: int,
        num_examples: int,
        distribution: Literal["zero", "gaussian", "sphere"] = "gaussian",
        scale: float = 1.0,
        data_seed: int = 0,
        **kwargs,
    ) -> LinearProcess:
        """A d-dimensional process whose other examples' gradients come from a distribution.

        The gradients are drawn once (a fixed dataset, from `data_seed` with numpy) and then
        Poisson-sampled every step like any data: "zero" (all zero: the adversarial-dataset
        setting), "gaussian" (N(0, scale^2 / d I), about norm `scale`), or "sphere" (uniform
        on the sphere of radius `scale`). Gradients larger than C are clipped by the engine.
        """
        num_examples = check_int("num_examples", num_examples, minimum=1)
        dim = check_int("dim", dim, minimum=1)
        scale = check_nonnegative("scale", scale)
        rng = np.random.default_rng(data_seed)
        if distribution == "zero":
            grads = np.zeros((num_examples, dim))
        elif distribution == "gaussian":
            grads = rng.normal(0.0, scale / np.sqrt(dim), (num_examples, dim))
        elif distribution == "sphere":
            g = rng.normal(size=(num_examples, dim))
            grads = scale * g / np.linalg.norm(g, axis=1, keepdims=True)
        else:
            raise ValueError(
                f"distribution must be 'zero', 'gaussian' or 'sphere', got {distribution!r}"
            )
        return cls(
            steps,
            sampling_prob,
            noise_multiplier,
            dim=dim,
            data_gradients=grads,
            data_counts=np.ones(num_examples, np.int32),
            **kwargs,
        )

    @classmethod
    def contract_examples(cls) -> dict[str, LinearProcess]:
        """Small instances, by name, on which the contract suite runs.

        Every built-in mechanism defines this classmethod: the repository's contract tests
        run `advsim.testing.check_mechanism` on each instance (with `jax_enable_x64` for a
        class with `requires_x64`). The instances are cheap to build and to simulate and
        cover the options that change what the engine runs; here data groups of three
        distributions, a canary at every third step, one unsampled canary step and fixed
        batches.
        """
        # scale 3 puts most data gradients above C = 1, so the engine's clipping is exercised.
        data = dict(dim=5, num_examples=20, scale=3.0)
        return {
            "1d": cls(20, 0.2, 1.5),
            "5d-zero": cls.with_data(5, 0.3, 1.0, distribution="zero", **data),
            "5d-gaussian": cls.with_data(5, 0.3, 1.0, distribution="gaussian", **data),
            "5d-sphere": cls.with_data(5, 0.3, 1.0, distribution="sphere", **data),
            "every3": cls(20, 0.2, 1.5, canary_schedule=CanarySchedule.every(3)),
            "only1-unsampled": cls(
                20, 0.2, 1.5, canary_schedule=CanarySchedule.only(1, sampled=False)
            ),
            "5d-fixed-batch": cls.with_data(5, 0.3, 1.0, batching="fixed", **data),
        }

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((self.dim,), jnp.float32)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        unit = jnp.zeros_like(model).at[self.canary_coordinate].set(1.0)
        return -jnp.asarray(self.clip_norm, model.dtype) * unit

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        return jnp.asarray(self.other_gradients, model.dtype)

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.other_counts)

    def facts(self):
        """What this run certifies for `advsim.bounds` (`ProcessFacts`): linear losses (every
        gradient constant: zero curvature, Holder constant 0), the largest gradient norm
        (the canary's C, or a data row's), no regularizer, no projection."""
        rows = np.linalg.norm(np.asarray(self.other_gradients, np.float64), axis=1)
        live = rows[np.asarray(self.other_counts) > 0]
        return run_facts(
            self, num_examples=1 + int(np.sum(self.other_counts)), dimension=self.dim,
            linear=True, convex=True, strong_convexity=0.0, objective_smoothness=0.0,
            example_strong_convexity=0.0, smoothness=0.0, regularizer_smoothness=0.0,
            regularizer_lipschitz=0.0, regularizer_zero=True,
            lipschitz=float(max([float(self.clip_norm), *live.tolist()])),
            holder=lambda beta: 0.0, source="LinearProcess: constant gradients",
        )  # fmt: skip

    def in_heuristic_family(self) -> bool:
        """True without data gradients only: the data's sampled counts add a random shift
        that the heuristic's family does not have (`projection_law` is exact only then)."""
        return not self.has_data

    def projection_law(self):
        """The law of the canary-direction projection of m_T - m_0, in units of eta * C.

        Only for the process without other data, where it is exact:
        Binomial(n, q) + N(0, T sigma^2) in the in-world and N(0, T sigma^2) in the
        out-world (n = steps that can carry the canary; q = 1 for an unsampled schedule).

        Returns:
            `(support, log_probs, scale)` as jax arrays, for a jittable likelihood ratio.
        """
        if self.has_data:
            raise ValueError(
                "projection_law is exact only without other data gradients; this process "
                f"has {self.other_gradients.shape[0]} data gradient rows, some non-zero"
            )
        # Jittable: no float() of traced fields (accounting() is for the host).
        n = len(self.canary_schedule.steps(self.steps))
        k = jnp.arange(n + 1, dtype=jnp.float32)
        sampled = self.canary_schedule.sampled and self.batching == "poisson"
        q = jnp.asarray(self.sampling_prob if sampled else 1.0, jnp.float32)
        log_probs = _binomial_logpmf(k, n, q)
        scale = jnp.sqrt(jnp.float32(self.steps)) * jnp.asarray(self.noise_multiplier, jnp.float32)
        return k, log_probs, scale


def _binomial_logpmf(k, n: int, q):
    from jax.scipy.special import gammaln, xlog1py, xlogy

    n = jnp.float32(n)
    return (
        gammaln(n + 1.0)
        - gammaln(k + 1.0)
        - gammaln(n - k + 1.0)
        + xlogy(k, q)
        + xlog1py(n - k, -q)
    )

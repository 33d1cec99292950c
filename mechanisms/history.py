r"""The history-encoding regularizer: the last model stores every step (Section 4.3).

Section 4.3 of arXiv:2410.06186 ("pathological example"): an arbitrary (even
discontinuous) regularizer can have any gradient, so pick $r$ with
$m - \eta \nabla r(m) = (0, v m_1, v m_2, \ldots, v m_{d-1})$: every step shifts the model
one coordinate down and scales it by $v$. With the canary's gradient $-C e_1$ (a step that
samples it adds $\eta C$ to the first coordinate) and no other data, coordinate $i$
(0-indexed) of the last model is a scaled noisy copy of the canary's presence $b_{T-i}$ at
step $T - i$ (Equation 8 there, with our 0-indexing and descent sign):

$$\frac{m_{T,i}}{\eta C v^i} = b_{T-i} + \mathcal{N}\Big(0,\ \sigma^2 \sum_{k=0}^{i} v^{-2k}\Big),$$

independently over $i$ (each coordinate collects distinct noise draws). As $v \to \infty$
the variances tend to $\sigma^2$: the last model holds every step's Gaussian observation,
and only-the-last-iterate is as leaky as releasing every iterate (composition). As
$v \to 0$ only coordinate 0 (the last step) is informative: one step's privacy, as with
the zeroing regularizer. The exact epsilon for any $v$ is the composition of the
Poisson-subsampled Gaussian mechanisms with those noise scales (`history_epsilon`), and the
optimal adversary is `advsim.adversaries.CoordinateLikelihoodRatio`.
"""

from __future__ import annotations

import math
from typing import Unpack

import dp_accounting
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from jaxtyping import Array, Float, Int

from advsim import AbstractCoordinateLaws, Accounting, DPSGDOptions, DPSGDParams
from advsim.validation import (
    as_traced_float,
    check_delta,
    check_int,
    check_positive,
    check_probability,
    check_run_arguments,
)

__all__ = [
    "HistoryRegularizer",
    "history_epsilon",
    "history_noise_scales",
    "subsampled_gaussians_epsilon",
]

#: |log10 v^(d-1)| must stay below this, so the float32 model neither overflows (3e38)
#: nor loses the early coordinates to underflow.
MAX_LOG10_SPREAD = 30.0


def history_noise_scales(dim: int, noise_multiplier, v) -> np.ndarray:
    r"""$s_i = \sigma \sqrt{\sum_{k=0}^{i} v^{-2k}}$ for $i = 0..d-1$ (host, float64).

    The noise standard deviation of coordinate i of the last model divided by
    $\eta C v^i$ (Equation 8 of arXiv:2410.06186).
    """
    dim = check_int("dim", dim, minimum=1)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    v = check_positive("v", v)
    k = np.arange(dim, dtype=np.float64)
    if v >= 1.0:
        return sigma * np.sqrt(np.cumsum(v ** (-2.0 * k)))
    # sum_{k<=i} v^(-2k) = v^(-2i) sum_{j<=i} v^(2j), whose terms are <= 1.
    return sigma * v ** (-k) * np.sqrt(np.cumsum(v ** (2.0 * k)))


def _run_accounting(function: str, steps, sampling_prob, noise_multiplier, canary_steps):
    """The run an exact-epsilon function of this package reads: the `advsim.Accounting`
    given as `steps`, or one built from the numbers (which validates them all).

    Raises:
        TypeError: an `Accounting` together with numbers, or numbers missing.
        ValueError: a value out of range (named); `canary_steps` not distinct steps in
            [1, T]; an `Accounting` with a learning-rate schedule (the coordinates' noise
            scales are in units of one step's move, `eta C`, the same at every step).
    """
    run = check_run_arguments(function, steps, sampling_prob, noise_multiplier, canary_steps)
    if run is not None:
        run.refuse_schedule(function, "the construction moves every step by the same eta C")
        return run
    steps = check_int("steps", steps, minimum=1)
    every = range(1, steps + 1) if canary_steps is None else canary_steps
    return Accounting(steps, sampling_prob, noise_multiplier, every)  # which checks them


def history_epsilon(
    delta,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    v=None,
    *,
    dim: int | None = None,
    canary_steps=None,
    value_discretization_interval: float = 1e-4,
) -> float:
    r"""The exact eps(delta) of the history regularizer's last model.

    Coordinate i of the last model is the Poisson-subsampled Gaussian mechanism of step
    $T - i$ with noise multiplier $s_i / 1$ (`history_noise_scales`), independently over
    i, so the last model is their composition; dp_accounting's PLD accountant composes
    them (pessimistic, as `advsim.bounds.composition_epsilon`, which it equals when
    $v \to \infty$). Steps older than the model's dimension are shifted out and leak
    nothing.

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$, or an `advsim.Accounting` (then leave `sampling_prob`,
            `noise_multiplier` and `canary_steps` unset; no learning-rate schedule).
        sampling_prob: $q \in (0, 1]$ (1 for a canary that is always present).
        noise_multiplier: $\sigma > 0$.
        v: the shift's scale, $v > 0$ (required).
        dim: the model's dimension (default T).
        canary_steps: the 1-indexed steps that can carry the canary, distinct, in
            $[1, T]$ (default all).
        value_discretization_interval: the PLD grid spacing.

    Returns:
        eps >= 0.

    Raises:
        ValueError: a value out of range (the message names it); an `Accounting` with a
            learning-rate schedule.
        TypeError: `v` missing; an `Accounting` together with numbers, or numbers missing.

    Example:
        >>> from advsim.bounds import composition_epsilon
        >>> e = history_epsilon(1e-5, 10, 0.1, 1.0, v=1e3)
        >>> abs(e - composition_epsilon(1e-5, 10, 0.1, 1.0)) < 1e-3
        True
        >>> from advsim import Accounting
        >>> history_epsilon(1e-5, Accounting(10, 0.1, 1.0, range(1, 11)), v=1e3) == e
        True
    """
    if v is None:
        raise TypeError("history_epsilon: missing v, the shift's scale (v > 0)")
    run = _run_accounting("history_epsilon", steps, sampling_prob, noise_multiplier, canary_steps)
    steps = run.steps
    dim = steps if dim is None else check_int("dim", dim, minimum=1)
    canary = set(run.canary_steps)
    scales = history_noise_scales(dim, run.noise_multiplier, v)
    used = [float(scales[i]) for i in range(min(dim, steps)) if steps - i in canary]
    vdi = value_discretization_interval
    return subsampled_gaussians_epsilon(delta, run.sampling_prob, used, vdi)


def subsampled_gaussians_epsilon(delta, sampling_prob, noise_multipliers, vdi=1e-4) -> float:
    """eps(delta) of Poisson-subsampled Gaussian mechanisms (sensitivity 1) composed.

    One `PoissonSampledDpEvent(q, GaussianDpEvent(s))` per noise multiplier s (the
    Gaussian alone for q = 1), composed by dp_accounting's PLD accountant with
    add-or-remove adjacency and pessimistic rounding, as `advsim.bounds.composition_epsilon`.
    0 for an empty list.
    """
    delta = check_delta("delta", delta)
    q = check_probability("sampling_prob", sampling_prob)
    events = []
    for s in noise_multipliers:
        step = dp_event.GaussianDpEvent(check_positive("noise multiplier", s))
        events.append(step if q == 1.0 else dp_event.PoissonSampledDpEvent(q, step))
    if not events:
        return 0.0
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    acc.compose(dp_accounting.ComposedDpEvent(events))
    return max(0.0, float(acc.get_epsilon(delta)))


class HistoryRegularizer(AbstractCoordinateLaws):
    r"""Regularizer update $m \mapsto (0, v m_0, \ldots, v m_{d-2})$: m_T stores all steps.

    Section 4.3 of arXiv:2410.06186. The regularizer's gradient is
    $\nabla r(m) = (m - \mathrm{shift}_v(m)) / \eta$, applied unclipped by the engine, so
    the update is $m_t = \mathrm{shift}_v(m_{t-1}) - \eta(\text{clipped gradients} +
    \sigma C \xi_t)$. The canary's gradient is $-C e_0$ (a linear loss, norm C), the same
    sign convention as `LinearProcess`: a step that samples it adds $\eta C$ to coordinate
    0. See the module docstring for the law of the last model (`coordinate_laws`).

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        v: the shift's scale, v > 0 (traced: a sweep over v compiles once).
        dim: the model's dimension d (default T: every step is stored).
        **dpsgd: clip_norm (C > 0), learning_rate (eta > 0), canary_schedule (default:
            every step, sampled), batching ("poisson" default, or "fixed"): `DPSGDOptions`.

    Raises:
        ValueError: on invalid inputs, or when |log10 v^(d-1)| > 30 (float32 range).

    Example:
        >>> mech = HistoryRegularizer(steps=10, sampling_prob=0.1, noise_multiplier=1.0,
        ...                           v=100.0)
        >>> mech.init_model().shape
        (10,)
    """

    params: DPSGDParams
    v: np.ndarray
    dim: int = eqx.field(static=True)

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        v: float,
        dim: int | None = None,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        self.v = as_traced_float("v", v, check_positive)
        self.dim = self.steps if dim is None else check_int("dim", dim, minimum=1)
        spread = (self.dim - 1) * abs(math.log10(float(self.v)))
        if spread > MAX_LOG10_SPREAD:
            raise ValueError(
                f"v^(dim - 1) must be within 1e-30 and 1e30 for the float32 model, got "
                f"v={float(self.v)!r}, dim={self.dim} (|log10 v^(dim-1)| = {spread:.3g})"
            )

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((self.dim,), jnp.float32)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        unit = jnp.zeros_like(model).at[0].set(1.0)
        return -jnp.asarray(self.clip_norm, model.dtype) * unit

    def shift(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        """$(0, v m_0, \\ldots, v m_{d-2})$: the model after the regularizer's step."""
        v = jnp.asarray(self.v, model.dtype)
        return jnp.concatenate([jnp.zeros_like(model[:1]), v * model[:-1]])

    def regularizer_gradient(
        self, model: Float[Array, " d"], t: Int[Array, ""]
    ) -> Float[Array, " d"]:
        # m - eta * grad = shift(m).
        return (model - self.shift(model)) / jnp.asarray(self.learning_rate, model.dtype)

    def coordinate_laws(self):
        r"""The law of the rescaled last model, coordinate by coordinate (jittable).

        $y_i = m_{T,i} / u_i$ with $u_i = \eta C v^i$ is $b_{T-i} + \mathcal{N}(0, s_i^2)$,
        independently over $i$, with $b_{T-i} \sim \mathrm{Bernoulli}(p_i)$ in the in-world
        and 0 in the out-world: $p_i = q$ if step $T - i$ can carry the canary (1 if
        unsampled), 0 if not or if $T - i < 1$ (the coordinate holds noise only, its
        scale is then irrelevant since it carries no signal).

        Returns:
            `(unit, scale, prob)`, float32 arrays of shape (d,).
        """
        dtype = jnp.float32
        i = jnp.arange(self.dim, dtype=dtype)
        v = jnp.asarray(self.v, dtype)
        unit = jnp.asarray(self.learning_rate, dtype) * jnp.asarray(self.clip_norm, dtype)
        unit = unit * v**i
        sigma = jnp.asarray(self.noise_multiplier, dtype)
        # sum_{k<=i} v^(-2k) = v^(-2i) sum_{j<=i} v^(2j): summed in the form whose terms
        # are <= 1, so that neither overflows float32 (the other branch may; unused).
        big_v = jnp.sqrt(jnp.cumsum(v ** (-2.0 * i)))
        small_v = v ** (-i) * jnp.sqrt(jnp.cumsum(v ** (2.0 * i)))
        scale = sigma * jnp.where(v >= 1.0, big_v, small_v)
        canary = set(self.canary_schedule.steps(self.steps))
        # Coordinate i holds the canary of step T - i (none before step 1).
        carries = np.array([self.steps - i in canary for i in range(self.dim)], bool)
        sampled = self.canary_schedule.sampled and self.batching == "poisson"
        p = jnp.asarray(self.sampling_prob if sampled else 1.0, dtype)
        prob = jnp.where(jnp.asarray(carries), p, 0.0)
        return unit, scale, prob

    def exact_epsilon(self, delta) -> float:
        """The last model's eps(delta) (`history_epsilon` with this run's parameters)."""
        return history_epsilon(delta, self.accounting(), v=float(self.v), dim=self.dim)

    @classmethod
    def contract_examples(cls) -> dict[str, HistoryRegularizer]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        return {"v-3": cls(6, 0.2, 1.0, v=3.0)}

r"""The malicious dataset ("repeaters"): the data makes the last model store every step.

Section 4.4 and Appendix C (Algorithms 2-4) of arXiv:2410.06186: no regularizer; the
model has one coordinate per step plus a step counter; the canary (Algorithm 2) writes its
presence into the coordinate of the current step; a large group of identical "repeater"
examples, present in both worlds (Algorithm 3), uses its gradient, kept below the clipping
norm by the size of the batch, to

- cancel the noise in the current and future coordinates (reset them to 0),
- threshold the previous step's coordinate and rewrite it to $\pm V$ (the canary was
  there iff it is $\ge \tau$), and rewrite every older one to $\pm V$ by its sign, so
  later noise never flips a decision (`encoding="threshold"`, the paper's construction),
- and advance the step counter.

So the last model holds one decision per step plus the raw last step, and only the last
iterate leaks (almost) what all iterates leak. With `encoding="amplify"` the repeaters
instead multiply the previous step's coordinate by V and leave older ones alone, which
keeps each step's full Gaussian observation (noise $\sigma^2 (1 + k / V^2)$ after $k$
more steps): its epsilon tends to composition as V grows; a variant of ours, not the
paper's.

Units: everything is in units of $\eta C$, the move of one canary step; V, tau and the
counter increment are numbers in those units.

Deviation from Algorithm 4, stated: there the N repeaters are in every batch and only the
canary is sampled. Here the engine Poisson-samples every example, repeaters included (the
canary with the same rate q), as DP-SGD does; the repeaters' gradient is the desired
update divided by $\eta$ times the *expected* number in the batch, $qN$ (the engine passes
only the model and t to `data_gradients`, so the sampled count is unknown to it). Every
reset then lands at $\mathrm{target} + \varepsilon_t (\mathrm{target} - m)$ with
$\varepsilon_t = n_t / (qN) - 1$, about $1/\sqrt{qN}$ (1% for the default batch): an extra
noise of about $\varepsilon_t \sigma$ in the coordinate the canary writes next, and a
negligible wobble of the $\pm V$ values. The step counter is read from the model
(coordinate T), as the paper describes, not from the engine's t; the tests check that the
two agree and that no repeater gradient is ever clipped.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal, Unpack

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from jax.scipy.special import ndtr
from jaxtyping import Array, Float, Int
from scipy.stats import norm

from advsim import AbstractCoordinateLaws, DPSGDOptions, DPSGDParams
from advsim.mechanisms.history import _run_accounting, subsampled_gaussians_epsilon
from advsim.validation import (
    as_traced_float,
    check_delta,
    check_int,
    check_positive,
)

__all__ = ["MaliciousRepeaters", "repeaters_epsilon"]

#: The fewest repeaters expected in a batch: the relative fluctuation of their number is
#: then <= 3% (1/sqrt(1000)), far below what would flip a decision or the counter.
MIN_EXPECTED_BATCH = 1000


def _update_norm_bound(steps: int, sigma: float, v: float, encoding: str) -> float:
    """A bound (in units of eta C) on the norm of the repeaters' total update.

    Last step's coordinate: |+-V - m| <= V + 1 + 6 sigma (threshold) or
    (V - 1)(1 + 6 sigma) (amplify); counter: V plus noise; every other coordinate: its
    noise (6 sigma, six standard deviations) plus the residual of an earlier reset,
    at most 0.1 V (a batch fluctuation of 10%, 3 standard deviations at the minimum
    batch).
    """
    last = v + 1 + 6 * sigma if encoding == "threshold" else (v - 1) * (1 + 6 * sigma)
    counter = v + 6 * sigma
    rest = math.sqrt(steps) * (6 * sigma + 0.1 * v)
    return math.sqrt(last**2 + counter**2 + rest**2)


class MaliciousRepeaters(AbstractCoordinateLaws):
    r"""DP-SGD on a malicious dataset that writes every step into the last model.

    See the module docstring (Appendix C of arXiv:2410.06186). The model is
    $(m_0, \ldots, m_{T-1}, c)$: coordinate $j$ belongs to step $j + 1$ and
    $c \approx V (t - 1)$ before step t. One group of `num_repeaters` identical examples
    (one gradient evaluation per step, whatever the group's size); the canary's gradient is
    $-C e_s$ with $s = \mathrm{round}(c / V)$ read from the counter.

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1], for the canary and each repeater.
        noise_multiplier: sigma > 0.
        encoding: "threshold" (Algorithm 3: decisions rewritten to +-V) or "amplify"
            (the previous coordinate multiplied by V; tends to composition).
        threshold: tau, in units of eta C: the previous step's coordinate is a 1 iff
            it is >= tau (default 1 + 3 sigma: a false alarm has probability
            Phi(-3 - 1/sigma), so a decoded 1 is strong evidence; used by "threshold").
        amplification: V, in units of eta C (default 1000), at least 20 sigma so that
            later noise never flips a rewritten decision; also the counter's increment.
        expected_batch: the expected number of repeaters in a batch, qN (Poisson) or N
            (fixed); default: the least that keeps their gradient unclipped with margin 2,
            and at least 1000.
        **dpsgd: clip_norm (C > 0), learning_rate (eta > 0), canary_schedule (default:
            every step, sampled), batching ("poisson" default, or "fixed"): `DPSGDOptions`.

    Raises:
        ValueError: bad values, or a batch too small to keep the repeaters unclipped.

    Example:
        >>> mech = MaliciousRepeaters(steps=5, sampling_prob=0.01, noise_multiplier=0.5)
        >>> mech.init_model().shape  # 5 steps + the counter
        (6,)
    """

    params: DPSGDParams
    encoding: Literal["threshold", "amplify"] = eqx.field(static=True)
    reads_steps: ClassVar[str | None] = "the model has one coordinate per step (T + 1)"
    threshold: np.ndarray
    amplification: np.ndarray
    expected_batch: np.ndarray
    num_repeaters: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        encoding: Literal["threshold", "amplify"] = "threshold",
        threshold: float | None = None,
        amplification: float = 1000.0,
        expected_batch: int | None = None,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        if encoding not in ("threshold", "amplify"):
            raise ValueError(f"encoding must be 'threshold' or 'amplify', got {encoding!r}")
        self.encoding = encoding
        sigma = float(self.noise_multiplier)
        if threshold is None:
            threshold = 1.0 + 3.0 * sigma
        self.threshold = as_traced_float("threshold", threshold, _check_finite)
        self.amplification = as_traced_float("amplification", amplification, check_positive)
        v = float(self.amplification)
        if v < 20.0 * sigma or v <= 1.0:
            raise ValueError(
                f"amplification must be > 1 and >= 20 * noise_multiplier = {20 * sigma:g}, "
                f"got {v!r}"
            )
        needed = 2.0 * _update_norm_bound(self.steps, sigma, v, encoding)
        least = max(MIN_EXPECTED_BATCH, math.ceil(needed))
        if expected_batch is None:
            expected_batch = least
        expected_batch = check_int("expected_batch", expected_batch, minimum=1)
        if expected_batch < least:
            raise ValueError(
                f"expected_batch must be at least {least} (>= {MIN_EXPECTED_BATCH}, and twice "
                f"the repeaters' update bound {needed / 2:.4g} so that their gradient is never "
                f"clipped), got {expected_batch}"
            )
        q = float(self.sampling_prob) if self.batching == "poisson" else 1.0
        count = math.ceil(expected_batch / q)
        if count > np.iinfo(np.int32).max:
            raise ValueError(
                f"expected_batch / sampling_prob = {count} repeaters exceeds int32; "
                "lower amplification or raise sampling_prob"
            )
        self.num_repeaters = np.array([count], np.int32)
        # The divisor of the repeaters' gradient: q N, as the engine will sample them.
        self.expected_batch = np.asarray(count * q, np.float64)

    # -- the model ------------------------------------------------------------------------

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((self.steps + 1,), jnp.float32)

    def _unit(self, dtype):
        return jnp.asarray(self.learning_rate, dtype) * jnp.asarray(self.clip_norm, dtype)

    def decode_step(self, model: Float[Array, " d"]) -> Int[Array, ""]:
        """s = round(c / (V eta C)): the 0-indexed current step, read from the counter."""
        v = jnp.asarray(self.amplification, model.dtype) * self._unit(model.dtype)
        s = jnp.round(model[-1] / v).astype(jnp.int32)
        return jnp.clip(s, 0, self.steps - 1)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        # Algorithm 2: -e_s, times C (a gradient of norm C, never clipped).
        s = self.decode_step(model)
        unit = (jnp.arange(model.shape[0]) == s).astype(model.dtype)
        return -jnp.asarray(self.clip_norm, model.dtype) * unit

    def target(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        """Where the repeaters move the model at this step (before canary and noise)."""
        dtype = model.dtype
        unit = self._unit(dtype)
        v = jnp.asarray(self.amplification, dtype)
        s = self.decode_step(model)
        j = jnp.arange(self.steps)
        m = model[:-1]
        if self.encoding == "threshold":
            tau = jnp.asarray(self.threshold, dtype) * unit
            last = jnp.where(m >= tau, v * unit, -v * unit)
            past = jnp.where(m >= 0, v * unit, -v * unit)
        else:
            last = v * m
            past = m
        out = jnp.where(j < s - 1, past, jnp.where(j == s - 1, last, 0.0))
        counter = (s + 1).astype(dtype) * v * unit
        return jnp.concatenate([out, counter[None]])

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        # Algorithm 3: a summed update eta * n * g = (n / (q N)) (target - m).
        lr = jnp.asarray(self.learning_rate, model.dtype)
        n = jnp.asarray(self.expected_batch, model.dtype)
        return ((model - self.target(model)) / (lr * n))[None, :]

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.num_repeaters)

    # -- the law of the last model --------------------------------------------------------

    def canary_probs(self, dtype=jnp.float32):
        """p_j: the canary's probability at step j + 1, j = 0..T-1 (0 off-schedule; 1 if
        unsampled), jittable."""
        canary = set(self.canary_schedule.steps(self.steps))
        carries = np.array([j + 1 in canary for j in range(self.steps)], bool)
        sampled = self.canary_schedule.sampled and self.batching == "poisson"
        p = jnp.asarray(self.sampling_prob if sampled else 1.0, dtype)
        return jnp.where(jnp.asarray(carries), p, 0.0)

    def decision_probs(self):
        r"""P(decision = 1) in and out, for the coordinates j = 0..T-1 (jittable).

        With `encoding="threshold"`, coordinate j < T - 1 of the last model is
        $\pm V$ by the decision $y_j \ge \tau$ on $y_j = b_j + \mathcal{N}(0, \sigma^2)$
        (ignoring the ~1% batch-fluctuation noise), so
        $p_{in} = p_j \bar\Phi((\tau - 1)/\sigma) + (1 - p_j) \bar\Phi(\tau/\sigma)$ and
        $p_{out} = \bar\Phi(\tau/\sigma)$. (Entry T - 1 is filled the same way, unused.)

        Returns:
            `(p_in, p_out)`, float32 arrays of shape (T,).
        """
        dtype = jnp.float32
        sigma = jnp.asarray(self.noise_multiplier, dtype)
        tau = jnp.asarray(self.threshold, dtype)
        p = self.canary_probs(dtype)
        p_out = ndtr(-tau / sigma)
        p_in = p * ndtr((1.0 - tau) / sigma) + (1.0 - p) * p_out
        return p_in, jnp.broadcast_to(p_out, p_in.shape)

    def coordinate_laws(self):
        r"""The law of coordinates 0..T-1, rescaled (jittable); for `encoding="amplify"`.

        Coordinate j < T - 1 was multiplied by V at step j + 2 and then received the noise
        of the T - j - 1 steps j + 2..T, so $m_{T,j} / (V\eta C) = b_j +
        \mathcal{N}(0, \sigma^2 (1 + (T - j - 1) / V^2))$; the last one is
        $m_{T,T-1} / (\eta C) = b_{T-1} + \mathcal{N}(0, \sigma^2)$ (batch fluctuations
        ignored). The same interface as `HistoryRegularizer.coordinate_laws`.

        Returns:
            `(unit, scale, prob)`, float32 arrays of shape (T,).

        Raises:
            ValueError: for `encoding="threshold"` (use `decision_probs`).
        """
        if self.encoding != "amplify":
            raise ValueError("coordinate_laws is for encoding='amplify'; see decision_probs")
        dtype = jnp.float32
        v = jnp.asarray(self.amplification, dtype)
        j = jnp.arange(self.steps, dtype=dtype)
        last = j == self.steps - 1
        unit = self._unit(dtype) * jnp.where(last, 1.0, v)
        later = self.steps - 1.0 - j
        sigma = jnp.asarray(self.noise_multiplier, dtype)
        scale = sigma * jnp.sqrt(1.0 + jnp.where(last, 0.0, later / v**2))
        return unit, scale, self.canary_probs(dtype)

    def exact_epsilon(self, delta) -> float:
        """eps(delta) of the last model, batch fluctuations ignored (`repeaters_epsilon`)."""
        return repeaters_epsilon(
            delta, self.accounting(), encoding=self.encoding, threshold=float(self.threshold),
            amplification=float(self.amplification),
        )  # fmt: skip

    @classmethod
    def contract_examples(cls) -> dict[str, MaliciousRepeaters]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        return {"default": cls(5, 0.2, 0.5)}


def _check_finite(name, value):
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def repeaters_epsilon(
    delta,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    encoding: str = "threshold",
    threshold: float | None = None,
    amplification: float = 1000.0,
    canary_steps=None,
    value_discretization_interval: float = 1e-4,
) -> float:
    r"""eps(delta) of the repeaters' last model (both directions, PLD accounting).

    "threshold": the last model is T - 1 independent binary decisions (in:
    Bernoulli($p_{in}$), out: Bernoulli($p_{out}$), see
    `MaliciousRepeaters.decision_probs`) and one Poisson-subsampled Gaussian observation
    of the last step; "amplify": T independent subsampled Gaussians with noise
    $\sigma\sqrt{1 + (T - j - 1)/V^2}$. Both are composed exactly by dp_accounting's PLD
    accountant (pessimistic rounding); each is below `composition_epsilon`, the amplified
    one tends to it as V grows. The ~1% noise of the batch fluctuations is ignored (it
    only garbles the observations further).

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$, or an `advsim.Accounting` (then leave `sampling_prob`,
            `noise_multiplier` and `canary_steps` unset; no learning-rate schedule).
        sampling_prob: $q \in (0, 1]$ (1 for a canary that is always present).
        noise_multiplier: $\sigma > 0$.
        encoding: "threshold" or "amplify".
        threshold: tau in units of eta C (default $1 + 3\sigma$).
        amplification: V.
        canary_steps: the 1-indexed steps that can carry the canary, distinct, in
            $[1, T]$ (default all).
        value_discretization_interval: the PLD grid spacing.

    Returns:
        eps >= 0.

    Raises:
        ValueError: a value out of range or an unknown `encoding` (the message names it);
            an `Accounting` with a learning-rate schedule.
        TypeError: an `Accounting` together with numbers, or numbers missing.

    Example:
        >>> round(repeaters_epsilon(1e-5, 30, 0.01, 0.5), 2)  # composition: 5.13
        3.85
    """
    delta = check_delta("delta", delta)
    run = _run_accounting("repeaters_epsilon", steps, sampling_prob, noise_multiplier, canary_steps)
    steps, q, sigma = run.steps, run.sampling_prob, run.noise_multiplier
    canary = set(run.canary_steps)
    v = check_positive("amplification", amplification)
    vdi = check_positive("value_discretization_interval", value_discretization_interval)
    if encoding == "amplify":
        scales = [
            sigma * math.sqrt(1.0 + (steps - j - 1) / v**2) for j in range(steps) if j + 1 in canary
        ]
        return subsampled_gaussians_epsilon(delta, q, scales, vdi)
    if encoding != "threshold":
        raise ValueError(f"encoding must be 'threshold' or 'amplify', got {encoding!r}")
    tau = 1.0 + 3.0 * sigma if threshold is None else _check_finite("threshold", threshold)
    n_bits = sum(1 for j in range(steps - 1) if j + 1 in canary)
    dist = None
    if steps in canary:
        dist = pld_lib.from_gaussian_mechanism(
            sigma, sampling_prob=q, value_discretization_interval=vdi
        )
    if n_bits:
        log_out1, log_out0 = norm.logsf(tau / sigma), norm.logcdf(tau / sigma)
        p_in1 = q * norm.sf((tau - 1) / sigma) + (1 - q) * norm.sf(tau / sigma)
        log_in1, log_in0 = math.log(p_in1), math.log1p(-p_in1)
        # symmetric=False: "remove" is H(in || out), "add" is H(out || in), the
        # orientation of from_gaussian_mechanism's remove/add (in = the mixture).
        bit = pld_lib.from_two_probability_mass_functions(
            {0: float(log_out0), 1: float(log_out1)},
            {0: log_in0, 1: log_in1},
            value_discretization_interval=vdi,
            symmetric=False,
        )
        bits = bit.self_compose(n_bits)
        dist = bits if dist is None else dist.compose(bits)
    if dist is None:
        return 0.0
    return max(0.0, float(dist.get_epsilon_for_delta(delta)))

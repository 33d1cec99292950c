r"""Linear loss plus an unclipped regularizer: Sections 4.1 and 4.2 of arXiv:2410.06186.

DP-SGD never clips the regularizer's gradient, so a regularizer can reshape what the last
model remembers of earlier steps. In one dimension, with the canary's linear loss
$\ell(m) = -C m$ (gradient $-C$, so a step that samples it moves the model up by $\eta C$)
and no other data:

- `ZeroingRegularizer`: $r(m) = m^2 / (2\eta)$, so $\eta \nabla r(m) = m$ and every step
  starts from 0: the last model is one step of DP-SGD,
  $m_T / (\eta C) \sim \mathrm{Bernoulli}(q) + \mathcal{N}(0, \sigma^2)$, whatever $T$.
  Where the heuristic is not monotone in $T$ ($\varepsilon_T < \varepsilon_1$), this beats
  it (Section 4.1); `nonmonotone_heuristic_parameters` finds such settings.
- `QuadraticRegularizer`: $r(m) = \alpha m^2 / 2$, so $m_t = \beta m_{t-1} + \eta(C b_t +
  \sigma C \xi_t)$ with $\beta = 1 - \eta\alpha$; the last model is
  $\mathcal{N}(\sum_i \beta^{i-1} b_{T-i+1}, \hat\sigma^2)$,
  $\hat\sigma^2 = \sigma^2 \sum_i \beta^{2(i-1)}$, in units of $\eta C$ (Section 4.2).
  $\alpha = 0$ is the linear loss, $\eta\alpha = 1$ the zeroing regularizer; for
  $\alpha = 1/2$ the exact epsilon can exceed the heuristic maximised over $t \le T$
  (`quadratic_exact_epsilon`).

The adversary that exploits both is the existing projection score
(`advsim.adversaries.ProjectionScore`): every atom of the canary's contribution is
$\ge 0$, so the likelihood ratio is increasing in the projection and thresholding it is the
Neyman-Pearson test; `projection_law` also lets `LikelihoodRatioScore` run on them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Unpack

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import (
    AbstractMechanism,
    AbstractProjectionLaw,
    AbstractScalarLaw,
    DPSGDOptions,
    DPSGDParams,
)
from advsim.bounds import (
    heuristic_epsilon,
    heuristic_epsilon_curve,
    quadratic_exact_epsilon,
    quadratic_law,
    run_facts,
)
from advsim.validation import as_traced_float, check_delta, check_nonnegative

__all__ = [
    "QuadraticRegularizer",
    "ZeroingRegularizer",
    "nonmonotone_heuristic_parameters",
    "quadratic_exact_epsilon",
    "quadratic_law",
]

#: Beyond this many canary steps `QuadraticRegularizer.projection_law` (2^n atoms, built
#: inside jit) refuses; the projection score is equally optimal.
MAX_LAW_STEPS = 12


def _canary_prob(mech: AbstractMechanism):
    """The canary's presence probability at a schedule step (traced; 1 if unsampled)."""
    sampled = mech.canary_schedule.sampled and mech.batching == "poisson"
    return jnp.asarray(mech.sampling_prob if sampled else 1.0, jnp.float32)


class _AbstractRegularizedLinear(AbstractProjectionLaw, AbstractScalarLaw):
    """The 1-D linear loss $-Cm$ of Section 4 of arXiv:2410.06186 (the canary's clipped
    gradient is $-C$, so descent moves the model up) under a regularizer a subclass
    supplies: what the two regularizer counterexamples share."""

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((1,), jnp.float32)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        return -jnp.asarray(self.clip_norm, model.dtype) * jnp.ones_like(model)

    def _curvature(self) -> float:
        """The regularizer's curvature a (r(m) = a m^2 / 2)."""
        raise NotImplementedError

    def facts(self):
        """What this run certifies for `advsim.bounds` (`ProcessFacts`): the canary's
        linear loss (gradient -C), no other data, the quadratic regularizer a m^2 / 2 (the
        objective a-strongly convex and a-smooth in both worlds; its gradient unbounded on
        the line), no projection."""
        a = self._curvature()
        return run_facts(
            self, num_examples=1, dimension=1, linear=a == 0.0, convex=True,
            strong_convexity=a, objective_smoothness=a, example_strong_convexity=0.0,
            smoothness=0.0, regularizer_smoothness=a,
            regularizer_lipschitz=math.inf if a > 0 else 0.0, regularizer_zero=a == 0.0,
            lipschitz=float(self.clip_norm), holder=lambda beta: 0.0,
            source=f"{type(self).__name__}: linear canary, quadratic regularizer",
        )  # fmt: skip


class ZeroingRegularizer(_AbstractRegularizedLinear):
    r"""Linear loss plus $r(m) = m^2 / (2\eta)$: every step erases the model.

    Section 4.1 of arXiv:2410.06186: $\eta \nabla r(m) = m$, so
    $m_t = \eta (C b_t - \sigma C \xi_t)$ keeps only step $t$, and the last model has the
    privacy of one step, $\varepsilon_1$, which exceeds the heuristic $\varepsilon_T$ when
    the heuristic is not monotone in $T$ (see `nonmonotone_heuristic_parameters`). The
    heuristic maximised over $t \le T$ is not beaten.

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        **dpsgd: clip_norm (C > 0), learning_rate (eta > 0), canary_schedule (default:
            every step, sampled), batching ("poisson" default, or "fixed"): `DPSGDOptions`.
            With learning_rate eta != 1, m - eta (m / eta) is m only up to float32
            rounding (~1e-7 relative).

    Example:
        >>> mech = ZeroingRegularizer(steps=10, sampling_prob=0.01, noise_multiplier=0.5)
        >>> round(mech.exact_epsilon(1e-5), 3)  # one step's epsilon, any T
        3.025
    """

    params: DPSGDParams

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)

    def regularizer_gradient(
        self, model: Float[Array, " d"], t: Int[Array, ""]
    ) -> Float[Array, " d"]:
        return model / jnp.asarray(self.learning_rate, model.dtype)

    def _curvature(self) -> float:
        return 1.0 / float(self.learning_rate)

    def _last_step_carries_canary(self) -> bool:
        return self.steps in self.canary_schedule.steps(self.steps)

    def projection_law(self):
        """The law of m_T / (eta C): Bernoulli(q) + N(0, sigma^2) in, N(0, sigma^2) out.

        Only the last step survives, so the canary contributes iff the last step can carry
        it (probability q, or 1 for an unsampled schedule or a fixed batch).

        Returns:
            `(support, log_probs, scale)` as jax arrays, for `LikelihoodRatioScore`.
        """
        scale = jnp.asarray(self.noise_multiplier, jnp.float32)
        if not self._last_step_carries_canary():
            return jnp.zeros(1), jnp.zeros(1), scale
        p = _canary_prob(self)
        return jnp.array([0.0, 1.0]), jnp.stack([jnp.log1p(-p), jnp.log(p)]), scale

    def exact_epsilon(self, delta) -> float:
        """The last model's eps(delta): one step's, `heuristic_epsilon(delta, 1, q, sigma)`."""
        delta = check_delta("delta", delta)
        if not self._last_step_carries_canary():
            return 0.0
        acc = self.accounting()
        return heuristic_epsilon(delta, 1, acc.sampling_prob, acc.noise_multiplier)

    @classmethod
    def contract_examples(cls) -> dict[str, ZeroingRegularizer]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        return {"default": cls(10, 0.2, 1.5)}


class QuadraticRegularizer(_AbstractRegularizedLinear):
    r"""Linear loss plus $r(m) = \alpha m^2 / 2$ in one dimension (Section 4.2).

    The update is $m_t = (1 - \eta\alpha) m_{t-1} + \eta (C b_t - \sigma C \xi_t)$, so the
    last model, in units of $\eta C$, is
    $\mathcal{N}(\sum_{i=1}^T \beta^{i-1} b_{T-i+1}, \hat\sigma^2)$ with
    $\beta = 1 - \eta\alpha$ and $\hat\sigma^2 = \sigma^2 \sum_i \beta^{2(i-1)}$, against
    $\mathcal{N}(0, \hat\sigma^2)$ (Section 4.2 of arXiv:2410.06186, $\eta = 1$ there).
    `exact_epsilon` computes its epsilon (`quadratic_exact_epsilon`).

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        alpha: the regularizer's strength, with 0 <= eta * alpha <= 1 (traced).
        **dpsgd: clip_norm (C > 0), learning_rate (eta > 0), canary_schedule (default:
            every step, sampled), batching ("poisson" default, or "fixed"): `DPSGDOptions`.
            The paper uses learning_rate = 1.

    Example:
        >>> mech = QuadraticRegularizer(steps=3, sampling_prob=0.1, noise_multiplier=1.0,
        ...                             alpha=0.5)
        >>> round(mech.exact_epsilon(1e-6), 4)  # Section 4.2: not DP for eps < 2.274
        2.2749
    """

    params: DPSGDParams
    alpha: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        alpha: float,
        **dpsgd: Unpack[DPSGDOptions],
    ):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        self.alpha = as_traced_float("alpha", alpha, check_nonnegative)
        if float(self.alpha) * float(self.learning_rate) > 1.0:
            raise ValueError(
                f"alpha must be in [0, 1 / learning_rate] = [0, {1 / float(self.learning_rate):g}]"
                f", got {float(self.alpha)!r}"
            )

    def regularizer_gradient(
        self, model: Float[Array, " d"], t: Int[Array, ""]
    ) -> Float[Array, " d"]:
        return jnp.asarray(self.alpha, model.dtype) * model

    def _curvature(self) -> float:
        return float(self.alpha)

    def _beta(self, dtype=jnp.float32):
        return 1.0 - jnp.asarray(self.learning_rate, dtype) * jnp.asarray(self.alpha, dtype)

    def noise_scale(self):
        r"""$\hat\sigma = \sigma \sqrt{\sum_{i=1}^T \beta^{2(i-1)}}$ (jittable)."""
        beta = self._beta()
        powers = beta ** jnp.arange(self.steps, dtype=jnp.float32)
        return jnp.asarray(self.noise_multiplier, jnp.float32) * jnp.sqrt(jnp.sum(powers**2))

    def projection_law(self):
        """The law of m_T / (eta C): all 2^n canary patterns enumerated (jittable).

        Only for n <= 12 canary steps (`MAX_LAW_STEPS`); the projection score is the
        same test for any n (the likelihood ratio is increasing in the projection).

        Returns:
            `(support, log_probs, scale)` as jax arrays, for `LikelihoodRatioScore`.
        """
        canary = np.asarray(self.canary_schedule.steps(self.steps))
        if canary.size > MAX_LAW_STEPS:
            raise ValueError(
                f"projection_law enumerates 2^n atoms and allows n <= {MAX_LAW_STEPS} canary "
                f"steps, got {canary.size}; use ProjectionScore (the same test)"
            )
        bits = np.array(list(itertools.product((0.0, 1.0), repeat=canary.size)), np.float32)
        beta = self._beta()
        weights = beta ** jnp.asarray(self.steps - canary, jnp.float32)  # beta^(T - t)
        p = _canary_prob(self)
        n_ones = bits.sum(axis=1)
        support = jnp.asarray(bits) @ weights
        log_probs = n_ones * jnp.log(p) + (canary.size - n_ones) * jnp.log1p(-p)
        # p = 1: (n - k) * log(0) would be 0 * -inf = NaN for k = n.
        log_probs = jnp.where(n_ones == canary.size, canary.size * jnp.log(p), log_probs)
        return support, log_probs, self.noise_scale()

    def _law_arguments(self, rounding: str) -> tuple[tuple, dict]:
        """The arguments of `quadratic_law` and `quadratic_exact_epsilon` for this run."""
        acc = self.accounting()
        args = (self.steps, acc.sampling_prob, acc.noise_multiplier, float(self.alpha))
        options = dict(
            learning_rate=float(self.learning_rate),
            canary_steps=acc.canary_steps,
            rounding=rounding,
        )
        return args, options

    def output_law(self, rounding: str = "auto"):
        """Host-side (float64) law: `(support, probs, scale, rounded)`; see `quadratic_law`."""
        args, options = self._law_arguments(rounding)
        return quadratic_law(*args, **options)

    def exact_epsilon(self, delta, *, rounding: str = "auto") -> float:
        """The last model's eps(delta) (`quadratic_exact_epsilon`, both directions)."""
        args, options = self._law_arguments(rounding)
        return quadratic_exact_epsilon(delta, *args, **options)

    @classmethod
    def contract_examples(cls) -> dict[str, QuadraticRegularizer]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        return {"alpha-0.5": cls(10, 0.2, 1.5, alpha=0.5)}


def nonmonotone_heuristic_parameters(
    delta,
    *,
    steps: Sequence[int] = (2, 3, 5, 10, 20, 50, 100),
    sampling_probs: Sequence[float] = (0.001, 0.003, 0.01, 0.03, 0.1),
    noise_multipliers: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5),
) -> list[dict]:
    r"""Settings where the heuristic is not monotone in T: $\varepsilon_T < \varepsilon_1$.

    Section 4.1 of arXiv:2410.06186: there the zeroing regularizer (one step's privacy
    whatever $T$) beats the heuristic $\varepsilon_T$. Every $(T, q, \sigma)$ of the grid
    is evaluated with `heuristic_epsilon_curve` (batched over T).

    Args:
        delta: $\delta \in (0, 1)$.
        steps, sampling_probs, noise_multipliers: the grid.

    Returns:
        One dict per counterexample (keys `steps`, `sampling_prob`, `noise_multiplier`,
        `eps_T`, `eps_1`, `ratio` = eps_1 / eps_T), largest ratio first.

    Example:
        >>> best = nonmonotone_heuristic_parameters(1e-5)[0]
        >>> best["eps_1"] > best["eps_T"]
        True
    """
    delta = check_delta("delta", delta)
    ts = np.asarray(sorted(set(int(t) for t in steps)))
    found = []
    for q in sampling_probs:
        for sigma in noise_multipliers:
            curve = heuristic_epsilon_curve(delta, np.concatenate([[1], ts]), q, sigma)
            eps_1, eps_t = float(curve[0]), curve[1:]
            for t, e in zip(ts.tolist(), eps_t.tolist(), strict=True):
                if e < eps_1:
                    found.append(
                        dict(
                            steps=t,
                            sampling_prob=float(q),
                            noise_multiplier=float(sigma),
                            eps_T=e,
                            eps_1=eps_1,
                            ratio=eps_1 / e if e > 0 else math.inf,
                        )
                    )
    found.sort(key=lambda r: -r["ratio"])
    return found

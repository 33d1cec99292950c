r"""The threshold loss landscape: a canary at step 1 whose side the landscape keeps.

Section 6 ("Towards a Worst-Case Adversary for the Hidden State") of Cebere, Bellet &
Papernot, "Tighter Privacy Auditing of DP-SGD in the Hidden State Threat Model"
(arXiv:2405.14457, ICLR 2025), Eq. (3): the one-dimensional pair of processes

$$\theta_1 = b\,C + Z_1, \qquad
  \theta_{t+1} = \theta_t - \tfrac{1}{B}\big(g(\theta_t) + Z_{t+1}\big), \quad t \ge 1,$$

with $Z_t \sim \mathcal{N}(0, C^2\sigma^2)$, $b \in \{0, 1\}$ the canary's presence (its
crafted gradient $\nabla^* = C$ is used at step 1 only) and the adversary's landscape
$g_{\phi}(\theta) = \pm BC$ by the threshold test $\theta > h$, $h^* = C/2$ by default
(the midpoint of $\mathcal{N}(0, \sigma^2 C^2)$ and $\mathcal{N}(C, \sigma^2 C^2)$, the
minimum-$\alpha + \beta$ test between the two laws of $\theta_1$).

Orientation. The paper writes $g_\phi = +BC$ if $\theta > h$, which with the descent sign
of Eq. (3) would move a model above $h$ *down* by $C$ per step: the landscape would flip
the model back across $h$ and forget the canary's side (`orientation="restore"`: with
$10^6$ runs the GDP audit at T = 25 falls from 4.33 at T = 1 to 0.02 at $\sigma = 1$,
B = 16, and to 0.005 at $\sigma = 4$, B = 1). The adversary's intent, "the crafted
gradient maximally biases subsequent steps" (Appendix F and its Figure 10/11: a loss
that decreases away from $h$ on both sides), is the reinforcing orientation used by
default here: $g(\theta) = -BC$ if $\theta > h$ else $+BC$, so every step moves the model
a further $C$ away from $h$ on the side it is on, while the noise of a step is only
$\sigma C / B$: for $B \gg \sigma$ the side chosen at step 1 is kept forever and the last
model leaks what $\theta_1$ leaks (no amplification, Implication 2); for $B \lesssim
\sigma$ the noise can still push the model across $h$ and privacy is amplified
(Implication 3).

As a DP-SGD run (`advsim` engine): a fixed batch of B identical examples whose clipped
per-example gradient is $\mp C$ (norm exactly C), and a canary present deterministically
at step 1 only (`CanarySchedule.only(1, sampled=False)`), with gradient $-C$. Step 1 has
step size 1 and no data gradient (so $\theta_1 = bC + Z_1$); steps $t \ge 2$ have step
size $1/B$ (the averaged update). Since the canary is used once, unsampled, the accounting
is one Gaussian mechanism of sensitivity C and noise $\sigma C$: $\mu = 1/\sigma$ GDP at
every T (the step sizes do not enter the accounting).

The exact laws of $\theta_T$: at T = 2 in closed form in `advsim.bounds`
(`two_step_density`, `two_step_epsilon`, `two_step_gdp_curve`; the reference for the
Algorithm-5 threshold search, `advsim.adversaries.ThresholdSearch`; `advsim/bounds/_landscape.py`
says what they show), and at any T from the exact-law engine `advsim.exact` (the mechanism
is an `AbstractScalarLaw` whose threshold is its field's breakpoint): `landscape_law`,
`landscape_epsilon`, `landscape_epsilon_curve` here. In short: for small B the GDP audits
(the paper's, Remark 3) read the central tests, which
keep the side chosen at step 1, as a Gaussian trade-off and can exceed the exact
$\varepsilon(\delta)$ by far (3.9 vs 1.09 at $\sigma = 1$, B = 1, T = 25); the
assumption-free (eps, delta) audit stays below it.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from advsim import AbstractScalarLaw, AbstractThresholdLandscape, CanarySchedule, DPSGDParams
from advsim.bounds import (  # the closed forms at T = 2, exported beside the landscape
    ORIENTATIONS,
    two_step_density,
    two_step_epsilon,
    two_step_gdp_curve,
)
from advsim.exact import ExactEpsilon, last_iterate_epsilon
from advsim.validation import as_traced_float, check_delta, check_finite, check_int

__all__ = [
    "ThresholdLandscape",
    "landscape_epsilon",
    "landscape_epsilon_curve",
    "landscape_law",
    "two_step_density",
    "two_step_epsilon",
    "two_step_gdp_curve",
]


class ThresholdLandscape(AbstractThresholdLandscape, AbstractScalarLaw):
    r"""DP-SGD on the threshold landscape of Eq. (3) of arXiv:2405.14457 (adversary $A_S^h$).

    See the module docstring. The model is 1-D; the release $m_T = \theta_T$; the score
    of `advsim.adversaries.ProjectionScore` (the canary's descent direction, +1) reads it
    directly.

    Args:
        steps: T >= 1 (the canary is at step 1; T = 1 releases $\theta_1$).
        noise_multiplier: sigma > 0.
        batch_size: B >= 1, the fixed batch of identical examples at steps t >= 2
            (stored as a traced array, so a sweep over B reuses one compilation).
        threshold: h, in the model's units (default C / 2, the paper's $h^*$).
        clip_norm: C > 0.
        orientation: "reinforce" (default: $g = -BC$ above h, the model keeps its side)
            or "restore" (the literal sign of the paper's $g_{\phi^*}$ under Eq. (3)'s
            descent: $g = +BC$ above h, the model is pushed back across h; for
            comparison only).

    Raises:
        ValueError: bad values, naming the parameter and its valid range.

    Example:
        >>> mech = ThresholdLandscape(steps=25, noise_multiplier=2.0, batch_size=16)
        >>> float(mech.threshold), mech.accounting().canary_steps
        (0.5, (1,))
    """

    params: DPSGDParams
    batch_size: np.ndarray
    threshold: np.ndarray
    orientation: Literal["reinforce", "restore"] = eqx.field(static=True)

    def __init__(
        self,
        steps: int,
        noise_multiplier: float,
        batch_size: int,
        *,
        threshold: float | None = None,
        clip_norm: float = 1.0,
        orientation: Literal["reinforce", "restore"] = "reinforce",
    ):
        batch_size = check_int("batch_size", batch_size, minimum=1, maximum=2**31 - 1)
        self.params = DPSGDParams(
            steps=steps,
            sampling_prob=1.0,
            noise_multiplier=noise_multiplier,
            clip_norm=clip_norm,
            learning_rate=1.0 / batch_size,
            batching="fixed",
            canary_schedule=CanarySchedule.only(1, sampled=False),
        )
        self.batch_size = np.asarray(batch_size, np.int32)
        if threshold is None:
            threshold = float(self.clip_norm) / 2.0
        self.threshold = as_traced_float("threshold", threshold, check_finite)
        if orientation not in ORIENTATIONS:
            raise ValueError(f"orientation must be one of {ORIENTATIONS}, got {orientation!r}")
        self.orientation = orientation

    def init_model(self) -> Float[Array, " d"]:
        return jnp.zeros((1,), jnp.float32)

    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        # nabla^* = C as a descent move: the gradient is -C, so step 1 moves theta by +C.
        return -jnp.asarray(self.clip_norm, model.dtype) * jnp.ones_like(model)

    def side(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        """s(theta) = +1 if theta > h else -1 (the threshold test $\\phi_h$)."""
        h = jnp.asarray(self.threshold, model.dtype)
        return jnp.where(model > h, 1.0, -1.0).astype(model.dtype)

    def example_gradient(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        """One example's gradient g / B: $-C s(\\theta)$ ("reinforce") or $+C s(\\theta)$."""
        c = jnp.asarray(self.clip_norm, model.dtype)
        sign = -1.0 if self.orientation == "reinforce" else 1.0
        return sign * c * self.side(model)

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        # Step 1 is the canary's alone (theta_1 = b C + Z_1); the batch acts from step 2.
        g = self.example_gradient(model)
        return jnp.where(t >= 2, g, jnp.zeros_like(g))[None, :]

    def data_counts(self) -> Int[Array, " g"]:
        return jnp.asarray(self.batch_size)[None]

    def field_breakpoints(self) -> Float[Array, " k"]:
        """The threshold h, where the examples' field jumps (for `advsim.exact`)."""
        return jnp.asarray(self.threshold)[None]

    def step_size(self, t: Int[Array, ""]):
        """1 at step 1 (theta_1 = b C + Z_1), 1/B afterwards (Eq. (3))."""
        return jnp.where(t == 1, 1.0, jnp.asarray(self.learning_rate))

    @classmethod
    def contract_examples(cls) -> dict[str, ThresholdLandscape]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        return {"batch-4": cls(6, 2.0, 4)}


def landscape_law(
    delta: float,
    steps: int,
    noise_multiplier: float,
    batch_size: int,
    *,
    every_step: bool = False,
    **landscape,
) -> ExactEpsilon:
    r"""The exact law of $\theta_T$ in both worlds and its $\varepsilon(\delta)$, from
    `advsim.exact.last_iterate_epsilon` on `ThresholdLandscape` (grid-propagated, three
    grids; `.error` is the refinement estimate, about 1e-5 relative here).

    Args:
        delta: $\delta \in (0, 1)$.
        steps, noise_multiplier, batch_size: as `ThresholdLandscape`.
        every_step: also the law's epsilon after every step (`epsilon_per_step`).
        **landscape: `ThresholdLandscape`'s keywords (`threshold`, `clip_norm`,
            `orientation`), checked there.
    """
    mech = ThresholdLandscape(steps, noise_multiplier, batch_size, **landscape)
    return last_iterate_epsilon(mech, check_delta("delta", delta), every_step=every_step)


def landscape_epsilon(delta: float, steps: int, noise_multiplier: float, batch_size: int, **kw):
    r"""The exact $\varepsilon(\delta)$ of the release $\theta_T$ (`landscape_law`): the
    privacy of the last model that any audit of this landscape can at most certify. At T = 1
    it is the accounting's `gdp_epsilon(delta, 1 / sigma)`, at T = 2
    `advsim.bounds.two_step_epsilon`. Keywords as `landscape_law`."""
    return landscape_law(delta, steps, noise_multiplier, batch_size, **kw).epsilon


def landscape_epsilon_curve(
    delta: float, steps: int, noise_multiplier: float, batch_size: int, **kw
) -> np.ndarray:
    """`landscape_epsilon` at every T = 1..`steps`, from one propagation (array of T)."""
    law = landscape_law(delta, steps, noise_multiplier, batch_size, every_step=True, **kw)
    return np.asarray(law.epsilon_per_step, np.float64)

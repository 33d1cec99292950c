"""The mechanism abstraction: one DP-SGD run, described by its gradients.

A mechanism says *what* the gradients are (the canary's, the other examples', the
regularizer's); the engine in `advsim._dpsgd` says *how* they are used: it clips every
example's gradient to norm `clip_norm`, samples the batch, adds Gaussian noise and applies
the regularizer's gradient unclipped. So a user-written mechanism cannot break the privacy
guarantee by accident, and `mechanism.accounting()` is always the right record to bound it
with.

Here: `AbstractMechanism` and the capability bases an adversary checks with `isinstance`.
The hyperparameter record every mechanism holds (`DPSGDParams`, `DPSGDOptions`) lives in
`advsim._records`, the canary's schedule (`CanarySchedule`) in `advsim._schedule`. This
module is private: its public names are those `advsim` exports.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from advsim._accounting import Accounting
from advsim._records import DPSGDParams
from advsim._schedule import CanarySchedule
from advsim._validation import check_int, check_positive, check_probability


class AbstractMechanism(eqx.Module):
    """One DP-SGD run, described by its gradients; the engine does the privacy part.

    Concrete mechanisms are final `eqx.Module`s that hold their hyperparameters in one
    `DPSGDParams` field, `params`, and implement `init_model` and `canary_gradient`; they may
    override `data_gradients` / `data_counts` (the other examples, as groups of identical
    examples with counts) and `regularizer_gradient` (applied unclipped). The update of step
    t (1-indexed) is

    $$m_t = m_{t-1} - \\eta \\Big( \\sum_{g} n_{g,t}\\, \\mathrm{clip}_C(\\nabla_g)
        + b_t\\, \\mathrm{clip}_C(\\nabla_{canary}) + \\nabla r(m_{t-1}) + \\xi_t \\Big),
        \\quad \\xi_t \\sim N(0, \\sigma^2 C^2 I),$$

    with $n_{g,t} \\sim \\mathrm{Binomial}(\\mathrm{count}_g, q)$ under Poisson sampling
    (or $n_{g,t} = \\mathrm{count}_g$ for a fixed batch) and $b_t$ the canary's presence,
    i.e. Algorithm 1 of arXiv:2410.06186 (Poisson sampling, add/remove neighbours, an
    unclipped regularizer). Use `learning_rate = 1/B` for the averaged update of a fixed
    batch of size B.

    The one field every concrete mechanism declares:
        params: a `DPSGDParams` (steps, sampling_prob, noise_multiplier, clip_norm,
            learning_rate, canary_schedule, batching), read through the properties below.

    Example (a complete mechanism):
        >>> import equinox as eqx, jax.numpy as jnp
        >>> class Offset(AbstractMechanism):
        ...     params: DPSGDParams
        ...     def __init__(self, steps, sampling_prob, noise_multiplier):
        ...         self.params = DPSGDParams(steps, sampling_prob, noise_multiplier)
        ...     def init_model(self):
        ...         return jnp.zeros((1,))
        ...     def canary_gradient(self, model, t):
        ...         return -jnp.ones_like(model)
        >>> Offset(10, 0.1, 1.0).accounting().num_canary_steps
        10
    """

    params: eqx.AbstractVar[DPSGDParams]

    #: Set True by mechanisms whose numerics need float64 (jax_enable_x64).
    requires_x64: ClassVar[bool] = False
    #: Why this class's methods read `steps` (T), for a mechanism that does so by design:
    #: its model's shape or a constant depends on T. Methods that do not read it (a value
    #: derived from T can be an array field set in `__init__`) let `simulate` run every T
    #: of a sweep in one compiled program; the engine finds out itself which case holds
    #: (`advsim.testing.steps_readers`), and the `one_program` check of
    #: `advsim.testing.check_mechanism` fails for a class that reads T without saying why
    #: here.
    reads_steps: ClassVar[str | None] = None

    def in_heuristic_family(self) -> bool:
        """Whether this mechanism's last model is exactly in the last-iterate heuristic's
        family (its tight case), where the family audit's assumption holds. It decides the
        default audit everywhere (`advsim.experiment.default_audit_method`: `run_audit`,
        each cell of a sweep, `advsim audit`): "family" where True, the assumption-free
        "eps_delta" elsewhere. False unless a class says which of its instances are in
        the family (`LinearProcess` without data gradients)."""
        return False

    def __check_init__(self):
        # Runs after every concrete mechanism's __init__ (equinox): the record was checked
        # when it was built, so only its type is left to check here.
        if not isinstance(self.params, DPSGDParams):
            raise TypeError(
                f"{type(self).__name__}.params must be a DPSGDParams, got "
                f"{type(self.params).__name__}"
            )

    @property
    def steps(self) -> int:
        """T, the number of steps (static)."""
        return self.params.steps

    @property
    def sampling_prob(self) -> np.ndarray:
        """q, the Poisson sampling probability (a 0-d array; traced under jit)."""
        return self.params.sampling_prob

    @property
    def noise_multiplier(self) -> np.ndarray:
        """sigma, the noise multiplier (a 0-d array; traced under jit)."""
        return self.params.noise_multiplier

    @property
    def clip_norm(self) -> np.ndarray:
        """C, the clip norm (a 0-d array; traced under jit)."""
        return self.params.clip_norm

    @property
    def learning_rate(self) -> np.ndarray:
        """eta, the learning rate (a 0-d array; traced under jit)."""
        return self.params.learning_rate

    @property
    def canary_schedule(self) -> CanarySchedule:
        """Which steps can carry the canary."""
        return self.params.canary_schedule

    @property
    def batching(self) -> Literal["poisson", "fixed"]:
        """Either 'poisson' (Poisson sampling) or 'fixed' (every example in every batch)."""
        return self.params.batching

    @abc.abstractmethod
    def init_model(self) -> Float[Array, " d"]:
        """The initial model m_0 (public, identical in both worlds)."""

    @abc.abstractmethod
    def canary_gradient(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, " d"]:
        """The canary's (unclipped) gradient at `model` in step `t`."""

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "g d"]:
        """Per-example gradients of the other examples, one row per group (default: none)."""
        return jnp.zeros((0, model.shape[-1]), model.dtype)

    def data_counts(self) -> Int[Array, " g"]:
        """How many identical examples each group holds (default: no groups)."""
        return jnp.zeros((0,), jnp.int32)

    def regularizer_gradient(
        self, model: Float[Array, " d"], t: Int[Array, ""]
    ) -> Float[Array, " d"]:
        """Gradient of the regularizer r at `model`; the engine never clips it (default 0)."""
        return jnp.zeros_like(model)

    def step_size(self, t: Int[Array, ""]):
        r"""The learning rate of step `t` (default: `learning_rate` at every step).

        Override for a schedule fixed before training (public, the same in both worlds),
        e.g. the threshold landscape's first step of size 1 followed by averaged steps of
        size 1/B. The engine multiplies the whole update (gradients and noise) by it.

        What it changes: the composition bounds, where every iterate is released, not at
        all (each update is scaled by a public nonzero constant, so the iterates of one
        schedule are an invertible post-processing of those of another); the last
        iterate's privacy, yes: for a linear loss the last model is
        $m_0 + \sum_t \eta_t (b_t C + \sigma C \xi_t)$, so the last-iterate heuristic
        (Theorem 1 of arXiv:2410.06186) weights step t by $\eta_t$. `accounting()`
        records the schedule (`Accounting.step_sizes`) for that reason.
        """
        return self.learning_rate

    def _step_sizes(self) -> tuple[float, ...] | None:
        """eta_t for t = 1..T on the host (float64), or None when the class keeps the
        default `step_size` (one learning rate) or every step has the same size."""
        if type(self).step_size is AbstractMechanism.step_size:
            return None
        with jax.enable_x64(True):
            ts = jnp.arange(1, self.steps + 1, dtype=jnp.int32)
            etas = jax.vmap(lambda t: jnp.asarray(self.step_size(t), jnp.float64))(ts)
            etas = np.asarray(etas, np.float64).reshape(-1)
        if etas.size != self.steps:
            raise ValueError(
                f"{type(self).__name__}.step_size(t) must be a scalar, got {etas.size} "
                f"values over steps={self.steps}"
            )
        return None if np.all(etas == etas[0]) else tuple(etas.tolist())

    def accounting(self) -> Accounting:
        """What the bounds need: steps, the canary's sampling rate, sigma, its steps and,
        when `step_size` varies over the steps, the schedule (`Accounting.step_sizes`)."""
        canary_steps = self.canary_schedule.steps(self.steps)
        if not canary_steps:
            raise ValueError(
                f"canary_schedule {self.canary_schedule} puts the canary in no step of "
                f"steps={self.steps}"
            )
        sampled = self.params.canary_sampled
        return Accounting(
            steps=self.steps,
            sampling_prob=float(self.sampling_prob) if sampled else 1.0,
            noise_multiplier=float(self.noise_multiplier),
            canary_steps=canary_steps,
            step_sizes=self._step_sizes(),
        )


def poisson_batch_bound(num_examples: int, sampling_prob: float, sds: float = 6.0) -> int:
    """A fixed maximum batch for Poisson sampling: $qn + s\\sqrt{qn(1-q)}$ (default s = 6
    standard deviations), rounded up to a multiple of 8 and capped at n.

    The engine stays exact when a sampled batch exceeds it (it computes further blocks, see
    `AbstractPerExampleData`); the bound only sets how much work a typical step does.

    Example:
        >>> poisson_batch_bound(427, 64 / 427)
        112
    """
    n = check_int("num_examples", num_examples, minimum=1)
    q = float(check_probability("sampling_prob", sampling_prob))
    sds = float(check_positive("sds", sds))
    mean = q * n
    bound = mean + sds * math.sqrt(mean * (1.0 - q))
    return int(min(n, 8 * math.ceil(max(bound, 1.0) / 8)))


# --- Capabilities -------------------------------------------------------------------------------
# What an adversary may need beyond `AbstractMechanism` is declared on an abstract base that
# the mechanism subclasses, and the adversary checks it with `isinstance` (equinox's
# abstract/final pattern), never with `hasattr`.


class AbstractPerExampleData(AbstractMechanism):
    r"""A mechanism whose $n$ training examples are Poisson-sampled one by one.

    Instead of groups of identical examples, it supplies the gradients of any examples by
    index, `example_gradients(model, indices, t)`, and the engine computes only the sampled
    ones: at each step it draws every example's membership $\mathrm{Bernoulli}(q)$
    (Poisson sampling, from the run's counter-based random bits), gathers the sampled indices in
    index order into blocks of `max_batch_size` $B$ (padding masked out), and sums the
    clipped `vmap(grad)` rows of block after block (a `lax.while_loop`) until every sampled
    example is in: $\lceil k / B \rceil$ blocks for $k$ sampled examples (at least one).
    No example is ever dropped; a batch larger than $B$ costs one more block of work, and
    under `vmap` every lane runs the largest number of blocks of its batch of runs (results
    of the other lanes are unchanged: their extra blocks are masked out). With
    `max_batch_size` $\geq n$ (or fixed batching) the engine computes all $n$ rows every
    step, weighted by the memberships (the same draws, so the same models up to the order
    of float additions).

    Fields: `num_examples` n and `max_batch_size` B, both static (they set shapes);
    `poisson_batch_bound(n, q)` is a good B. `data_gradients` / `data_counts` are all n
    examples' gradients with counts 1, for code that wants every example.
    """

    num_examples: eqx.AbstractVar[int]
    max_batch_size: eqx.AbstractVar[int]

    @abc.abstractmethod
    def example_gradients(
        self, model: Float[Array, " d"], indices: Int[Array, " k"], t: Int[Array, ""]
    ) -> Float[Array, "k d"]:
        """The (unclipped) gradients of the examples `indices` (in [0, n)) at `model`."""

    def data_gradients(self, model: Float[Array, " d"], t: Int[Array, ""]) -> Float[Array, "n d"]:
        return self.example_gradients(model, jnp.arange(self.num_examples, dtype=jnp.int32), t)

    def data_counts(self) -> Int[Array, " n"]:
        return jnp.ones((self.num_examples,), jnp.int32)


class AbstractProjected(AbstractMechanism):
    r"""Projected DP-SGD: every update is followed by the projection onto a closed convex set.

    The engine applies `project` to $m_t$ after each step of Algorithm 1 (clipping,
    sampling, noise and regularizer unchanged), so $m_t = \Pi_K(m_{t-1} - \eta(\dots))$:
    the algorithm of the hidden-state bounds for convex losses over a bounded set
    (Altschuler and Talwar 2022; Bok, Su and Altschuler, arXiv:2403.00278), whose bound
    needs the set's `diameter`. Projection is post-processing of each step's release, so
    `accounting()` and the composition bound are unchanged.
    """

    @property
    @abc.abstractmethod
    def diameter(self) -> float:
        """D, the diameter of the set K the model is projected onto."""

    @abc.abstractmethod
    def project(self, model: Float[Array, " d"]) -> Float[Array, " d"]:
        r"""$\Pi_K(m)$, the Euclidean projection onto K (pure, jittable)."""


class AbstractMultiCanary(AbstractMechanism):
    """A mechanism with m canaries in one run, each present or not by its own bit.

    The capability `advsim.one_run.simulate_one_run` needs: `num_canaries` (static),
    `with_included(bits)` (the same run with canary j in the dataset iff `bits[j]`) and a
    jittable `canary_scores(model)` (m scores of the released last model, higher meaning
    "included").
    """

    num_canaries: eqx.AbstractVar[int]

    @abc.abstractmethod
    def with_included(self, included: Bool[Array, " m"]) -> AbstractMultiCanary:
        """The same run with canary j in the dataset iff `included[j]`."""

    @abc.abstractmethod
    def canary_scores(self, model: Float[Array, " d"]) -> Float[Array, " m"]:
        """The m canaries' scores of the released model."""


class AbstractProjectionLaw(AbstractMechanism):
    """A mechanism whose projected last model has a known law in both worlds.

    `projection_law()` returns `(support, log_probs, scale)`: the last model's displacement
    along the canary's descent direction, in units of $\\eta C$, is $N(X, s^2)$ with $X$ on
    `support` (log-probabilities `log_probs`) in, and $N(0, s^2)$ out. Needed by
    `advsim.adversaries.LikelihoodRatioScore`.
    """

    @abc.abstractmethod
    def projection_law(self) -> tuple[Float[Array, " k"], Float[Array, " k"], Float[Array, ""]]:
        """`(support, log_probs, scale)` of the projected last model (see the class)."""


class AbstractCoordinateLaws(AbstractMechanism):
    """A mechanism whose last model's coordinates are independent noisy canary bits.

    `coordinate_laws()` returns `(unit, scale, prob)`, arrays over coordinates: coordinate
    i divided by `unit[i]` is $b_i + N(0, s_i^2)$ with $b_i \\sim \\mathrm{Bernoulli}(p_i)$
    in and $b_i = 0$ out. Needed by `advsim.adversaries.CoordinateLikelihoodRatio`.
    """

    @abc.abstractmethod
    def coordinate_laws(self) -> tuple[Float[Array, " k"], Float[Array, " k"], Float[Array, " k"]]:
        """`(unit, scale, prob)` of the coordinates (see the class)."""


class AbstractSumEncoding(AbstractMechanism):
    """A mechanism that writes a running test statistic into its model.

    `decoded_sum(model)` reads it back from a released model (higher means "canary in").
    Needed by `advsim.adversaries.LikelihoodSumDecoder`.
    """

    @abc.abstractmethod
    def decoded_sum(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        """The statistic encoded in `model`."""


class AbstractDirectedCanary(AbstractMechanism):
    """A mechanism whose canary gradient is a crafted unit direction, scaled to the clip norm.

    Fields: `dim` (static) and `canary_direction` (a unit vector of length `dim`);
    `with_direction(direction)` returns the same run with the canary along `direction` (a
    coordinate index or a vector). Needed by the gradient-crafting adversaries
    (`advsim.adversaries.BiasedCoordinate`, ...).
    """

    dim: eqx.AbstractVar[int]
    canary_direction: eqx.AbstractVar[np.ndarray]

    @abc.abstractmethod
    def with_direction(self, direction) -> AbstractDirectedCanary:
        """The same mechanism with its canary along `direction`."""


class AbstractCanaryExample(AbstractMechanism):
    """A mechanism whose canary is an input-space example (`canary_x`, `canary_y`).

    `canary_loss(model)` and `canary_margin(model)` read the canary's loss and margin off a
    released model. Needed by `advsim.adversaries.CanaryLoss`.
    """

    @abc.abstractmethod
    def canary_loss(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        """The canary's loss at `model`."""

    @abc.abstractmethod
    def canary_margin(self, model: Float[Array, " d"]) -> Float[Array, ""]:
        """The canary's margin at `model` (its label's logit over the others')."""


class AbstractThresholdLandscape(AbstractMechanism):
    """A loss landscape that keeps the side of a threshold the canary chose at step 1.

    Fields: `threshold` h (a traced 0-d array, which the adversary may replace) and
    `batch_size`. Needed by `advsim.adversaries.ThresholdAdversary` and the threshold
    search.
    """

    threshold: eqx.AbstractVar[np.ndarray]
    batch_size: eqx.AbstractVar[np.ndarray]


class AbstractScalarLaw(AbstractMechanism):
    r"""A mechanism whose model is a scalar and whose gradients depend on $(m, t)$ alone.

    Then the last model is a one-dimensional Markov chain, and `advsim.exact` propagates its
    law in both worlds on a grid, step by step, from the mechanism's own methods: the
    canary's field `canary_gradient(m, t)`, the groups' fields `data_gradients(m, t)` with
    `data_counts()`, `regularizer_gradient(m, t)`, `step_size(t)`, the canary schedule,
    the batching and, for an `AbstractProjected` mechanism, the projection onto an interval.
    The simulation and the exact law read the same functions, so they cannot disagree about
    the construction. A mechanism joins by subclassing this base and writing its fields in
    `jax.numpy` (they are evaluated at float64 on the grid's cells); no grid code.

    The contract (checked by `advsim.exact` before any work): `init_model()` has shape (1,)
    and is the same in both worlds, every field returns shape (1,) (groups: (g, 1)), the
    mechanism is not `AbstractPerExampleData`.

    One optional method: `field_breakpoints()`, the model values where a field jumps (a
    threshold). The exact engine then splits the grid cell containing a breakpoint into
    its two sides, so a jump costs no first-order error.
    """

    def field_breakpoints(self) -> Float[Array, " k"]:
        """Model values where some field (canary, data groups, regularizer) jumps, in any
        order (default: none). It decides the exact epsilon's accuracy.

        What it must cover: every jump inside the grid's reach,
        `advsim.exact.grid_reach(mechanism)` (the drift's hull plus 12 accumulated noise
        sds on each side); the law never meets a jump outside it. A field that is kinked
        but continuous needs no entry.

        A periodic field (a sawtooth of period P) lists each of its jumps inside the
        reach, e.g. `P * jnp.arange(math.ceil(lo / P), math.floor(hi / P) + 1)` with
        `lo, hi = grid_reach(...)`, computed in `__init__` and kept as an array field (so
        that no method reads T; a margin of a period on each side costs nothing).

        A jump left out: the cell that straddles it is moved as a whole, to one side, a
        first-order error in the cell width that the refinement estimate
        (`ExactEpsilon.error`, the change between the two finest grids) is not built to
        cover, and that the observed order does not reveal. So the engine probes the
        fields before any work (`advsim.exact.undeclared_jumps`) and warns, naming each
        jump no breakpoint declares (`advsim.exact.UndeclaredJumpWarning`);
        `advsim.testing.check_mechanism` fails on one."""
        return jnp.zeros((0,))

"""The mechanism abstraction: one DP-SGD run, described by its gradients.

A mechanism says *what* the gradients are (the canary's, the other examples', the
regularizer's); the engine in `advsim._dpsgd` says *how* they are used: it clips every
example's gradient to norm `clip_norm`, samples the batch, adds Gaussian noise and applies
the regularizer's gradient unclipped. So a user-written mechanism cannot break the privacy
guarantee by accident, and `mechanism.accounting()` is always the right record to bound it
with.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar, Literal, TypedDict

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from advsim._accounting import Accounting
from advsim._validation import check_int, check_positive, check_probability

__all__ = [
    "AbstractCoordinateLaws",
    "AbstractDirectedCanary",
    "AbstractMechanism",
    "AbstractMultiCanary",
    "AbstractPerExampleData",
    "AbstractProjected",
    "AbstractProjectionLaw",
    "AbstractScalarLaw",
    "AbstractSumEncoding",
    "AbstractThresholdLandscape",
    "CanarySchedule",
    "DPSGDOptions",
    "DPSGDParams",
    "as_traced_float",
    "poisson_batch_bound",
]


def as_traced_float(name: str, value, check) -> np.ndarray:
    """Validates a scalar hyperparameter and stores it as a 0-d float64 numpy array.

    Arrays are traced by `eqx.filter_jit`, so a sweep over this value reuses one compiled
    function; float64 on the host keeps `accounting()` exact (q = 0.01 stays 0.01).
    """
    if isinstance(value, np.ndarray | np.generic) and np.ndim(value) == 0:
        value = value.item()  # a 0-d array is a scalar; anything else is checked as given
    return np.asarray(check(name, value), dtype=np.float64)


class CanarySchedule(eqx.Module):
    """Which steps can carry the canary, and whether it is Poisson-sampled there.

    The canary can be present at steps `first, first + period, first + 2 period, ...` up
    to `last` (default: the last step), 1-indexed as in the papers. At those steps it is in
    the batch with probability `sampling_prob` when `sampled` is True (DP-SGD with Poisson
    sampling), or always when False (a crafted gradient inserted deterministically, or a
    fixed batch).

    Example:
        >>> CanarySchedule.every_step().steps(5)
        (1, 2, 3, 4, 5)
        >>> CanarySchedule.every(3).steps(10)
        (1, 4, 7, 10)
        >>> CanarySchedule.only(1, sampled=False).steps(10)
        (1,)
    """

    period: int = eqx.field(static=True, default=1)
    first: int = eqx.field(static=True, default=1)
    last: int | None = eqx.field(static=True, default=None)
    sampled: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if not isinstance(self.sampled, bool):
            raise TypeError(f"sampled must be True or False, got {self.sampled!r}")
        check_int("period", self.period, minimum=1)
        check_int("first", self.first, minimum=1)
        if self.last is not None:
            check_int("last", self.last, minimum=self.first)

    @classmethod
    def every_step(cls, *, sampled: bool = True) -> CanarySchedule:
        """The canary can be in every step (standard DP-SGD)."""
        return cls(period=1, first=1, last=None, sampled=sampled)

    @classmethod
    def every(cls, period: int, *, first: int = 1, sampled: bool = True) -> CanarySchedule:
        """Steps `first, first + period, ...` (e.g. a gradient canary every k-th step)."""
        return cls(period=period, first=first, last=None, sampled=sampled)

    @classmethod
    def only(cls, step: int, *, sampled: bool = True) -> CanarySchedule:
        """A single step, e.g. `only(1)` for a canary used at step 1 only."""
        return cls(period=1, first=step, last=step, sampled=sampled)

    @classmethod
    def parse(cls, text: str, *, sampled: bool = True) -> CanarySchedule:
        """The schedule a config writes as a string.

        Forms: `"every_step"`; `"every:K"` (steps 1, 1 + K, ...); `"every:K@F"` (steps F,
        F + K, ..., e.g. `"every:3@3"` for a gradient canary at steps 3, 6, ...);
        `"only:S"` (step S only).

        Example:
            >>> CanarySchedule.parse("every:3@3", sampled=False).steps(10)
            (3, 6, 9)

        Raises:
            ValueError: naming the text and the valid forms.
        """
        text = str(text).strip()
        kind, _, arg = text.partition(":")
        period, _, first = arg.partition("@")
        numbers = [period] + ([first] if first else [])
        try:
            if text == "every_step":
                return cls.every_step(sampled=sampled)
            if all(n.strip().isdigit() for n in numbers):
                if kind == "every":
                    return cls.every(int(period), first=int(first or 1), sampled=sampled)
                if kind == "only" and not first:
                    return cls.only(int(period), sampled=sampled)
        except ValueError as err:
            raise ValueError(f"canary_schedule {text!r}: {err}") from None
        raise ValueError(
            "canary_schedule must be 'every_step', 'every:K' (steps 1, 1+K, ...), 'every:K@F' "
            f"(steps F, F+K, ...) or 'only:S' (step S only), got {text!r}"
        )

    def steps(self, num_steps: int) -> tuple[int, ...]:
        """The 1-indexed steps in `[1, num_steps]` that can carry the canary."""
        last = num_steps if self.last is None else min(self.last, num_steps)
        return tuple(range(self.first, last + 1, self.period))

    def mask(self, t: Int[Array, ...]) -> Bool[Array, ...]:
        """Jittable membership test for 1-indexed steps `t`."""
        ok = (t >= self.first) & ((t - self.first) % self.period == 0)
        if self.last is not None:
            ok = ok & (t <= self.last)
        return ok


class DPSGDOptions(TypedDict, total=False):
    """The keyword hyperparameters of `DPSGDParams`, as a mechanism forwards them.

    A mechanism whose run may use any of them takes `**dpsgd: Unpack[DPSGDOptions]` after
    its own keywords and builds `DPSGDParams(steps, sampling_prob, noise_multiplier,
    **dpsgd)`, so the four are spelled, defaulted and checked in one place. Sweep configs
    and `advsim.sweep.resolve` read these keys off the annotation, so an unknown key is
    still refused by name before anything runs.

    Keys:
        clip_norm: C > 0 (default 1.0).
        learning_rate: eta > 0 (default 1.0).
        canary_schedule: a `CanarySchedule` or its string form (default: every step,
            Poisson-sampled, unless the mechanism says otherwise).
        batching: "poisson" (default) or "fixed".
    """

    clip_norm: float
    learning_rate: float
    canary_schedule: CanarySchedule | str | None
    batching: Literal["poisson", "fixed"]


class DPSGDParams(eqx.Module):
    """The hyperparameters every DP-SGD mechanism shares, checked once.

    Every mechanism holds one as `params` (and reads it through the properties of
    `AbstractMechanism`: `mech.steps`, `mech.noise_multiplier`, ...), so the checks and the
    normalisation live here alone. The scalars are stored as 0-d float64 numpy arrays: they
    are traced by `eqx.filter_jit` (a sweep over sigma or q reuses one compiled function,
    e.g. through `eqx.tree_at(lambda m: m.params.noise_multiplier, mech, sigma)`), and
    float64 on the host keeps `accounting()` exact (q = 0.01 stays 0.01).

    Args:
        steps: T >= 1 (static: it sets the scan length).
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        clip_norm: C > 0.
        learning_rate: eta > 0.
        canary_schedule: a `CanarySchedule` (default: every step, Poisson-sampled), or its
            string form (`CanarySchedule.parse`).
        batching: "poisson" (default) or "fixed".

    Raises:
        ValueError: a value outside its range (the message names it and the range).
        TypeError: a canary_schedule that is neither a `CanarySchedule` nor a string.

    Example:
        >>> params = DPSGDParams(steps=100, sampling_prob=0.01, noise_multiplier=1.0)
        >>> params.steps, float(params.sampling_prob), params.canary_schedule.steps(3)
        (100, 0.01, (1, 2, 3))
    """

    steps: int = eqx.field(static=True)
    sampling_prob: np.ndarray
    noise_multiplier: np.ndarray
    clip_norm: np.ndarray
    learning_rate: np.ndarray
    canary_schedule: CanarySchedule
    batching: Literal["poisson", "fixed"] = eqx.field(static=True)

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        clip_norm: float = 1.0,
        learning_rate: float = 1.0,
        canary_schedule: CanarySchedule | str | None = None,
        batching: Literal["poisson", "fixed"] = "poisson",
    ):
        self.steps = check_int("steps", steps, minimum=1)
        self.sampling_prob = as_traced_float("sampling_prob", sampling_prob, check_probability)
        self.noise_multiplier = as_traced_float(
            "noise_multiplier", noise_multiplier, check_positive
        )
        self.clip_norm = as_traced_float("clip_norm", clip_norm, check_positive)
        self.learning_rate = as_traced_float("learning_rate", learning_rate, check_positive)
        if canary_schedule is None:
            canary_schedule = CanarySchedule()
        elif isinstance(canary_schedule, str):
            canary_schedule = CanarySchedule.parse(canary_schedule)
        elif not isinstance(canary_schedule, CanarySchedule):
            raise TypeError(
                "canary_schedule must be a CanarySchedule or its string form, got "
                f"{type(canary_schedule).__name__}"
            )
        self.canary_schedule = canary_schedule
        if batching not in ("poisson", "fixed"):
            raise ValueError(f"batching must be 'poisson' or 'fixed', got {batching!r}")
        self.batching = batching

    @property
    def canary_sampled(self) -> bool:
        """Whether the canary is Poisson-sampled at its steps (else always present there)."""
        return self.canary_schedule.sampled and self.batching == "poisson"


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
    #: Set True by mechanisms in the last-iterate heuristic's family (its tight case), where
    #: the family audit's assumption holds; sweeps audit them with "family" by default and
    #: every other mechanism with the assumption-free "eps_delta".
    in_heuristic_family: ClassVar[bool] = False

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
        """The learning rate of step `t` (default: `learning_rate` at every step).

        Override for a schedule fixed before training, e.g. the threshold landscape's
        first step of size 1 followed by averaged steps of size 1/B. The engine multiplies
        the whole update (gradients and noise) by it, so it never changes the privacy
        accounting.
        """
        return self.learning_rate

    def accounting(self) -> Accounting:
        """What the bounds need: steps, the canary's sampling rate, sigma, its steps."""
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
    (Poisson sampling; `advsim._dpsgd.bernoulli_from_bits`), gathers the sampled indices in
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
        """Model values where some field is discontinuous (default: none)."""
        return jnp.zeros((0,))

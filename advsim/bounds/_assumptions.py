r"""What a process is known to satisfy (`ProcessFacts`), and what a bound assumes of it.

A last-iterate bound holds only under assumptions on the losses (convex, strongly convex,
smooth, Lipschitz, Holder), the domain (a projection onto a ball), the batches (full,
Poisson, cyclic) and the step sizes. Here both sides are values:

- `ProcessFacts`: the run's numbers (its `advsim.Accounting`, clip norm, learning rate,
  batching) and what is *certified* about its losses on the domain: every field that is
  not known is None, and an assumption that needs it fails with "not certified". A
  process gives its facts through a `facts()` method (`advsim.testing`'s scalar field
  constructions and the built-in scalar mechanisms read them off their fields); for any
  other mechanism `process_facts` knows only the numbers.
- `Assumption`: one condition, with `failure(facts)` (None where it holds, else the
  reason) and `describe()`. A bound declares a tuple of them (`AbstractBound`).

The loss facts use the update of `advsim.AbstractMechanism`,
$m_t = \Pi_K(m_{t-1} - \eta_t(\sum_i \mathrm{clip}_C(\nabla\ell_i) + \nabla r + \xi_t))$:
"examples" are the canary and every other example (the regularizer $r$ is not one: it is
applied once, unclipped), "the objective" is $F = \sum_{i \ne \mathrm{canary}} \ell_i + r$, and its
constants hold in both worlds (with the canary's loss added too).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import ClassVar, Literal

from advsim._accounting import Accounting

__all__ = [
    "Assumption",
    "BoundedDomain",
    "ConstantStepSize",
    "Convex",
    "CyclicBatches",
    "FullBatch",
    "HolderGradients",
    "Linear",
    "LipschitzWithinClip",
    "PoissonBatches",
    "ProcessFacts",
    "RegularizerAsExample",
    "Smooth",
    "StepSizeAtMost",
    "StronglyConvex",
    "process_facts",
    "run_facts",
]


@dataclasses.dataclass(frozen=True)
class ProcessFacts:
    r"""What a DP-SGD process is: its numbers, and what is certified about its losses.

    A loss fact that is None is not certified: an assumption that needs it fails.
    Constants are bounds, valid on the domain (the ball of radius `radius`, or all of
    $\mathbb{R}^d$).

    Attributes:
        accounting: T, the canary's sampling rate q, sigma, its steps, the schedule.
        clip_norm: C.
        learning_rate: $\eta$ (the schedule, if any, is `accounting.step_sizes`).
        batching: "poisson" (every example sampled with rate q) or "fixed" (all in).
        canary_sampled: whether the canary is Poisson-sampled at its steps.
        data_sampling_prob: the other examples' sampling rate (1 under fixed batching).
        num_examples: n, the canary and the other examples (None: unknown).
        radius: R of the projection onto a ball after every step (inf: none).
        init_in_domain: the start is data-independent and lies in the domain.
        dimension: d.
        linear: every example's loss and the regularizer are linear (constant gradients).
        convex: every example's loss and the regularizer are convex.
        strong_convexity: $m$, a lower bound on the objective's curvature
            $\nabla^2 F$ in both worlds ($F$, and $F$ plus the canary's loss); 0 when
            only convex, negative when weakly convex.
        objective_smoothness: $M_F$, a bound on $\|\nabla^2 F\|$ in both worlds.
        example_strong_convexity: the smallest per-example (canary included) curvature
            lower bound.
        smoothness: $M$, the largest per-example smoothness ($\|\nabla^2\ell_i\|$; inf
            where a gradient jumps).
        regularizer_smoothness: the regularizer's smoothness.
        regularizer_lipschitz: the largest norm of the regularizer's gradient on the domain.
        regularizer_zero: whether the regularizer is identically zero.
        lipschitz: $G$, the largest per-example gradient norm on the domain.
        holder: $\beta \mapsto$ the largest per-example Holder constant of the gradients
            of exponent $\beta \in (0, 1]$ on the domain (inf where none is certified), or
            None.
        source: what certified the loss facts (for reports).
    """

    accounting: Accounting
    clip_norm: float
    learning_rate: float
    batching: Literal["poisson", "fixed"]
    canary_sampled: bool
    data_sampling_prob: float = 1.0
    num_examples: int | None = None
    radius: float = math.inf
    init_in_domain: bool = True
    dimension: int | None = None
    linear: bool | None = None
    convex: bool | None = None
    strong_convexity: float | None = None
    objective_smoothness: float | None = None
    example_strong_convexity: float | None = None
    smoothness: float | None = None
    regularizer_smoothness: float | None = None
    regularizer_lipschitz: float | None = None
    regularizer_zero: bool | None = None
    lipschitz: float | None = None
    holder: object = None
    source: str = "the run's numbers only"

    @property
    def steps(self) -> int:
        """T (`accounting.steps`)."""
        return self.accounting.steps

    @property
    def noise_multiplier(self) -> float:
        """sigma (`accounting.noise_multiplier`)."""
        return self.accounting.noise_multiplier

    @property
    def sampling_prob(self) -> float:
        """The canary's sampling rate q (`accounting.sampling_prob`)."""
        return self.accounting.sampling_prob

    @property
    def projected(self) -> bool:
        """Whether the run is projected onto a ball (finite `radius`)."""
        return math.isfinite(self.radius)

    def holder_constant(self, beta: float) -> float:
        """The certified per-example Holder constant of exponent `beta` (inf if none)."""
        if self.holder is None:
            return math.inf
        return float(self.holder(float(beta)))


def process_facts(process) -> ProcessFacts:
    """The facts of `process`: itself if it is a `ProcessFacts`, its `facts()` if it has
    that method, else the numbers of its `accounting()` and parameters only (no loss is
    certified).

    Raises:
        TypeError: for anything else.
    """
    if isinstance(process, ProcessFacts):
        return process
    facts = getattr(process, "facts", None)
    if callable(facts):
        got = facts()
        if not isinstance(got, ProcessFacts):
            raise TypeError(
                f"{type(process).__name__}.facts() must return a ProcessFacts, got "
                f"{type(got).__name__}"
            )
        return got
    accounting = getattr(process, "accounting", None)
    if not callable(accounting):
        raise TypeError(
            "a bound takes a mechanism (with accounting()), a process with facts(), or a "
            f"ProcessFacts; got {type(process).__name__}"
        )
    return run_facts(process, source=f"{type(process).__name__}.accounting() (no loss facts)")


def run_facts(mechanism, **loss_facts) -> ProcessFacts:
    """`ProcessFacts` with the numbers of `mechanism` (an `advsim.AbstractMechanism`) and
    the given loss facts (keywords of `ProcessFacts`): what a mechanism's `facts()` calls."""
    q = float(mechanism.sampling_prob)
    return ProcessFacts(
        accounting=mechanism.accounting(),
        clip_norm=float(mechanism.clip_norm),
        learning_rate=float(mechanism.learning_rate),
        batching=mechanism.batching,
        canary_sampled=mechanism.params.canary_sampled,
        data_sampling_prob=q if mechanism.batching == "poisson" else 1.0,
        **loss_facts,
    )


def _uncertified(what: str) -> str:
    return f"{what}: not certified for this process (its facts() does not say)"


class Assumption(abc.ABC):
    """One condition a bound needs. Subclasses are frozen dataclasses: one without
    parameters states itself in `description`; one with parameters overrides `describe()`.
    """

    #: The condition in words, for a condition without parameters (what `describe()` says).
    description: ClassVar[str] = ""

    @abc.abstractmethod
    def failure(self, facts: ProcessFacts) -> str | None:
        """None where the condition holds for `facts`, else why it does not."""

    def describe(self) -> str:
        """The condition in words."""
        if not self.description:
            raise NotImplementedError(
                f"{type(self).__name__} says nothing of itself: set its `description` or "
                "override describe()"
            )
        return self.description

    def __str__(self) -> str:
        return self.describe()


@dataclasses.dataclass(frozen=True)
class Linear(Assumption):
    """Every loss linear (constant gradients), no projection: the family of Theorem 1 of
    arXiv:2410.06186."""

    description = "linear losses (every gradient constant), no projection"

    def failure(self, facts):
        if facts.linear is None:
            return _uncertified("linear losses")
        if not facts.linear:
            return "linear losses: some gradient is not constant"
        if facts.projected:
            return f"no projection: the run is projected onto a ball of radius {facts.radius:g}"
        return None


@dataclasses.dataclass(frozen=True)
class Convex(Assumption):
    """Every example's loss and the regularizer convex."""

    description = "every example's loss and the regularizer convex"

    def failure(self, facts):
        if facts.convex is None:
            return _uncertified("convex losses")
        return None if facts.convex else "convex losses: some loss is not convex"


@dataclasses.dataclass(frozen=True)
class StronglyConvex(Assumption):
    r"""Strong convexity: of the objective $F$ (`of="objective"`: $\nabla^2 F \succeq m
    > 0$) or of every example's loss (`of="examples"`); with `minimum`, $m \ge$ it."""

    of: Literal["objective", "examples"] = "objective"
    minimum: float = 0.0

    def describe(self) -> str:
        what = "the objective F" if self.of == "objective" else "every example's loss"
        return f"{what} m-strongly convex with m > {self.minimum:g}"

    def failure(self, facts):
        m = facts.strong_convexity if self.of == "objective" else facts.example_strong_convexity
        name = f"strongly convex ({self.of})"
        if m is None:
            return _uncertified(name)
        if not m > self.minimum:
            return f"{name}: m = {m:.6g} is not > {self.minimum:g}"
        return None


@dataclasses.dataclass(frozen=True)
class Smooth(Assumption):
    """Every example's loss (and the regularizer) M-smooth, M finite."""

    description = "every example's loss and the regularizer M-smooth (M finite)"

    def failure(self, facts):
        if facts.smoothness is None or facts.regularizer_smoothness is None:
            return _uncertified("smooth losses")
        if not math.isfinite(facts.smoothness):
            return "smooth losses: some example's gradient jumps (M = inf)"
        if not math.isfinite(facts.regularizer_smoothness):
            return "smooth losses: the regularizer's gradient jumps"
        return None


@dataclasses.dataclass(frozen=True)
class LipschitzWithinClip(Assumption):
    """Every example's gradient of norm at most G <= C on the domain: G-Lipschitz
    losses, and clipping never acts."""

    description = "every example's gradient of norm <= G <= C on the domain (clipping never acts)"

    def failure(self, facts):
        if facts.lipschitz is None:
            return _uncertified("G-Lipschitz losses")
        if not facts.lipschitz <= facts.clip_norm * (1.0 + 1e-12):
            return (
                f"G-Lipschitz with G <= C: G = {facts.lipschitz:.6g} > C = "
                f"{facts.clip_norm:.6g} on the domain"
            )
        return None


@dataclasses.dataclass(frozen=True)
class RegularizerAsExample(Assumption):
    """The regularizer, where it is not zero, meets the examples' conditions: its gradient
    of norm at most C on the domain (it then counts as one more example, as in
    `advsim.testing`'s `ConvexityCertificate`)."""

    description = "a non-zero regularizer has gradient norm <= C on the domain (one more example)"

    def failure(self, facts):
        if facts.regularizer_zero is None:
            return _uncertified("the regularizer as an example")
        if facts.regularizer_zero:
            return None
        lip = facts.regularizer_lipschitz
        if lip is None:
            return _uncertified("the regularizer's gradient norm")
        if not lip <= facts.clip_norm * (1.0 + 1e-12):
            return (
                f"regularizer as an example: |r'| <= {lip:.6g} is not <= C = {facts.clip_norm:.6g}"
            )
        return None


@dataclasses.dataclass(frozen=True)
class HolderGradients(Assumption):
    r"""Every example's gradient $\beta$-Holder on the domain, with a finite constant."""

    beta: float = 1.0

    def describe(self) -> str:
        return f"every example's gradient {self.beta:g}-Holder continuous on the domain"

    def failure(self, facts):
        if facts.holder is None:
            return _uncertified(f"{self.beta:g}-Holder gradients")
        if not math.isfinite(facts.holder_constant(self.beta)):
            return f"{self.beta:g}-Holder gradients: some gradient is not (it jumps)"
        return None


@dataclasses.dataclass(frozen=True)
class BoundedDomain(Assumption):
    """A projection onto a ball of finite radius R after every step, the start inside."""

    description = "projected onto a ball of radius R < inf after every step, the start inside"

    def failure(self, facts):
        if not facts.projected:
            return "bounded domain: the run is not projected"
        if not facts.init_in_domain:
            return "bounded domain: the start is not in the ball"
        return None


@dataclasses.dataclass(frozen=True)
class FullBatch(Assumption):
    """Every example in every step (fixed batching, or Poisson with q = 1), the canary
    too."""

    description = "full batch: every example, the canary too, in every step"

    def failure(self, facts):
        acc = facts.accounting
        if facts.data_sampling_prob != 1.0:
            return f"full batch: the examples are sampled with q = {facts.data_sampling_prob:g}"
        if acc.num_canary_steps != acc.steps:
            return f"full batch: the canary is in {acc.num_canary_steps} of {acc.steps} steps"
        if acc.sampling_prob != 1.0:
            return f"full batch: the canary is sampled with q = {acc.sampling_prob:g}"
        return None


@dataclasses.dataclass(frozen=True)
class PoissonBatches(Assumption):
    """Poisson sampling with rate q: every example, the canary too, at every step."""

    description = "Poisson sampling: every example (the canary too) sampled with rate q each step"

    def failure(self, facts):
        acc = facts.accounting
        if facts.batching != "poisson":
            return f"Poisson batches: batching is {facts.batching!r}"
        if acc.num_canary_steps != acc.steps:
            return (
                f"Poisson batches: the canary can be in {acc.num_canary_steps} of {acc.steps} steps"
            )
        return None


@dataclasses.dataclass(frozen=True)
class CyclicBatches(Assumption):
    """Cyclic batches: the canary in exactly one step of every epoch of k steps, at the
    same position, unsampled (its schedule is every k-th step)."""

    description = "cyclic batches: the canary at one fixed position of every epoch, unsampled"

    def failure(self, facts):
        acc = facts.accounting
        steps = acc.canary_steps
        if facts.canary_sampled and acc.sampling_prob < 1.0:
            return "cyclic batches: the canary is Poisson-sampled"
        gaps = {b - a for a, b in zip(steps, steps[1:], strict=False)}
        if len(gaps) > 1 or (steps and steps[0] > (gaps.pop() if gaps else acc.steps)):
            return f"cyclic batches: the canary's steps {list(steps)[:6]} are not one per epoch"
        return None


@dataclasses.dataclass(frozen=True)
class ConstantStepSize(Assumption):
    """One learning rate at every step (no schedule)."""

    description = "one learning rate at every step"

    def failure(self, facts):
        if facts.accounting.step_sizes is not None:
            return "constant step size: the run has a learning-rate schedule"
        return None


@dataclasses.dataclass(frozen=True)
class StepSizeAtMost(Assumption):
    r"""$\eta M \le$ `factor`: with `of="objective"`, $M = M_F$ (the objective's
    smoothness); with `of="examples"`, $M = n \max_i M_i$ (n times the per-example
    smoothness, the form of arXiv:2403.00278's $\eta \le 2/M$ for the average loss; a
    non-zero regularizer counts as one more example, `RegularizerAsExample`)."""

    factor: float = 2.0
    of: Literal["objective", "examples"] = "examples"

    def describe(self) -> str:
        m = "M_F (the objective)" if self.of == "objective" else "n M (per-example M)"
        return f"learning rate x {m} <= {self.factor:g}"

    def failure(self, facts):
        if self.of == "objective":
            m = facts.objective_smoothness
            if m is None:
                return _uncertified("the objective's smoothness")
        else:
            if facts.smoothness is None or facts.num_examples is None:
                return _uncertified("per-example smoothness and n")
            n, m = facts.num_examples, facts.smoothness
            if facts.regularizer_zero is False:
                if facts.regularizer_smoothness is None:
                    return _uncertified("the regularizer's smoothness")
                n, m = n + 1, max(m, facts.regularizer_smoothness)
            m = n * m
        lr = facts.learning_rate
        if not lr * m <= self.factor * (1.0 + 1e-12):
            return f"step size: lr x M = {lr:.6g} x {m:.6g} = {lr * m:.6g} > {self.factor:g}"
        return None

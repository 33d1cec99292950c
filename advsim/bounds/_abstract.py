r"""A bound is a value plus what it assumes: `AbstractBound`.

A researcher's last-iterate bound is a final subclass that declares its `assumptions`
(a tuple of `advsim.bounds.Assumption` values), its `reference`, and implements `value`
(epsilon from the process's `ProcessFacts` and delta; `delta_value`, delta from epsilon,
defaults to inverting it). `epsilon(process, delta)` and `delta(process, epsilon)` check
every assumption first and refuse, naming the one that fails, a process outside them;
`advsim.testing.check_bound` then draws 1-D constructions meeting the assumptions and
compares the bound with their exact epsilon.

Example (a bound of one's own):
    >>> import math
    >>> from advsim.bounds import AbstractBound, FullBatch, gdp_epsilon
    >>> class OneStepGDP(AbstractBound):
    ...     '''Full batch: sqrt(T)/sigma-GDP (composition of Gaussian mechanisms).'''
    ...     assumptions = (FullBatch(),)
    ...     reference = "Dong, Roth and Su, arXiv:1905.02383, Corollary 3.3"
    ...     def value(self, facts, delta):
    ...         mu = math.sqrt(facts.steps) / facts.noise_multiplier
    ...         return gdp_epsilon(delta, mu)
    >>> from advsim.mechanisms import LinearProcess
    >>> round(OneStepGDP().epsilon(LinearProcess(100, 1.0, 10.0), 1e-5), 4)
    4.3772
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import equinox as eqx

from advsim._validation import check_delta
from advsim.bounds._assumptions import Assumption, ProcessFacts, process_facts

__all__ = ["AbstractBound", "AssumptionError"]


class AssumptionError(ValueError):
    """A bound was given a process outside its assumptions.

    Attributes:
        bound: the bound's name.
        failures: why each failing assumption fails.
    """

    def __init__(self, bound: str, failures: tuple[str, ...]):
        self.bound = bound
        self.failures = failures
        super().__init__(f"{bound} does not apply to this process: " + "; ".join(failures))


class AbstractBound(eqx.Module):
    """An upper bound on the last model's epsilon(delta), valid under its assumptions.

    Subclasses set the class attributes and implement `value`:

    Attributes:
        assumptions: the conditions under which `value` is an upper bound on the exact
            epsilon of the last model (`advsim.bounds.Assumption` values).
        reference: where the formula comes from (paper and theorem).
        kind: what the value certifies: "upper bound" (default), or "exact" for a bound
            that is the exact epsilon of every process it accepts.
    """

    assumptions: ClassVar[tuple[Assumption, ...]] = ()
    reference: ClassVar[str] = ""
    kind: ClassVar[str] = "upper bound"

    @property
    def name(self) -> str:
        """The class name (for reports)."""
        return type(self).__name__

    @abc.abstractmethod
    def value(self, facts: ProcessFacts, delta: float) -> float:
        """epsilon(delta) for a process whose facts meet every assumption (not checked
        here: `epsilon` checks)."""

    def failures(self, process) -> tuple[str, ...]:
        """Why each assumption fails for `process` (empty: the bound applies)."""
        facts = process_facts(process)
        return tuple(f for a in self.assumptions if (f := a.failure(facts)) is not None)

    def applies(self, process) -> bool:
        """Whether every assumption holds for `process`."""
        return not self.failures(process)

    def check(self, process) -> ProcessFacts:
        """The facts of `process`, after checking every assumption.

        Raises:
            AssumptionError: naming every assumption that fails.
        """
        facts = process_facts(process)
        failures = tuple(f for a in self.assumptions if (f := a.failure(facts)) is not None)
        if failures:
            raise AssumptionError(self.name, failures)
        return facts

    def epsilon(self, process, delta) -> float:
        """epsilon(delta) of the last model of `process` (a mechanism, or its
        `ProcessFacts`), an upper bound under `assumptions`.

        Raises:
            AssumptionError: (a ValueError) naming the assumptions the process fails.
            ValueError: for a delta outside (0, 1).
        """
        delta = check_delta("delta", delta)
        value = float(self.value(self.check(process), delta))
        if math.isnan(value) or value < 0:
            raise ValueError(f"{self.name}.value returned {value!r} (must be >= 0)")
        return value

    def delta_value(self, facts: ProcessFacts, epsilon: float) -> float:
        """delta(epsilon) for a process whose facts meet every assumption: by default the
        smallest delta in [1e-300, 1) at which `value` is at most `epsilon` (bisection in
        log delta to 1e-12 relative, rounded up: never below the exact inverse). A bound
        with a closed form overrides it."""
        lo, hi = math.log(1e-300), math.log1p(-1e-12)
        if self.value(facts, math.exp(hi)) > epsilon:
            return 1.0
        if self.value(facts, math.exp(lo)) <= epsilon:
            return 1e-300
        for _ in range(200):  # value is non-increasing in delta
            if hi - lo <= 1e-12 * abs(lo):
                break
            mid = 0.5 * (lo + hi)
            if self.value(facts, math.exp(mid)) <= epsilon:
                hi = mid
            else:
                lo = mid
        return math.exp(hi)

    def delta(self, process, epsilon) -> float:
        """delta(epsilon) of the last model of `process`, an upper bound under
        `assumptions` (`delta_value`).

        Raises:
            AssumptionError: naming the assumptions the process fails.
            ValueError: for a negative or non-finite epsilon.
        """
        epsilon = float(epsilon)
        if not (math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
        value = float(self.delta_value(self.check(process), epsilon))
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{self.name}.delta_value returned {value!r} (must be in [0, 1])")
        return value

    def describe(self) -> str:
        """The bound, its reference and its assumptions, for reports."""
        lines = [f"{self.name} ({self.kind}): {self.reference or 'no reference given'}"]
        lines += [f"  assumes: {a.describe()}" for a in self.assumptions] or ["  assumes nothing"]
        return "\n".join(lines)

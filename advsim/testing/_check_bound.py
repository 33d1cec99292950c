r"""`check_bound`: try to break a last-iterate bound on constructions meeting its assumptions.

For each draw of `constructions(bound.assumptions)` it computes the exact
$\varepsilon(\delta)$ of the last model (`advsim.exact.last_iterate_epsilon`, with its
refinement error estimate) and the bound's value. A draw *violates* the bound when

$$\text{bound} < \varepsilon_{\text{exact}} - (\text{error\_factor}\cdot\text{error} +
  \text{rtol}\cdot\varepsilon_{\text{exact}}),$$

i.e. the bound is below the truth by more than the engine's stated error (an estimate,
hence the factor; its measured coverage is in the exact guide) and the last digits.
Hypothesis then shrinks the violation to a simpler construction, which is saved as a
file (`load_construction` replays it). The tightness, the largest exact / bound ratio
over the draws, is reported with where it was found.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from advsim._validation import check_delta, check_int, check_nonnegative
from advsim.bounds._abstract import AbstractBound
from advsim.exact import last_iterate_epsilon
from advsim.testing._construction_files import save_construction
from advsim.testing._drawn import constructions
from advsim.testing._strategies import SETTINGS

__all__ = ["BoundCheck", "BoundViolation", "check_bound"]


@dataclasses.dataclass(frozen=True)
class Draw:
    """One construction's comparison."""

    describe: str
    exact: float
    error: float
    bound: float
    resolved: bool
    violates: bool

    @property
    def ratio(self) -> float:
        """exact / bound (inf for a bound of 0 below a positive exact value)."""
        if self.bound > 0:
            return self.exact / self.bound
        return math.inf if self.exact > 0 else 1.0


@dataclasses.dataclass(frozen=True)
class BoundCheck:
    """What `check_bound` found.

    Attributes:
        bound: the bound's name.
        delta: the delta of every comparison.
        examples: the constructions drawn and compared (shrinking's included).
        unresolved: how many the exact engine could not resolve (not compared).
        violations: how many draws violated the bound.
        largest_ratio: the largest exact / bound over the resolved draws (tightness:
            1 is tight; above 1 only within the tolerance unless violated).
        largest_ratio_at: the construction where it was found.
        counterexample: the shrunk violating draw (None when none violated).
        counterexample_path: the file it was saved to (`load_construction`).
        draws: every comparison, in order.
    """

    bound: str
    delta: float
    examples: int
    unresolved: int
    violations: int
    largest_ratio: float
    largest_ratio_at: str
    counterexample: Draw | None
    counterexample_path: Path | None
    draws: tuple[Draw, ...]

    @property
    def passed(self) -> bool:
        return self.violations == 0

    def report(self) -> str:
        lines = [
            f"check_bound({self.bound}, delta={self.delta:g}): {self.examples} constructions, "
            f"{self.unresolved} unresolved, {self.violations} violations; largest exact/bound "
            f"{self.largest_ratio:.6g}",
            f"  largest ratio at: {self.largest_ratio_at}",
        ]
        if self.counterexample is not None:
            c = self.counterexample
            lines += [
                f"  shrunk counterexample: exact {c.exact:.6g} (error {c.error:.3g}) > bound "
                f"{c.bound:.6g}",
                f"  saved to: {self.counterexample_path}",
                "  " + c.describe.replace("\n", "\n  "),
            ]
        return "\n".join(lines)


class BoundViolation(AssertionError):
    """A bound was below the exact epsilon beyond the error; `.result` is the `BoundCheck`."""

    def __init__(self, result: BoundCheck):
        self.result = result
        super().__init__(result.report())


class _Violates(Exception):
    pass


def check_bound(
    bound: AbstractBound,
    examples: int = 40,
    *,
    delta: float = 1e-5,
    save_to: str | Path | None = None,
    raise_on_violation: bool = True,
    shrink_budget: int = 30,
    error_factor: float = 2.0,
    rtol: float = 1e-3,
    cells_per_sd: float = 8.0,
    refinements: int = 2,
    **strategy_kwargs,
) -> BoundCheck:
    """Draws constructions meeting `bound.assumptions` and compares the bound with the
    exact epsilon of each (see the module for the criterion).

    Args:
        bound: an `advsim.bounds.AbstractBound`.
        examples: how many constructions to draw (hypothesis, derandomized: the same ones
            in every run).
        delta: delta in (0, 1).
        save_to: the file of the shrunk counterexample (default: a new file in the
            temporary folder).
        raise_on_violation: raise `BoundViolation` (default) or return the result.
        shrink_budget: new exact evaluations allowed while shrinking a violation (each
            costs about a second); the smallest violation found within it is reported.
        error_factor, rtol: the tolerance (see the module).
        cells_per_sd, refinements: the exact engine's grid (coarse by default: about
            1e-3 relative on smooth fields, with an error estimate).
        **strategy_kwargs: passed to `constructions` (e.g. `steps`, `noise_multiplier`).

    Returns:
        A `BoundCheck` (examples, violations, the largest ratio and where).

    Raises:
        BoundViolation: (an AssertionError) where a draw violates the bound, with the
            report and the saved shrunk construction.
        AssertionError: if a draw fails the bound's assumptions (a strategy bug).
    """
    if not isinstance(bound, AbstractBound):
        raise TypeError(f"bound must be an AbstractBound, got {type(bound).__name__}")
    examples = check_int("examples", examples, minimum=1)
    delta = check_delta("delta", delta)
    shrink_budget = check_int("shrink_budget", shrink_budget, minimum=0)
    error_factor = check_nonnegative("error_factor", error_factor)
    rtol = check_nonnegative("rtol", rtol)
    strategy = constructions(bound.assumptions, **strategy_kwargs)
    memo: dict[str, Draw] = {}
    order: list[Draw] = []
    violating: dict = {}  # describe() -> the construction, for every violating draw
    state = {"after_first": 0}

    def evaluate(mech) -> Draw | None:
        key = mech.describe()
        if key in memo:
            return memo[key]
        if violating:
            if state["after_first"] >= shrink_budget:
                return None  # out of budget: not evaluated, so not a violation
            state["after_first"] += 1
        failures = bound.failures(mech)
        if failures:
            raise AssertionError(
                f"constructions drew a process outside {bound.name}'s assumptions: "
                f"{'; '.join(failures)}\n{key}"
            )
        exact = last_iterate_epsilon(
            mech, delta, cells_per_sd=cells_per_sd, refinements=refinements, progress=False
        )
        value = bound.epsilon(mech, delta)
        error = exact.error if math.isfinite(exact.error) else 0.0
        slack = error_factor * error + rtol * abs(exact.epsilon)
        violates = bool(exact.resolved and value < exact.epsilon - slack)
        draw = Draw(key, float(exact.epsilon), float(exact.error), float(value),
                    bool(exact.resolved), violates)  # fmt: skip
        memo[key] = draw
        order.append(draw)
        if violates:
            violating[key] = mech
        return draw

    @settings(
        SETTINGS,
        max_examples=examples,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(strategy)
    def run(mech):
        draw = evaluate(mech)
        if draw is not None and draw.violates:
            raise _Violates(draw.describe)

    counter = None
    try:
        run()
    except _Violates as err:  # hypothesis re-raises its shrunk (final) example's
        counter = memo[str(err)]
    resolved = [d for d in order if d.resolved]
    best = max(resolved, key=lambda d: d.ratio, default=None)
    path = None
    if counter is not None:
        mech = violating[counter.describe]
        if save_to is None:
            folder = Path(tempfile.mkdtemp(prefix="advsim-check-bound-"))
            save_to = folder / f"{bound.name}-counterexample.json"
        path = save_construction(
            save_to, mech, bound=bound.name, bound_value=counter.bound,
            exact_epsilon=counter.exact, exact_error=counter.error, delta=delta,
        )  # fmt: skip
    result = BoundCheck(
        bound=bound.name,
        delta=delta,
        examples=len(order),
        unresolved=len(order) - len(resolved),
        violations=sum(d.violates for d in order),
        largest_ratio=best.ratio if best else math.nan,
        largest_ratio_at=best.describe if best else "",
        counterexample=counter,
        counterexample_path=path,
        draws=tuple(order),
    )
    if counter is not None and raise_on_violation:
        raise BoundViolation(result)
    return result

r"""Threshold strategies as values: how a threshold audit chooses the test it counts.

A threshold audit (`AbstractThresholdAudit`: `"eps_delta"`, `"gdp"`, `"family"`) reads
eps off one threshold test; a strategy says where that test comes from and on which runs
it is counted, which decides what the number certifies. Each strategy is a small frozen
value, called with the audit and the scores:

    strategy(audit, scores, delta=..., accounting=...) -> AuditResult

and `audit(x_in, x_out, threshold_selection=RankSplit(0.2))` takes one, as it takes the
strings, which stay as aliases (`"rank_split"`, with `selection_fraction=0.2`).

- Held out, rigorous for an assumption-free method: `Split(fraction)` (one threshold
  chosen on a random `fraction` of each world, counted on the rest), `MultiSplit`,
  `ProjectedSplit`, `RankSplit`, and `Explicit(threshold, chosen_in_advance=True)`.
- Not held out: `Same()` (chosen and counted on the same runs, as in the papers:
  optimistic), `Bonferroni()` (the best of all thresholds at the observed scores, each at
  level alpha / K), `Explicit(threshold)` not declared fixed in advance.
- `BySampleSize()`, `audit`'s default: the best rigorous strategy for the sample size,
  by a rule fixed in advance (its docstring states the rule and what it was measured on).

A new strategy subclasses `ThresholdStrategy` and writes `run`, with the audit's public
methods (`AbstractThresholdAudit.at_threshold`, `select`, `bound`, `context`) and the
public helpers `candidate_thresholds`, `counts_at`, `clopper_pearson_upper`; its name in
records, sweeps and on the command line is its class path, `"module:Class"`.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import equinox as eqx
import numpy as np

from advsim import Accounting, Scores
from advsim.validation import check_in_interval, check_int, import_class_path

from ._base import AbstractThresholdAudit, run_threshold_audit
from ._rank_split import RANK_SPLIT_FRACTION, rank_split_audit
from ._result import AuditResult
from ._strategies import (
    PLANNING_MIN_SCORES,
    SELECTION_FRACTION,
    bonferroni_audit,
    multi_split_audit,
    projected_split_audit,
)

__all__ = [
    "Bonferroni",
    "BySampleSize",
    "Explicit",
    "MultiSplit",
    "ProjectedSplit",
    "RankSplit",
    "Same",
    "Split",
    "ThresholdStrategy",
]


class ThresholdStrategy(eqx.Module):
    """How a threshold audit chooses the test it counts: the base of every strategy.

    A subclass is a frozen value whose fields are its options, and writes `run`. Calling
    it checks the audit, runs it and records in the result's extras the strategy that ran
    (`extras["strategy"]`, its repr) and its name (`extras["threshold_selection"]`).

    Attributes:
        name: the strategy's name in records, sweeps and on the command line; a
            subclass that does not set it is named by its class path,
            `"module:Class"`.
        min_scores: the fewest scores per world it takes.

    Example:
        A strategy from public names only: the threshold at a high quantile of half the
        out-scores, counted on the other half.

        >>> import numpy as np
        >>> from advsim.audits import ThresholdStrategy, audit
        >>> class OutQuantile(ThresholdStrategy):
        ...     quantile: float = 0.99
        ...     def run(self, audit, scores, *, delta, accounting=None):
        ...         rng = np.random.default_rng(audit.seed)
        ...         order_in = rng.permutation(scores.n_in)
        ...         order_out = rng.permutation(scores.n_out)
        ...         half_in, half_out = scores.n_in // 2, scores.n_out // 2
        ...         chooser = np.asarray(scores.canary_out)[order_out[:half_out]]
        ...         tau = np.quantile(chooser, self.quantile)
        ...         counting = type(scores)(
        ...             np.asarray(scores.canary_in)[order_in[half_in:]],
        ...             np.asarray(scores.canary_out)[order_out[half_out:]])
        ...         return audit.at_threshold(counting, tau, delta=delta, held_out=True,
        ...                                   accounting=accounting)
        >>> rng = np.random.default_rng(0)
        >>> r = audit(rng.normal(2, 1, 10**4), rng.normal(0, 1, 10**4),
        ...           threshold_selection=OutQuantile(), delta=1e-5)
        >>> (r.rigorous, r.eps_lower > 1.5)
        (True, True)
    """

    name: ClassVar[str | None] = None
    min_scores: ClassVar[int] = 2

    @abc.abstractmethod
    def run(
        self,
        audit: AbstractThresholdAudit,
        scores: Scores,
        *,
        delta: float,
        accounting: Accounting | None = None,
    ) -> AuditResult:
        """Chooses the test(s), counts them and returns the audit's `AuditResult`.

        Its guarantee must say how the threshold was chosen: `held_out=True` only when
        the runs it is counted on played no part in the choice (or the threshold was
        fixed in advance), which is what makes an assumption-free bound rigorous.
        """

    def label(self) -> str:
        """The strategy's name (`name`, or the class path `"module:Class"`)."""
        cls = type(self)
        return self.name or f"{cls.__module__}:{cls.__qualname__}"

    def options(self) -> dict:
        """The strategy's options, by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __call__(
        self,
        audit: AbstractThresholdAudit,
        scores: Scores,
        *,
        delta: float,
        accounting: Accounting | None = None,
    ) -> AuditResult:
        """Runs the strategy on `audit` (see `run`); refuses an audit that is not a
        one-threshold audit and fewer than `min_scores` scores per world."""
        if not isinstance(audit, AbstractThresholdAudit):
            raise TypeError(
                f"threshold strategy {self!r} needs a one-threshold audit ('eps_delta', "
                f"'gdp', 'family'), got {type(audit).__name__}"
            )
        if not isinstance(scores, Scores):
            raise TypeError(f"scores must be an advsim.Scores, got {type(scores).__name__}")
        if min(scores.n_in, scores.n_out) < self.min_scores:
            raise ValueError(
                f"threshold_selection={self.label()!r} needs at least {self.min_scores} "
                f"scores per world, got n_in={scores.n_in}, n_out={scores.n_out}"
            )
        result = self.run(audit, scores, delta=delta, accounting=accounting)
        if not isinstance(result, AuditResult):
            raise TypeError(
                f"{type(self).__name__}.run must return an AuditResult, got "
                f"{type(result).__name__}"
            )
        extras = {**result.extras, "threshold_selection": self.label(), "strategy": repr(self)}
        return dataclasses.replace(result, extras=extras)


def _check_fraction(fraction) -> float:
    value = check_in_interval("fraction", fraction, 0.0, 1.0)
    if value == 0.0 or value == 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    return value


class Split(ThresholdStrategy):
    """One threshold chosen on a random `fraction` of each world, counted on the rest
    (held out). The split is drawn from the audit's `seed`, in-world first; at the
    default 0.5 it is jax_privacy's `Split(0.5, seed)` partition.

    Attributes:
        fraction: the share of each world that chooses the threshold, in (0, 1).
    """

    fraction: float = 0.5
    name: ClassVar[str] = "split"

    def __check_init__(self):
        _check_fraction(self.fraction)

    def run(self, audit, scores, *, delta, accounting=None):
        audit = dataclasses.replace(audit, threshold_selection="split")
        return run_threshold_audit(
            audit, scores, delta=delta, accounting=accounting, fraction=float(self.fraction)
        )


class Same(ThresholdStrategy):
    """The threshold chosen and counted on the same runs, as in the papers: optimistic,
    not held out (a maximum over thresholds on the runs that are counted)."""

    name: ClassVar[str] = "same"

    def run(self, audit, scores, *, delta, accounting=None):
        audit = dataclasses.replace(audit, threshold_selection="same")
        return run_threshold_audit(audit, scores, delta=delta, accounting=accounting)


class Explicit(ThresholdStrategy):
    """The test at a threshold the caller gives, counted on all runs.

    Attributes:
        threshold: the test says "in" iff `score >= threshold`; a finite number.
        chosen_in_advance: True declares that the threshold was fixed without looking
            at these scores (on other runs, from theory, before the experiment): the
            guarantee is then held out, and the bound rigorous where the method assumes
            nothing, on the strength of that declaration, which the guarantee quotes.
            False (default): not known to be independent of the runs, so not held out.
    """

    threshold: float
    chosen_in_advance: bool = False
    name: ClassVar[str] = "explicit"
    min_scores: ClassVar[int] = 1

    def __check_init__(self):
        if isinstance(self.threshold, bool) or not np.isfinite(float(self.threshold)):
            raise ValueError(f"threshold must be a finite number, got {self.threshold!r}")
        if not isinstance(self.chosen_in_advance, bool):
            raise TypeError(
                f"chosen_in_advance must be True or False, got {self.chosen_in_advance!r}"
            )

    def run(self, audit, scores, *, delta, accounting=None):
        multiplicity = (
            "a threshold the caller declares was fixed before these scores were seen "
            "(chosen_in_advance=True: valid on the strength of that declaration)"
            if self.chosen_in_advance
            else None
        )
        result = audit.at_threshold(
            scores, self.threshold, delta=delta, accounting=accounting,
            held_out=self.chosen_in_advance, multiplicity=multiplicity,
        )  # fmt: skip
        extras = {**result.extras, "chosen_in_advance": self.chosen_in_advance}
        return dataclasses.replace(result, extras=extras)


class MultiSplit(ThresholdStrategy):
    """The lower median of `num_splits` `Split(fraction)` bounds, each at level
    alpha / 2 (Meinshausen, Meier & Buhlmann 2009, Theorem 3.1; held out). Split i uses
    the seed `audit.seed + i`.

    Attributes:
        num_splits: the number of splits, >= 1.
        fraction: each split's choosing share, in (0, 1).
    """

    num_splits: int = 21
    fraction: float = 0.5
    name: ClassVar[str] = "multi_split"

    def __check_init__(self):
        check_int("num_splits", self.num_splits, minimum=1)
        _check_fraction(self.fraction)

    def run(self, audit, scores, *, delta, accounting=None):
        return multi_split_audit(
            audit, scores, delta=delta, accounting=accounting,
            num_splits=self.num_splits, fraction=float(self.fraction),
        )  # fmt: skip


class _PlanningSplit(ThresholdStrategy):
    """A strategy that plans its tests on a random `fraction` of each world and counts
    them on the rest, by its audit function (`plan`)."""

    fraction: eqx.AbstractVar[float]
    plan: ClassVar[staticmethod]
    min_scores: ClassVar[int] = PLANNING_MIN_SCORES

    def __check_init__(self):
        _check_fraction(self.fraction)

    def run(self, audit, scores, *, delta, accounting=None):
        return type(self).plan(
            audit, scores, delta=delta, accounting=accounting,
            selection_fraction=float(self.fraction),
        )  # fmt: skip


class ProjectedSplit(_PlanningSplit):
    """Two thresholds chosen on a random `fraction` of each world with their counts
    projected to the rest, counted there with Bonferroni over the two (held out).

    Attributes:
        fraction: the choosing share, in (0, 1) (default 0.15).
    """

    fraction: float = SELECTION_FRACTION
    name: ClassVar[str] = "projected_split"
    plan: ClassVar[staticmethod] = staticmethod(projected_split_audit)


class RankSplit(_PlanningSplit):
    """Up to two tests planned on a random `fraction` of each world, placed at ranks of
    the rest and counted there (held out).

    An upper test says "in" iff the score exceeds the (k+1)-th largest counting
    out-score (its FPR placed by a rank); a lower test says "in" iff the score is at
    least the (j+1)-th smallest counting in-score (its FNR placed by a rank). The plan
    (sides, ranks, the levels of each rate) is read off the planning part alone.

    Validity. Let the levels of the counted tests' rates add up to 1 - c (each test gets
    (1 - c) / 2 or, alone, 1 - c, split between its FPR and FNR by the planned share). The
    split is drawn from the seed, independently of the scores, so the four parts (planning
    and counting, of each world) are independent, and the plan (the number of tests, their
    sides, ranks or values, levels) is a function of the planning parts alone. Condition on
    them. (i) Upper test at rank k: write the counting out-scores as X_i = G(W_i), W_i iid
    uniform and G(w) = inf{t : P(X > t) <= w}; then P(X > G(w)) <= w, so the test's FPR,
    P(X > X_(k+1)), is at most W_(k+1) ~ Beta(k + 1, m_out - k), whose 1 - a quantile is the
    Clopper-Pearson bound `clopper_pearson_upper(k, m_out, a)`: it fails with probability <=
    a, whatever the law of X (with ties the count at the threshold may be below k; the bound
    used is the one at k). The threshold is a function of the counting out-scores,
    independent of the counting in-scores, so given it the FN count is Binomial(m_in, FNR)
    and its Clopper-Pearson bound at level b fails with probability <= b. (ii) Lower test at
    rank j: with Y_i = H(V_i), H the quantile function, P(Y < H(v)) <= v, so its FNR,
    P(Y < Y_(j+1)), is at most V_(j+1) ~ Beta(j + 1, m_in - j): the bound at j; its FP count
    is binomial given the threshold, as in (i). (iii) A value-placed test is fixed by the
    plan: both counts are binomial. By the union bound every rate bound holds at once with
    probability >= c; there each test's rates lie below their bounds, the method's bound
    only shrinks as the rates grow, so every test's eps_lower is at most the run's eps, and
    so is their maximum. Assumption-free for `"eps_delta"`: rigorous. Measured (`advsim
    figure threshold_vs_jax_privacy`, its second table): on the Laplace pair (exact eps
    reached by every threshold beyond the shift), 10^4 per world, 200 repeats, 1 bound above
    the exact eps at confidence 0.95 (allowed 21) and 3 at 0.8 (allowed 58), where `"same"`
    (chosen and counted on the same runs) has 117.

    Attributes:
        fraction: the planning share, in (0, 1) (default 0.1).
    """

    fraction: float = RANK_SPLIT_FRACTION
    name: ClassVar[str] = "rank_split"
    plan: ClassVar[staticmethod] = staticmethod(rank_split_audit)


class Bonferroni(ThresholdStrategy):
    """The best of every distinct threshold (one between each pair of adjacent pooled
    scores, plus one above all: K of them), each bounded at level alpha / K and counted
    on all runs. The thresholds sit at the observed scores: not held out."""

    name: ClassVar[str] = "bonferroni"

    def run(self, audit, scores, *, delta, accounting=None):
        return bonferroni_audit(audit, scores, delta=delta, accounting=accounting)


#: `BySampleSize`'s rule: `RankSplit()` from this many scores per world on.
BY_SAMPLE_SIZE_RANK_FROM = PLANNING_MIN_SCORES


class BySampleSize(ThresholdStrategy):
    """`audit`'s default: the best rigorous strategy for the sample size at hand, by a
    rule fixed in advance.

    The rule: `RankSplit()` when each world has at least 3 scores (the fewest it takes),
    else `Split()` (2 per world: one chooses, one is counted). The result's
    `extras["chosen_strategy"]` is the strategy that ran (its repr) and
    `extras["strategy_rule"]` the rule.

    Measured (`scripts/threshold_strategies_small.py`: the eps_delta audit at delta
    1e-5, confidence 0.95, the median `eps_lower` of 40 score sets per row, and how many
    were 0; `advsim figure threshold_vs_jax_privacy` measures 10^3, 10^4 and 10^5 per
    world): on the figure's six families at 100, 300 and 1000 scores per world
    `RankSplit()` had the largest median of the held-out strategies in 15 of 18 rows
    (N(2, 1) vs N(0, 1) at 1000: 3.07 against `ProjectedSplit` 2.84, `Split` 2.69,
    `MultiSplit` 2.47; the mixture at 1000: 2.62 against 1.88); in two it ties at 0 (the
    weak Gaussian and the mixture at 100, where every strategy has 0 in most sets:
    `RankSplit` in the fewest, 34 and 29 of 40); in one, the Binomial pair at 100,
    `ProjectedSplit`'s median is larger (0.31 against 0.27) with 12 zeros against 5.
    Outside the six families,
    on 0.9 N(0, 1) + 0.1 N(2, 1) vs N(0, 1) at 1000, `ProjectedSplit` was ahead (0.357
    against 0.322). On three families the rule was not chosen on
    (`scripts/threshold_default_heldout.py`, 1000 per world, 600 score sets: median
    eps_lower of the default; of RankSplit(0.05), (0.2), (0.3), ProjectedSplit(0.15),
    Split(0.5)): Logistic(1, 1) vs Logistic(0, 1) 0.471; 0.472, 0.458, 0.450, 0.445,
    0.395; Poisson(12) vs Poisson(10) 0.606; 0.613, 0.601, 0.563, 0.554, 0.476;
    Gumbel(0.75, 1) vs Gumbel(0, 1) 1.364; 1.298, 1.373, 1.386, 1.448, 1.155 (its evidence
    in the lower tail, where `ProjectedSplit` is 6% ahead). A larger planning share at
    1000 would cost 2-5% on the first two; none of these shares wins everywhere.
    """

    name: ClassVar[str] = "by_sample_size"

    def choose(self, scores: Scores) -> ThresholdStrategy:
        """The strategy the rule picks for `scores`."""
        if min(scores.n_in, scores.n_out) >= BY_SAMPLE_SIZE_RANK_FROM:
            return RankSplit()
        return Split()

    def run(self, audit, scores, *, delta, accounting=None):
        chosen = self.choose(scores)
        result = chosen(audit, scores, delta=delta, accounting=accounting)
        extras = {
            **result.extras,
            "chosen_strategy": repr(chosen),
            "strategy_rule": (
                f"by_sample_size: rank_split from {BY_SAMPLE_SIZE_RANK_FROM} scores per "
                "world, else split"
            ),
        }
        return dataclasses.replace(result, extras=extras)


#: Every strategy by its alias, with the `audit` keyword of each option (the keywords
#: `audit` takes, as the sweeps and the command line name them) and the field it sets.
ALIASES: dict[str, tuple[type[ThresholdStrategy], dict[str, str]]] = {
    "by_sample_size": (BySampleSize, {}),
    "split": (Split, {}),
    "same": (Same, {}),
    "explicit": (Explicit, {"threshold": "threshold"}),
    "multi_split": (MultiSplit, {"num_splits": "num_splits"}),
    "projected_split": (ProjectedSplit, {"selection_fraction": "fraction"}),
    "bonferroni": (Bonferroni, {}),
    "rank_split": (RankSplit, {"selection_fraction": "fraction"}),
}


def as_threshold_strategy(value, **options) -> ThresholdStrategy:
    """The strategy for `value`: a `ThresholdStrategy` (returned as is), an alias of
    `ALIASES` with its options (`selection_fraction=0.2` for `"rank_split"`), or a class
    path `"module:Class"` of a `ThresholdStrategy` subclass (built with no arguments).

    Raises:
        ValueError: an unknown alias, an option the strategy does not take, a class path
            that does not name a `ThresholdStrategy`, options with a value or a path.
        TypeError: anything else.
    """
    if isinstance(value, ThresholdStrategy):
        if options:
            raise ValueError(
                f"options {sorted(options)} apply to a threshold_selection given by name; "
                f"set them on the strategy value instead, got {value!r}"
            )
        return value
    if not isinstance(value, str):
        raise TypeError(
            "threshold_selection must be a ThresholdStrategy or its name, one of "
            f"{list(ALIASES)} or 'module:Class', got {value!r}"
        )
    if value in ALIASES:
        cls, keywords = ALIASES[value]
        if ("threshold" in options) != ("threshold" in keywords):
            raise ValueError(
                "threshold is given exactly when threshold_selection='explicit', got "
                f"threshold_selection={value!r}, threshold={options.get('threshold')!r}"
            )
        for key in options:
            if key not in keywords:
                takers = [a for a, (_, kw) in ALIASES.items() if key in kw]
                raise ValueError(
                    f"{key} applies to threshold_selection={' or '.join(map(repr, takers))} "
                    f"only, got threshold_selection={value!r}"
                )
        try:
            return cls(**{keywords[k]: v for k, v in options.items()})
        except ValueError as err:  # name the option as it was given: selection_fraction
            message = str(err)
            for key, field in keywords.items():
                if message.startswith(f"{field} ") and key != field:
                    message = key + message[len(field) :]
            raise ValueError(message) from None
    if ":" not in value:
        raise ValueError(
            f"threshold_selection must be one of {list(ALIASES)} or a class path "
            f"'module:Class', got {value!r}"
        )
    cls = import_class_path(value, "threshold_selection")
    if not (isinstance(cls, type) and issubclass(cls, ThresholdStrategy)):
        raise ValueError(
            f"threshold_selection {value!r} must name a subclass of "
            f"advsim.audits.ThresholdStrategy, got {cls!r}"
        )
    if options:
        raise ValueError(
            f"options {sorted(options)} do not apply to threshold_selection {value!r} "
            "(a class path is built with no arguments; give a value in Python instead)"
        )
    return cls()

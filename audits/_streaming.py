r"""Streaming audits: tests planned on a pilot, then only counted on the main runs.

Leakage that lives in rare events needs $10^8$-$10^{10}$ runs per world, far more than an
audit can sort and split in memory. A streaming audit separates the two jobs an in-memory
held-out audit does on one score set:

1. **Plan** (`plan_tests`): on a pilot run with its own seed, choose $K$ threshold tests
   "canary in iff score $\ge \tau_j$" and fix them.
2. **Count** (`advsim.simulate_counts`): simulate the main runs chunk by chunk and keep,
   per world, only how many runs score at or above each $\tau_j$.
3. **Bound** (`counts_audit`): the (eps, delta) lower bound of each test from its counts
   (Clopper-Pearson at level $(1 - c) / (2K)$ for each of its two rates), the largest
   over the $K$ tests.

**Why the result is a rigorous lower bound.** The thresholds are functions of the pilot
alone (or were given before any run), and the pilot's runs are drawn from keys disjoint
from the main runs', so conditionally on the plan the main runs are independent of it:
given the plan, test $j$'s count among $N$ canary-out runs is $\mathrm{Binomial}(N,
\mathrm{FPR}_j)$ and among canary-in runs below $\tau_j$ is $\mathrm{Binomial}(N,
\mathrm{FNR}_j)$, with the rates of the fixed region $S_j = \{s \ge \tau_j\}$. The
one-sided Clopper-Pearson bounds $\overline{\mathrm{FPR}}_j, \overline{\mathrm{FNR}}_j$ at
level $(1 - c)/(2K)$ each all hold together with probability $\ge c$ (union bound over
$2K$ events). If the run is $(\varepsilon, \delta)$-DP, every region satisfies
$1 - \mathrm{FNR}_j \le e^\varepsilon \mathrm{FPR}_j + \delta$ and
$1 - \mathrm{FPR}_j \le e^\varepsilon \mathrm{FNR}_j + \delta$ (both orders of the pair),
and both stay true with the rates replaced by upper bounds on the right and lower bounds
on the left; solved for $\varepsilon$ they give `eps_delta_terms` at the bounds. So on
that event every test's value, and their maximum, is at most $\varepsilon$: `eps_lower`
exceeds the true epsilon with probability at most $1 - c$, whatever the plan. The plan
only decides how tight it is. (The runs' keys are derived by `jax.random.fold_in`; the
pilot's and the main run's streams are as independent as any two streams of the
generator.)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from advsim import Scores
from advsim.validation import check_delta, check_in_interval, check_int

from ._eps_delta import eps_delta_terms
from ._guarantee import Guarantee
from ._metrics import eps_from_counts
from ._result import AuditResult
from ._threshold import clopper_pearson_upper

__all__ = ["TestPlan", "counts_audit", "fixed_tests", "plan_tests"]

DEFAULT_NUM_TESTS = 6
"""Tests `plan_tests` plans by default: per order of the pair, the pilot's best threshold
and two less extreme ones (the rarer world's pilot count doubled and quadrupled), which
hedge the pilot's noise in the far tail at a Bonferroni cost of a few hundredths."""
# Ranks of each world's sorted pilot scores tried as thresholds, geometric from both ends.
_RANKS_PER_TAIL = 512


@dataclasses.dataclass(frozen=True)
class TestPlan:
    """The threshold tests of a streaming audit, fixed before its main runs are counted.

    Attributes:
        thresholds: the $K$ thresholds; test $j$ says "canary in" iff score $\\ge \\tau_j$.
        planned_on: how they were chosen, in words (a pilot of how many runs per world
            and its seed, or "given before any run").
        pilot_runs: runs per world of the pilot (None when the tests were given).
        projected: for each test, the eps_lower the pilot projected at the main run's
            size (an estimate used only to choose; None when the tests were given).
        directions: for each test, "in above" (it was chosen for the first inequality:
            canary-in runs at or above tau, rare among canary-out runs) or "out below"
            (the second), or "given".
    """

    __test__ = False  # a plan, not a pytest class

    thresholds: tuple[float, ...]
    planned_on: str
    pilot_runs: int | None = None
    projected: tuple[float, ...] | None = None
    directions: tuple[str, ...] | None = None

    def __post_init__(self):
        values = np.asarray(self.thresholds, dtype=np.float64).reshape(-1)
        if values.size == 0:
            raise ValueError("a test plan needs at least one threshold, got none")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"thresholds must be finite, got {values.tolist()!r}")
        object.__setattr__(self, "thresholds", tuple(float(v) for v in values))

    @property
    def num_tests(self) -> int:
        """K, the number of tests the Bonferroni correction is over."""
        return len(self.thresholds)

    def to_dict(self) -> dict:
        """Plain values, JSON-ready (thresholds also as exact hex strings)."""
        return {
            "thresholds": list(self.thresholds),
            "thresholds_hex": [t.hex() for t in self.thresholds],
            "planned_on": self.planned_on,
            "pilot_runs": self.pilot_runs,
            "projected": None if self.projected is None else list(self.projected),
            "directions": None if self.directions is None else list(self.directions),
        }

    @classmethod
    def from_dict(cls, record: dict) -> TestPlan:
        """The plan `to_dict` wrote (thresholds bit for bit from their hex strings)."""
        return cls(
            thresholds=tuple(float.fromhex(h) for h in record["thresholds_hex"]),
            planned_on=record["planned_on"],
            pilot_runs=record.get("pilot_runs"),
            projected=None if record.get("projected") is None else tuple(record["projected"]),
            directions=None if record.get("directions") is None else tuple(record["directions"]),
        )


def fixed_tests(thresholds) -> TestPlan:
    """A plan of thresholds given before any run (e.g. from theory or an earlier study).

    Raises:
        ValueError: no threshold (the plan would choose nothing), or one not finite.
    """
    values = np.asarray(thresholds, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError(
            f"thresholds plans no test: give at least one finite threshold, got {list(values)!r}"
        )
    return TestPlan(thresholds=tuple(values.tolist()), planned_on="given before any run",
                    directions=("given",) * values.size)  # fmt: skip


def _candidate_ranks(n: int) -> np.ndarray:
    """0-based ranks of a sorted world, geometric from both ends plus even quantiles."""
    head = np.unique(np.geomspace(1, n, _RANKS_PER_TAIL).astype(np.int64)) - 1
    even = np.linspace(0, n - 1, 129).astype(np.int64)
    return np.unique(np.concatenate([head, n - 1 - head, even]))


def _projected_values(a, b, n_in, n_out, runs, delta, level):
    """The eps_lower each direction would give at `runs` per world if the main rates were
    the pilot's (a of n_in canary-in runs and b of n_out canary-out runs at or above the
    threshold), a rate the pilot saw 0 times read as half a run."""
    fpr = (b + 0.5) / (n_out + 1.0)
    fnr = (n_in - a + 0.5) / (n_in + 1.0)
    fp = np.minimum(np.round(fpr * runs), runs)
    fn = np.minimum(np.round(fnr * runs), runs)
    fpr_up = clopper_pearson_upper(fp.astype(np.int64), runs, level)
    fnr_up = clopper_pearson_upper(fn.astype(np.int64), runs, level)
    return eps_delta_terms(fpr_up, fnr_up, delta)


def _nearest_count(counts: np.ndarray, target: float, eligible: np.ndarray) -> int:
    """The eligible candidate whose count is nearest `target` in log scale."""
    gap = np.abs(np.log((counts + 0.5) / (target + 0.5)))
    gap = np.where(eligible, gap, np.inf)
    return int(np.argmin(gap))


def plan_tests(
    pilot: Scores,
    runs: int,
    *,
    delta: float,
    confidence: float = 0.95,
    num_tests: int = DEFAULT_NUM_TESTS,
    planned_on: str | None = None,
) -> TestPlan:
    r"""Chooses $K$ threshold tests on a pilot run, for a main run of `runs` per world.

    Every threshold tried is a pilot score (up to about 2000 per world: ranks geometric
    from both ends of each world's sorted scores, where rare-event leakage lives, and
    even quantiles). For each, the pilot's rates are projected to `runs` runs per world
    and turned into the bound each inequality of (eps, delta)-DP would give there
    (Clopper-Pearson at the level $(1 - c)/(2K)$ that `counts_audit` will use; a rate
    the pilot saw 0 times counts as half a run, so a threshold beyond every pilot run is
    not taken for a perfect test). Per direction with a positive projection, the plan
    takes the best threshold and, to hedge the pilot's noise in the far tail, thresholds
    whose rarer pilot count is 2, 4, ... times the best one's (at least 1); the $K$ tests
    are split between the directions. When no threshold projects a positive bound, the
    best one is kept (the audit will then most likely report 0).

    Args:
        pilot: the pilot's scores (its own seed: never the main runs').
        runs: the main run's runs per world, >= 1.
        delta: the delta of the audit, in [0, 1).
        confidence: the audit's confidence c, in (0.5, 1).
        num_tests: K >= 1.
        planned_on: how the pilot was drawn, in words (recorded in the plan).

    Returns:
        A `TestPlan` with the pilot's projections.

    Raises:
        ValueError: a bad argument, naming it, its value and the valid range.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> pilot = Scores(rng.normal(1.0, 1.0, 10**4), rng.normal(0.0, 1.0, 10**4))
        >>> plan = plan_tests(pilot, 10**6, delta=1e-5, num_tests=2)
        >>> plan.num_tests, plan.directions  # in the thresholds' order
        (2, ('out below', 'in above'))
    """
    if not isinstance(pilot, Scores):
        raise TypeError(f"pilot must be an advsim.Scores, got {type(pilot).__name__}")
    runs = check_int("runs", runs, minimum=1)
    num_tests = check_int("num_tests", num_tests, minimum=1)
    delta = check_delta("delta", delta, allow_zero=True)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    pilot.check_finite()
    s_in, s_out = np.sort(pilot.canary_in), np.sort(pilot.canary_out)
    n_in, n_out = s_in.size, s_out.size
    cand = np.unique(np.concatenate([s_in[_candidate_ranks(n_in)],
                                     s_out[_candidate_ranks(n_out)]]))  # fmt: skip
    a = n_in - np.searchsorted(s_in, cand, side="left")  # canary-in runs >= tau
    b = n_out - np.searchsorted(s_out, cand, side="left")  # canary-out runs >= tau
    level = (1.0 - confidence) / (2.0 * num_tests)
    value_in, value_out = _projected_values(a, b, n_in, n_out, runs, delta, level)
    # The rarer count each direction rests on: canary-out runs at or above tau for the
    # first inequality, canary-in runs below it for the second.
    sides = [("in above", value_in, b.astype(float)),
             ("out below", value_out, (n_in - a).astype(float))]  # fmt: skip
    live = [s for s in sides if np.max(s[1]) > 0]
    if not live:
        live = [max(sides, key=lambda s: np.max(s[1]))]
    chosen: list[tuple[int, str]] = []
    per_side = [num_tests // len(live) + (i < num_tests % len(live)) for i in range(len(live))]
    for (name, value, rare), m in zip(live, per_side, strict=True):
        best = int(np.argmax(value))
        picks = [best]
        for j in range(1, m):
            eligible = np.isfinite(value) & ~np.isin(np.arange(cand.size), picks)
            if not np.any(eligible):
                break
            picks.append(_nearest_count(rare, max(rare[best], 1.0) * 2.0**j, eligible))
        chosen += [(p, name) for p in picks]
    # One test per threshold (two directions may pick the same one).
    seen: dict[int, str] = {}
    for idx, name in chosen:
        seen.setdefault(idx, name)
    order = sorted(seen)
    projected = [float(max(value_in[i], value_out[i], 0.0)) for i in order]
    return TestPlan(
        thresholds=tuple(float(cand[i]) for i in order),
        planned_on=planned_on or f"a pilot of {n_in} canary-in and {n_out} canary-out runs",
        pilot_runs=int(min(n_in, n_out)),
        projected=tuple(projected),
        directions=tuple(seen[i] for i in order),
    )


def counts_audit(
    plan: TestPlan,
    in_at_or_above,
    out_at_or_above,
    runs_in: int,
    runs_out: int,
    *,
    delta: float,
    confidence: float = 0.95,
) -> AuditResult:
    r"""The streaming audit's bound: each planned test's (eps, delta) bound from its counts.

    Test $j$ has TP = `in_at_or_above[j]`, FN = `runs_in` - TP, FP =
    `out_at_or_above[j]`, TN = `runs_out` - FP; its bound is `eps_from_counts` at
    confidence $1 - (1 - c)/K$ (so each of its two Clopper-Pearson bounds is at level
    $(1 - c)/(2K)$), and `eps_lower` is the largest over the $K$ tests: a rigorous lower
    bound with confidence $c$ when the plan was fixed without the counted runs (the
    module docstring proves it).

    Args:
        plan: the tests, fixed before the counted runs.
        in_at_or_above, out_at_or_above: per test, the counted runs of each world with
            score >= its threshold.
        runs_in, runs_out: the counted runs per world, >= 1.
        delta: in [0, 1) (0: pure DP).
        confidence: c in (0.5, 1).

    Returns:
        An `AuditResult` (method "streaming") at the best test; `extras["tests"]` holds
        every test's counts, rates, bounds and value, `extras["plan"]` the plan.

    Raises:
        ValueError: counts that do not match the plan or exceed the runs.
    """
    if not isinstance(plan, TestPlan):
        raise TypeError(f"plan must be an audits.TestPlan, got {type(plan).__name__}")
    runs_in = check_int("runs_in", runs_in, minimum=1)
    runs_out = check_int("runs_out", runs_out, minimum=1)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    k = plan.num_tests
    tp_all = np.asarray(in_at_or_above, dtype=np.int64).reshape(-1)
    fp_all = np.asarray(out_at_or_above, dtype=np.int64).reshape(-1)
    if tp_all.size != k or fp_all.size != k:
        raise ValueError(
            f"the counts must have one entry per planned test ({k}), got {tp_all.size} "
            f"and {fp_all.size}"
        )
    if np.any(tp_all < 0) or np.any(tp_all > runs_in) or np.any(fp_all < 0) or np.any(
        fp_all > runs_out
    ):
        raise ValueError(
            f"counts must lie in [0, runs]: got {tp_all.tolist()} of {runs_in} canary-in "
            f"and {fp_all.tolist()} of {runs_out} canary-out runs"
        )
    per_test = 1.0 - (1.0 - confidence) / k
    tests = []
    for j, (tau, tp, fp) in enumerate(zip(plan.thresholds, tp_all.tolist(), fp_all.tolist(),
                                          strict=True)):  # fmt: skip
        fn, tn = runs_in - tp, runs_out - fp
        bound = eps_from_counts(tp, fp, tn, fn, delta, confidence=per_test)
        point = eps_from_counts(tp, fp, tn, fn, delta, confidence=None)
        tests.append({
            "threshold": tau, "direction": None if plan.directions is None else
            plan.directions[j], "tp": tp, "fp": fp, "tn": tn, "fn": fn,
            "fpr": fp / runs_out, "fnr": fn / runs_in,
            "fpr_upper": bound.details["fpr_upper"], "fnr_upper": bound.details["fnr_upper"],
            "eps_lower": bound.value, "eps_point": point.value,
            "projected": None if plan.projected is None else plan.projected[j],
        })  # fmt: skip
    best = max(range(k), key=lambda j: (tests[j]["eps_lower"], -j))
    t = tests[best]
    eps_point, note = t["eps_point"], None
    if not math.isfinite(eps_point):
        eps_point, note = None, "a rate of the chosen test is 0: no finite plug-in estimate"
    elif eps_point < t["eps_lower"]:
        eps_point, note = None, "the plug-in estimate lies below eps_lower (a rate too small)"
    held = "given before any run" if plan.pilot_runs is None else (
        f"planned on {plan.planned_on}, with its own seed")
    guarantee = Guarantee(
        statement="eps_delta_lower_bound",
        assumption="none",
        held_out=True,
        multiplicity=f"Bonferroni over {k} threshold test(s) {held}, counted on "
        f"{runs_in} + {runs_out} other runs",
    )
    return AuditResult(
        method="streaming",
        eps_lower=float(t["eps_lower"]),
        eps_point=eps_point,
        eps_point_note=note,
        delta=float(delta),
        confidence=float(confidence),
        guarantee=guarantee,
        threshold=float(t["threshold"]),
        fpr=float(t["fpr"]),
        fnr=float(t["fnr"]),
        fpr_upper=float(t["fpr_upper"]),
        fnr_upper=float(t["fnr_upper"]),
        n_in=runs_in,
        n_out=runs_out,
        extras={"sides": "two", "tests": tests, "best_test": best, "plan": plan.to_dict()},
    )

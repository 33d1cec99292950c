"""Checks with readable failure reports, and audit calibration (`advsim.testing`)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import scipy.stats

import advsim
from advsim._accounting import Accounting
from advsim._scores import Scores
from advsim._validation import check_in_interval, check_int, check_nonnegative
from advsim.audits import AssumptionRejectedWarning, audit, get_audit
from advsim.testing._strategies import DrawnDPSGDParams, Mixture

__all__ = [
    "Calibration",
    "assert_audit_below",
    "assert_bound_below",
    "assert_monotone",
    "calibration_fraction",
    "clopper_pearson_interval",
    "gaussian_sampler",
    "mixture_sampler",
    "simulation_sampler",
]

# ----------------------------------------------------------------------------------------
# Checks


def _fmt(x) -> str:
    if isinstance(x, float | np.floating):
        return f"{float(x):.10g}"
    return repr(x)


def _describe(params) -> str:
    if isinstance(params, DrawnDPSGDParams | Mixture):
        params = dataclasses.asdict(params)
    if isinstance(params, Mapping):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in params.items())
    return repr(params)


def _call(fn: Callable, params) -> float:
    if isinstance(params, DrawnDPSGDParams):
        return fn(*params.bound_args, **params.bound_kwargs)
    if isinstance(params, Mapping):
        return fn(**params)
    if isinstance(params, Sequence) and not isinstance(params, str):
        return fn(*params)
    return fn(params)


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def assert_bound_below(
    lower_fn: Callable, upper_fn: Callable, params, *, rtol: float = 0.0, atol: float = 0.0
) -> tuple[float, float]:
    """Asserts `lower_fn(params) <= upper_fn(params) * (1 + rtol) + atol`, both not NaN.

    `params` is passed as: a `DrawnDPSGDParams` -> `fn(delta, T, q, sigma, canary_steps=n)`
    (the signature of every `*_epsilon` bound in `advsim.bounds`); a mapping -> `fn(**p)`;
    a tuple or list -> `fn(*p)`; anything else (e.g. a `Mixture`) -> `fn(p)`.

    Returns:
        `(lower, upper)`.

    Raises:
        AssertionError: naming both functions, both values and the parameters.
    """
    lower, upper = float(_call(lower_fn, params)), float(_call(upper_fn, params))
    ok = lower <= upper * (1.0 + rtol) + atol  # False if either is NaN
    if not ok:
        raise AssertionError(
            f"{_name(lower_fn)} exceeds {_name(upper_fn)}\n"
            f"  lower: {_name(lower_fn)} = {lower!r}\n"
            f"  upper: {_name(upper_fn)} = {upper!r}\n"
            f"  excess: {lower - upper!r} (rtol={rtol:g}, atol={atol:g})\n"
            f"  params: {_describe(params)}"
        )
    return lower, upper


def assert_monotone(
    xs: Sequence[float],
    values: Sequence[float],
    *,
    decreasing: bool = False,
    rtol: float = 0.0,
    atol: float = 0.0,
    label: str = "value",
    params=None,
) -> None:
    """Asserts that `values` (at increasing `xs`) never move against the stated direction
    by more than `rtol * |previous| + atol`, and that none is NaN.

    Raises:
        AssertionError: naming the first offending pair and `params`.
    """
    vs = [float(v) for v in values]
    where = "" if params is None else f"\n  params: {_describe(params)}"
    for x, v in zip(xs, vs, strict=True):
        if math.isnan(v):
            raise AssertionError(f"{label} is NaN at {_fmt(x)}{where}")
    for i in range(1, len(vs)):
        (x0, v0), (x1, v1) = (xs[i - 1], vs[i - 1]), (xs[i], vs[i])
        step = v0 - v1 if not decreasing else v1 - v0
        if step > rtol * abs(v0) + atol:
            kind = "non-increasing" if decreasing else "non-decreasing"
            raise AssertionError(
                f"{label} is not {kind}: {_fmt(v0)} at {_fmt(x0)} -> {_fmt(v1)} at "
                f"{_fmt(x1)} (rtol={rtol:g}, atol={atol:g}){where}"
            )


def assert_audit_below(
    mechanism,
    adversary,
    upper_eps: float,
    *,
    delta: float,
    method: str = "eps_delta",
    trials: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    accounting: Accounting | None = None,
    label: str = "upper bound",
):
    """Simulates, audits, and asserts that the audit's `eps_lower <= upper_eps`.

    Runs `advsim.simulate(mechanism, adversary, trials, key=seed)` and
    `advsim.audits.audit(scores, method, delta=..., confidence=..., seed=seed)` (rigorous
    split threshold). A correct upper bound is exceeded by a rigorous audit with
    probability at most 1 - confidence, so inside a property test (many examples) use a
    high confidence, e.g. 0.99 or more. Sizes are small by default, for hypothesis.

    For the gdp and family audits, whose `eps_lower` rests on an assumption, the held-out
    check of that assumption does not warn here (under a true assumption it still rejects
    with probability up to the audit's `assumption_level`, which would make a property
    test flaky wherever warnings are errors); its verdict is in the returned result
    (`assumption_rejected`) and in the report when the assertion fails.

    Args:
        mechanism, adversary: what to simulate.
        upper_eps: the bound that must hold (e.g. `heuristic_epsilon(...)` for a linear
            mechanism, `composition_epsilon(...)` for any DP-SGD run).
        delta, method, confidence: passed to `audit`.
        trials: runs per world.
        seed: the simulation key and the audit's split seed; the report names it.
        accounting: for `method="family"`; default `mechanism.accounting()`.
        label: what `upper_eps` is, for the report.

    Returns:
        The `AuditResult`.

    Raises:
        AssertionError: with the parameters, eps_lower, the bound and a replay call.
    """
    acc = mechanism.accounting() if accounting is None else accounting
    scores = advsim.simulate(mechanism, adversary, trials, key=seed, chunk_size=trials)
    with warnings.catch_warnings():  # the verdict is reported below instead
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        result = audit(
            scores, method, delta=delta, accounting=acc, confidence=confidence, seed=seed
        )
    # None: the method's model does not fit (no claim is made), which exceeds nothing.
    if result.eps_lower is not None and not result.eps_lower <= upper_eps:
        raise AssertionError(
            f"audit lower bound exceeds the {label}\n"
            f"  eps_lower: {result.eps_lower!r} (method {method!r}, confidence {confidence}, "
            f"rigorous={result.rigorous}; assumes: {result.extras.get('assumption')}"
            + (
                ""
                if result.assumption_check is None
                else f"; held-out check: {result.assumption_check.describe()}"
            )
            + ")\n"
            f"  {label}: {float(upper_eps)!r}\n"
            f"  delta: {delta!r}; rates at threshold {result.threshold:.6g}: "
            f"FPR {result.fpr:.4g} (<= {result.fpr_upper:.4g}), "
            f"FNR {result.fnr:.4g} (<= {result.fnr_upper:.4g}), "
            f"{result.n_in}/{result.n_out} runs counted\n"
            f"  mechanism: {type(mechanism).__name__} with accounting "
            f"{_describe(acc.to_dict())}\n"
            f"  adversary: {type(adversary).__name__}\n"
            f"  replay: assert_audit_below(mechanism, adversary, {float(upper_eps)!r}, "
            f"delta={delta!r}, method={method!r}, trials={trials}, "
            f"confidence={confidence!r}, seed={seed})\n"
            f"  (a correct bound fails this check with probability <= {1 - confidence:.3g})"
        )
    return result


# ----------------------------------------------------------------------------------------
# Calibration


def clopper_pearson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval for a binomial proportion (k successes in n)."""
    n = check_int("n", n, minimum=1)
    k = check_int("k", k, minimum=0, maximum=n)
    a = (1.0 - check_in_interval("level", level, 0.0, 1.0)) / 2.0
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(scipy.stats.beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def gaussian_sampler(mu: float, trials: int) -> Callable[[int], Scores]:
    """`seed -> Scores(N(mu, 1), N(0, 1))`: the mu-GDP Gaussian mechanism, `trials` per world."""
    mu = check_nonnegative("mu", mu)

    def sample(seed: int) -> Scores:
        rng = np.random.default_rng(seed)
        return Scores(rng.normal(mu, 1.0, trials), rng.normal(0.0, 1.0, trials))

    sample.description = f"the Gaussian mechanism (mu={mu:g}, {trials} runs per world)"
    return sample


def mixture_sampler(mixture: Mixture, trials: int) -> Callable[[int], Scores]:
    """`seed -> Scores` drawn exactly from the mixture's pair: in ~ N(X, s^2), out ~ N(0, s^2)."""
    support, probs, scale = mixture.args

    def sample(seed: int) -> Scores:
        rng = np.random.default_rng(seed)
        x = rng.choice(support, size=trials, p=probs / probs.sum())
        return Scores(x + rng.normal(0.0, scale, trials), rng.normal(0.0, scale, trials))

    sample.description = f"a {support.size}-atom mixture ({trials} runs per world)"
    return sample


def simulation_sampler(mechanism, adversary, trials: int) -> Callable[[int], Scores]:
    """`seed -> advsim.simulate(mechanism, adversary, trials, key=seed)`."""

    def sample(seed: int) -> Scores:
        return advsim.simulate(mechanism, adversary, trials, key=seed, chunk_size=trials)

    sample.description = (
        f"{type(mechanism).__name__} scored by {type(adversary).__name__} ({trials} runs per world)"
    )
    return sample


@dataclasses.dataclass(frozen=True)
class Calibration:
    """How often an audit's `eps_lower` exceeded the true epsilon, over independent repeats.

    Attributes:
        method, label: the audit method and a description of the scenario.
        repeats, failures: audits run, and those with `eps_lower > true_eps`.
        fraction: failures / repeats.
        interval: two-sided Clopper-Pearson interval of the failure probability.
        nominal: 1 - confidence, the failure probability a calibrated audit may have.
        max_failures: the largest count consistent with `nominal` at p-value `p_value`
            (`scipy.stats.binom.ppf(1 - p_value, repeats, nominal)`).
        true_eps, median_eps_lower: the truth and the median bound (tightness).
        failing_seeds: the sampler seeds of the first few failures, to replay.
        assumption_rejected: repeats whose audit's assumption check rejected (gdp and
            family audits; 0 for the others). Under a true assumption each rejects with
            probability at most the audit's `assumption_level`; the warning each would
            raise is recorded here instead.
    """

    method: str
    label: str
    repeats: int
    failures: int
    fraction: float
    interval: tuple[float, float]
    nominal: float
    max_failures: int
    p_value: float
    true_eps: float
    median_eps_lower: float
    failing_seeds: tuple[int, ...]
    assumption_rejected: int = 0

    @property
    def passed(self) -> bool:
        return self.failures <= self.max_failures

    def __str__(self) -> str:
        lo, hi = self.interval
        return (
            f"{self.method} on {self.label}: eps_lower > true eps {self.true_eps:.4g} in "
            f"{self.failures}/{self.repeats} = {self.fraction:.3f} (CP [{lo:.3f}, {hi:.3f}]); "
            f"allowed <= {self.max_failures} (nominal {self.nominal:.3g}, p = {self.p_value:g}); "
            f"median eps_lower {self.median_eps_lower:.4g}"
            + (
                f"; assumption rejected in {self.assumption_rejected}/{self.repeats}"
                if self.assumption_rejected
                else ""
            )
        )

    def check(self) -> Calibration:
        """Returns self, or raises AssertionError with the report and seeds to replay."""
        if not self.passed:
            raise AssertionError(
                f"audit is not calibrated: {self}\n  replay: sampler(seed) for seed in "
                f"{list(self.failing_seeds)}"
            )
        return self


def calibration_fraction(
    sampler: Callable[[int], Scores],
    true_eps: float,
    method: str,
    *,
    delta: float,
    repeats: int = 200,
    confidence: float = 0.95,
    accounting: Accounting | None = None,
    threshold_selection: str = "split",
    seed: int = 0,
    p_value: float = 1e-3,
    interval_level: float = 0.95,
    rtol: float = 1e-9,
    label: str = "",
    audit_kwargs: Mapping | None = None,
) -> Calibration:
    """Repeats an audit on independent score sets and counts `eps_lower > true_eps`.

    Repeat i audits `sampler(seed + i)` with split seed `seed + i`. An audit whose
    `eps_lower` is a rigorous bound at `confidence` fails with probability at most
    `1 - confidence`, so `failures` is then stochastically below
    Binomial(repeats, 1 - confidence); `Calibration.check()` asserts it is at most that
    binomial's (1 - p_value)-quantile.

    Args:
        sampler: `seed -> Scores` (see `gaussian_sampler`, `mixture_sampler`,
            `simulation_sampler`); must give independent score sets for distinct seeds.
        true_eps: the mechanism's exact epsilon at `delta`.
        method, delta, confidence, accounting: passed to the audit.
        threshold_selection: the audit's own field (`get_audit`): "split" (default) or
            "same". The strategies of `advsim.audits.audit` ("by_sample_size", its
            default, and the others) are not taken here: the calibration is that of one
            audit class at one split.
        repeats: number of independent audits.
        seed: first sampler seed.
        p_value: false-alarm probability of `check()` for a calibrated audit.
        interval_level: level of the reported Clopper-Pearson interval.
        rtol: `eps_lower` counts as a failure only above `true_eps * (1 + rtol)` (rounding).
        label: describes the scenario in reports (default: the sampler's `description`
            attribute, which the samplers here set, and the threshold selection).
        audit_kwargs: further fields of the audit (`get_audit(method, **audit_kwargs)`),
            e.g. `{"eps_grid": (20.0,)}` for a cheaper "tradeoff" audit.

    Returns:
        A `Calibration` record; call `.check()` to assert.
    """
    repeats = check_int("repeats", repeats, minimum=1)
    true_eps = check_nonnegative("true_eps", true_eps)
    nominal = 1.0 - check_in_interval("confidence", confidence, 0.5, 1.0)
    p_value = check_in_interval("p_value", p_value, 0.0, 1.0)
    eps, failing, rejected = [], [], 0
    for i in range(repeats):
        auditor = get_audit(
            method,
            confidence=confidence,
            threshold_selection=threshold_selection,
            seed=seed + i,
            **dict(audit_kwargs or {}),
        )
        with warnings.catch_warnings():  # counted in `assumption_rejected` instead
            warnings.simplefilter("ignore", AssumptionRejectedWarning)
            r = auditor(sampler(seed + i), delta=delta, accounting=accounting)
        rejected += bool(r.assumption_rejected)
        # None (the method's model does not fit the rates) makes no claim: 0 for the median.
        eps.append(0.0 if r.eps_lower is None else r.eps_lower)
        if r.eps_lower is not None and r.eps_lower > true_eps * (1.0 + rtol):
            failing.append(seed + i)
    k = len(failing)
    return Calibration(
        method=method,
        label=label
        or f"{getattr(sampler, 'description', 'sampled scores')}, {threshold_selection} threshold",
        repeats=repeats,
        failures=k,
        fraction=k / repeats,
        interval=clopper_pearson_interval(k, repeats, interval_level),
        nominal=nominal,
        max_failures=int(scipy.stats.binom.ppf(1.0 - p_value, repeats, nominal)),
        p_value=p_value,
        true_eps=true_eps,
        median_eps_lower=float(np.median(eps)),
        failing_seeds=tuple(failing[:10]),
        assumption_rejected=rejected,
    )

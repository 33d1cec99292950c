"""advsim's threshold strategies against jax_privacy's, on score families nobody tuned to.

Every row is one score family at one size (`per_world` scores in each world) and
`params.seeds` independent score sets (one count for every size, or one per size). On
each set every strategy runs on the same scores (the eps_delta audit, delta =
`params.delta`, confidence = `params.confidence`, split seed = the set's index; the scores
come from a generator seeded with (index, family, size), so the split is independent of
them):

- advsim: every strategy of `advsim.audits.THRESHOLD_SELECTIONS` but `"explicit"` and
  `"same"`: the default `"by_sample_size"`, `"split"`, `"multi_split"`,
  `"projected_split"`, `"bonferroni"`, `"rank_split"`, each with its guarantee's
  `held_out` flag;
- jax_privacy (imported here; a test dependency of advsim): `CanaryScoreAuditor.
  epsilon_clopper_pearson` with `Split(0.5, seed)`, `MultiSplit(num_splits, 0.5, seed)`
  (both held out) and `Bonferroni()` (not held out: it counts every run and divides the
  level by the number of thresholds on the hull of the observed ROC, chosen after seeing
  the scores), each two-sided and one-sided.

The `threshold_vs_jax_privacy` table puts the best median of advsim's held-out strategies
beside the best median of all of jax_privacy's, their ratio with a 95% bootstrap interval
(the score sets resampled, both strategies together) and the number of score sets on which
advsim's is at least jax_privacy's, and, where advsim is behind, why; then the two
defaults: advsim's (`audit`'s `"by_sample_size"`) against jax_privacy's
(`epsilon_clopper_pearson(significance, delta)`: `Bonferroni()`, one-sided),
`default_ratio`, on `params.default_seeds` score sets of their own (the row's sets and
more: the two defaults alone are cheap; `default_seeds` in the table). The limit is the
oracle (`advsim.figures._threshold_oracle`): the
eps_delta bound of one test fixed in advance at the true optimum (a threshold value, or a
rank of either world's scores, whichever has the larger median: the value at the pair's
expected counts from its exact laws, `exact_rates`, the rank on 200 score sets drawn from
the laws apart from the audited ones; `oracle_test` names it), counted on all runs at the
same confidence, the level 1 - c shared between its two rates as fixed in advance with it
(`advsim.figures._threshold_oracle.SHARES`). A held-out strategy counts fewer runs
and places its test from data, so its median should not beat it beyond the noise; each
strategy's median over the oracle's is `*_over_oracle` (`over_oracle` in
`threshold_strategies`, not printed, with every strategy's median), and advsim's best
over it has the paired bootstrap interval `advsim_over_oracle_low` - `_high` and the
count `advsim_ahead_of_oracle_in`: the noise the "beyond" is read against. jax_privacy's best
held-out strategy (`Split`, `MultiSplit`) is `jax_held_out_strategy`, with advsim's best
over it, `held_out_ratio`. The median number of hull thresholds jax_privacy's
Bonferroni() takes the best of on the same runs is `jax_hull_thresholds`.

The `threshold_calibration` table repeats strategies `params.calibration.repeats` times on
the Laplace pair (`laplace`: Laplace(shift, 1) vs Laplace(0, 1), exact eps(delta) =
shift + 2 log(1 - delta), reached by every threshold at or beyond the shift) and counts the
repeats whose eps_lower exceeds the exact eps. A held-out strategy claims an (eps, delta)
bound at confidence c, so the count must stay within the 0.999-quantile of
Binomial(repeats, 1 - c) (`check` pass / FAIL, the rule of `advsim.testing.Calibration`);
`"same"` (threshold chosen and counted on the same runs) and jax_privacy's Bonferroni()
are measured, not claimed (`check` "measured"): the first shows the check has the power
to see a bound that ignores its selection.

Each row is a file in OUT/cells/ (written atomically, with the configuration it was
computed under), reused with --resume when that configuration matches.
"""

from __future__ import annotations

import functools
import json
import math
import time
import warnings

import numpy as np
import scipy.optimize
import scipy.stats

from advsim import Scores
from advsim._io import write_json
from advsim.audits import (
    DEFAULT_THRESHOLD_SELECTION,
    THRESHOLD_SELECTIONS,
    AssumptionRejectedWarning,
    audit,
)
from advsim.bounds import gdp_epsilon
from advsim.figures._threshold_oracle import SHARES, oracle_eps, oracle_tests

__all__ = [
    "FAMILIES",
    "compute_threshold_strategies",
    "exact_epsilon",
    "family_exact",
    "sample_scores",
]

#: Each family: (code for the seed, description). Its scores come from `sample_scores`.
FAMILIES = {
    "gaussian_strong": (1, "N(2, 1) vs N(0, 1)"),
    "gaussian_weak": (2, "N(0.5, 1) vs N(0, 1)"),
    "laplace": (3, "Laplace(1, 1) vs Laplace(0, 1)"),
    "mixture": (4, "0.9 N(0, 1) + 0.1 N(4, 1) vs N(0, 1)"),
    "student_t": (5, "t3 + 2 vs t3"),
    "binomial": (6, "Binomial(20, 0.6) vs Binomial(20, 0.5)"),
}
#: The Laplace pair's shift (its exact eps at delta 0).
LAPLACE_SHIFT = 1.0


def _draw(family: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if family == "gaussian_strong":
        return rng.normal(2.0, 1.0, n), rng.normal(0.0, 1.0, n)
    if family == "gaussian_weak":
        return rng.normal(0.5, 1.0, n), rng.normal(0.0, 1.0, n)
    if family == "laplace":
        return rng.laplace(LAPLACE_SHIFT, 1.0, n), rng.laplace(0.0, 1.0, n)
    if family == "mixture":
        tail = rng.random(n) < 0.1
        return np.where(tail, rng.normal(4.0, 1.0, n), rng.normal(0.0, 1.0, n)), rng.normal(
            0.0, 1.0, n
        )
    if family == "student_t":
        return rng.standard_t(3, n) + 2.0, rng.standard_t(3, n)
    if family == "binomial":
        return (rng.binomial(20, 0.6, n).astype(np.float64),
                rng.binomial(20, 0.5, n).astype(np.float64))  # fmt: skip
    raise ValueError(f"unknown family {family!r}; the families: {', '.join(FAMILIES)}")


def sample_scores(family: str, n: int, seed: int) -> Scores:
    """`n` scores per world of `family` (`FAMILIES`), from a generator seeded with
    (seed, family code, n): independent of every split seed the strategies draw from."""
    return Scores(*_draw(family, n, np.random.default_rng([seed, FAMILIES[family][0], n])))


def _hockey_stick(log_p: np.ndarray, log_q: np.ndarray, weights: np.ndarray, eps: float):
    """max over both orders of sum weights (p - e^eps q)_+ (p, q given by their logs)."""
    p, q = np.exp(log_p), np.exp(log_q)
    return max(np.sum(weights * np.maximum(p - math.exp(eps) * q, 0.0)),
               np.sum(weights * np.maximum(q - math.exp(eps) * p, 0.0)))  # fmt: skip


#: Points of the grid on [-60, 60] of the mixture and the t pair (spacing 1e-4).
GRID_POINTS = 1_200_001
#: brentq's absolute tolerance on eps where the hockey-stick divergence is solved for it.
_XTOL = 1e-10


def exact_epsilon(family: str, delta: float, points: int = GRID_POINTS) -> float:
    """The pair's exact eps(delta) (its privacy profile, both orders of the pair): closed
    forms for the Gaussian (`gdp_epsilon`) and Laplace pairs, the hockey-stick divergence
    solved for eps elsewhere (exact sums over the Binomial's 21 atoms; a grid of `points`
    points on [-60, 60] for the mixture and the t pair: beyond it their likelihood ratio is
    below e^eps both ways, so the window cuts nothing off the divergence)."""
    if family == "gaussian_strong":
        return float(gdp_epsilon(delta, 2.0))
    if family == "gaussian_weak":
        return float(gdp_epsilon(delta, 0.5))
    if family == "laplace":  # delta(eps) = 1 - exp((eps - shift) / 2)
        return LAPLACE_SHIFT + 2.0 * math.log1p(-delta)
    if family == "binomial":
        k = np.arange(21)
        log_p = scipy.stats.binom.logpmf(k, 20, 0.6)
        log_q = scipy.stats.binom.logpmf(k, 20, 0.5)
        weights = np.ones(k.size)
    else:
        x, dx = np.linspace(-60.0, 60.0, points, retstep=True)
        weights = np.full(x.size, dx)
        if family == "mixture":
            log_p = np.logaddexp(np.log(0.9) + scipy.stats.norm.logpdf(x),
                                 np.log(0.1) + scipy.stats.norm.logpdf(x, 4.0))  # fmt: skip
            log_q = scipy.stats.norm.logpdf(x)
        elif family == "student_t":
            log_p, log_q = scipy.stats.t.logpdf(x - 2.0, 3), scipy.stats.t.logpdf(x, 3)
        else:
            raise ValueError(f"unknown family {family!r}")
    top = float(np.max(np.abs(log_p - log_q))) + 1.0
    if _hockey_stick(log_p, log_q, weights, 0.0) <= delta:
        return 0.0
    return float(scipy.optimize.brentq(
        lambda e: _hockey_stick(log_p, log_q, weights, e) - delta, 0.0, min(top, 50.0),
        xtol=_XTOL))  # fmt: skip


def family_exact(family: str, delta: float) -> dict:
    """`exact_eps` (`exact_epsilon`) with its `exact_error` and `exact_error_kind`: 0 for
    the closed forms (float64 rounding only); brentq's tolerance on eps for the Binomial's
    exact sums; for the mixture and the t pair, the change from the grid twice as coarse
    (an estimate of the grid's error, not a bound)."""
    return dict(zip(("exact_eps", "exact_error", "exact_error_kind"),
                    _family_exact(family, delta), strict=True))  # fmt: skip


@functools.lru_cache(maxsize=32)
def _family_exact(family: str, delta: float) -> tuple:
    from advsim.figures import CLOSED_FORM

    value = exact_epsilon(family, delta, GRID_POINTS)
    if family in ("gaussian_strong", "gaussian_weak", "laplace"):
        error, kind = 0.0, CLOSED_FORM
    elif family == "binomial":
        # brentq returns eps within xtol + rtol |eps| (rtol: 4 float64 epsilons)
        error = _XTOL + 4 * np.finfo(np.float64).eps * value
        kind = "exact sum over the 21 atoms; root-finding tolerance (brentq)"
    else:
        coarse = exact_epsilon(family, delta, (GRID_POINTS + 1) // 2)
        error = abs(value - coarse)
        kind = (f"refinement estimate (grid of {GRID_POINTS:,} points against the grid "
                "twice as coarse)")  # fmt: skip
    return value, float(error), kind


def _jax_privacy():
    try:
        from jax_privacy import auditing
    except ImportError as err:  # pragma: no cover - jax_privacy is a test dependency
        raise ImportError(
            "the threshold_vs_jax_privacy figure runs jax_privacy's own strategies: install "
            "jax-privacy (pip install jax-privacy; a test dependency of advsim)"
        ) from err
    return auditing


def _auditor(auditing, scores: Scores):
    """jax_privacy's `CanaryScoreAuditor` on `scores` (in-world first, as its arguments)."""
    return auditing.CanaryScoreAuditor(np.asarray(scores.canary_in), np.asarray(scores.canary_out))


def _advsim_names() -> tuple[str, ...]:
    """advsim's strategies by alias, the default first: every one but `"explicit"` (the
    oracle is the explicit test) and `"same"` (not a bound: `threshold_calibration`)."""
    return tuple(s for s in THRESHOLD_SELECTIONS if s not in ("explicit", "same"))


#: jax_privacy's default: `epsilon_clopper_pearson(significance, delta)` is one-sided with
#: `Bonferroni()`.
JAX_DEFAULT = "Bonferroni() one-sided"


def _one_set(scores: Scores, seed: int, p: dict, auditing) -> dict:
    """{strategy: (eps_lower, held_out, label)} of every strategy on one score set."""
    delta, c, splits = p["delta"], p["confidence"], p["num_splits"]
    out = {}
    for name in _advsim_names():
        options = {"num_splits": splits} if name == "multi_split" else {}
        r = audit(scores, "eps_delta", delta=delta, confidence=c, threshold_selection=name,
                  seed=seed, **options)  # fmt: skip
        out[f"advsim:{name}"] = (r.eps_lower, r.guarantee.held_out, r.guarantee.label)
    jp = _auditor(auditing, scores)
    strategies = {
        "Split(0.5)": (auditing.Split(0.5, seed), True),
        f"MultiSplit({splits})": (auditing.MultiSplit(splits, 0.5, seed), True),
        "Bonferroni()": (auditing.Bonferroni(), False),
    }
    for side, one_sided in (("two-sided", False), ("one-sided", True)):
        for name, (strategy, held_out) in strategies.items():
            eps = jp.epsilon_clopper_pearson(
                1.0 - c, delta, one_sided=one_sided, threshold_strategy=strategy
            )
            label = "rigorous" if held_out else "optimistic"
            out[f"jax_privacy:{name} {side}"] = (float(eps), held_out, label)
    out["hull_thresholds"] = (len(jp._fn_counts), None, None)
    return out


def _paired(row: dict, strategies: list, defaults: dict, oracle: list) -> None:
    """Adds the paired comparisons over the score sets: of the two best strategies and of
    advsim's best against the oracle (on the row's `seeds` sets), and of the two defaults
    (on `defaults`' `default_seeds` sets): on how many sets advsim's is at least the other,
    and a 95% bootstrap interval (2000 resamples of the score sets, both resampled
    together) for the ratio of medians."""
    values = {(r["library"], r["strategy"]): np.asarray(r["values"]) for r in strategies}
    best = values[("advsim", row["advsim_strategy"])]
    pairs = {  # (ours, theirs): (ahead column, interval columns)
        ("advsim_ahead_in", "ratio_low", "ratio_high"):
            (best, values[("jax_privacy", row["jax_strategy"])]),
        ("default_advsim_ahead_in", "default_ratio_low", "default_ratio_high"):
            (np.asarray(defaults["ours"]), np.asarray(defaults["theirs"])),
        ("advsim_ahead_of_oracle_in", "advsim_over_oracle_low", "advsim_over_oracle_high"):
            (best, np.asarray(oracle)),
    }  # fmt: skip
    for (ahead, low, high), (ours, theirs) in pairs.items():
        row[ahead] = f"{int(np.sum(ours >= theirs))}/{ours.size}"
        idx = np.random.default_rng(0).integers(0, ours.size, (2000, ours.size))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.median(ours[idx], axis=1) / np.median(theirs[idx], axis=1)
        row[low], row[high] = (float(q) for q in np.quantile(ratios, [0.025, 0.975]))


def _oracle(family: str, n: int, count: int, p: dict) -> dict:
    """The two oracle tests fixed in advance (`oracle_tests`) and their bounds on the row's
    `count` score sets (`oracle_eps`; set i: `sample_scores(family, n, i)`)."""
    start = time.perf_counter()
    delta, c = p["delta"], p["confidence"]
    tests = oracle_tests(family, n, delta, c, sample_scores)
    values = {kind: [] for kind in tests}
    for seed in range(count):
        scores = sample_scores(family, n, seed)
        for kind, test in tests.items():
            values[kind].append(oracle_eps(test, scores, delta, c))
    return {"tests": {k: list(t) for k, t in tests.items()}, "values": values,
            "wall_time_s": round(time.perf_counter() - start, 1)}  # fmt: skip


def _with_oracle(row: dict, strategies: list, oracle: dict) -> list:
    """The row's oracle columns and every strategy's median over the oracle's; returns
    the better oracle's bounds, one per score set."""
    medians = {kind: float(np.median(v)) for kind, v in oracle["values"].items()}
    best = max(medians, key=medians.get)
    kind, where, share = oracle["tests"][best]
    limit = medians[best]

    def over(value: float) -> float:
        return value / limit if limit > 0 else math.inf

    row.update(
        oracle_test=f"{kind} {where:g} (FPR share {share:g})",
        oracle_value_median=medians["value"], oracle_rank_median=medians["rank"],
        oracle_median_eps_lower=limit, oracle_median_guarantee="oracle (not an audit)",
        advsim_over_oracle=over(row["advsim_median_eps_lower"]),
        jax_over_oracle=over(row["jax_median_eps_lower"]),
    )  # fmt: skip
    for s in strategies:
        s["over_oracle"] = over(s["median_eps_lower"])
    return oracle["values"][best]


def _defaults(family: str, n: int, count: int, p: dict, auditing) -> dict:
    """The two defaults alone on `count` score sets (the row's sets and more: they are
    cheap, and their ratio is the one a user meets): advsim's `audit` default and
    jax_privacy's `epsilon_clopper_pearson(significance, delta)` (`JAX_DEFAULT`), on the
    scores and split seeds of `_row` (set i: `sample_scores(family, n, i)`, seed i)."""
    start = time.perf_counter()
    delta, c = p["delta"], p["confidence"]
    ours, theirs = [], []
    for seed in range(count):
        scores = sample_scores(family, n, seed)
        r = audit(scores, "eps_delta", delta=delta, confidence=c,
                  threshold_selection=DEFAULT_THRESHOLD_SELECTION, seed=seed)  # fmt: skip
        ours.append(-1.0 if r.eps_lower is None else float(r.eps_lower))
        jp = _auditor(auditing, scores)
        theirs.append(float(jp.epsilon_clopper_pearson(
            1.0 - c, delta, one_sided=True, threshold_strategy=auditing.Bonferroni())))  # fmt: skip
    return {"ours": ours, "theirs": theirs, "wall_time_s": round(time.perf_counter() - start, 1)}


def _with_defaults(row: dict, defaults: dict) -> None:
    """The row's default columns from the defaults' own score sets (`_defaults`)."""
    ours, theirs = float(np.median(defaults["ours"])), float(np.median(defaults["theirs"]))
    oracle = row["oracle_median_eps_lower"]
    row.update(
        default_seeds=len(defaults["ours"]), default_median_eps_lower=ours,
        jax_default_median_eps_lower=theirs,
        default_ratio=ours / theirs if theirs > 0 else math.inf,
        default_over_oracle=ours / oracle if oracle > 0 else math.inf,
    )  # fmt: skip


def _why(row: dict) -> str:
    if row["ratio"] >= 1.0:
        return ""
    parts = [f"behind by {100 * (1 - row['ratio']):.1f}%"]
    if row["ratio_high"] >= 1.0:
        parts.append(
            f"within the noise of {row['seeds']} score sets (95% interval of the ratio "
            f"{row['ratio_low']:.3f}-{row['ratio_high']:.3f}; advsim ahead on "
            f"{row['advsim_ahead_in']} of them)"
        )
    if not row["jax_held_out"]:
        parts.append(
            f"{row['jax_strategy']} is not held out: it counts all runs and takes the best "
            f"of ~{row['jax_hull_thresholds']:.0f} thresholds placed on them (its median "
            "gains from the luckiest)"
        )
    if row["oracle_median_eps_lower"] < row["jax_median_eps_lower"]:
        parts.append(
            f"even the oracle's threshold, fixed in advance, has median "
            f"{row['oracle_median_eps_lower']:.3f}"
        )
    else:
        parts.append("the planning part (10% of the runs) misplaces advsim's tests")
    return "; ".join(parts)


def _row(family: str, n: int, p: dict, auditing) -> dict:
    start = time.perf_counter()
    delta, c = p["delta"], p["confidence"]
    values: dict[str, list] = {}
    meta: dict[str, tuple] = {}
    for seed in range(p["seeds"]):
        scores = sample_scores(family, n, seed)
        for name, (eps, held_out, label) in _one_set(scores, seed, p, auditing).items():
            values.setdefault(name, []).append(-1.0 if eps is None else float(eps))
            meta[name] = (held_out, label)
    hull = float(np.median(values.pop("hull_thresholds")))
    meta.pop("hull_thresholds")
    medians = {name: float(np.median(v)) for name, v in values.items()}
    ours = {k: v for k, v in medians.items() if k.startswith("advsim:") and meta[k][0]}
    theirs = {k: v for k, v in medians.items() if k.startswith("jax_privacy:")}
    a, j = max(ours, key=ours.get), max(theirs, key=theirs.get)
    held = {k: v for k, v in theirs.items() if meta[k][0]}
    h = max(held, key=held.get)
    ours_default = f"advsim:{DEFAULT_THRESHOLD_SELECTION}"
    theirs_default = f"jax_privacy:{JAX_DEFAULT}"
    row = dict(
        family=family, scores=FAMILIES[family][1], per_world=n, seeds=p["seeds"],
        delta=delta, confidence=c, **family_exact(family, delta),
        advsim_strategy=a.split(":", 1)[1], advsim_held_out=meta[a][0],
        advsim_median_eps_lower=ours[a], advsim_median_guarantee=meta[a][1],
        jax_strategy=j.split(":", 1)[1], jax_held_out=meta[j][0],
        jax_median_eps_lower=theirs[j], jax_median_guarantee=meta[j][1],
        ratio=ours[a] / theirs[j] if theirs[j] > 0 else math.inf,
        jax_hull_thresholds=hull,
        default_median_eps_lower=medians[ours_default],
        default_median_guarantee=meta[ours_default][1],
        jax_default_median_eps_lower=medians[theirs_default],
        jax_default_median_guarantee=meta[theirs_default][1],
        default_ratio=(medians[ours_default] / medians[theirs_default]
                       if medians[theirs_default] > 0 else math.inf),
        jax_held_out_strategy=h.split(":", 1)[1],
        jax_held_out_median_eps_lower=held[h],
        jax_held_out_median_guarantee=meta[h][1],
        held_out_ratio=ours[a] / held[h] if held[h] > 0 else math.inf,
    )  # fmt: skip
    row["strategies"] = [
        dict(
            family=family,
            per_world=n,
            seeds=p["seeds"],
            library=k.split(":", 1)[0],
            strategy=k.split(":", 1)[1],
            held_out=meta[k][0],
            median_eps_lower=medians[k],
            guarantee=meta[k][1],
            values=values[k],
        )  # fmt: skip
        for k in medians
    ]
    row["wall_time_s"] = round(time.perf_counter() - start, 1)
    return row


def _calibration_row(spec: dict, cal: dict, delta: float, auditing) -> dict:
    start = time.perf_counter()
    strategy, c, n, repeats = spec["strategy"], spec["confidence"], cal["per_world"], cal["repeats"]
    exact = family_exact("laplace", delta)
    truth = exact["exact_eps"]
    eps, labels = [], set()
    for rep in range(repeats):
        scores = sample_scores("laplace", n, 10_000 + rep)
        if strategy == "Bonferroni()":
            jp = _auditor(auditing, scores)
            eps.append(float(jp.epsilon_clopper_pearson(1.0 - c, delta, one_sided=False)))
            labels.add("optimistic")
            continue
        r = audit(scores, "eps_delta", delta=delta, confidence=c, threshold_selection=strategy,
                  seed=rep)  # fmt: skip
        eps.append(-1.0 if r.eps_lower is None else float(r.eps_lower))
        labels.add(r.guarantee.label)
    over = int(np.sum(np.asarray(eps) > truth * (1.0 + 1e-9)))
    allowed = int(scipy.stats.binom.ppf(0.999, repeats, 1.0 - c))
    claimed = labels == {"rigorous"}
    return dict(
        library="jax_privacy" if strategy == "Bonferroni()" else "advsim", strategy=strategy,
        scores=FAMILIES["laplace"][1], per_world=n, delta=delta, confidence=c,
        repeats=repeats, **exact, over=over, allowed=allowed,
        median_eps_lower=float(np.median(eps)), max_eps_lower=float(np.max(eps)),
        guarantee="/".join(sorted(labels)),
        check=("pass" if over <= allowed else "FAIL") if claimed else "measured",
        wall_time_s=round(time.perf_counter() - start, 1),
    )  # fmt: skip


def _cached(fig, name: str, config: dict, compute):
    """The cell OUT/cells/<name>.json if --resume and it was computed under `config`, else
    `compute()`, written there."""
    path = fig.out / "cells" / f"{name}.json"
    if fig.resume and path.exists():
        cell = json.loads(path.read_text())
        if cell.get("config") == config:
            return cell["row"]
    row = compute()
    write_json(path, {"config": config, "row": row})
    return row


def compute_threshold_strategies(fig, rows):
    """The `threshold_vs_jax_privacy`, `threshold_strategies` and `threshold_calibration`
    tables (module docstring); each row cached in OUT/cells/."""
    auditing = _jax_privacy()
    p = fig.params
    (fig.out / "cells").mkdir(parents=True, exist_ok=True)
    table, full, calibration = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        seeds = p["seeds"] if isinstance(p["seeds"], list) else [p["seeds"]] * len(p["sizes"])
        wanted = p.get("default_seeds", seeds)
        default_seeds = wanted if isinstance(wanted, list) else [wanted] * len(p["sizes"])
        for family in p["families"]:
            for n, count, many in zip(p["sizes"], seeds, default_seeds, strict=True):
                config = dict(family=family, per_world=n, seeds=count, delta=p["delta"],
                              confidence=p["confidence"], num_splits=p["num_splits"],
                              strategies=list(_advsim_names()))  # fmt: skip
                row = _cached(fig, f"{family}-{n}", config,
                              lambda f=family, n=n, k=count: _row(f, n, {**p, "seeds": k},
                                                                  auditing))  # fmt: skip
                if "exact_error" not in row:  # a cell resumed from an older run
                    row.update(family_exact(family, p["delta"]))
                strategies = row.pop("strategies")
                oracle_config = dict(family=family, per_world=n, seeds=count, delta=p["delta"],
                                     confidence=p["confidence"], shares=list(SHARES))  # fmt: skip
                oracle = _cached(fig, f"oracle-{family}-{n}", oracle_config,
                                 lambda f=family, n=n, k=count: _oracle(f, n, k, p))  # fmt: skip
                oracle_values = _with_oracle(row, strategies, oracle)
                extra = dict(family=family, per_world=n, default_seeds=many, delta=p["delta"],
                             confidence=p["confidence"], default=DEFAULT_THRESHOLD_SELECTION,
                             jax_default=JAX_DEFAULT)  # fmt: skip
                defaults = _cached(
                    fig, f"defaults-{family}-{n}", extra,
                    lambda f=family, n=n, k=many: _defaults(f, n, k, p, auditing),
                )  # fmt: skip
                _with_defaults(row, defaults)
                _paired(row, strategies, defaults, oracle_values)
                row["behind"] = _why(row)
                full += strategies
                table.append(row)
                print(f"{family} {n}: advsim {row['advsim_strategy']} "
                      f"{row['advsim_median_eps_lower']:.3f}, jax_privacy {row['jax_strategy']} "
                      f"{row['jax_median_eps_lower']:.3f} ({row['ratio']:.3f}) "
                      f"[{row['wall_time_s']:.0f} s]", flush=True)  # fmt: skip
        cal = p["calibration"]
        for spec in cal["strategies"]:
            config = dict(spec=spec, per_world=cal["per_world"], repeats=cal["repeats"],
                          delta=p["delta"], shift=LAPLACE_SHIFT)  # fmt: skip
            name = f"calibration-{spec['strategy']}-{spec['confidence']}"
            rec = _cached(
                fig, name, config, lambda s=spec: _calibration_row(s, cal, p["delta"], auditing)
            )
            calibration.append({**family_exact("laplace", p["delta"]), **rec})
    for rec in calibration:
        if rec["check"] == "FAIL":
            print(
                f"FAIL: {rec['strategy']} at confidence {rec['confidence']} exceeded the "
                f"exact eps {rec['over']}/{rec['repeats']} times (allowed {rec['allowed']})"
            )
    return {
        "threshold_vs_jax_privacy": table,
        "threshold_strategies": full,
        "threshold_calibration": calibration,
    }

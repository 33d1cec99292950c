r"""jax_privacy's auditing vocabulary, meaning what jax_privacy means by it.

For code written against `jax_privacy.auditing` (its `CanaryScoreAuditor` and the
threshold strategies `Explicit`, `Split`, `MultiSplit`, `Bonferroni`): the same names,
the same signatures, defaults and definitions, computed with advsim's own code
(`clopper_pearson_upper`, the (eps, delta) inequalities of `EpsDeltaAudit`, the one-run
p-value of `one_run_audit`, the f-DP recursion of `one_run_fdp_audit`). jax_privacy is
not imported: it is only needed to cross-check (`tests/audits/test_jax_privacy.py`).

```python
from advsim.audits.jax_privacy import CanaryScoreAuditor, Split

auditor = CanaryScoreAuditor(in_canary_scores, out_canary_scores)
eps = auditor.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=Split(seed=0))
result = auditor.epsilon_clopper_pearson_result(0.05, 1e-5, threshold_strategy=Split(seed=0))
```

**What comes back.** The methods named as jax_privacy's return what jax_privacy returns:
a float, equal to jax_privacy's (bit for bit for `epsilon_clopper_pearson` and
`epsilon_from_gdp`; to jax_privacy's root-finding tolerance, 1e-6, for the one-run
bounds, which jax_privacy computes only to that tolerance). They are drop-in
replacements. `epsilon_clopper_pearson_result` returns the same number as an advsim
`AuditResult` whose `guarantee` says what it certifies (see "Guarantees" below).

**The definitions** (jax_privacy 2.0's, written out):

- *Thresholds.* A test says "in" iff `score >= tau`. The candidate thresholds are every
  distinct score of either world plus `inf`; of their (FN, TN) counts only the points on
  the upper hull are kept: a point is dropped when it lies on or below the segment
  between two other points on either side (jax_privacy's "Pareto frontier"). Searches
  over "all thresholds" are over these K points.
- *Clopper-Pearson bound* (`epsilon_clopper_pearson`, arXiv:2101.04535). At a threshold,
  FPR and FNR get one-sided Clopper-Pearson upper bounds at level `significance / 2`
  each, and eps is `max(0, log(1 - FNR_ub - delta) - log(FPR_ub))`; with
  `one_sided=False` also the reverse test's `log(1 - FPR_ub - delta) - log(FNR_ub)`.
- `Explicit(threshold)`: the bound at that threshold, counted on all scores.
- `Split(threshold_estimation_frac=0.5, seed=None)`: `np.random.default_rng(seed)`
  permutes the in-scores, then the out-scores; the first `int(n * frac)` of each choose
  the threshold (the best of the hull points at level `significance`, no correction),
  and the rest are counted at that threshold at level `significance`.
- `MultiSplit(num_samples=100, threshold_estimation_frac=0.5, seed=None)`:
  `np.random.default_rng(seed).integers(2**63 - 1, size=num_samples)` seeds that many
  `Split`s, each at level `significance / 2`, and the result is their `np.median` (for an
  even count, the mean of the two middle bounds; Meinshausen, Meier & Buhlmann 2009,
  Theorem 3.1 with gamma = 1/2).
- `Bonferroni()` (the default): the best of the K hull thresholds, each at level
  `significance / K`, counted on all scores. K depends on the scores (tens at 10^4 scores
  per world, against 2 x 10^4 + 1 distinct thresholds).
- *One-run bounds* (`epsilon_one_run`, Steinke, Nasr & Jagielski 2023; and
  `epsilon_one_run_fdp`, Mahloujifar, Melis & Chaudhuri 2024): the canaries scored are
  the m = n_in + n_out of both lists; at a threshold the guesses are the scores
  `>= tau` and the correct ones those of in-canaries. The bound at one threshold is
  advsim's `one_run_epsilon` (the p-value of Appendix D of arXiv:2305.08846), or, for
  the f-DP version, the (eps, delta) of the Gaussian trade-off curve G_mu at the largest
  mu the guesses reject (`one_run_gdp_mu`; jax_privacy parameterises G_mu by the eps of
  a Gaussian mechanism, the same curve). Over all thresholds, jax_privacy visits the hull
  points by decreasing Clopper-Pearson lower bound on their precision and skips one
  whose raw precision is at most e^eps / (1 + e^eps) of the best eps so far; this module
  follows the same rule (for `epsilon_one_run` at `significance < 0.5` the skipped
  thresholds cannot win, so the result is the maximum over the hull). Only one-sided
  bounds (`one_sided=True`), as in jax_privacy. The strategies apply as above.
- `epsilon_from_gdp` (arXiv:2302.07956): at every hull threshold, FPR and FNR bounded at
  level `significance / (2K)`, thresholds with a bound >= 1 - delta dropped, mu the
  largest `|Phi^{-1}(1 - FPR_ub) - Phi^{-1}(FNR_ub)|`, and eps the root in [0, 100] of
  Corollary 2.13 of arXiv:1905.02383 (Brent's method, `xtol=eps_tol`).

**Guarantees** (of `epsilon_clopper_pearson_result`; statement "eps_delta_lower_bound",
assumption "none" for every strategy):

- `Split`, `MultiSplit`: held out (the threshold is chosen on scores the bound does not
  count), so `rigorous`. `MultiSplit`'s median is valid for either parity of
  `num_samples`: if the median exceeds the true eps, at least half of the split bounds
  (each wrong with probability <= significance / 2) do, which by Markov's inequality has
  probability <= significance.
- `Explicit`: not held out; valid if the threshold was fixed without these scores, which
  the adapter cannot know.
- `Bonferroni`: not held out: the tests sit at the observed scores and the divisor K is
  counted on the scores themselves (not a union bound as written; advsim's
  `audit(..., threshold_selection="bonferroni")` divides by every distinct threshold).

**Not mirrored.** jax_privacy's metric methods (`tpr_at_given_fpr`, `attack_auroc`,
`max_accuracy`, the point estimate `epsilon_raw_counts`, and their `bootstrap_params`)
compute no lower bound and are not part of this adapter. `significance >= 0.5` (allowed
by jax_privacy's one-run methods) may differ: the skip rule above is then a heuristic
whose outcome depends on the order of the search.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from advsim import Scores

from ._eps_delta import eps_delta_terms
from ._guarantee import Guarantee
from ._jax_privacy_strategies import (  # noqa: F401 (re-exported)
    _FIELDS,
    Bonferroni,
    Explicit,
    MultiSplit,
    Split,
    ThresholdStrategy,
    _check_fraction,
    as_strategy,
)
from ._jax_privacy_terms import (  # noqa: F401 (re-exported)
    _best,
    _check_delta,
    _check_significance,
    _fdp_eps,
    _Found,
    _gdp_log_delta_gap,
    _one_run_eps,
    _partition,
    _precision_lower,
    _upper_hull,
)
from ._result import AuditResult
from ._threshold import clopper_pearson_upper, counts_at

__all__ = [
    "Bonferroni",
    "CanaryScoreAuditor",
    "Explicit",
    "MultiSplit",
    "Split",
    "ThresholdStrategy",
    "as_strategy",
]


class CanaryScoreAuditor:
    """jax_privacy's `CanaryScoreAuditor`: epsilon lower bounds from canary scores.

    The methods named as jax_privacy's take the same arguments and return the same floats
    (module docstring); `epsilon_clopper_pearson_result` returns an advsim `AuditResult`.

    Args:
        in_canary_scores: scores of the canaries in the training set (1-D, non-empty);
            higher means "in".
        out_canary_scores: scores of the canaries left out (1-D, non-empty).

    Raises:
        ValueError: an empty or not 1-D score array, or a NaN score.

    Example:
        >>> import numpy as np
        >>> from advsim.audits.jax_privacy import CanaryScoreAuditor, Split
        >>> rng = np.random.default_rng(0)
        >>> auditor = CanaryScoreAuditor(rng.normal(1, 1, 1000), rng.normal(0, 1, 1000))
        >>> r = auditor.epsilon_clopper_pearson_result(
        ...     0.05, 1e-5, threshold_strategy=Split(seed=0))
        >>> r.rigorous, r.eps_lower == auditor.epsilon_clopper_pearson(
        ...     0.05, 1e-5, threshold_strategy=Split(seed=0))
        (True, True)
    """

    def __init__(self, in_canary_scores, out_canary_scores):
        self._in = np.asarray(in_canary_scores)
        self._out = np.asarray(out_canary_scores)
        for name, arr in (("in_canary_scores", self._in), ("out_canary_scores", self._out)):
            if arr.size == 0:
                raise ValueError(f"{name} must be non-empty.")
            if arr.ndim != 1:
                raise ValueError(f"{name} must be 1-dimensional, got {arr.ndim}.")
            if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
                raise ValueError(f"{name} contains NaN.")

    @classmethod
    def from_scores(cls, scores: Scores) -> CanaryScoreAuditor:
        """The auditor of an advsim `Scores` (`canary_in`, `canary_out`)."""
        return cls(np.asarray(scores.canary_in), np.asarray(scores.canary_out))

    @property
    def n_in(self) -> int:
        """The number of in-canary scores."""
        return int(self._in.size)

    @property
    def n_out(self) -> int:
        """The number of out-canary scores."""
        return int(self._out.size)

    @functools.cached_property
    def _hull(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thresholds, FN counts, TN counts) at the hull points, thresholds ascending."""
        thresholds = np.concatenate([np.union1d(self._in, self._out), [np.inf]])
        fp, fn = counts_at(np.sort(self._in), np.sort(self._out), thresholds)
        tn = self._out.size - fp
        keep = _upper_hull(fn, tn)
        return thresholds[keep], fn[keep], tn[keep]

    @property
    def num_thresholds(self) -> int:
        """K, the number of hull thresholds (`Bonferroni()` divides the level by it)."""
        return int(self._hull[0].size)

    # The bounds at one threshold (`threshold` given) or the best over the hull.

    def _clopper_pearson(self, level, delta, one_sided, threshold=None) -> _Found:
        if threshold is None:
            _, fn, tn = self._hull
        else:
            fn = np.array([np.count_nonzero(self._in < threshold)])
            tn = np.array([np.count_nonzero(self._out < threshold)])
        n_in, n_out = self._in.size, self._out.size
        fp = n_out - tn
        fnr_ub = clopper_pearson_upper(fn, n_in, level / 2)
        fpr_ub = clopper_pearson_upper(fp, n_out, level / 2)
        eps_tpr, eps_tnr = eps_delta_terms(fpr_ub, fnr_ub, delta)
        eps, idx = _best(eps_tpr)
        if not one_sided:
            eps_rev, idx_rev = _best(eps_tnr)
            if eps_rev > eps:
                eps, idx = eps_rev, idx_rev
        tau = float(threshold) if threshold is not None else float(self._hull[0][idx])
        i = idx if threshold is None else 0
        details = dict(
            fp=int(fp[i]),
            fn=int(fn[i]),
            fpr_upper=float(fpr_ub[i]),
            fnr_upper=float(fnr_ub[i]),
            n_in=int(n_in),
            n_out=int(n_out),
            level=level,
        )
        return _Found(eps, tau, details)

    def _one_run(self, level, delta, one_sided, threshold=None, *, fdp=False) -> _Found:
        if not one_sided:
            raise ValueError("one_sided must be True.")
        bound = _fdp_eps if fdp else _one_run_eps
        m = self._in.size + self._out.size
        if threshold is not None:
            tp = int(np.count_nonzero(self._in >= threshold))
            fp = int(np.count_nonzero(self._out >= threshold))
            eps = bound(m, tp + fp, tp, level, delta, 0.0)
            return _Found(eps, float(threshold), {"num_guesses": tp + fp, "num_correct": tp})
        thresholds, fn, tn = self._hull
        tp = self._in.size - fn
        fp = self._out.size - tn
        best, best_idx = 0.0, -1
        for idx in np.argsort(-_precision_lower(tp, fp, level)):
            r, v = int(tp[idx] + fp[idx]), int(tp[idx])
            if r == 0 or v / r <= scipy.special.expit(best):
                continue  # raw precision at most that of the best eps: skipped
            eps = bound(m, r, v, level, delta, best)
            if eps > best:
                best, best_idx = eps, int(idx)
        r = int(tp[best_idx] + fp[best_idx])
        details = {"num_guesses": r, "num_correct": int(tp[best_idx])}
        return _Found(best, float(thresholds[best_idx]), details)

    # The strategies.

    def _split(self, search, frac, level, delta, one_sided, seed) -> _Found:
        rng = np.random.default_rng(seed)
        in_choose, in_count = _partition(self._in, rng, frac)
        out_choose, out_count = _partition(self._out, rng, frac)
        chosen = search(CanaryScoreAuditor(in_choose, out_choose), level, delta, one_sided)
        counting = CanaryScoreAuditor(in_count, out_count)
        return search(counting, level, delta, one_sided, chosen.threshold)

    def _run(self, strategy, search, significance, delta, one_sided) -> tuple:
        """`(eps, the bounds behind it, what the strategy did)`."""
        strategy = as_strategy(strategy)
        if isinstance(strategy, Explicit):
            found = search(self, significance, delta, one_sided, strategy.threshold)
            return found.eps, [found], {}
        if isinstance(strategy, Split):
            frac, seed = strategy.threshold_estimation_frac, strategy.seed
            found = self._split(search, frac, significance, delta, one_sided, seed)
            return found.eps, [found], {}
        if isinstance(strategy, MultiSplit):
            rng = np.random.default_rng(seed=strategy.seed)
            seeds = rng.integers(np.iinfo(np.int64).max, size=strategy.num_samples)
            frac = strategy.threshold_estimation_frac
            founds = [
                self._split(search, frac, significance / 2, delta, one_sided, s) for s in seeds
            ]
            eps = float(np.median([f.eps for f in founds]))
            return eps, founds, {"split_seeds": [int(s) for s in seeds]}
        if isinstance(strategy, Bonferroni):
            k = self.num_thresholds
            found = search(self, significance / k, delta, one_sided)
            return found.eps, [found], {"num_thresholds": k}
        raise TypeError(f"unsupported threshold strategy {strategy!r}")  # a subclass

    def _clopper_pearson_run(self, strategy, significance, delta, one_sided) -> tuple:
        """`epsilon_clopper_pearson`'s argument checks, then `_run` with its search."""
        _check_significance(significance, 0.5)
        _check_delta(delta, zero_ok=True)
        search = CanaryScoreAuditor._clopper_pearson
        return self._run(strategy, search, significance, delta, one_sided)

    def _one_run_epsilon(self, search, strategy, significance, delta, one_sided) -> float:
        """The one-run methods' argument checks, then the eps of `_run` with `search`."""
        _check_significance(significance, 1.0)
        _check_delta(delta, zero_ok=False)
        if not one_sided:
            raise ValueError("one_sided must be True.")
        if delta == 1:
            return 0.0  # every run is (0, 1)-DP
        eps, _, _ = self._run(strategy, search, significance, delta, one_sided)
        return float(eps)

    # jax_privacy's methods.

    def epsilon_clopper_pearson(
        self,
        significance: float,
        delta: float = 0,
        one_sided: bool = True,
        *,
        threshold_strategy: ThresholdStrategy = Bonferroni(),  # noqa: B008 (frozen)
    ) -> float:
        """The Clopper-Pearson epsilon lower bound (arXiv:2101.04535), as jax_privacy's.

        Args:
            significance: failure probability, in (0, 0.5).
            delta: the DP delta, in [0, 1].
            one_sided: use only the test "in iff score >= tau" (else also its reverse).
            threshold_strategy: `Explicit`, `Split`, `MultiSplit` or `Bonferroni`
                (this module's or jax_privacy's).

        Returns:
            eps >= 0, equal to jax_privacy's (module docstring).

        Raises:
            ValueError: `significance` or `delta` out of range, a split part empty.
        """
        eps, _, _ = self._clopper_pearson_run(threshold_strategy, significance, delta, one_sided)
        return float(eps)

    def epsilon_clopper_pearson_result(
        self,
        significance: float,
        delta: float = 0,
        one_sided: bool = True,
        *,
        threshold_strategy: ThresholdStrategy = Bonferroni(),  # noqa: B008 (frozen)
    ) -> AuditResult:
        """`epsilon_clopper_pearson`'s bound as an advsim `AuditResult`.

        `eps_lower` is `epsilon_clopper_pearson(...)` with the same arguments;
        `confidence` is `1 - significance`; `guarantee` says what the number certifies
        (module docstring: held out under `Split` and `MultiSplit` only, assumption
        "none"). `threshold`, the rates and their upper bounds are those of the test the
        bound was read at (under `MultiSplit`, of the split whose bound is the upper of
        the two middle ones, the median itself for an odd count), counted on `n_in` +
        `n_out` scores. `eps_point` is None (jax_privacy's bound has no point estimate).
        `extras` holds the strategy, `one_sided`, the per-rate level, and under
        `MultiSplit` every split's bound and seed, under `Bonferroni` K.
        """
        eps, founds, info = self._clopper_pearson_run(
            threshold_strategy, significance, delta, one_sided
        )
        strategy = as_strategy(threshold_strategy)
        order = sorted(range(len(founds)), key=lambda i: founds[i].eps)
        shown = founds[order[len(founds) // 2]]
        guarantee = _guarantee(strategy, info)
        d = shown.details
        extras = {
            "jax_privacy_method": "epsilon_clopper_pearson",
            "threshold_strategy": repr(strategy),
            "one_sided": bool(one_sided),
            "rate_level": d["level"] / 2,
            **info,
        }
        if len(founds) > 1:
            extras["split_eps_lower"] = [float(founds[i].eps) for i in order]
        return AuditResult(
            method="eps_delta",
            eps_lower=eps,
            eps_point=None,
            eps_point_note="jax_privacy's Clopper-Pearson bound has no point estimate",
            delta=float(delta),
            confidence=1.0 - significance,
            guarantee=guarantee,
            threshold=shown.threshold,
            fpr=d["fp"] / d["n_out"],
            fnr=d["fn"] / d["n_in"],
            fpr_upper=d["fpr_upper"],
            fnr_upper=d["fnr_upper"],
            n_in=d["n_in"],
            n_out=d["n_out"],
            extras=extras,
        )

    def epsilon_one_run(
        self,
        significance: float,
        delta: float,
        one_sided: bool = True,
        *,
        threshold_strategy: ThresholdStrategy = Bonferroni(),  # noqa: B008 (frozen)
    ) -> float:
        """The one-run (eps, delta) lower bound (arXiv:2305.08846), as jax_privacy's.

        Args:
            significance: failure probability, in (0, 1) (equal to jax_privacy's below
                0.5; module docstring).
            delta: the DP delta, in (0, 1].
            one_sided: must be True (guesses "in" only, k- = 0).
            threshold_strategy: as in `epsilon_clopper_pearson`.

        Returns:
            eps >= 0, equal to jax_privacy's to its root-finding tolerance (1e-6).

        Raises:
            ValueError: arguments out of range, `one_sided=False`.
        """
        search = CanaryScoreAuditor._one_run
        return self._one_run_epsilon(search, threshold_strategy, significance, delta, one_sided)

    def epsilon_one_run_fdp(
        self,
        significance: float,
        delta: float,
        one_sided: bool = True,
        *,
        threshold_strategy: ThresholdStrategy = Bonferroni(),  # noqa: B008 (frozen)
    ) -> float:
        """The one-run f-DP bound (arXiv:2410.22235) as eps, as jax_privacy's.

        The guesses reject G_mu for mu up to some mu_lower (assumption-free); the eps
        returned is G_mu_lower's at `delta`, an (eps, delta) bound only if the run's
        trade-off curve is Gaussian (jax_privacy states no such caveat).

        Args:
            significance: failure probability, in (0, 1).
            delta: the DP delta, in (0, 1].
            one_sided: must be True.
            threshold_strategy: as in `epsilon_clopper_pearson`.

        Returns:
            eps >= 0, equal to jax_privacy's to about 1e-6 (its tolerances).

        Raises:
            ValueError: arguments out of range, `one_sided=False`.
        """
        search = functools.partial(CanaryScoreAuditor._one_run, fdp=True)
        return self._one_run_epsilon(search, threshold_strategy, significance, delta, one_sided)

    def epsilon_from_gdp(self, significance: float, delta: float, eps_tol: float = 1e-6) -> float:
        """The GDP-based epsilon of jax_privacy (arXiv:2302.07956, module docstring).

        mu is the largest |mu| over the hull thresholds with both rates bounded at level
        significance / (2K) (either test direction); eps assumes the run's trade-off
        curve is Gaussian and is found in [0, 100] to `eps_tol`.

        Args:
            significance: failure probability, in (0, 0.5).
            delta: the DP delta, in (0, 1].
            eps_tol: the root finder's tolerance on eps, > 0.

        Returns:
            eps in [0, 100], equal to jax_privacy's.

        Raises:
            ValueError: arguments out of range.
        """
        _check_significance(significance, 0.5)
        _check_delta(delta, zero_ok=False)
        if eps_tol <= 0:
            raise ValueError(f"eps_tol must be positive, got {eps_tol}.")
        _, fn, tn = self._hull
        k = fn.size
        level = significance / (2 * k)
        fnr_ub = clopper_pearson_upper(fn, self._in.size, level)
        fpr_ub = clopper_pearson_upper(self._out.size - tn, self._out.size, level)
        keep = np.maximum(fpr_ub, fnr_ub) < 1 - delta
        if not np.any(keep):
            return 0.0
        mus = scipy.stats.norm.isf(fpr_ub[keep]) - scipy.stats.norm.ppf(fnr_ub[keep])
        mu = float(np.max(np.abs(mus)))
        if mu == 0:
            return 0.0
        lo, hi = 0.0, 100.0
        if _gdp_log_delta_gap(lo, mu, delta) <= 0:
            return lo
        if _gdp_log_delta_gap(hi, mu, delta) >= 0:
            return hi
        return float(
            scipy.optimize.brentq(_gdp_log_delta_gap, lo, hi, args=(mu, delta), xtol=eps_tol)
        )


def _guarantee(strategy: ThresholdStrategy, info: dict) -> Guarantee:
    """What `epsilon_clopper_pearson_result`'s number certifies under `strategy`."""
    if isinstance(strategy, Explicit):
        held_out = False
        how = "a threshold given by the caller, not known to be independent of the scores"
    elif isinstance(strategy, Split):
        held_out = True
        how = (
            f"one threshold chosen on a random {strategy.threshold_estimation_frac:g} of "
            "each world, counted on the rest"
        )
    elif isinstance(strategy, MultiSplit):
        held_out = True
        how = (
            f"median of {strategy.num_samples} split bounds, each at level significance / 2 "
            "(Meinshausen, Meier & Buhlmann 2009, Theorem 3.1)"
        )
    else:
        held_out = False
        how = (
            f"level divided by the {info['num_thresholds']} thresholds on the hull of "
            "(FN, TN) counts, a count read off the scores (data-placed: not held out)"
        )
    return Guarantee(
        statement="eps_delta_lower_bound", assumption="none", held_out=held_out, multiplicity=how
    )

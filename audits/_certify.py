r"""Certify that a release's trade-off curve lies below a bound's: a counterexample claim.

`certify_violation(scores, bound, accounting)` decides, assuming nothing about the
mechanism, whether the audited release is *less private than a bound claims*: whether
some threshold test "canary in iff score >= tau" has type-I error $\alpha$ (FPR, canary
out) and type-II error $\beta$ (FNR, canary in) with $\beta < f(\alpha)$, where $f$ is
the bound's trade-off curve. It reports the most demanding member of the bound's family
that is still certifiably violated, as an *index*, never as the release's epsilon.

**The families** (each indexed so that its curves are nested):

- `"heuristic"`: the last-iterate heuristic (Theorem 1 of arXiv:2410.06186) at noise
  multiplier $\sigma'$, with the run's $T$, $q$ and canary steps, and at the run's
  learning-rate schedule when the accounting has one (`Accounting.step_sizes`:
  $\mathcal{N}(X, s'^2)$ against $\mathcal{N}(0, s'^2)$ with $X = \sum_t \eta_t b_t$ over
  the canary steps and $s' = \sigma'\sqrt{\sum_t \eta_t^2}$, see
  `advsim.bounds.heuristic_curve_lower`);
- `"heuristic_max_over_steps"`: its maximum over horizons (Section 4.1 there), the
  convex minorant of $\min_{t \le T} f_{t,\sigma'}$; one learning rate only (a
  scheduled accounting is refused with a ValueError that names the schedule);
- `"composition"`: DP-SGD releasing every iterate (dp_accounting PLD);
- `"gdp"`: $G_\mu$ (Definition 2.7 of Dong, Roth & Su, arXiv:1905.02383).

The first three curves rise with $\sigma'$ (more noise is a post-processing of less), so
if the curve at $\sigma'$ is violated, so is every curve at $\sigma'' \ge \sigma'$. The
certificate's `sigma_star` is the **smallest** $\sigma'$ found certifiably violated (to a
relative 1e-3): *the release is less private than the bound claims for a run with noise
multiplier sigma_star, and for any run with more noise*. The release is a counterexample
to the bound as applied to itself (`certified`) iff `sigma_star <= accounting.noise_multiplier`.
Only then is `eps_equivalent` given: that curve's epsilon at `delta` (e.g. the epsilon the
heuristic would report for noise multiplier `sigma_star`), always named as a *curve index*
(`eps_equivalent_name`, e.g. "heuristic curve index eps_equiv"). It indexes the violated
curve on the bound's epsilon scale and is not an epsilon of the release: on 2 x 10^5 runs
of the linear process T = 10, q = 0.01, sigma = 0.3544 (exact epsilon 2.0), the
max-over-steps curve is violated down to sigma* = 0.43 but not at 0.3544, and the index
there is 4.6. So it is left out (None, and absent from the statement) when the reference
is not certified. A smaller `sigma_star` (a larger index) is a stronger counterexample.
For `"gdp"`, $G_\mu$ falls as $\mu$ rises, so `mu_star` is the **largest** $\mu$ found
certifiably violated: the release is not $\mu$-GDP for any $\mu \le$ `mu_star`.

**What a violation means.** Each bound's curve is its privacy profile's (Proposition
2.12 of arXiv:1905.02383, both orders of the neighbouring pair; see
`advsim.bounds.LowerCurve`), so $\beta < f(\alpha)$ at a test means exactly: *the
release is not $(\varepsilon', \delta_f(\varepsilon'))$-DP for some $\varepsilon' \ge 0$*
(one line of the profile is crossed). It does **not** mean that the release's epsilon at
`delta` exceeds `eps_equivalent`: the crossed line can be at another $\varepsilon'$.
For an (eps, delta) lower bound use `audit(scores, "eps_delta", delta=...)`.

**Method** (as the other held-out audits of `advsim.audits`): each world is split in two
halves with `np.random.default_rng(seed)` (`split_halves`). On the first half, among a few
thousand candidate thresholds (`candidate_thresholds`), whose rates are bounded by
Clopper-Pearson at the Bonferroni level $(1 - c) / (2K)$ over the $K$ candidates, the
`num_thresholds` = m witnesses that violate the family's curves most are chosen (ranked
by their margin at the first half's own boundary index; when no candidate violates any
curve at that level, at the level $(1 - c) / 2$, then by raw rates). On the held-out half their
rates are counted and bounded at level $(1 - c) / (2m)$ each, so that with probability
$\ge c$ every true rate is below its bound: $\alpha \le \bar\alpha$, $\beta \le \bar\beta$.
Since $f$ is non-increasing, $\bar\beta < f(\bar\alpha)$ then implies
$\beta \le \bar\beta < f(\bar\alpha) \le f(\alpha)$. The boundary index is found by
doubling and then bisection on its logarithm; every curve compared is a guaranteed lower
bound of the exact one (`advsim.bounds.LowerCurve`), so numerics never certify a
violation that is not there.

Soundness: if the release really satisfies the family's curve at index $\theta$ (e.g. the
linear process, whose curve is the heuristic's at its own $\sigma$), that curve and every
lower one is certified violated with probability at most $1 - c$; so `sigma_star > sigma`
(`mu_star < mu`) with probability $\ge c$. `tests/audits/test_certify.py` checks this
on exact Gaussian and heuristic-family scores, and `advsim figure certificates`
on 100 simulated linear processes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from advsim import Accounting, Scores
from advsim.bounds import (
    composition_curve_lower,
    composition_epsilon_from_pld,
    gdp_curve_lower,
    gdp_epsilon,
    heuristic_curve_lower,
    heuristic_epsilon,
    heuristic_epsilon_max_over_steps,
    heuristic_max_over_steps_curve_lower,
    horizon_canary_counts,
)
from advsim.validation import check_delta, check_in_interval, check_int, check_positive

from ._base import check_two_per_world
from ._certify_names import (
    _EPS_NAMES,
    _SEARCH_FACTOR,
    _SEARCH_START_MU,
    _reference_label,
    _statement,
)
from ._result import _plain
from ._threshold import candidate_thresholds, clopper_pearson_upper, counts_at, split_halves

__all__ = ["VIOLATION_BOUNDS", "ViolationCertificate", "certify_violation"]

VIOLATION_BOUNDS = ("heuristic", "heuristic_max_over_steps", "composition", "gdp")
"""The bounds whose curves `certify_violation` compares against."""

#: Relative width of the final bracket (in sigma or mu).
_RTOL = 1e-3


def _full_batch_mu(accounting: Accounting) -> float:
    """q sqrt(n_c) / sigma: full-batch DP-GD with noise sigma / q (Appendix B of
    arXiv:2410.06186), mu-GDP by Corollary 3.3 of arXiv:1905.02383."""
    return (
        accounting.sampling_prob
        * math.sqrt(accounting.num_canary_steps)
        / accounting.noise_multiplier
    )


@dataclasses.dataclass(frozen=True)
class ViolationCertificate:
    """The outcome of `certify_violation`: which of a bound's curves the release beats.

    Attributes:
        bound: one of `VIOLATION_BOUNDS`.
        certified: True iff the reference curve is certifiably violated: for the sigma
            families, the bound's curve at `reference` (default: the run's own noise
            multiplier; then the release is a counterexample to the bound, with
            confidence `confidence`); for `"gdp"`, G_mu at `reference` (default: the
            full-batch mu q sqrt(n_c) / sigma of the run when `accounting` is given,
            Appendix B of arXiv:2410.06186), or, with neither, some G_mu (the worlds are
            certifiably distinguishable).
        sigma_star: sigma families: the smallest noise multiplier whose bound curve was
            found certifiably violated (every larger one is too); None if none up to
            `reference * 4096`. "gdp" with accounting: q sqrt(n_c) / mu_star.
        mu_star: "gdp": the largest mu whose G_mu was found certifiably violated (every
            smaller one is too: the release is not mu-GDP for mu <= mu_star); None if none
            down to `reference / 4096`. None for the other bounds.
        at_limit: the search stopped at the edge of its range while still violated (then
            `sigma_star` / `mu_star` is only the edge, the truth is beyond).
        eps_equivalent: the epsilon at `delta` of the violated curve at the star index
            (`eps_equivalent_name` says which bound's epsilon), only when `certified`;
            None without `delta`, without a star or when not `certified`. An index of the
            curve, NOT an epsilon of the release nor a lower bound on it.
        eps_equivalent_name: its label, e.g. "heuristic curve index eps_equiv".
        delta: the delta `eps_equivalent` is stated at (or None).
        reference: the index `certified` refers to (sigma, or mu for "gdp"); None for
            "gdp" with neither `reference` nor `accounting`.
        witnesses: one dict per witness threshold: `threshold`, held-out counts `fp`,
            `fn`, rates `fpr`, `fnr`, their Clopper-Pearson upper bounds `fpr_upper`,
            `fnr_upper` (level (1 - c) / (2m) each) and `curve_at_fpr_upper`, the bound's
            curve (lowered) at `fpr_upper` for the star index (None without a star).
        confidence: c: every statement holds with probability >= c.
        n_in, n_out: held-out runs per world the witnesses were counted on.
        n_in_total, n_out_total: all runs per world.
        n_candidates: thresholds considered on the choosing half.
        seed: seed of the split.
        statement: one sentence saying exactly what is certified.
    """

    bound: str
    certified: bool
    sigma_star: float | None
    mu_star: float | None
    at_limit: bool
    eps_equivalent: float | None
    eps_equivalent_name: str
    delta: float | None
    reference: float | None
    witnesses: tuple
    confidence: float
    n_in: int
    n_out: int
    n_in_total: int
    n_out_total: int
    n_candidates: int
    seed: int
    statement: str

    def to_dict(self) -> dict:
        """JSON-ready plain values (floats, ints, bools, strings, lists, dicts, None)."""
        return _plain(dataclasses.asdict(self))


# ----------------------------------------------------------------------------------------
# The family of curves, indexed by x so that "violated" is non-decreasing in x.


@dataclasses.dataclass(frozen=True)
class _Family:
    """Curves f_x, nested: f_x rises with x (x = log sigma, or -log mu for GDP)."""

    bound: str
    curve_at: Callable[[float], Callable]
    x_ref: float
    x_min: float
    x_max: float

    def index(self, x: float) -> float:
        """sigma (or mu) of x."""
        return math.exp(-x) if self.bound == "gdp" else math.exp(x)

    def violated(self, x: float, a_up: np.ndarray, b_up: np.ndarray) -> bool:
        return bool(a_up.size) and bool(np.any(b_up < self.curve_at(x)(a_up)))


def _family(bound: str, accounting: Accounting | None, reference: float | None) -> _Family:
    if bound == "gdp":
        if reference is not None:
            mu_ref = reference
        elif accounting is None:
            mu_ref = _SEARCH_START_MU
        else:
            mu_ref = _full_batch_mu(accounting)
        x_ref = -math.log(mu_ref)
        return _Family(
            bound,
            lambda x: gdp_curve_lower(math.exp(-x)),
            x_ref,
            x_ref - math.log(_SEARCH_FACTOR),
            x_ref + math.log(_SEARCH_FACTOR),
        )
    T, q, n = accounting.steps, accounting.sampling_prob, accounting.num_canary_steps
    if bound == "heuristic_max_over_steps":
        _refuse_schedule(accounting)
    if bound == "heuristic" and accounting.step_sizes is not None:

        def curve_at(x):
            # The pair at the run's schedule and noise multiplier exp(x) (its atoms are
            # cached: only their scale changes with x).
            return heuristic_curve_lower(_at_sigma(accounting, math.exp(x)))

    elif bound == "heuristic":

        def curve_at(x):
            return heuristic_curve_lower(T, q, math.exp(x), canary_steps=n)

    elif bound == "heuristic_max_over_steps":
        cs = accounting.canary_steps

        def curve_at(x):
            return heuristic_max_over_steps_curve_lower(T, q, math.exp(x), canary_steps=cs)

    else:

        def curve_at(x):
            return composition_curve_lower(T, q, math.exp(x), canary_steps=n)

    x_ref = math.log(accounting.noise_multiplier if reference is None else reference)
    x_min = x_ref - math.log(_SEARCH_FACTOR)
    if bound == "composition":
        # A PLD at tiny sigma needs a huge grid (losses ~ 1 / sigma^2 at spacing 1e-3);
        # stop at sigma / 16 (then `at_limit`): a DP-SGD run violates composition's curve
        # at its own sigma with probability <= 1 - c, let alone 16 times less noise.
        x_min = x_ref - math.log(16.0)
    return _Family(bound, curve_at, x_ref, x_min, x_ref + math.log(_SEARCH_FACTOR))


def _boundary(fam: _Family, a_up: np.ndarray, b_up: np.ndarray) -> tuple:
    """The smallest x (to _RTOL) with the curve f_x violated by a test (a_up, b_up).

    Returns `(x, at_limit)`: x is a value found violated (None if none up to x_max);
    `at_limit` when even x_min is violated.
    """

    def bad(x):
        return fam.violated(x, a_up, b_up)

    step = math.log(2.0)
    if bad(fam.x_ref):
        hi, lo = fam.x_ref, None
        while lo is None:
            x = max(hi - step, fam.x_min)
            if not bad(x):
                lo = x
            else:
                hi = x
                if x <= fam.x_min:
                    return hi, True
            step *= 2.0
    else:
        lo, hi = fam.x_ref, None
        while hi is None:
            x = min(lo + step, fam.x_max)
            if bad(x):
                hi = x
            else:
                lo = x
                if x >= fam.x_max:
                    return None, False
            step *= 2.0
    tol = math.log1p(_RTOL)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if bad(mid):
            hi = mid
        else:
            lo = mid
    return hi, False


def _refuse_schedule(accounting: Accounting) -> None:
    """The max over horizons is computed at one learning rate only: a ValueError naming
    the accounting's schedule, if it has one."""
    accounting.refuse_schedule(
        "bound='heuristic_max_over_steps'", "its horizons are the last t steps of a run at "
        "one learning rate (Section 4.1 of arXiv:2410.06186), and its curves are computed "
        "only for that case; use bound='heuristic' (the heuristic at this schedule), "
        "'composition' or 'gdp'"
    )  # fmt: skip


def _at_sigma(accounting: Accounting, sigma: float) -> Accounting:
    """The same run (steps, q, canary steps, schedule) at noise multiplier sigma."""
    return dataclasses.replace(accounting, noise_multiplier=sigma)


def _eps_equivalent(bound: str, index: float, delta: float, accounting) -> float:
    if bound == "gdp":
        return float(gdp_epsilon(delta, index))
    T, q, n = accounting.steps, accounting.sampling_prob, accounting.num_canary_steps
    if bound == "heuristic" and accounting.step_sizes is not None:
        return float(heuristic_epsilon(delta, _at_sigma(accounting, index)))
    if bound == "heuristic":
        return float(heuristic_epsilon(delta, T, q, index, canary_steps=n))
    if bound == "composition":
        return float(composition_epsilon_from_pld(delta, T, q, index, canary_steps=n))
    if n == T:
        return float(heuristic_epsilon_max_over_steps(delta, T, q, index))
    counts = horizon_canary_counts(T, accounting.canary_steps)
    return max(
        float(heuristic_epsilon(delta, t, q, index, canary_steps=int(c)))
        for t, c in enumerate(counts.tolist(), start=1)
        if c > 0
    )


def _check_inputs(scores, bound, accounting, delta, confidence, seed, num_thresholds, reference):
    if not isinstance(scores, Scores):
        raise TypeError(f"scores must be an advsim.Scores, got {type(scores).__name__}")
    if bound not in VIOLATION_BOUNDS:
        raise ValueError(f"bound must be one of {VIOLATION_BOUNDS}, got {bound!r}")
    if accounting is not None and not isinstance(accounting, Accounting):
        raise TypeError(
            f"accounting must be an advsim.Accounting or None, got {type(accounting).__name__}"
        )
    if accounting is None and bound != "gdp":
        raise ValueError(
            f"bound={bound!r} needs accounting=Accounting(steps, sampling_prob, "
            "noise_multiplier, canary_steps) of the audited run (its T, q and canary steps "
            "define the curves; its noise multiplier is the reference), got None"
        )
    if delta is not None:
        delta = check_delta("delta", delta)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    seed = check_int("seed", seed, minimum=0)
    num_thresholds = check_int("num_thresholds", num_thresholds, minimum=1)
    if reference is not None:
        reference = check_positive("reference", reference)
    check_two_per_world(
        scores,
        "certify_violation needs at least 2 scores per world (one half chooses the "
        "witnesses, the other counts them)",
    )
    return delta, confidence, seed, num_thresholds, reference


def certify_violation(
    scores: Scores,
    bound: str,
    accounting: Accounting | None = None,
    *,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    num_thresholds: int = 1,
    reference: float | None = None,
) -> ViolationCertificate:
    r"""Certifies, assumption-free, that the release's trade-off curve is below a bound's.

    See the module docstring for the families, the meaning of a violation and the method.

    Args:
        scores: the adversary's scores in both worlds (higher means "canary in").
        bound: one of `VIOLATION_BOUNDS`: `"heuristic"`, `"heuristic_max_over_steps"`,
            `"composition"` or `"gdp"`.
        accounting: the audited run's T, q, canary steps and noise multiplier (required
            except for `"gdp"`, where it only sets the reference mu).
        delta: the delta at which to name the violated curve's epsilon, a curve index
            (`eps_equivalent`, given only when `certified`); None leaves it out.
        confidence: c in (0.5, 1).
        seed: seed of `np.random.default_rng` for the split into halves.
        num_thresholds: m >= 1 witness thresholds tested on the held-out half
            (Bonferroni over them).
        reference: the index that `certified` asks about: a noise multiplier for the
            sigma families (default `accounting.noise_multiplier`), a mu for `"gdp"`
            (default the run's full-batch mu, or none without accounting).

    Returns:
        A `ViolationCertificate`.

    Raises:
        ValueError: an unknown `bound`, no `accounting` for a sigma family, a bad
            `delta`, `confidence`, `seed` or `num_thresholds`, fewer than 2 scores in a
            world.
        TypeError: `scores` or `accounting` of the wrong type.
        NonFiniteScoresError: a score is NaN or inf.

    Example:
        >>> import numpy as np
        >>> from advsim import Scores
        >>> rng = np.random.default_rng(0)
        >>> s = Scores(rng.normal(2.0, 1.0, 10**5), rng.normal(0.0, 1.0, 10**5))
        >>> cert = certify_violation(s, "gdp", reference=1.5)  # the truth is G_2
        >>> cert.certified, 1.9 < cert.mu_star <= 2.0
        (True, True)
    """
    user_reference = reference is not None
    delta, confidence, seed, m, reference = _check_inputs(
        scores, bound, accounting, delta, confidence, seed, num_thresholds, reference
    )
    fam = _family(bound, accounting, reference)
    rng = np.random.default_rng(seed)
    sel_in, cnt_in = _sorted_halves(scores.canary_in, rng)
    sel_out, cnt_out = _sorted_halves(scores.canary_out, rng)
    alpha = (1.0 - confidence) / 2.0
    witnesses, n_candidates = _choose_witnesses(fam, sel_in, sel_out, alpha, m)
    m = witnesses.size

    # Count the witnesses on the held-out half, Bonferroni over them.
    fp_h, fn_h = counts_at(cnt_in, cnt_out, witnesses)
    a_up = clopper_pearson_upper(fp_h, cnt_out.size, alpha / m)
    b_up = clopper_pearson_upper(fn_h, cnt_in.size, alpha / m)
    x_star, at_limit = _boundary(fam, a_up, b_up)
    no_reference = bound == "gdp" and reference is None and accounting is None
    reference = None if no_reference else fam.index(fam.x_ref)
    certified = x_star is not None if no_reference else fam.violated(fam.x_ref, a_up, b_up)
    star = None if x_star is None else fam.index(x_star)
    sigma_star, mu_star = _stars(bound, star, accounting)
    eps = None
    if delta is not None and star is not None and certified:
        # Only a certificate names its curve's index: beside epsilons, an uncertified
        # one reads as the release's epsilon (see the module docstring).
        eps = _eps_equivalent(bound, star, delta, accounting)
    wit = _witness_records(fam, x_star, witnesses, fp_h, fn_h, a_up, b_up, cnt_in, cnt_out)
    label = _reference_label(bound, user_reference)
    statement = _statement(
        bound, certified, star, at_limit, reference, label, eps, delta, confidence, m
    )
    return ViolationCertificate(
        bound=bound,
        certified=bool(certified),
        sigma_star=sigma_star,
        mu_star=mu_star,
        at_limit=bool(at_limit),
        eps_equivalent=eps,
        eps_equivalent_name=_EPS_NAMES[bound],
        delta=delta,
        reference=None if reference is None else float(reference),
        witnesses=wit,
        confidence=float(confidence),
        n_in=int(cnt_in.size),
        n_out=int(cnt_out.size),
        n_in_total=int(scores.n_in),
        n_out_total=int(scores.n_out),
        n_candidates=n_candidates,
        seed=int(seed),
        statement=statement,
    )


def _sorted_halves(scores, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(choosing half, counting half) of one world's scores (`split_halves`), each sorted."""
    sel, cnt = split_halves(np.asarray(scores, dtype=np.float64), rng)
    return np.sort(sel), np.sort(cnt)


def _choose_witnesses(fam, sel_in, sel_out, alpha: float, m: int) -> tuple[np.ndarray, int]:
    """The (at most) `m` witness thresholds chosen on the first half, and the number of
    candidates they were chosen among.

    Candidates are ranked by their margin below the family's curve at the least-violated
    index their rates reach, bounded at the Bonferroni level over the candidates. If no
    candidate violates any curve there (too few runs for it), they are ranked at the single
    level, then by raw rates: any rule that looks only at the first half keeps the held-out
    certificate valid; these only pick a sensible witness.
    """
    cands = candidate_thresholds(sel_in, sel_out)
    fp, fn = counts_at(sel_in, sel_out, cands)
    for level in (alpha / cands.size, alpha, None):
        if level is None:
            a_sel, b_sel = fp / sel_out.size, fn / sel_in.size
        else:
            a_sel = clopper_pearson_upper(fp, sel_out.size, level)
            b_sel = clopper_pearson_upper(fn, sel_in.size, level)
        x_sel, _ = _boundary(fam, a_sel, b_sel)
        if x_sel is not None:
            break
    x_rank = fam.x_max if x_sel is None else x_sel
    margin = fam.curve_at(x_rank)(a_sel) - b_sel
    m = min(m, cands.size)
    return cands[np.argsort(-margin, kind="stable")[:m]], int(cands.size)


def _stars(bound: str, star, accounting) -> tuple[float | None, float | None]:
    """(sigma_star, mu_star) from the certified index: a "gdp" certificate's mu* gives a
    sigma* through the run's full-batch relation mu = q sqrt(n_c) / sigma, where there is a
    run; the sigma families' index is sigma* itself."""
    if bound != "gdp":
        return star, None
    if star is None or accounting is None:
        return None, star
    return accounting.sampling_prob * math.sqrt(accounting.num_canary_steps) / star, star


def _witness_records(fam, x_star, witnesses, fp_h, fn_h, a_up, b_up, cnt_in, cnt_out) -> tuple:
    """Each witness's threshold, held-out counts, rates, their upper bounds and the violated
    curve at its bounded FPR (None where nothing is certified)."""
    curve_vals = fam.curve_at(x_star)(a_up) if x_star is not None else np.full(a_up.size, np.nan)
    return tuple(
        {
            "threshold": float(witnesses[i]),
            "fp": int(fp_h[i]),
            "fn": int(fn_h[i]),
            "fpr": float(fp_h[i] / cnt_out.size),
            "fnr": float(fn_h[i] / cnt_in.size),
            "fpr_upper": float(a_up[i]),
            "fnr_upper": float(b_up[i]),
            "curve_at_fpr_upper": None if x_star is None else float(curve_vals[i]),
        }
        for i in range(witnesses.size)
    )

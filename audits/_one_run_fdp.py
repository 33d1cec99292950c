r"""One-run f-DP audits (Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-Differential
Privacy in One Run", arXiv:2410.22235) against a named trade-off curve.

The same game as `one_run_audit` (m canaries, each in the one run with probability 1/2;
"in" guessed on the k highest scores, abstentions elsewhere, v correct), but the claim
tested is "the run is f-DP with respect to each canary" for a whole trade-off curve f
rather than one (eps, delta) pair, which uses the guesses more efficiently. For a claimed
curve f with blow-up function $B(x) = 1 - f(x)$, the claim is rejected at level $\tau$
when the recursion of their numerical bound (jax_privacy's `audit_rh_with_cap`) ends with
$r + h > k / m$: starting from $r = \tau v / m$ and $h = \tau (k - v) / m$, for
$i = v - 1, \dots, 0$,

$$h' = \max(h, B^{-1}(r)), \qquad r \leftarrow \min\big(1, r + \tfrac{i}{k - i}(h' - h)\big),
  \qquad h \leftarrow h',$$

stopping early once $h$ no longer moves (`fdp_one_run_margin`). A smaller $B^{-1}$ (a
lower curve, a weaker claim) only makes $r$ and $h$ smaller, so the rejection is monotone
in the curve: rejecting a curve below the claimed one rejects the claim.

**The curves** (`bound`, as `advsim.audits.certify_violation` names them):

- `"gdp"`: $G_\mu$, $B^{-1}(r) = \Phi(\Phi^{-1}(r) - \mu)$ in closed form. `mu_lower` is
  the largest $\mu$ whose claim is rejected (bisection; the rejection is monotone in
  $\mu$): with probability at least `confidence` the run is not $\mu$-GDP for any
  $\mu \le$ `mu_lower`, which assumes nothing. Its `eps_lower` is the (eps, delta) of
  $G_{\mu_{lower}}$ (Corollary 2.13 of arXiv:1905.02383): an (eps, delta) bound only if
  the run's curve is Gaussian (assumption `"gaussian_tradeoff"`). jax_privacy's
  `epsilon_one_run_fdp` computes the same number (it parameterises $G_\mu$ by the eps of
  `dp_accounting.get_sigma_gaussian`) without that caveat.
- `"heuristic"`, `"heuristic_max_over_steps"`, `"composition"`: the curve of that bound
  (the last-iterate heuristic of Theorem 1 of arXiv:2410.06186, its maximum over horizons,
  DP-SGD releasing every iterate) for the run's $T$, $q$ and canary steps
  (`accounting`) at a noise multiplier $\sigma'$. These curves rise with $\sigma'$ (more
  noise is a post-processing of less), so the rejected claims are those with
  $\sigma' \ge$ `sigma_star`, the smallest $\sigma'$ rejected, searched on the fixed grid
  $\sigma' = \sigma e^{j h}$, $h = \log(1.001)$ (so the result is within 0.1% of the
  exact boundary and the curves are cached across calls). With probability at least
  `confidence`, assuming nothing: *the run is not f-DP for the bound's curve at any noise
  multiplier $\sigma' \ge$ `sigma_star`*; when `sigma_star` $\le \sigma$ (the run's own),
  the run is a counterexample to the bound applied to itself. `eps_lower` is the bound's
  epsilon at `delta` for `sigma_star` (e.g. the heuristic-equivalent epsilon): an
  (eps, delta) lower bound only if the run's curve is exactly one of the family's
  (assumption `"heuristic_family"` or `"bound_family"`), as for the separate-coordinate
  one-run mechanism, whose canaries each have the heuristic's law.

**Numerical curves.** Only $G_\mu$ has a closed-form $B^{-1}$. The other curves come from
`advsim.bounds` (`heuristic_curve_lower`, `composition_curve_lower`, ...),
which are piecewise linear envelopes never above the exact curves (each delta of the
profile rounded up, the envelope lowered by 1e-12). Their exact curves are symmetric
(Proposition 2.12 of arXiv:1905.02383 over both orders of the neighbouring pair), so
$B^{-1}(r) = f^{-1}(1 - r) = f(1 - r)$; this module evaluates the lowered envelope at
$1 - r$ and lowers it by a further `_INV_MARGIN` = 1e-12 (the rounding of $1 - r$ and of
the line evaluation). So the $B^{-1}$ used is never above the exact one: numerics can only
make a rejection harder, never optimistic. The statement "for every $\sigma' \ge$
`sigma_star`" uses the exact curves' nesting in $\sigma'$; the search on the grid assumes
the rounded curves are nested too (they differ from the exact ones by ~1e-6 of delta,
far less than between grid points; `tests/audits/test_one_run_fdp.py` checks the nesting).

**The coins** are checked as `one_run_audit` checks them (an exact binomial test of
their balance at `coin_level`, default 1e-3; see `one_run_audit`): the
recursion, like the (eps, delta) bound, holds only for bits drawn with probability 1/2
independently of everything else before training, and a balance test cannot detect bits
that depend on the scores.

Only k- = 0 (as jax_privacy): the recursion above counts "in" guesses. The number of
"in" guesses k is fixed by the caller or the best of a grid with Bonferroni over it.
"""

from __future__ import annotations

import bisect
import functools
import math

from scipy.special import ndtr, ndtri

from advsim import Accounting
from advsim.bounds import CURVE_MARGIN
from advsim.validation import check_delta, check_in_interval, check_int

from ._certify import VIOLATION_BOUNDS, _eps_equivalent, _family
from ._certify_names import _CURVE_NAMES, _EPS_NAMES
from ._one_run import COIN_TEST_LEVEL, OneRunResult, _check_inputs, check_coins, one_run_guesses

__all__ = [
    "FDP_BOUNDS",
    "fdp_one_run_margin",
    "gdp_one_run_rejects",
    "inverse_blow_up",
    "one_run_fdp_audit",
    "one_run_gdp_mu",
]

FDP_BOUNDS = VIOLATION_BOUNDS
"""The trade-off curves `one_run_fdp_audit` tests (as `certify_violation` names them).
"""
_MU_MAX = 40.0  # G_40 is indistinguishable from perfect separation at any sample size
_GRID_STEP = math.log1p(1e-3)  # the sigma grid's spacing in log sigma
_INV_MARGIN = 1e-12  # B^{-1} lowered by this (module docstring)
_ASSUMPTION = {
    "gdp": "gaussian_tradeoff",
    "heuristic": "heuristic_family",
    "heuristic_max_over_steps": "bound_family",
    "composition": "bound_family",
}


def fdp_one_run_margin(m: int, k: int, v: int, inv_blow_up, level: float) -> float:
    """The recursion's margin `r + h - k / m` (module docstring); > 0 rejects the claim
    whose inverse blow-up function is `inv_blow_up` (a scalar map of [0, 1])."""
    if k == 0:
        return -1.0
    r = level * v / m
    h = level * (k - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, inv_blow_up(r))
        if h_new == h:
            break
        r = min(r + (i / (k - i)) * (h_new - h), 1.0)
        h = h_new
    return r + h - k / m


def gdp_one_run_rejects(m: int, k: int, v: int, mu: float, level: float) -> float:
    """The recursion's margin `r + h - k / m` for the claim G_mu; > 0 rejects it."""
    return fdp_one_run_margin(m, k, v, lambda r: float(ndtr(ndtri(r) - mu)), level)


def one_run_gdp_mu(m: int, k: int, v: int, *, level: float, tol: float = 1e-10) -> float:
    """The largest mu whose G_mu claim the (m, k, v) guesses reject at `level` (0 if none)."""
    level = check_in_interval("level", level, 0.0, 1.0)
    if gdp_one_run_rejects(m, k, v, 0.0, level) <= 0:
        return 0.0
    if gdp_one_run_rejects(m, k, v, _MU_MAX, level) > 0:
        return _MU_MAX
    lo, hi = 0.0, _MU_MAX
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if gdp_one_run_rejects(m, k, v, mid, level) > 0:
            lo = mid
        else:
            hi = mid
    return lo


@functools.lru_cache(maxsize=64)  # ~0.3 MB each (3 lists of up to ~3000 floats)
def inverse_blow_up(curve):
    r"""$r \mapsto B^{-1}(r) = f(1 - r)$ for a symmetric `LowerCurve` f with a piecewise
    linear profile, evaluated with `bisect` on plain floats (about 1 us a call), lowered by
    1e-12 (module docstring). Cached per curve object.

    Args:
        curve: an `advsim.bounds.LowerCurve` whose `profile` is a
            `TradeoffCurve` and which is that profile lowered by at most 1e-12.

    Returns:
        A function of one float r in [0, 1], never above the exact curve's $B^{-1}(r)$.
    """
    if curve.profile is None:
        raise ValueError(f"inverse_blow_up needs a curve with a profile, got {curve.name}")
    breaks = curve.profile.breakpoints.tolist()
    ints = curve.profile.intercepts.tolist()
    slopes = curve.profile.slopes.tolist()

    def inv(r: float) -> float:
        x = 1.0 - r
        i = bisect.bisect_right(breaks, x)
        y = min(max(ints[i] + slopes[i] * x, 0.0), 1.0) - CURVE_MARGIN  # as LowerCurve
        return max(y - _INV_MARGIN, 0.0)

    return inv


def _check_bound(bound, accounting, k_plus, candidates):
    if bound not in FDP_BOUNDS:
        raise ValueError(f"bound must be one of {FDP_BOUNDS}, got {bound!r}")
    if bound == "gdp" and accounting is not None:
        raise ValueError("accounting is for the noise-multiplier bounds, not bound='gdp'")
    if bound != "gdp" and not isinstance(accounting, Accounting):
        raise ValueError(
            f"bound={bound!r} needs accounting=Accounting(steps, sampling_prob, "
            "noise_multiplier, canary_steps) of the audited run (per canary), got "
            f"{type(accounting).__name__}"
        )
    if k_plus is not None and candidates is not None:
        raise ValueError("give k_plus or candidates, not both")


def _sigma_star(fam, guesses, m: int, level: float) -> tuple:
    """`(j, at_limit)`: the smallest grid index j (sigma' = sigma e^{j h}) whose curve some
    guess rejects (None if none up to the family's upper limit)."""
    j_min = math.ceil((fam.x_min - fam.x_ref) / _GRID_STEP)
    j_max = math.floor((fam.x_max - fam.x_ref) / _GRID_STEP)

    @functools.cache
    def rejected(j: int) -> bool:
        inv = inverse_blow_up(fam.curve_at(fam.x_ref + j * _GRID_STEP))
        return any(fdp_one_run_margin(m, r, v, inv, level) > 0 for r, v in guesses)

    step = 1
    if rejected(0):
        hi, lo = 0, None
        while lo is None:
            j = max(hi - step, j_min)
            if not rejected(j):
                lo = j
            elif j == j_min:
                return j_min, True
            else:
                hi = j
            step *= 2
    else:
        lo, hi = 0, None
        while hi is None:
            j = min(lo + step, j_max)
            if rejected(j):
                hi = j
            elif j == j_max:
                return None, False
            else:
                lo = j
            step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if rejected(mid):
            hi = mid
        else:
            lo = mid
    return hi, False


def _gdp_claim(guesses, m, level, delta):
    from advsim.bounds import gdp_epsilon

    mus = [one_run_gdp_mu(m, r, v, level=level) for r, v in guesses]
    best = max(range(len(mus)), key=lambda i: (mus[i], -i))
    mu = mus[best]
    eps = float(gdp_epsilon(delta, mu)) if mu > 0 else 0.0
    return best, eps, f"not mu-GDP for any mu <= {mu:.6g}", {"mu_lower": mu}


def _curve_claim(bound, accounting, guesses, m, level, delta):
    fam = _family(bound, accounting, None)
    j, at_limit = _sigma_star(fam, guesses, m, level)
    sigma = accounting.noise_multiplier
    run = (
        f"T = {accounting.steps}, q = {accounting.sampling_prob:g}, "
        f"{accounting.num_canary_steps} canary steps"
    )
    if j is None:
        limit = fam.index(fam.x_max)
        return (
            0,
            0.0,
            (
                f"{_CURVE_NAMES[bound]} ({run}) is not rejected at any noise multiplier up to "
                f"{limit:.4g}: nothing is certified"
            ),
            {"sigma_star": None, "eps_equivalent": None, "at_limit": False, "certified": False},
        )
    star = fam.index(fam.x_ref + j * _GRID_STEP)
    inv = inverse_blow_up(fam.curve_at(fam.x_ref + j * _GRID_STEP))
    best = max(
        range(len(guesses)),
        key=lambda i: (fdp_one_run_margin(m, *guesses[i], inv, level), -i),
    )
    eps = _eps_equivalent(bound, star, delta, accounting)
    edge = " (the edge of the search; smaller ones may be rejected too)" if at_limit else ""
    own = (
        f"; this includes the run's own sigma = {sigma:.4g}: a counterexample to the bound"
        if j <= 0
        else f"; not rejected at the run's own sigma = {sigma:.4g}"
    )
    text = (
        f"not f-DP for {_CURVE_NAMES[bound]} ({run}) at any noise multiplier "
        f">= sigma* = {star:.6g}{edge}{own}"
    )
    extras = {
        "sigma_star": star,
        "eps_equivalent": eps,
        "eps_equivalent_name": _EPS_NAMES[bound],
        "at_limit": at_limit,
        "certified": j <= 0,
    }
    return best, eps, text, extras


def one_run_fdp_audit(
    scores,
    included,
    *,
    delta: float,
    confidence: float = 0.95,
    k_plus: int | None = None,
    candidates=None,
    bound: str = "gdp",
    accounting: Accounting | None = None,
    coin_level: float | None = COIN_TEST_LEVEL,
) -> OneRunResult:
    """One-run audit of a trade-off curve claim (module docstring).

    Args:
        scores, included: per-canary scores and inclusion bits, shape (m,).
        delta: the delta at which the rejected curve is read as eps, in (0, 1).
        confidence: c in (0.5, 1).
        k_plus: a number of "in" guesses fixed by the caller; else the best of
            `candidates` (default 1, 2, 5, 10, ... <= m / 2) with Bonferroni over them.
        bound: the curve family, one of `FDP_BOUNDS`: `"gdp"` (G_mu), `"heuristic"`,
            `"heuristic_max_over_steps"` or `"composition"`.
        accounting: the run's T, q, canary steps and noise multiplier per canary (required
            for every bound but `"gdp"`, refused there).
        coin_level: the level of the bits' balance test (default 1e-3), or None to skip
            it for bits from a known fair generator (as `one_run_audit`).

    Returns:
        A `OneRunResult` (method `"one_run_fdp"`) whose `guarantee.certified` states the
        assumption-free rejection; `extras` holds `bound`, `level`, `n_candidates` and
        `mu_lower` (`"gdp"`) or `sigma_star`, `eps_equivalent`, `at_limit` and `certified`
        (the run's own sigma rejected).

    Raises:
        ValueError: bad arrays, bits the balance test rejects as fair coins, delta,
            confidence, k's, an unknown `bound`, `accounting`
            missing for a noise-multiplier bound or given for `"gdp"`.

    References:
        Mahloujifar, Melis & Chaudhuri, arXiv:2410.22235 (the numerical bound for
        abstaining guessers); Dong, Roth & Su, arXiv:1905.02383, Corollary 2.13 and
        Proposition 2.12; arXiv:2410.06186, Theorem 1 (the heuristic's curve).

    Example:
        >>> import numpy as np
        >>> from advsim import Accounting
        >>> rng = np.random.default_rng(0)
        >>> included = rng.random(1000) < 0.5
        >>> scores = rng.normal(2.0 * included, 1.0)  # G_2: the heuristic at T=4, q=1, sigma=1
        >>> acc = Accounting(4, 1.0, 1.0, (1, 2, 3, 4))
        >>> r = one_run_fdp_audit(scores, included, delta=1e-5, bound="heuristic", accounting=acc)
        >>> 1.0 < r.extras["sigma_star"], r.guarantee.assumption
        (True, 'heuristic_family')
    """
    scores, included = _check_inputs(scores, included)
    coin_p = check_coins(included, coin_level)
    delta = check_delta("delta", delta)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    _check_bound(bound, accounting, k_plus, candidates)
    m = scores.size
    if k_plus is not None:
        ks = [check_int("k_plus", k_plus, minimum=1, maximum=m)]
        multiplicity = f"k+ = {ks[0]} given by the caller: valid if fixed before the scores"
    else:
        default = sorted(
            {c * 10**e for e in range(12) for c in (1, 2, 5) if c * 10**e <= max(m // 2, 1)}
        )
        ks = [check_int("k_plus", k, minimum=1, maximum=m) for k in (candidates or default)]
        multiplicity = f"Bonferroni over {len(ks)} values of k+ (k- = 0)"
    level = (1.0 - confidence) / len(ks)
    guesses = [one_run_guesses(scores, included, k, 0) for k in ks]
    if bound == "gdp":
        best, eps, certified, extras = _gdp_claim(guesses, m, level, delta)
    else:
        best, eps, certified, extras = _curve_claim(bound, accounting, guesses, m, level, delta)
    return OneRunResult.make(
        "one_run_fdp",
        eps,
        delta,
        confidence,
        assumption=_ASSUMPTION[bound],
        held_out=True,
        multiplicity=multiplicity,
        certified=certified,
        num_canaries=m,
        pair=(ks[best], 0),
        guesses=guesses[best],
        extras={
            "bound": bound,
            "level": level,
            "n_candidates": len(ks),
            "coin_p_value": coin_p,
            **extras,
        },
    )

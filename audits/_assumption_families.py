"""The two assumptions the assumed audits rest on, each checked with `check_tradeoff_fit`: a
Gaussian trade-off (`gdp`) and the last-iterate heuristic's family (`family`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.special
import scipy.stats

import advsim.bounds as _bounds
from advsim import Accounting
from advsim.validation import check_in_interval

from ._assumption import _ATOM_LOG_TOL, AssumptionCheck, _run, _validate_scores
from ._binned_fit import binned_mixture_test
from ._roc_band import (
    _bisect_limits,
    _gdp_limits,
)
from ._roc_segments import _segment_limits

__all__ = [
    "check_gaussian_tradeoff",
    "check_heuristic_family",
    "family_tradeoff",
    "gaussian_tradeoff",
]


def gaussian_tradeoff(alpha, mu) -> np.ndarray:
    r"""$G_\mu(\alpha) = \Phi(\Phi^{-1}(1 - \alpha) - \mu)$, elementwise (Dong, Roth & Su,
    arXiv:1905.02383, Definition 2.7)."""
    return scipy.special.ndtr(-scipy.special.ndtri(np.asarray(alpha, np.float64)) - mu)


def check_gaussian_tradeoff(canary_in, canary_out, *, level: float = 0.05) -> AssumptionCheck:
    r"""Tests "the ROC of these scores is $G_\mu$ for some $\mu \ge 0$" (the GDP audit's
    assumption, as far as the data can show it).

    $G_\mu$ is Definition 2.7 of Dong, Roth & Su (arXiv:1905.02383); the limits on $\mu$
    per box are in closed form. See the module docstring for the test and its level.

    Args:
        canary_in, canary_out: the scores of each world (any order): the held-out half
            the audit counted its rates on.
        level: the test's level, in (0, 1).

    Returns:
        An `AssumptionCheck` with `assumption="gaussian_tradeoff"`, `param_name="mu"`.

    Raises:
        ValueError: empty or non-finite scores; `level` outside (0, 1).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> r = check_gaussian_tradeoff(rng.normal(1, 1, 10**4), rng.normal(0, 1, 10**4))
        >>> r.rejected
        False
    """
    return _check_convex_family(
        canary_in, canary_out, gaussian_tradeoff, _gdp_limits, level=level,
        assumption="gaussian_tradeoff", param_name="mu", show=lambda a, b: (float(a), float(b)),
        mixture=(np.ones(1), np.ones(1)),
    )  # fmt: skip


def _check_convex_family(
    canary_in,
    canary_out,
    curve,
    limits,
    *,
    level,
    assumption,
    param_name,
    show,
    mixture,
    tol=0.0,
) -> AssumptionCheck:
    """`_run` on unsorted scores for a family of strictly convex curves with theta in
    [0, inf) (the GDP and heuristic-family checks), with the binned test of the
    probit-shift mixture `mixture = (shifts, weights)` that the curves are; `tol` as in
    `_segment_limits`."""
    level = check_in_interval("level", level, 0.0, 1.0)
    cin = np.sort(_validate_scores("canary_in", canary_in, must_be_sorted=False))
    cout = np.sort(_validate_scores("canary_out", canary_out, must_be_sorted=False))
    return _run(
        cin,
        cout,
        limits=limits,
        segment_limits=lambda seg, cap: _segment_limits(curve, seg, 0.0, math.inf, cap, tol),
        strictly_convex=True,
        curve=curve,
        lo=0.0,
        level=level,
        assumption=assumption,
        param_name=param_name,
        show=show,
        binned=lambda sin, sout, lev, guess: _binned(sin, sout, mixture, lev, guess, show),
    )


def _binned(sorted_in, sorted_out, mixture, level, theta_guess, show) -> dict | None:
    """The binned test (step 6) with its fit also in the reported parameter."""
    result = binned_mixture_test(
        sorted_in, sorted_out, *mixture, level=level, theta_guess=theta_guess
    )
    if result is not None:
        theta = result["theta_fit"]
        result["param_fit"] = show(max(theta, 0.0), max(theta, 0.0))[0]
    return result


def _family_curve(accounting: Accounting) -> tuple:
    """`(curve, error, (shifts, weights))`: the family's curve from the atoms within
    `_ATOM_LOG_TOL` of the largest, a bound on its distance to the exact one (twice the
    dropped mass), and the atoms as the probit-shift mixture of the binned test."""
    n_c = accounting.num_canary_steps
    support, probs = _bounds.binomial_mixture(n_c, accounting.sampling_prob, log_tol=_ATOM_LOG_TOL)
    z = np.asarray(support, np.float64) / math.sqrt(accounting.steps)
    probs = np.asarray(probs, np.float64)

    def curve(alpha, theta):
        c = -scipy.special.ndtri(np.asarray(alpha, np.float64))
        theta = np.asarray(theta, np.float64)
        with np.errstate(invalid="ignore"):  # c = +-inf minus a finite shift
            terms = scipy.special.ndtr(c[..., None] - z * theta[..., None])
        return np.clip(terms @ probs, 0.0, 1.0)

    return curve, 2.0 * (n_c + 1) * math.exp(-_ATOM_LOG_TOL), (z, probs / probs.sum())


def family_tradeoff(accounting: Accounting) -> Callable:
    r"""The heuristic family's curve as `curve(alpha, theta)` with $\theta = 1/\sigma$:
    $\sum_k p_k \Phi(\Phi^{-1}(1 - \alpha) - k\theta/\sqrt{T})$, $p_k$ the
    Binomial($n_c$, q) atoms of `advsim.bounds.binomial_mixture` (Theorem 1 of
    arXiv:2410.06186; `advsim.bounds.mixture_tradeoff` at scale $\sqrt{T}\sigma$),
    elementwise in (alpha, theta) and non-increasing in theta. Atoms more than
    `_ATOM_LOG_TOL` below the largest in log-probability are dropped (absolute error
    < 2 (n_c + 1) e^{-60})."""
    return _family_curve(accounting)[0]


def check_heuristic_family(
    canary_in, canary_out, accounting: Accounting, *, level: float = 0.05
) -> AssumptionCheck:
    r"""Tests "the ROC of these scores is the heuristic family's $f_\sigma$ for some sigma"
    (the family audit's assumption, as far as the data can show it).

    The family (Theorem 1 of arXiv:2410.06186) with the run's T, q and number of canary
    steps $n_c$ from `accounting`: $P = \mathrm{Binomial}(n_c, q) + N(0, T\sigma^2)$
    against $Q = N(0, T\sigma^2)$, $\sigma \in (0, \infty]$ ($\sigma = \infty$: no
    signal). Tested in $\theta = 1/\sigma \in [0, \infty)$ (the curve is non-increasing in
    theta) and reported in sigma. See the module docstring for the test and its level.

    Args:
        canary_in, canary_out: the scores of each world (any order): the held-out half
            the audit counted its rates on.
        accounting: the audited run's `Accounting` (its noise multiplier is not used).
        level: the test's level, in (0, 1).

    Returns:
        An `AssumptionCheck` with `assumption="heuristic_family"`, `param_name="sigma"`,
        `param_interval` as `(sigma_lo, sigma_hi)` (`sigma_hi` may be inf).

    Raises:
        TypeError: `accounting` is not an `advsim.Accounting`.
        ValueError: empty or non-finite scores; `level` outside (0, 1).

    Example:
        >>> import numpy as np
        >>> from advsim import Accounting
        >>> rng = np.random.default_rng(0)
        >>> acc = Accounting(1, 1.0, 1.0, canary_steps=(1,))
        >>> r = check_heuristic_family(rng.normal(1, 1, 10**4), rng.normal(0, 1, 10**4), acc)
        >>> r.rejected, r.param_interval[0] < 1.0 < r.param_interval[1]
        (False, True)
    """
    if not isinstance(accounting, Accounting):
        raise TypeError(f"accounting must be an advsim.Accounting, got {type(accounting).__name__}")
    curve, err, mixture = _family_curve(accounting)

    def limits(boxes):
        return (
            _bisect_limits(curve, boxes["a_hi"], boxes["b_hi"], 0.0, math.inf, lower=True, tol=err),
            _bisect_limits(
                curve, boxes["a_lo"], boxes["b_lo"], 0.0, math.inf, lower=False, tol=err
            ),
        )

    def show(theta_lo, theta_hi):  # sigma = 1 / theta, so the ends swap
        def inv(t):
            return math.inf if t <= 0 else (0.0 if math.isinf(t) else 1.0 / t)

        return (inv(theta_hi), inv(theta_lo))

    return _check_convex_family(
        canary_in, canary_out, curve, limits, level=level, assumption="heuristic_family",
        param_name="sigma", show=show, mixture=mixture, tol=err,
    )  # fmt: skip

r"""Trade-off curves: DP-SGD with composition (PLD), the linear-loss last iterate, GDP.

A trade-off curve $f = T(P, Q)$ gives, for every type-I error $\alpha$ of a test of $P$
against $Q$, the least type-II error $\beta$ any test can reach (Definition 2.1 of Dong,
Roth and Su, arXiv:1905.02383). A mechanism whose privacy profile is
$\delta(\varepsilon)$ in both directions (add and remove) has, by Proposition 2.12 there
taken over every $\varepsilon \ge 0$,

$$f(\alpha) = \sup_{\varepsilon \ge 0} \max\{0,\ 1 - \delta(\varepsilon)
    - e^{\varepsilon}\alpha,\ e^{-\varepsilon}(1 - \delta(\varepsilon) - \alpha)\},$$

the symmetric curve Annamalai (2024, "It's Our Loss", Section 3.3) writes
$\mathrm{PLD}(\varepsilon)(\alpha)$. `composition_tradeoff_curve` builds it for DP-SGD
releasing every iterate from dp_accounting's privacy loss distribution
(`from_gaussian_mechanism(sigma, sampling_prob=q)` composed T times; both directions),
reading $\delta$ on a dense grid of $\varepsilon$ (spacing 0.01 up to 40). Both
approximations err on the low side of the exact curve: dp_accounting rounds $\delta$ up
(pessimistic), and a finite grid of $\varepsilon$ takes the supremum over fewer lines.
So an observation that violates this curve violates the exact one: the audits built on
it stay sound.

Cost and accuracy (measured on this machine, $T = 1024$, $q = 0.01$, $\sigma = 1.43$,
i.e. $\varepsilon = 1$ at $\delta = 10^{-5}$): building the PLD takes 0.05 s at the
default `value_discretization_interval = 1e-3` and 0.3 s at 1e-4, reading the profile
(4001 epsilons, numpy suffix sums, 1e-3 s; dp_accounting's own loop takes 0.4 s) and
building the envelope 0.02 s; the two curves differ by less than 1e-3 in $\beta$ at every $\alpha$
(`tests/advsim/test_bounds_tradeoff.py` checks 2e-3) and the composition epsilon by 1e-3.
Curves are cached per (q, sigma, number of steps, discretization).

`linear_loss_tradeoff` is the exact curve of the last iterate of DP-SGD on a linear loss
(the heuristic of arXiv:2410.06186, Theorem 1; Choquette-Choo et al.): $Q = \mathcal{N}(0,
T\sigma^2)$ against $P = \sum_k \mathrm{Binom}(T, q)(k)\, \mathcal{N}(k, T\sigma^2)$,
whose likelihood ratio is increasing, so the Neyman-Pearson test is a threshold
(`mixture_tradeoff`); at a learning-rate schedule (an `Accounting` with `step_sizes`) it
is the same test for $\mathcal{N}(X, s^2)$ against $\mathcal{N}(0, s^2)$ with
$X = \sum_t \eta_t b_t$ over the canary steps and $s = \sigma\sqrt{\sum_t \eta_t^2}$
(`advsim.bounds._step_sizes`). The composition curves take an `Accounting` with a schedule
and ignore it (scaling each update by a public nonzero constant is an invertible
post-processing of the iterates). `gdp_tradeoff` is
$G_\mu(\alpha) = \Phi(\Phi^{-1}(1 - \alpha) - \mu)$ (Definition 2.7 of arXiv:1905.02383).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from scipy.special import ndtr, ndtri

from advsim._accounting import Accounting
from advsim._validation import check_delta, check_positive
from advsim.bounds._heuristic import binomial_mixture
from advsim.bounds._mixture import mixture_tradeoff
from advsim.bounds._pld_fast import gaussian_pld
from advsim.bounds._run import run_parameters
from advsim.bounds._step_sizes import schedule_atoms

__all__ = [
    "TRADEOFF_VDI",
    "TradeoffCurve",
    "composition_epsilon_from_pld",
    "composition_pld",
    "composition_tradeoff",
    "composition_tradeoff_curve",
    "gdp_tradeoff",
    "linear_loss_tradeoff",
]

TRADEOFF_VDI = 1e-3
"""The default PLD grid spacing (value discretization interval) of the trade-off curves
(see the module docstring)."""
#: The epsilons at which the privacy profile is read.
PROFILE_EPSILONS = np.round(np.arange(0.0, 40.0 + 1e-9, 0.01), 10)


def _check_alpha(alpha) -> np.ndarray:
    alpha = np.asarray(alpha, dtype=np.float64)
    if not np.all((alpha >= 0) & (alpha <= 1)):
        raise ValueError("alpha must be in [0, 1], got an entry outside it (or NaN)")
    return alpha


@dataclasses.dataclass(frozen=True)
class TradeoffCurve:
    r"""A trade-off curve $f(\alpha) = \max_j \max(0, a_j + b_j \alpha)$, stored as the
    upper envelope of its lines.

    The lines come from a privacy profile (`from_profile`); the envelope (a convex hull
    of lines, slopes increasing) is evaluated by a binary search on its breakpoints, so
    `f` costs $O(\log J)$ per $\alpha$ whatever the number of lines $J$.

    Attributes:
        intercepts, slopes: the envelope's lines, slopes increasing (ending with the line
            0, so $f \ge 0$).
        breakpoints: where line $i$ hands over to line $i + 1$ (increasing).
        epsilons, deltas: the privacy profile it was built from.
    """

    intercepts: np.ndarray
    slopes: np.ndarray
    breakpoints: np.ndarray
    epsilons: np.ndarray
    deltas: np.ndarray

    @classmethod
    def from_profile(cls, epsilons, deltas) -> TradeoffCurve:
        r"""The curve of a symmetric privacy profile $\delta(\varepsilon)$ (Proposition
        2.12 of arXiv:1905.02383, every $\varepsilon$ of the grid at once).

        Args:
            epsilons: $\varepsilon_i \ge 0$.
            deltas: $\delta(\varepsilon_i) \in [0, 1]$ (both directions' maximum).

        Returns:
            The `TradeoffCurve`.

        Example:
            >>> f = TradeoffCurve.from_profile([0.0, 1.0], [0.5, 0.1])
            >>> float(f(0.0)), float(f(1.0))
            (0.9, 0.0)
        """
        eps = np.asarray(epsilons, dtype=np.float64).ravel()
        delta = np.asarray(deltas, dtype=np.float64).ravel()
        if eps.shape != delta.shape or eps.size == 0:
            raise ValueError(
                f"epsilons and deltas must be non-empty and of one shape, got {eps.shape} "
                f"and {delta.shape}"
            )
        if not np.all(np.isfinite(eps) & (eps >= 0)):
            raise ValueError("epsilons must be finite and >= 0")
        if not np.all((delta >= 0) & (delta <= 1)):
            raise ValueError("deltas must be in [0, 1]")
        rest = 1.0 - delta
        a = np.concatenate([rest, np.exp(-eps) * rest, [0.0]])
        b = np.concatenate([-np.exp(eps), -np.exp(-eps), [0.0]])
        ints, slopes, breaks = _upper_envelope(a, b)
        return cls(ints, slopes, breaks, eps, delta)

    def __call__(self, alpha) -> np.ndarray:
        """beta = f(alpha) for alpha in [0, 1] (any shape)."""
        alpha = _check_alpha(alpha)
        i = np.searchsorted(self.breakpoints, alpha, side="right")
        return np.clip(self.intercepts[i] + self.slopes[i] * alpha, 0.0, 1.0)


def _upper_envelope(a: np.ndarray, b: np.ndarray) -> tuple:
    """Upper envelope of the lines a + b x on x >= 0 (convex hull trick).

    Returns (intercepts, slopes, breakpoints): line i is the maximum on
    [breakpoints[i - 1], breakpoints[i]].
    """
    order = np.lexsort((a, b))  # slope increasing, then intercept increasing
    a, b = a[order], b[order]
    keep = np.append(b[1:] != b[:-1], True)  # equal slopes: the largest intercept
    a, b = a[keep], b[keep]
    hull_a: list[float] = []
    hull_b: list[float] = []
    hull_x: list[float] = []  # x where hull line i starts to win
    for ai, bi in zip(a.tolist(), b.tolist(), strict=True):
        while hull_a:
            x = (hull_a[-1] - ai) / (bi - hull_b[-1])  # where the new line overtakes
            if x <= hull_x[-1]:
                hull_a.pop(), hull_b.pop(), hull_x.pop()
                continue
            break
        start = -math.inf if not hull_a else (hull_a[-1] - ai) / (bi - hull_b[-1])
        hull_a.append(ai)
        hull_b.append(bi)
        hull_x.append(start)
    # Drop the lines that win only at x < 0 (the first with a start >= 0 keeps x = 0).
    starts = np.asarray(hull_x)
    first = max(0, int(np.searchsorted(starts, 0.0, side="right")) - 1)
    return (
        np.asarray(hull_a[first:]),
        np.asarray(hull_b[first:]),
        starts[first + 1 :],
    )


@functools.lru_cache(maxsize=256)
def _pld(q: float, sigma: float, n: int, vdi: float):
    # `gaussian_pld` is `from_gaussian_mechanism(sigma, sampling_prob=q,
    # value_discretization_interval=vdi)` bit for bit, 4x faster at small sigma, and
    # refuses a grid that would not fit in memory, naming the smallest sigma it takes.
    return gaussian_pld(sigma, q, vdi).self_compose(n)


def composition_pld(
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=TRADEOFF_VDI,
):
    """dp_accounting's PLD of DP-SGD releasing every iterate (cached).

    `from_gaussian_mechanism(sigma, sampling_prob=q)` (add and remove, pessimistic
    rounding) self-composed over the `canary_steps` steps that can carry the canary.

    Returns:
        A `dp_accounting.pld.PrivacyLossDistribution`.
    """
    _, q, sigma, n = run_parameters(
        steps, sampling_prob, noise_multiplier, canary_steps, schedule="ignore"
    )
    vdi = check_positive("value_discretization_interval", value_discretization_interval)
    return _pld(q, sigma, n, vdi)


def _pmf_deltas(pmf, epsilons: np.ndarray) -> np.ndarray:
    r"""delta(eps) of one direction's PLD pmf at sorted `epsilons`, vectorised.

    The formula of dp_accounting's `_get_delta_for_epsilon_vectorized`,
    $\delta(\varepsilon) = m_\infty + \sum_{l_j > \varepsilon} p_j
    (1 - e^{\varepsilon - l_j})$, with numpy suffix sums instead of its Python loop
    (which takes 0.5 s for 4000 epsilons); falls back to it for a non-dense pmf.

    Only the losses above the smallest epsilon count, and $e^{-l_j}$ is scaled by the
    largest epsilon, so no exponential overflows however wide the loss grid is (at
    sigma = 0.01 it spans thousands of nats).
    """
    try:
        probs = np.asarray(pmf._probs, np.float64)
        losses = (pmf._lower_loss + np.arange(probs.size)) * pmf._discretization
        inf_mass = float(pmf._infinity_mass)
    except AttributeError:
        return np.asarray(pmf.get_delta_for_epsilon(epsilons), np.float64)
    epsilons = np.asarray(epsilons, np.float64)
    # The losses that count for some epsilon: l_j > min(eps). Suffix sums over them of
    # p_j and p_j e^{s - l_j}, s = max(eps): the exponent is below s - min(eps), and
    # e^{eps - s} <= 1, so nothing overflows (a term that underflows is below 1e-300).
    keep = losses > epsilons.min()
    probs, losses = probs[keep], losses[keep]
    top = epsilons.max()
    upper = np.concatenate([np.cumsum(probs[::-1])[::-1], [0.0]])
    lower = np.concatenate([np.cumsum((probs * np.exp(top - losses))[::-1])[::-1], [0.0]])
    first = np.searchsorted(losses, epsilons, side="right")  # first loss > eps
    deltas = inf_mass + upper[first] - np.exp(epsilons - top) * lower[first]
    return np.clip(deltas, inf_mass, 1.0)


@functools.lru_cache(maxsize=256)
def _curve(q: float, sigma: float, n: int, vdi: float) -> TradeoffCurve:
    pld = _pld(q, sigma, n, vdi)
    deltas = np.maximum(
        _pmf_deltas(pld._pmf_remove, PROFILE_EPSILONS),
        _pmf_deltas(pld._pmf_add, PROFILE_EPSILONS),
    )
    return TradeoffCurve.from_profile(PROFILE_EPSILONS, np.clip(deltas, 0.0, 1.0))


def composition_tradeoff_curve(
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=TRADEOFF_VDI,
) -> TradeoffCurve:
    r"""The symmetric trade-off curve of DP-SGD releasing every iterate (cached).

    $\delta(\varepsilon)$ of `composition_pld` on `PROFILE_EPSILONS` (0 to 40, spacing
    0.01), turned into a curve by Proposition 2.12 of arXiv:1905.02383 (see the module
    docstring); below the exact curve by the PLD's pessimism and the grid's gaps.

    Args:
        steps: T >= 1, or an `advsim.Accounting` (then nothing else).
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        canary_steps: $n \in [1, T]$, the number of steps that can carry the canary,
            or those steps (distinct, in $[1, T]$; only their number is read) (default T).
        value_discretization_interval: the PLD grid spacing.

    Returns:
        A `TradeoffCurve`.

    Example:
        >>> f = composition_tradeoff_curve(1, 1.0, 1.0)  # one Gaussian: G_1
        >>> round(float(f(0.1)), 3), round(float(gdp_tradeoff(0.1, 1.0)), 3)
        (0.611, 0.611)
    """
    _, q, sigma, n = run_parameters(
        steps, sampling_prob, noise_multiplier, canary_steps, schedule="ignore"
    )
    vdi = check_positive("value_discretization_interval", value_discretization_interval)
    return _curve(q, sigma, n, vdi)


def composition_tradeoff(
    alpha,
    steps,
    sampling_prob=None,
    noise_multiplier=None,
    *,
    canary_steps=None,
    value_discretization_interval=TRADEOFF_VDI,
) -> np.ndarray:
    """beta = f(alpha) of `composition_tradeoff_curve` (Annamalai's PLD(eps)(alpha))."""
    curve = composition_tradeoff_curve(
        steps,
        sampling_prob,
        noise_multiplier,
        canary_steps=canary_steps,
        value_discretization_interval=value_discretization_interval,
    )
    return curve(alpha)


def composition_epsilon_from_pld(delta, steps, sampling_prob=None, noise_multiplier=None, **kwargs):
    """eps(delta) of the same (cached) PLD the curve is built from."""
    delta = check_delta("delta", delta)
    pld = composition_pld(steps, sampling_prob, noise_multiplier, **kwargs)
    return max(0.0, float(pld.get_epsilon_for_delta(delta)))


def gdp_tradeoff(alpha, mu) -> np.ndarray:
    r"""$G_\mu(\alpha) = \Phi(\Phi^{-1}(1 - \alpha) - \mu)$ (Definition 2.7 of
    arXiv:1905.02383): N(0, 1) against N(mu, 1).

    Example:
        >>> round(float(gdp_tradeoff(0.05, 1.0)), 4)
        0.7405
    """
    alpha = _check_alpha(alpha)
    mu = check_positive("mu", mu)
    with np.errstate(divide="ignore"):
        return ndtr(-ndtri(alpha) - mu)


def linear_loss_tradeoff(
    alpha, steps, sampling_prob=None, noise_multiplier=None, *, canary_steps=None
):
    r"""Exact trade-off curve of the last iterate of DP-SGD on a linear loss.

    $Q = \mathcal{N}(0, T\sigma^2)$ (canary out) against
    $P = \sum_k \mathrm{Binom}(n, q)(k)\, \mathcal{N}(k, T\sigma^2)$ (canary in, $n$ canary
    steps): Theorem 1 of arXiv:2410.06186 (the "linear loss amplification" of Annamalai's
    Figure 1). The likelihood ratio is increasing, so $\alpha(\tau) =
    \bar\Phi(\tau / (\sigma\sqrt T))$, $\beta(\tau) = \sum_k \mathrm{Binom}(k)
    \Phi((\tau - k)/(\sigma\sqrt T))$ (`mixture_tradeoff`). With an `Accounting` that has a
    learning-rate schedule, the same at that schedule: $X = \sum_t \eta_t b_t$ over the
    canary steps in place of the Binomial, $s = \sigma\sqrt{\sum_t \eta_t^2}$ in place of
    $\sigma\sqrt T$ (an X of too many atoms is refused).

    Example:
        >>> b = linear_loss_tradeoff([0.01, 0.1], 100, 0.1, 1.0)
        >>> bool(np.all(b > composition_tradeoff([0.01, 0.1], 100, 0.1, 1.0)))
        True
    """
    alpha = _check_alpha(alpha)
    run = steps
    steps, q, sigma, n = run_parameters(
        run, sampling_prob, noise_multiplier, canary_steps, schedule="ignore"
    )
    if isinstance(run, Accounting) and run.step_sizes is not None:
        atoms = schedule_atoms(run)
        return mixture_tradeoff(alpha, atoms.x, np.exp(atoms.logp), sigma * atoms.scale)
    support, probs = binomial_mixture(n, q)
    return mixture_tradeoff(alpha, support, probs, sigma * math.sqrt(steps))

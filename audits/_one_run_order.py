r"""The order-statistics one-run audit of Xiang, Wang, Xiao, Tian & Wang, "Tight Privacy
Audit in One Run" (arXiv:2509.08704), and the f-DP channels it tests.

One run with n canaries, each in or out by a fair coin; the auditor releases guesses on
the r canaries it is most confident about and makes T mistakes. Under the null that every
canary's bit passes through an f-DP channel (P, Q), the paper's Theorem 2 gives the law of
T exactly through order statistics: write the channel's *score profile* as the error
probability of the optimal decoder, $\gamma = 1 / (1 + e^{|L|})$ with L = log dQ/dP, as a
function of the score's quantile w under the mixture M = (P + Q) / 2, and
$\bar\gamma(w) = \int_w^1 \gamma / (1 - w)$, the mean error rate above quantile w. The
highest-scoring guess left out (the cut) sits at a quantile W ~ Beta(n - r, r + 1), and

$$P[T \le u] = E_W[\mathrm{BinCDF}(u; r, \bar\gamma(W))]$$

(for r = n there is no cut: T ~ Binomial(n, E_M[\gamma])). A run with u mistakes rejects
the channel at level alpha when this is below alpha; bisection on the channel's parameter
(mu of Gaussian mu-GDP, or mu of the Poisson-subsampled Gaussian at a given q) finds the
largest one rejected, `mu_lower`, converted to eps at delta by the channel's privacy
profile. The rejection is a statement about the f-DP curve of that channel family; the
eps assumes the run's curve is in the family (as `GaussianDPAudit`'s does).

Against Steinke, Nasr & Jagielski's bound (`one_run_epsilon`, which reads only how many
guesses were right and treats each as eps-DP randomised response) the profile uses how
confident the released guesses were: on the paper's 60 settings (its `RESULTS.txt`) it
recovers 84% of the true eps on average, against 24%.

The channels are discretised on a midpoint grid of `points` cells over
[-span - |mu|, span + |mu|] (the mixture's mass per cell, the log-likelihood ratio at its
midpoint); the tail integral is a trapezoid rule in log space on `quadrature` nodes
spanning the Beta's mean +- 18 standard deviations.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from advsim.bounds import gdp_epsilon
from advsim.validation import check_delta, check_in_interval, check_int

from ._guarantee import ASSUMPTIONS, Guarantee

__all__ = [
    "OrderAuditResult",
    "ScoreProfile",
    "channel_epsilon",
    "expected_mistakes",
    "gaussian_channel",
    "one_run_order_audit",
    "one_run_order_epsilon",
    "order_tail_probability",
    "subsampled_gaussian_channel",
]

#: The channel parameter's search range (mu of the Gaussian channels).
MU_RANGE = (0.01, 32.0)
_GRID_POINTS, _SPAN = 100_000, 14.0
_QUADRATURE, _BETA_SDS = 20_001, 18.0


@dataclasses.dataclass(frozen=True)
class ScoreProfile:
    """One bit's (score, error) law through a channel: the error probability `gamma` of
    each outcome of a discretised channel and its mass under the mixture, sorted by
    increasing score (decreasing gamma).

    Attributes:
        gamma: error probability of the optimal decoder per outcome, in [0, 1/2].
        mass: the outcome's probability under M = (P + Q) / 2 (sums to 1).
        log_lr: log dQ/dP per outcome, in the same order (for the privacy profile).
    """

    gamma: np.ndarray
    mass: np.ndarray
    log_lr: np.ndarray

    @classmethod
    def from_log_lr(cls, log_lr, mass) -> ScoreProfile:
        """The profile of a channel given as log dQ/dP and mixture mass per outcome."""
        log_lr = np.asarray(log_lr, np.float64)
        mass = np.asarray(mass, np.float64)
        mass = mass / mass.sum()
        gamma = np.exp(-np.logaddexp(0.0, np.abs(log_lr)))  # 1 / (1 + e^|L|)
        order = np.argsort(-gamma, kind="stable")
        return cls(gamma[order], mass[order], log_lr[order])

    @property
    def optimal_error(self) -> float:
        """E_M[gamma]: the optimal decoder's error on one bit."""
        return float(np.dot(self.gamma, self.mass))

    def mean_error_above(self, w) -> np.ndarray:
        """gamma-bar(w): the mean error rate of the outcomes above quantile w (an outcome
        straddling w counts for its part above it)."""
        w = np.asarray(w, np.float64)
        upper = np.cumsum(self.mass)
        err = self.gamma * self.mass
        above = np.concatenate([np.cumsum(err[::-1])[::-1][1:], [0.0]])  # strictly above j
        j = np.clip(np.searchsorted(upper, w, side="right"), 0, self.gamma.size - 1)
        partial = self.gamma[j] * np.maximum(upper[j] - w, 0.0)
        return (partial + above[j]) / np.maximum(1.0 - w, np.finfo(np.float64).tiny)

    def delta_of_eps(self, eps: float) -> float:
        """The hockey-stick divergence H_{e^eps}(Q || P) of the discretised pair:
        sum over outcomes of (q - e^eps p)_+, with q = 2 m L / (1 + L), p = 2 m / (1 + L)."""
        lr = self.log_lr
        with np.errstate(over="ignore"):
            term = 2.0 * self.mass * (-np.expm1(eps - lr)) / (1.0 + np.exp(-lr))
        return float(np.sum(np.where(lr > eps, term, 0.0)))


def _grid(mu: float, points: int, span: float) -> tuple[np.ndarray, float]:
    half = span + abs(mu)
    edges = np.linspace(-half, half, points + 1)
    return 0.5 * (edges[:-1] + edges[1:]), float(edges[1] - edges[0])


def gaussian_channel(mu: float, points: int = _GRID_POINTS, span: float = _SPAN):
    """mu-GDP: P = N(0, 1), Q = N(mu, 1), log dQ/dP = mu x - mu^2 / 2."""
    x, dx = _grid(mu, points, span)
    mass = 0.5 * (scipy.stats.norm.pdf(x) + scipy.stats.norm.pdf(x - mu)) * dx
    return ScoreProfile.from_log_lr(mu * x - mu * mu / 2.0, mass)


def subsampled_gaussian_channel(
    mu: float, sampling_prob: float, points: int = _GRID_POINTS, span: float = _SPAN
):
    """The Poisson-subsampled Gaussian: P = N(0, 1), Q = (1 - q) N(0, 1) + q N(mu, 1)."""
    q = sampling_prob
    x, dx = _grid(mu, points, span)
    log_lr = np.logaddexp(np.log1p(-q), np.log(q) + mu * x - mu * mu / 2.0)
    p = scipy.stats.norm.pdf(x)
    mass = 0.5 * p * (1.0 + np.exp(np.minimum(log_lr, 700.0))) * dx
    return ScoreProfile.from_log_lr(log_lr, mass)


def order_tail_probability(profile: ScoreProfile, u: int, r: int, n: int) -> float:
    """P[T <= u]: at most u mistakes among the r most confident of n guesses, for bits
    through the channel of `profile` (Theorem 2 of arXiv:2509.08704; module docstring)."""
    if not 0 <= u <= r <= n:
        raise ValueError(f"need 0 <= u <= r <= n, got u={u}, r={r}, n={n}")
    if u >= r:
        return 1.0
    if r == n:
        return float(scipy.stats.binom.cdf(u, r, profile.optimal_error))
    w, log_density = _beta_nodes(n, r)
    rate = profile.mean_error_above(w)
    log_cdf = np.where(rate > 0.0, scipy.stats.binom.logcdf(u, r, np.maximum(rate, 1e-300)), 0.0)
    log_f = log_density + log_cdf
    top = float(np.max(log_f))
    if not math.isfinite(top):
        return 0.0
    return min(1.0, math.exp(top) * float(np.trapezoid(np.exp(log_f - top), w)))


def _beta_nodes(n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature nodes on the cut's law W ~ Beta(n - r, r + 1) (its mean +- 18 standard
    deviations, within (0, 1)) and the log-density there."""
    a, b = float(n - r), float(r + 1)
    mean, sd = a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
    w = np.linspace(max(1e-15, mean - _BETA_SDS * sd), min(1.0 - 1e-15, mean + _BETA_SDS * sd),
                    _QUADRATURE)  # fmt: skip
    return w, scipy.stats.beta.logpdf(w, a, b)


def expected_mistakes(profile: ScoreProfile, n: int, r: int) -> float:
    """E[T], the mistakes among the r most confident of n guesses through the channel:
    r E_W[gamma-bar(W)], W ~ Beta(n - r, r + 1) (n E_M[gamma] for r = n)."""
    if r == n:
        return n * profile.optimal_error
    w, log_density = _beta_nodes(n, r)
    return r * float(np.trapezoid(np.exp(log_density) * profile.mean_error_above(w), w))


def _channel(family: str, sampling_prob):
    if family == "gaussian":
        return gaussian_channel
    if family == "subsampled_gaussian":
        q = check_in_interval("sampling_prob", sampling_prob, 0.0, 1.0)
        return lambda mu: subsampled_gaussian_channel(mu, q)
    raise ValueError(f"family must be 'gaussian' or 'subsampled_gaussian', got {family!r}")


def channel_epsilon(family: str, mu: float, delta: float, sampling_prob=None) -> float:
    """The channel's eps at delta: closed form for mu-GDP (`"gaussian"`), the discretised
    pair's hockey-stick divergence H(Q || P), the order (Q, P) only, solved for eps for
    `"subsampled_gaussian"` (as the paper's `true eps`)."""
    if family == "gaussian":
        return float(gdp_epsilon(delta, mu))
    profile = subsampled_gaussian_channel(mu, sampling_prob)
    if profile.delta_of_eps(0.0) <= delta:
        return 0.0
    top = float(np.max(profile.log_lr))
    return float(scipy.optimize.brentq(lambda e: profile.delta_of_eps(e) - delta, 0.0, top,
                                       xtol=1e-12))  # fmt: skip


def one_run_order_epsilon(
    n: int,
    r: int,
    u: int,
    *,
    delta: float,
    level: float = 0.05,
    family: str = "gaussian",
    sampling_prob: float | None = None,
) -> tuple[float, float]:
    """`(eps_lower, mu_lower)` from u mistakes among the r most confident of n guesses.

    mu_lower is the largest channel parameter whose tail probability
    (`order_tail_probability`) is below `level` (bisection on `MU_RANGE`, 46 halvings: to 5e-13;
    0 when even the smallest is not rejected), and eps_lower the channel's eps at delta
    there.

    Args:
        n: canaries; r: guesses released (the r most confident); u: wrong guesses.
        delta: the delta eps is stated at, in (0, 1).
        level: 1 - confidence, in (0, 1).
        family: the null channels, `"gaussian"` (mu-GDP) or `"subsampled_gaussian"` (one
            step of the Poisson-subsampled Gaussian at `sampling_prob`).
        sampling_prob: q of `"subsampled_gaussian"`, in (0, 1].

    Returns:
        `(eps_lower, mu_lower)`.

    Raises:
        ValueError: counts outside 0 <= u <= r <= n, a bad level, delta or family.
    """
    n, r = check_int("n", n, minimum=1), check_int("r", r, minimum=1)
    u = check_int("u", u, minimum=0)  # no mistakes: the strongest outcome
    if not 0 <= u <= r <= n:
        raise ValueError(f"need 0 <= u <= r <= n, got u={u}, r={r}, n={n}")
    delta = check_delta("delta", delta)
    level = check_in_interval("level", level, 0.0, 1.0)
    channel = _channel(family, sampling_prob)

    def rejected(mu: float) -> bool:
        return order_tail_probability(channel(mu), u, r, n) < level

    lo, hi = MU_RANGE
    if not rejected(lo):
        return 0.0, 0.0
    if rejected(hi):
        raise ValueError(
            f"every channel up to mu = {hi} is rejected: the run is far from any channel of "
            f"the {family!r} family this search covers"
        )
    for _ in range(46):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return channel_epsilon(family, lo, delta, sampling_prob), lo


@dataclasses.dataclass(frozen=True)
class OrderAuditResult:
    """What `one_run_order_audit` found.

    Attributes:
        eps_lower: eps at `delta` of the channel at `mu_lower`: valid assuming the run's
            trade-off curve is in the channel family.
        mu_lower: the run is not f-DP for the family's curve at any parameter below it,
            with probability >= confidence (assumption-free).
        n, r, u: canaries, guesses released, wrong guesses.
        delta, confidence, family, sampling_prob: the settings.
    """

    eps_lower: float
    mu_lower: float
    n: int
    r: int
    u: int
    delta: float
    confidence: float
    family: str
    sampling_prob: float | None

    @property
    def guarantee(self) -> Guarantee:
        """What `eps_lower` certifies: an (eps, delta) lower bound assuming the run's
        curve is in the channel family; r fixed in advance (no choice to account for);
        `certified`: the family's curves rejected below `mu_lower`, assumption-free."""
        gaussian = self.family == "gaussian"
        return Guarantee(
            statement="eps_delta_lower_bound",
            assumption="gaussian_tradeoff" if gaussian else "subsampled_gaussian_tradeoff",
            held_out=True,
            multiplicity=f"the {self.r} most confident of {self.n} guesses, r fixed in advance",
            certified=(
                f"not mu-GDP for any mu < {self.mu_lower:.6g}"
                if gaussian
                else f"not f-DP for the q = {self.sampling_prob:g} subsampled Gaussian's curve "
                f"at any mu < {self.mu_lower:.6g}"
            ),
        )

    @property
    def assumption(self) -> str:
        """What `eps_lower` assumes, in words."""
        return ASSUMPTIONS[self.guarantee.assumption]


def one_run_order_audit(
    scores,
    included,
    *,
    delta: float,
    r: int | None = None,
    confidence: float = 0.95,
    family: str = "gaussian",
    sampling_prob: float | None = None,
) -> OrderAuditResult:
    """Audits one run from its canaries' scores and inclusion bits (arXiv:2509.08704).

    The auditor guesses "in" for a positive score and "out" for a negative one, on the r
    canaries of largest |score| (r fixed in advance: default all of them, the setting the
    paper found best), and counts its mistakes u.

    Args:
        scores: one score per canary; its sign is the guess, |score| the confidence.
        included: the canaries' inclusion bits (fair coins drawn before the run).
        delta: the delta eps is stated at.
        r: guesses released (default n).
        confidence: of the rejection.
        family, sampling_prob: the null channels (`one_run_order_epsilon`).

    Returns:
        An `OrderAuditResult`.
    """
    scores = np.asarray(scores, np.float64).ravel()
    included = np.asarray(included).astype(bool).ravel()
    if scores.shape != included.shape or scores.size == 0:
        raise ValueError(
            f"scores and included must be 1-D of one length >= 1, got {scores.shape} and "
            f"{included.shape}"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    n = scores.size
    r = n if r is None else check_int("r", r, minimum=1)
    if r > n:
        raise ValueError(f"r must be in [1, n] = [1, {n}], got {r}")
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    top = np.argsort(-np.abs(scores), kind="stable")[:r]
    u = int(np.sum((scores[top] > 0) != included[top]))
    eps, mu = one_run_order_epsilon(n, r, u, delta=delta, level=1.0 - confidence,
                                    family=family, sampling_prob=sampling_prob)  # fmt: skip
    return OrderAuditResult(
        eps_lower=eps, mu_lower=mu, n=n, r=r, u=u, delta=float(delta),
        confidence=confidence, family=family, sampling_prob=sampling_prob,
    )  # fmt: skip

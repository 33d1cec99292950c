r"""Bound trade-off curves that are never above the exact ones, for certifying violations.

A certified counterexample (`advsim.audits.certify_violation`) shows that a held-out test
$(\bar\alpha, \bar\beta)$ (Clopper-Pearson upper bounds on its type-I and type-II errors)
satisfies $\bar\beta < f(\bar\alpha)$ for a bound's trade-off curve $f$. That claim is only
as good as $f$: a curve computed a little too high would "certify" a violation that is not
there. Every curve here is therefore a guaranteed lower bound of the exact curve of the
bound; truncations and rounding err on the low side, and the argument is given with each.

**Which curve.** A bound that says "(eps, delta(eps))-DP for every eps >= 0" (the heuristic,
its maximum over horizons, composition) is, by Proposition 2.12 of Dong, Roth & Su
(arXiv:1905.02383) applied to both orders of the neighbouring pair, the claim that every
test of "canary out" against "canary in" has

$$\beta \ge f(\alpha) = \sup_{\varepsilon \ge 0} \max\{0,\ 1 - \delta(\varepsilon) -
   e^{\varepsilon}\alpha,\ e^{-\varepsilon}(1 - \delta(\varepsilon) - \alpha)\}.$$

So $\beta < f(\alpha)$ at a test means exactly: the release is not
$(\varepsilon', \delta(\varepsilon'))$-DP for some $\varepsilon' \ge 0$. That is the
statement a violation carries, and it is why the curves are built from the
bound's privacy profile $\delta(\varepsilon)$ (the maximum of both hockey-stick directions,
as the bound reports it) rather than from the one-orientation Neyman-Pearson curve
`mixture_tradeoff` (which lies above this one; tests check both facts).

**Lower, not higher.** Any finite set of $\varepsilon$ with any upper bounds
$\bar\delta(\varepsilon) \ge \delta(\varepsilon)$ gives lines below the exact $f$; so the
curve here uses a finite grid (`EPS_GRID`) and rounds every delta up:

- the Binomial atoms more than $e^{-60}$ below the mode's probability are dropped (a
  window of a few dozen atoms instead of all $n + 1$: the cost of the maximum over
  horizons is rows x atoms x epsilons) and the rest renormalised; the dropped mass $m$
  is computed exactly (scipy's Binomial tails) and rounded up, and since dropping and
  renormalising changes $H_{e^\varepsilon}(P\|Q)$ by at most $m$ and
  $H_{e^\varepsilon}(Q\|P)$ by at most $e^\varepsilon m$ (write $P = (1 - m)P' + mD$),
  $(1 + e^\varepsilon) m$ is added;
- at a learning-rate schedule (an `advsim.Accounting` with `step_sizes`), the law of
  $X = \sum_g \eta_g \mathrm{Binomial}(n_g, q)$ (`advsim.bounds._step_sizes`) is built
  from each group's Binomial atoms cut the same way (each group's exact dropped tail mass,
  rounded up as above) and, after each group's convolution, from the product's atoms
  more than $60$ below its largest log-probability dropped (their mass summed in float64,
  times $1 + 10^{-6}$, plus $10^{-300}$ per atom). Each cut writes the law before it as
  $(1 - m_i) P_{i} + m_i R_i$ with $P_i$ the renormalised law after it, so the law of $X$
  is $(1 - m) P' + m R$ with $m \le \sum_i m_i$, and $(1 + e^\varepsilon)\sum_i m_i$ is
  added, as for one Binomial;
- $\delta$ at a grid $\varepsilon$ is evaluated at the threshold $\tilde u$ solving
  $L(\tilde u) \approx \varepsilon$ (the batched solver of `advsim.bounds._mixture`);
  $|d\delta_+/d\varepsilon| \le e^{\varepsilon} Q(Y \ge u)$ and
  $|d\delta_-/d\varepsilon| \le Q(Y \le u)$, so the root's residual, widened by
  $10^{-12}(1 + \varepsilon)$, is added times twice that slope (a root with a residual
  above $10^{-9}(1 + \varepsilon)$, where that slope bound could fail, gets
  $\delta = 1$, i.e. no line); below the threshold
  $-40$ (where `_Batch.delta` stops), $\delta_-$ is read at $-40$, an upper bound because
  $\delta_-$ decreases in $\varepsilon$;
- every delta is multiplied by $1 + 10^{-6}$ (the solver's relative error is ~1e-14) plus
  $10^{-300}$, and the final curve is lowered by $10^{-12}$ (rounding of the envelope).

**The maximum over horizons** (Section 4.1 of arXiv:2410.06186): the bound "the release is
$f_t$-DP for the $t$ maximising $\varepsilon_t$" is compared through the convex minorant of
$\min_t f_t$. By conjugate duality that minorant is the curve of the profile
$\max_t \delta_t(\varepsilon)$ (the supremum of the lines that lie below every $f_t$), so
it is computed exactly as above with the rows' deltas maximised per $\varepsilon$: no
interpolation on an alpha grid, and the same one-sided rounding.

**GDP** ($G_\mu$, symmetric, Definition 2.7 of arXiv:1905.02383) is evaluated in closed form
and lowered by a relative $10^{-9}$ plus $10^{-15}$ (scipy's `ndtr`/`ndtri` are accurate to
a few ulps). **Composition** uses `composition_tradeoff_curve` (dp_accounting's pessimistic
PLD on a finite epsilon grid, which that module argues errs low; `tests/audits/
test_certify.py` checks it against the exact $G_{\sqrt{n}/\sigma}$ at $q = 1$), lowered by
$10^{-12}$.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.stats
from scipy.special import log_ndtr, ndtr, ndtri

from advsim._accounting import Accounting
from advsim._validation import (
    check_canary_steps,
    check_int,
    check_positive,
    check_probability,
)
from advsim.bounds._heuristic import _binomial_log_atoms, _heuristic_batch
from advsim.bounds._mixture import _U_MIN
from advsim.bounds._run import run_parameters
from advsim.bounds._step_sizes import schedule_batch
from advsim.bounds._tradeoff import TradeoffCurve, composition_tradeoff_curve

__all__ = [
    "CURVE_MARGIN",
    "EPS_GRID",
    "LowerCurve",
    "composition_curve_lower",
    "gdp_curve_lower",
    "heuristic_curve_lower",
    "heuristic_max_over_steps_curve_lower",
    "horizon_canary_counts",
]

#: The epsilons whose lines make up the profile curves (0 to 30: spacing 0.01 up to 4,
#: 0.05 beyond). A sparser grid only lowers the curve.
EPS_GRID = np.unique(
    np.round(np.concatenate([np.arange(0.0, 4.0, 0.01), np.arange(4.0, 30.0 + 1e-9, 0.05)]), 10)
)
_REL = 1e-6  # relative round-up of every delta
_ABS_DELTA = 1e-300  # absolute round-up of every delta
CURVE_MARGIN = 1e-12
"""The absolute lowering of every profile curve here (a code that evaluates a curve's
`profile` itself subtracts it too, to stay below the exact curve)."""
_DROPPED_PER_ATOM = 1e-300  # absolute round-up of the dropped mass, per atom
#: Atoms below the mode's log-probability minus this are dropped (their exact mass m is
#: added to every delta as (1 + e^eps) m; at eps <= 30 that is < 1e-13 (n + 1)).
_ATOM_LOG_TOL = 60.0
_EPS_RESIDUAL = 1e-12  # relative widening of the threshold solver's residual
_MAX_RESIDUAL = 1e-9  # a threshold root with a larger |L(u) - eps| / (1 + eps) is not used
_BLOCK_ELEMENTS = 1 << 21  # (row, eps) pairs x atoms per block of the delta computation


class LowerCurve:
    """A trade-off curve known to lie below a bound's exact curve: `beta = curve(alpha)`.

    Attributes:
        name: what the curve is (for messages).
        profile: the underlying `TradeoffCurve` (None for closed forms).
    """

    def __init__(self, fun, name: str, profile: TradeoffCurve | None = None):
        self._fun = fun
        self.name = name
        self.profile = profile

    def __call__(self, alpha) -> np.ndarray:
        alpha = np.asarray(alpha, dtype=np.float64)
        if not np.all((alpha >= 0) & (alpha <= 1)):
            raise ValueError("alpha must be in [0, 1], got an entry outside it (or NaN)")
        return np.clip(self._fun(alpha), 0.0, 1.0)


def _dropped_mass(n: int, q: float, kept: np.ndarray) -> float:
    """Binomial(n, q) mass outside the contiguous kept atoms, rounded up."""
    lo, hi = int(kept[0]), int(kept[-1])
    m = 0.0
    if lo > 0:
        m += float(scipy.stats.binom.cdf(lo - 1, n, q))
    if hi < n:
        m += float(scipy.stats.binom.sf(hi, n, q))
    return m * (1.0 + _REL) + (n + 1) * _DROPPED_PER_ATOM


def _pair_deltas(batch, rows: np.ndarray, e: np.ndarray) -> np.ndarray:
    """max(delta_+, delta_-) at eps `e[i]` for batch row `rows[i]`, rounded up for the
    threshold solver's residual (module docstring); NaN where the solver failed."""
    # delta_+ (P over Q): the threshold with L(u) = eps exists for eps >= 0 > log p0.
    u = batch.solve_loss(e, rows)
    logd, _, lval = batch.log_delta_plus(u, rows)
    d_plus = np.exp(logd)
    resid = np.abs(lval - e) + _EPS_RESIDUAL * (1.0 + e)
    with np.errstate(over="ignore"):
        slope = 2.0 * np.exp(np.maximum(lval, e) + log_ndtr(-u))
    d_plus = d_plus + slope * resid
    # The slope bound holds near the exact threshold only: an unconverged root (not seen
    # in practice) gets the trivial delta 1.
    d_plus = np.where(np.abs(lval - e) <= _MAX_RESIDUAL * (1.0 + e), d_plus, 1.0)

    # delta_- (Q over P): 0 when -eps <= log p0 (P >= p0 Q); otherwise at L(u) = -eps,
    # with the threshold clamped to _U_MIN (an upper bound: delta_- decreases in eps).
    d_minus = np.zeros(e.size)
    need = -e > batch.log_p0[rows]
    if np.any(need):
        idx = np.flatnonzero(need)
        r, en = rows[idx], e[idx]
        l_min, _ = batch.loss(np.full(idx.size, _U_MIN), r)
        um = np.full(idx.size, _U_MIN)
        solve = l_min < -en
        if np.any(solve):
            um[solve] = np.maximum(batch.solve_loss(-en[solve], r[solve]), _U_MIN)
        logm, _, lm = batch.log_delta_minus(um, r)
        dm = np.exp(logm)
        # Only where the root was solved is there a residual; at the clamp -L(u) <= eps.
        res_m = np.where(solve, np.abs(-lm - en), 0.0) + _EPS_RESIDUAL * (1.0 + en)
        dm = dm + 2.0 * ndtr(um) * res_m
        dm = np.where(res_m <= _MAX_RESIDUAL * (1.0 + en), dm, 1.0)
        d_minus[idx] = dm

    return np.maximum(d_plus, d_minus)


def _profile_deltas_upper(steps, counts, q: float, sigma: float, eps: np.ndarray) -> np.ndarray:
    """Upper bounds on delta_t(eps) = max(H(P_t||Q_t), H(Q_t||P_t)), rows t, columns eps.

    Row i: `steps[i]` noisy steps and a canary in `counts[i]` of them, i.e. the mixture of
    Theorem 1 of arXiv:2410.06186 with Binomial(counts[i], q) atoms at scale
    sqrt(steps[i]) sigma. See the module docstring for each round-up.
    """
    atoms = [_binomial_log_atoms(int(n), q, _ATOM_LOG_TOL) for n in counts]
    batch = _heuristic_batch(steps, atoms, sigma)
    return _batch_deltas_upper(
        batch, lambda i: _dropped_mass(int(counts[i]), q, atoms[i][0]), eps
    )


def _batch_deltas_upper(batch, dropped_mass, eps: np.ndarray) -> np.ndarray:
    """Upper bounds on max(H(P_i||Q), H(Q||P_i)) for the mixtures of `batch` (rows i),
    columns eps; `dropped_mass(i)` is an upper bound on the mass cut from row i's law
    (added as (1 + e^eps) m). See the module docstring for each round-up."""
    n_rows, n_eps = batch.size, eps.size
    out = np.zeros((n_rows, n_eps))
    live = np.flatnonzero(~batch.trivial)
    if live.size == 0:
        return out
    rows = np.repeat(live, n_eps)
    e = np.tile(eps, live.size)

    # (row, eps) pairs in blocks of bounded size (the solver's temporaries are pairs x
    # atoms doubles).
    block = max(1, _BLOCK_ELEMENTS // batch.z.shape[1])
    flat = np.empty(e.size)
    for start in range(0, e.size, block):
        sl = slice(start, start + block)
        flat[sl] = _pair_deltas(batch, rows[sl], e[sl])
    delta = flat.reshape(live.size, n_eps)
    delta = np.where(np.isfinite(delta), delta, 1.0)
    # Dropped Binomial atoms: (1 + e^eps) m, with m the exact tail mass outside the kept
    # window (scipy's incomplete beta), rounded up.
    dropped = np.array([dropped_mass(i) for i in live.tolist()])
    with np.errstate(over="ignore"):
        delta = delta + (1.0 + np.exp(eps))[None, :] * dropped[:, None]
    delta = delta * (1.0 + _REL) + _ABS_DELTA
    out[live] = np.minimum(delta, 1.0)
    return out


def _profile_curve(deltas: np.ndarray, name: str) -> LowerCurve:
    profile = TradeoffCurve.from_profile(EPS_GRID, np.clip(deltas, 0.0, 1.0))
    return LowerCurve(lambda a: profile(a) - CURVE_MARGIN, name, profile)


def _check_common(steps, sampling_prob, noise_multiplier, canary_steps):
    steps = check_int("steps", steps, minimum=1)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    n = steps if canary_steps is None else check_canary_steps(canary_steps, steps, count=True)
    return steps, q, sigma, n


@functools.lru_cache(maxsize=512)
def _heuristic_cached(steps: int, q: float, sigma: float, n: int) -> LowerCurve:
    deltas = _profile_deltas_upper([steps], [n], q, sigma, EPS_GRID)[0]
    return _profile_curve(deltas, f"heuristic(T={steps}, q={q:g}, n={n}, sigma={sigma:.6g})")


@functools.lru_cache(maxsize=128)
def _schedule_cached(accounting: Accounting) -> LowerCurve:
    batch, atoms = schedule_batch(accounting, _ATOM_LOG_TOL)
    q = accounting.sampling_prob
    tails = math.fsum(_dropped_mass(n, q, np.array([lo, hi])) for n, lo, hi in atoms.windows)
    pruned = atoms.pruned * (1.0 + _REL) + atoms.pruned_count * _DROPPED_PER_ATOM
    deltas = _batch_deltas_upper(batch, lambda i: tails + pruned, EPS_GRID)[0]
    acc = accounting
    return _profile_curve(
        deltas,
        f"heuristic(T={acc.steps}, q={q:g}, n={acc.num_canary_steps}, "
        f"sigma={acc.noise_multiplier:.6g}, {len(atoms.windows)} step sizes over the canary "
        "steps)",
    )


def heuristic_curve_lower(steps, sampling_prob=None, noise_multiplier=None, *, canary_steps=None):
    r"""A lower bound on the trade-off curve of the last-iterate heuristic (cached).

    The heuristic (Theorem 1 of arXiv:2410.06186) says the release is
    $(\varepsilon, \delta_{T,q,\sigma}(\varepsilon))$-DP for every $\varepsilon$, with
    $\delta$ the maximum of both directions for $P = \mathrm{Binomial}(n, q) +
    \mathcal{N}(0, T\sigma^2)$, $Q = \mathcal{N}(0, T\sigma^2)$; its curve is that profile's
    (Proposition 2.12 of arXiv:1905.02383). For an `advsim.Accounting` with a
    learning-rate schedule, the pair at that schedule, $P = \mathcal{N}(X, s^2)$,
    $Q = \mathcal{N}(0, s^2)$ with $X = \sum_t \eta_t b_t$ over the canary steps and
    $s = \sigma\sqrt{\sum_t \eta_t^2}$ (`heuristic_epsilon`). See the module docstring for
    why the returned curve is never above it.

    Args:
        steps: $T \ge 1$, or an `advsim.Accounting` (then nothing else; its schedule, if
            any, is used).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, the number of steps that can carry the canary,
            or those steps (distinct, in $[1, T]$; only their number is read) (default $T$).

    Raises:
        ValueError: invalid inputs; at a schedule, an X with too many atoms.

    Returns:
        A `LowerCurve`.

    Example:
        >>> f = heuristic_curve_lower(1, 1.0, 1.0)  # one Gaussian step: G_1
        >>> bool(f(0.1) <= gdp_curve_lower(1.0)(0.1) + 1e-9), round(float(f(0.1)), 3)
        (True, 0.611)
    """
    if isinstance(steps, Accounting):
        run = steps
        steps, q, sigma, n = run_parameters(
            run, sampling_prob, noise_multiplier, canary_steps, schedule="ignore"
        )
        if run.step_sizes is not None:
            return _schedule_cached(run)
        return _heuristic_cached(steps, q, sigma, n)
    steps, q, sigma, n = _check_common(steps, sampling_prob, noise_multiplier, canary_steps)
    return _heuristic_cached(steps, q, sigma, n)


def horizon_canary_counts(steps: int, canary_steps) -> np.ndarray:
    """n_t, t = 1..T: how many of the canary steps lie in the last t steps.

    Args:
        steps: T >= 1.
        canary_steps: the 1-indexed steps that can carry the canary.

    Returns:
        An int64 array of length T, nondecreasing.

    Example:
        >>> horizon_canary_counts(4, [2, 4]).tolist()
        [1, 1, 2, 2]
    """
    steps = check_int("steps", steps, minimum=1)
    cs = np.asarray(sorted(canary_steps), dtype=np.int64)
    t = np.arange(1, steps + 1)
    return np.array([np.count_nonzero(cs > steps - ti) for ti in t.tolist()], dtype=np.int64)


@functools.lru_cache(maxsize=512)
def _max_over_steps_cached(q: float, sigma: float, counts: tuple) -> LowerCurve:
    steps = [t for t, n in enumerate(counts, start=1) if n > 0]
    deltas = _profile_deltas_upper(steps, [counts[t - 1] for t in steps], q, sigma, EPS_GRID)
    return _profile_curve(
        np.max(deltas, axis=0),
        f"max-over-t heuristic(T={len(counts)}, q={q:g}, sigma={sigma:.6g})",
    )


def heuristic_max_over_steps_curve_lower(
    steps, sampling_prob, noise_multiplier, *, canary_steps=None
):
    r"""A lower bound on the convex minorant of $\min_{t \le T} f_t$ (cached).

    $f_t$ is the heuristic's curve for the last $t$ steps: noise of $t$ steps, the canary
    in the $n_t$ canary steps among them (`horizon_canary_counts`; $n_t = t$ for a canary
    in every step), as in Section 4.1 of arXiv:2410.06186 (`heuristic_epsilon_max_over_steps`
    is its epsilon). The minorant is the curve of the profile $\max_t \delta_t$ (conjugate
    duality; see the module docstring), rounded to stay below.

    Args:
        steps: $T \ge 1$.
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: the 1-indexed steps that can carry the canary, distinct, in $[1, T]$
            (default all $T$).

    Returns:
        A `LowerCurve`.

    Example:
        >>> f = heuristic_max_over_steps_curve_lower(3, 0.1, 1.0)
        >>> bool(np.all(f([0.01, 0.1]) <= heuristic_curve_lower(3, 0.1, 1.0)([0.01, 0.1])))
        True
    """
    steps = check_int("steps", steps, minimum=1)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    if canary_steps is None:
        canary_steps = range(1, steps + 1)
    cs = check_canary_steps(canary_steps, steps, count=False)
    counts = tuple(int(n) for n in horizon_canary_counts(steps, cs))
    return _max_over_steps_cached(q, sigma, counts)


def composition_curve_lower(
    steps, sampling_prob, noise_multiplier, *, canary_steps=None
) -> LowerCurve:
    """`advsim.bounds.composition_tradeoff_curve` lowered by 1e-12 (module docstring).

    Args:
        steps: $T \\ge 1$.
        sampling_prob: $q \\in (0, 1]$.
        noise_multiplier: $\\sigma > 0$.
        canary_steps: $n \\in [1, T]$, the number of steps that can carry the canary,
            or those steps (distinct, in $[1, T]$; only their number is read) (default $T$).

    Returns:
        A `LowerCurve` whose `profile` is the composition curve.
    """
    steps, q, sigma, n = _check_common(steps, sampling_prob, noise_multiplier, canary_steps)
    curve = composition_tradeoff_curve(steps, q, sigma, canary_steps=n)
    return LowerCurve(
        lambda a: curve(a) - CURVE_MARGIN,
        f"composition(T={steps}, q={q:g}, n={n}, sigma={sigma:.6g})",
        curve,
    )


def gdp_curve_lower(mu) -> LowerCurve:
    r"""$G_\mu(\alpha) = \Phi(\Phi^{-1}(1 - \alpha) - \mu)$ (Definition 2.7 of
    arXiv:1905.02383), lowered by a relative 1e-9 and an absolute 1e-15.

    Example:
        >>> round(float(gdp_curve_lower(1.0)(0.05)), 4)
        0.7405
    """
    mu = check_positive("mu", mu)

    def fun(alpha):
        with np.errstate(divide="ignore"):
            g = ndtr(-ndtri(alpha) - mu)
        g = np.where(alpha <= 0, 1.0, np.where(alpha >= 1, 0.0, g))
        return g * (1.0 - 1e-9) - 1e-15

    return LowerCurve(fun, f"G_mu(mu={mu:.6g})")

r"""The last-iterate heuristic: Theorem 1 of arXiv:2410.06186.

For linear losses, releasing only the last model of DP-SGD ($T$ steps, Poisson sampling
with probability $q$, noise multiplier $\sigma$) is exactly as private as distinguishing

$$P = \mathrm{Binomial}(n, q) + \mathcal{N}(0, T\sigma^2) \quad\text{from}\quad
Q = \mathcal{N}(0, T\sigma^2),$$

where $n = T$ when the canary can be sampled at every step (Equation 1 there); when it
can be sampled at only $n$ of the $T$ steps the sum still carries the noise of all $T$.
This is the Gaussian location mixture of `advsim.bounds._mixture` with support
$k = 0..n$, Binomial probabilities, and scale $\sqrt{T}\sigma$.

An `advsim.Accounting` with a learning-rate schedule (`step_sizes`) is evaluated at that
schedule by `advsim.bounds._step_sizes` (step t weighted by $\eta_t$); without one, the
code below runs as it always has.
"""

from __future__ import annotations

import math

import numpy as np
from tqdm.auto import tqdm

from advsim._accounting import Accounting
from advsim._validation import (
    check_delta,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)
from advsim.bounds._mixture import _Batch
from advsim.bounds._run import run_parameters

__all__ = [
    "binomial_mixture",
    "heuristic_delta",
    "heuristic_epsilon",
    "heuristic_epsilon_curve",
    "heuristic_epsilon_max_over_steps",
]

_LOG_TOL = 800.0
# Rows x atoms per block of the batched solver (bounds the temporaries to ~ tens of MB).
_BLOCK_ELEMENTS = 1 << 19


def _approx_log_pmf(k: int, n: int, log_q: float, log_1mq: float) -> float:
    # Only used to locate the window; math.lgamma is accurate to ~1e-16 * lgamma(n).
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * log_q
        + (n - k) * log_1mq
    )


def _binomial_log_atoms(n: int, q: float, log_tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Atoms k of Binomial(n, q) with log pmf >= max log pmf - log_tol, and their
    log-probabilities renormalised over the kept atoms."""
    if q == 1.0 or n == 0:
        return np.array([float(n)]), np.array([0.0])
    log_q, log_1mq = math.log(q), math.log1p(-q)
    mode = min(n, int(math.floor((n + 1) * q)))
    # The pmf is log-concave, so {k : log pmf(k) >= thr} is an interval around the mode;
    # find its ends by integer bisection on each side (a margin of one atom covers the
    # ~1e-9 error of the lgamma formula; the exact pmf decides below).
    thr = _approx_log_pmf(mode, n, log_q, log_1mq) - log_tol - 1e-6

    def ok(k):
        return _approx_log_pmf(k, n, log_q, log_1mq) >= thr

    lo, hi = 0, mode  # smallest ok k is in [lo, hi]
    if not ok(0):
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        lo = hi
    k_lo = max(0, lo - 1)
    lo, hi = mode, n  # largest ok k is in [lo, hi]
    if not ok(n):
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        hi = lo
    k_hi = min(n, hi + 1)
    k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
    # log pmf(k) - log pmf(mode) as a cumulative sum of the log ratios
    # log pmf(j) / pmf(j - 1) = log(n - j + 1) - log(j) + log(q / (1 - q)): no
    # cancellation between log-gammas of size n log n, and the constant is fixed by the
    # normalisation below.
    j = k[1:]
    ratios = np.log(n - j + 1.0) - np.log(j) + (log_q - log_1mq)
    logp = np.concatenate(([0.0], np.cumsum(ratios)))
    logp -= logp[mode - k_lo]
    keep = logp >= -log_tol
    k, logp = k[keep], logp[keep]
    # Normalise: the mode has relative log-probability 0, the rest sum to `rest`, so
    # log(total) = log1p(rest) (log(1 + rest) would round p0 = (1 - q)^n ~ 1 - 1e-299 to 1).
    others = np.arange(logp.size) != np.argmax(logp)
    rest = float(np.sum(np.exp(logp[others])))
    logp = logp - math.log1p(rest)
    return k, logp


def binomial_mixture(n, q, *, log_tol: float = _LOG_TOL) -> tuple[np.ndarray, np.ndarray]:
    r"""The atoms of $\mathrm{Binomial}(n, q)$ that can matter, for the mixture bounds.

    Keeps the atoms $k$ with $\log \Pr[k] \ge \max_j \log \Pr[j] - $ `log_tol`, found
    by bisection on the log-concave pmf and evaluated in log space, vectorised over $k$
    (a cumulative sum of the log ratios of consecutive probabilities, which avoids the
    cancellation of $\log\Gamma$ terms of size $n \log n$); the kept probabilities are
    normalised to sum to 1. The dropped mass is below $n e^{-\mathrm{log\_tol}}$ ($< 10^{-341}$ for
    the default and $n \le 10^6$), and dropping mass $m$ from $P$ moves every
    $H_{e^\varepsilon}$ of the pair by at most $e^\varepsilon m$: far below any
    representable delta.

    Args:
        n: the number of trials (canary steps), an integer >= 0.
        q: the success (sampling) probability, in (0, 1].
        log_tol: how far below the largest log-probability an atom may lie, > 0.

    Returns:
        `(support, probs)`: float arrays of the kept $k$ (increasing) and their
        probabilities (atoms whose probability underflows to 0 are left out).

    Example:
        >>> binomial_mixture(2, 0.5)
        (array([0., 1., 2.]), array([0.25, 0.5 , 0.25]))
    """
    n = check_int("n", n, minimum=0)
    q = check_probability("q", q)
    log_tol = check_positive("log_tol", log_tol)
    k, logp = _binomial_log_atoms(n, q, log_tol)
    p = np.exp(logp)
    keep = p > 0
    return k[keep], p[keep]


def _blocks(widths):
    """Consecutive slices of rows whose padded size (rows x widest row) stays within
    `_BLOCK_ELEMENTS` (a row alone may exceed it)."""
    start = 0
    while start < len(widths):
        stop, width = start + 1, widths[start]
        while stop < len(widths) and (stop + 1 - start) * max(width, widths[stop]) <= (
            _BLOCK_ELEMENTS
        ):
            stop, width = stop + 1, max(width, widths[stop])
        yield slice(start, stop)
        start = stop


def _heuristic_batch(steps, atoms, sigma: float) -> _Batch:
    """One row per step count: the atoms (k, log p) over sqrt(steps[i]) * sigma."""
    width = max(k.size for k, _ in atoms)
    z = np.zeros((len(atoms), width))
    logp = np.full((len(atoms), width), -np.inf)
    for i, ((k, lp), t) in enumerate(zip(atoms, steps, strict=True)):
        z[i, : k.size] = k / (math.sqrt(t) * sigma)
        logp[i, : k.size] = lp
    return _Batch(z, logp)


def _single(steps: int, n: int, q: float, sigma: float) -> _Batch:
    return _heuristic_batch([steps], [_binomial_log_atoms(n, q, _LOG_TOL)], sigma)


def _run(steps, sampling_prob, noise_multiplier, canary_steps):
    """The run of `heuristic_delta` / `heuristic_epsilon`, and its schedule if it has one.

    Args:
        steps, sampling_prob, noise_multiplier, canary_steps: as `heuristic_epsilon`
            takes them (`steps` a number or an `advsim.Accounting`).

    Returns:
        `((T, q, sigma, n), scheduled)`: the run's numbers (one learning rate), and
        `steps` itself when it is an `Accounting` with `step_sizes`, else None.
    """
    params = run_parameters(steps, sampling_prob, noise_multiplier, canary_steps, schedule="ignore")
    scheduled = steps if isinstance(steps, Accounting) and steps.step_sizes is not None else None
    return params, scheduled


def heuristic_delta(
    eps, steps, sampling_prob=None, noise_multiplier=None, *, canary_steps=None
) -> float:
    r"""delta(eps) of DP-SGD releasing only its last iterate, for linear losses.

    Theorem 1 of arXiv:2410.06186: $\delta_{T,q,\sigma}(\varepsilon) =
    \max\{H_{e^\varepsilon}(P, Q), H_{e^\varepsilon}(Q, P)\}$ with
    $P = \mathrm{Binomial}(n, q) + \mathcal{N}(0, T\sigma^2)$ and
    $Q = \mathcal{N}(0, T\sigma^2)$ (Equations 1-2), evaluated as in its Appendix A.1.

    Args:
        eps: $\varepsilon \ge 0$, finite.
        steps: $T \ge 1$, the number of noisy steps, or an `advsim.Accounting` (then
            nothing else; at its learning-rate schedule when it has one, as in
            `heuristic_epsilon`).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, the number of steps that can sample the canary,
            or those steps (distinct, in $[1, T]$; only their number is read) (default $T$).

    Returns:
        delta in [0, 1].

    Raises:
        ValueError: on invalid inputs (the message names the parameter and the range).

    Example:
        >>> round(heuristic_delta(1.0, 1, 1.0, 1.0), 6)  # q = 1, T = 1: Gaussian, mu = 1
        0.126937
    """
    eps = check_nonnegative("eps", eps)
    (steps, q, sigma, n), scheduled = _run(steps, sampling_prob, noise_multiplier, canary_steps)
    if scheduled is not None:
        from advsim.bounds._step_sizes import schedule_delta  # (built on this module)

        return schedule_delta(eps, scheduled)
    # Far out, delta is below the smallest double: the privacy loss is at most z u with
    # z = n / (sqrt(T) sigma) the largest atom in noise units, so delta_+(eps) <=
    # P(Y / s >= eps / z) <= Phi(z - eps / z), below Phi(-40) < 1e-349 once
    # eps >= z (z + 40); delta_- vanishes for eps >= -log p0 = -n log(1 - q) (P >= p0 Q),
    # and for q = 1 (one Gaussian) equals delta_+. Answering 0 there also keeps the solver
    # (and its overflows) away from eps ~ 1e308.
    z = n / (math.sqrt(steps) * sigma)
    far = z * (z + 40.0)
    if q < 1.0:
        far = max(far, -n * math.log1p(-q))
    if eps >= far:
        return 0.0
    return float(_single(steps, n, q, sigma).delta(eps)[0])


def heuristic_epsilon(
    delta, steps, sampling_prob=None, noise_multiplier=None, *, canary_steps=None
) -> float:
    r"""eps(delta) of DP-SGD releasing only its last iterate, for linear losses.

    Theorem 1 of arXiv:2410.06186, Equation 3: $\varepsilon_{T,q,\sigma}(\delta) =
    \min\{\varepsilon \ge 0 : \delta_{T,q,\sigma}(\varepsilon) \le \delta\}$, with
    $P = \mathrm{Binomial}(n, q) + \mathcal{N}(0, T\sigma^2)$ against
    $Q = \mathcal{N}(0, T\sigma^2)$. One threshold root find per direction (see
    `mixture_epsilon`). Agrees with a 32-digit mpmath evaluation of Appendix A to ~1e-14
    relative in the tests (asserted at 1e-9), for T up to 1e6 and eps up to ~150.

    **At a learning-rate schedule.** For an `advsim.Accounting` with `step_sizes`
    $\eta_1, \dots, \eta_T$ (what `mechanism.accounting()` records when `step_size(t)`
    varies), the last model of the linear loss is $m_0 + \sum_t \eta_t (b_t C +
    \sigma C \xi_t)$, so the pair is $P = \mathcal{N}(X, s^2)$ against
    $Q = \mathcal{N}(0, s^2)$ with $X = \sum_{t \in \text{canary steps}} \eta_t b_t$
    ($b_t \sim \mathrm{Bernoulli}(q)$) and $s = \sigma\sqrt{\sum_{t=1}^T \eta_t^2}$ (units
    of C). With the canary steps grouped by step size, $X = \sum_g \eta_g
    \mathrm{Binomial}(n_g, q)$, whose atoms are convolved in log space and evaluated by the
    same solver; when X would have more than $2^{20}$ atoms
    that closed form is refused with a ValueError naming the alternative (the exact engine
    on a linear construction at that schedule). With one step size the code above runs
    unchanged. The numeric form (`steps`, `sampling_prob`, ...) is always one learning
    rate: a schedule needs to know which steps carry the canary, so it comes in an
    `Accounting`.

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$, or an `advsim.Accounting` (then nothing else; its schedule, if
            any, is used).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        canary_steps: $n \in [1, T]$, or those steps (distinct, in $[1, T]$; only their number
            is read) (default $T$).

    Returns:
        eps >= 0.

    Raises:
        ValueError: on invalid inputs (the message names the parameter and the range); a
            schedule whose X has too many atoms (the message names the schedule).

    Example:
        >>> round(heuristic_epsilon(1e-6, 3, 0.1, 1.0), 3)  # Section 4.2, alpha = 0
        2.222
        >>> from advsim import Accounting
        >>> round(heuristic_epsilon(1e-6, Accounting(3, 0.1, 1.0, (1, 2, 3))), 3)
        2.222
        >>> # The threshold landscape's schedule (1, then 1/B; canary at step 1, unsampled):
        >>> # X = 1, s = sigma sqrt(1 + (T - 1) / B^2), mu-GDP with mu = 1 / s.
        >>> acc = Accounting(25, 1.0, 4.0, (1,), step_sizes=(1.0,) + (0.25,) * 24)
        >>> round(heuristic_epsilon(1e-5, acc), 4)
        0.5613
        >>> round(heuristic_epsilon(1e-5, 25, 1.0, 4.0, canary_steps=1), 4)  # one rate
        0.16
    """
    delta = check_delta("delta", delta)
    (steps, q, sigma, n), scheduled = _run(steps, sampling_prob, noise_multiplier, canary_steps)
    if scheduled is not None:
        from advsim.bounds._step_sizes import schedule_epsilon  # (built on this module)

        return schedule_epsilon(delta, scheduled)
    return float(_single(steps, n, q, sigma).epsilon(delta)[0])


def heuristic_epsilon_curve(delta, steps, sampling_prob, noise_multiplier) -> np.ndarray:
    r"""heuristic_epsilon(delta, t, q, sigma) for every t in `steps`, batched.

    The canary can be sampled at every one of the $t$ steps (Theorem 1 of
    arXiv:2410.06186 with $n = t$). All values are computed by the same batched threshold
    solver as `heuristic_epsilon` (equal up to rounding), many rows per numpy call.

    Args:
        delta: $\delta \in (0, 1)$.
        steps: an array of step counts $t \ge 1$, any shape.
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.

    Returns:
        An array of epsilons of the shape of `steps`.

    Example:
        >>> heuristic_epsilon_curve(1e-6, [1, 3], 0.1, 1.0).round(3)
        array([2.182, 2.222])
    """
    delta = check_delta("delta", delta)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    steps_arr = np.asarray(steps)
    flat = steps_arr.reshape(-1)
    ts = np.array([check_int("steps", t, minimum=1) for t in flat.tolist()], dtype=np.int64)
    out = np.empty(ts.size)
    if ts.size == 0:
        return out.reshape(steps_arr.shape)
    uniq, inverse = np.unique(ts, return_inverse=True)
    atoms = [_binomial_log_atoms(int(t), q, _LOG_TOL) for t in uniq]
    eps_uniq = np.empty(uniq.size)
    # Blocks of consecutive t (similar atom counts, so little padding).
    for block in _blocks([a[0].size for a in atoms]):
        eps_uniq[block] = _heuristic_batch(uniq[block], atoms[block], sigma).epsilon(delta)
    out[:] = eps_uniq[inverse]
    return out.reshape(steps_arr.shape)


# Relative share of delta that the atom cut of `heuristic_epsilon_max_over_steps` may drop
# (2^-52: the epsilons move by ~1e-16 relative, ~1e-13 where eps(delta) is steep).
_CUT_RHO = 2.0**-52
# A block of steps is skipped when its bound is below the best epsilon by this factor
# (covers the solver's ~1e-14 relative rounding).
_SKIP_MARGIN = 1e-12
# Evaluated steps per block split in the max over steps.
_SPLIT = 4


def _cut_log_tol(delta: float, n_max: int) -> float:
    r"""The atom cut tied to delta: at most $n + 1$ atoms are dropped, each below
    $e^{-L} \max_k p_k \le e^{-L}$, so the dropped mass is $\le (n + 1) e^{-L} =
    \rho\delta$ for $L = \log(n + 1) - \log(\rho\delta)$ (capped at `_LOG_TOL`)."""
    # (log rho + log delta: rho * delta underflows for a subnormal delta)
    return min(_LOG_TOL, math.log(n_max + 1.0) - math.log(_CUT_RHO) - math.log(delta))


def _upper_epsilons(delta: float, counts, steps, q: float, sigma: float) -> np.ndarray:
    r"""Upper bounds on eps(delta) of $\mathrm{Binomial}(c_i, q) + \mathcal{N}(0, s_i\sigma^2)$
    against $\mathcal{N}(0, s_i\sigma^2)$ for rows $(c_i, s_i)$, with atoms cut by
    `_cut_log_tol`.

    Cutting mass $m \le \rho\delta$ from $P = (1 - m) P' + m R$ ($P'$ the renormalised
    kept atoms) gives $H_\gamma(P, Q) \le H_\gamma(P', Q) + m$ and
    $H_\gamma(Q, P) \le H_{\gamma(1 - m)}(Q, P') \le \min(H_\gamma(Q, P') + \gamma m,\,
    H_{\gamma'}(Q, P'))$ with $\log\gamma' = \log\gamma + \log(1 - m)$. So, with
    $\varepsilon_2 = \varepsilon'(\delta - 2m)$ (solved at $\delta(1 - 2\rho)$):
    $\varepsilon(\delta) \le \varepsilon_2$ when $\varepsilon_2 \le \log 2$ (then
    $e^{\varepsilon_2} m \le 2m$; an epsilon of 0 stays 0), and
    $\varepsilon(\delta) \le \varepsilon_2 - \log(1 - \rho\delta)$ otherwise.
    """
    counts = np.asarray(counts, dtype=np.int64)
    steps = np.asarray(steps, dtype=np.int64)
    out = np.empty(counts.size)
    if counts.size == 0:
        return out
    log_tol = _cut_log_tol(delta, int(counts.max()))
    order = np.argsort(counts, kind="stable")
    atoms = [_binomial_log_atoms(int(counts[i]), q, log_tol) for i in order]
    solve_at = delta * (1.0 - 2.0 * _CUT_RHO)
    raise_by = -math.log1p(-_CUT_RHO * delta)
    for block in _blocks([a[0].size for a in atoms]):
        rows = order[block]
        eps = _heuristic_batch(steps[rows], atoms[block], sigma).epsilon(solve_at)
        out[rows] = np.where(eps <= math.log(2.0), eps, eps + raise_by)
    return out


def _coarse_horizons(big_t: int) -> np.ndarray:
    """The first horizons `heuristic_epsilon_max_over_steps` evaluates: every t up to 64,
    then 64 geometric and 64 evenly spaced points of [1, T]."""
    return np.unique(
        np.concatenate(
            [
                np.arange(1, min(big_t, 64) + 1),
                np.geomspace(1, big_t, 64).round(),
                np.linspace(1, big_t, 64).round(),
            ]
        ).astype(np.int64)
    )


def _split_gaps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The horizons that split each gap [a_i, b_i]: `_SPLIT` evenly spaced points, or all
    of a small gap."""
    new = [
        np.arange(lo, hi + 1)
        if hi - lo + 1 <= _SPLIT
        else np.linspace(lo, hi, _SPLIT + 2)[1:-1].round().astype(np.int64)
        for lo, hi in zip(a.tolist(), b.tolist(), strict=True)
    ]
    return np.unique(np.concatenate(new))


def heuristic_epsilon_max_over_steps(
    delta, steps, sampling_prob, noise_multiplier, *, progress: bool | None = None
) -> float:
    r"""$\max_{t \le T} \varepsilon_{t,q,\sigma}(\delta)$: the heuristic over all horizons.

    Section 4.1 of arXiv:2410.06186: a regularizer that zeroes the model (or any
    mechanism that can forget early steps) is as private as the last $t$ steps alone, so
    the heuristic is benchmarked by its maximum over $t \le T$ (Theorem 1 for each $t$,
    canary in all $t$ steps).

    **Which t are evaluated.** Every $t$ is either evaluated or skipped by a proved bound.
    Write $\delta_{X,s}$ for the privacy profile of $\mathcal{N}(X, s^2)$ against
    $\mathcal{N}(0, s^2)$ ($X \ge 0$). Its likelihood ratio increases in $y$, so both
    hockey-stick divergences are suprema over half-lines, where $P_X(Y \ge u)$ grows
    with $X$ in the usual stochastic order: $\delta_{X,s} \le \delta_{X',s}$ for
    $X \le_{st} X'$. Adding independent noise to both outputs is post-processing:
    $\delta_{X,s} \le \delta_{X,s'}$ for $s' \le s$. Since
    $\mathrm{Binomial}(t, q) \le_{st} \mathrm{Binomial}(b, q)$ for $t \le b$, every $t$ in
    a block $[a, b]$ has
    $$\varepsilon_{t,q,\sigma}(\delta) \le E(a, b) := \varepsilon \text{ of }
    \mathrm{Binomial}(b, q) + \mathcal{N}(0, a\sigma^2) \text{ against }
    \mathcal{N}(0, a\sigma^2).$$
    The search evaluates a coarse grid of $t$ (and $t = T$), bounds each gap by $E$,
    drops the gaps whose bound is below the best epsilon found (by a margin of 1e-12
    relative, for rounding), splits the others (a few evaluated $t$ each), and ends when
    no gap is left. The result is the largest evaluated epsilon, so it equals the
    maximum over every $t$ (to the solver's ~1e-14), at a cost that grows with the
    number of $t$ near the maximum, not with $T$.

    **Atom cut.** Atoms of $\mathrm{Binomial}(n, q)$ with $\log p_k < \max_j \log p_j - L$
    are dropped, $L = \log(n + 1) - \log(\rho\delta)$ with $\rho = 2^{-52}$ (at most 800),
    so the dropped mass is $m \le \rho\delta$; each epsilon is solved at $\delta - 2m$
    (and, above $\log 2$, raised by $-\log(1 - m)$), which makes it an upper bound on
    the uncut value (see `_upper_epsilons`): the cut never makes the result optimistic,
    and moves it by ~1e-16 relative (up to ~1e-13 where eps(delta) is steep, e.g.
    eps ~ 1e-5 at delta = 1e-300).

    Args:
        delta: $\delta \in (0, 1)$.
        steps: $T \ge 1$ (one learning rate at every step: an `advsim.Accounting` with a
            schedule is refused with a ValueError naming it).
        sampling_prob: $q \in (0, 1]$.
        noise_multiplier: $\sigma > 0$.
        progress: a tqdm bar (stderr) over the search's rounds; default: when
            $T > 2 \cdot 10^5$ (about 5 s or more).

    Returns:
        The largest epsilon over $t = 1..T$ (at least `heuristic_epsilon` at $T$, exactly).

    Example:
        >>> round(heuristic_epsilon_max_over_steps(1e-6, 3, 0.1, 1.0), 3)
        2.222
    """
    delta = check_delta("delta", delta)
    if isinstance(steps, Accounting):
        steps.refuse_schedule(
            "heuristic_epsilon_max_over_steps", "its horizons are the last t steps of a run "
            "at one learning rate (Section 4.1 of arXiv:2410.06186); use "
            "heuristic_epsilon(delta, accounting) for the heuristic at this schedule"
        )  # fmt: skip
    big_t = check_int("steps", steps, minimum=1)
    q = check_probability("sampling_prob", sampling_prob)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    if progress is None:
        progress = big_t > 200_000

    def exact(ts):
        return _upper_epsilons(delta, ts, ts, q, sigma)

    grid = _coarse_horizons(big_t)
    bar = tqdm(desc=f"max over t <= {big_t}", unit="t", disable=not progress, leave=False)
    with bar:
        evaluated = dict(zip(grid.tolist(), exact(grid).tolist(), strict=True))
        bar.update(grid.size)
        while True:
            best = max(evaluated.values())
            ts = np.array(sorted(evaluated))
            gaps = np.flatnonzero(np.diff(ts) > 1)
            if gaps.size == 0:
                break
            a, b = ts[gaps] + 1, ts[gaps + 1] - 1
            bound = _upper_epsilons(delta, b, a, q, sigma)
            open_ = bound > best * (1.0 - _SKIP_MARGIN)
            if not np.any(open_):
                break
            new = _split_gaps(a[open_], b[open_])
            evaluated.update(zip(new.tolist(), exact(new).tolist(), strict=True))
            bar.update(new.size)
            bar.set_postfix(best=f"{best:.6g}", open=int(np.count_nonzero(open_)))
    # t = T once more through the scalar path, so that the result is >= heuristic_epsilon
    # exactly.
    last = heuristic_epsilon(delta, big_t, q, sigma)
    return float(max(max(evaluated.values()), last))

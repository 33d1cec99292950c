r"""One step of the exact law in log space: masses down to any size float64 can hold.

The grid propagation (`advsim.exact._propagate`) carries the masses themselves and
convolves by FFT, so every mass is known only to about $10^{-16}$ of the largest: the
out-world masses that set a large $\varepsilon(\delta)$ (about $\delta e^{-\varepsilon}$)
are lost in the rounding. Here the same chain, on the same kind of grid and with the same
discretisation (the drift's linear-interpolation deposit, split cells at breakpoints, the
node-sampled Gaussian $h\,\varphi_{s_t}(kh)$, the projection's atoms), is carried as
log-masses $\ell_i = \log p_i$, so every mass is known to about $10^{-16}$ of *itself*:

1. **Drift.** Each part's log-mass plus the log of its component's probability and of its
   interpolation weight is added into the two nodes around $y$ by a segment log-sum-exp
   (a segment maximum, then the sum of the exponentials below it).
2. **Noise.** The convolution with the sampled Gaussian is a direct windowed
   log-sum-exp over $2K + 1$ taps, $K = \lceil \sqrt{2 L}\, s_t / h\rceil$: the taps left
   out are below $e^{-L}$ of the kernel's peak, and their whole mass (at most
   $2\bar\Phi(K h / s_t)$ of the mass present) is counted as lost, as is every mass that
   lands beyond the grid (through the kernel's tail sums, in log space), so nothing is
   dropped unseen.
3. **Ends.** As in the grid propagation: a projected run's spill beyond an end becomes the
   atom there (the end nodes keep half), an unprojected run's is lost.

Lost masses are accumulated as log-masses too. Pure and jittable; `advance_log` runs a
chunk of steps of one mechanism (a `lax.scan`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.stats.norm as jnorm
from jaxtyping import Array, Float

from advsim.exact._divergence import _grid_hockey_stick, bisect_epsilon
from advsim.exact._propagate import _moves

__all__ = ["LogPlan", "LogState", "advance_log", "log_grid_delta", "log_grid_epsilon"]

_NEG = -jnp.inf
_LOG2 = math.log(2.0)
#: Bisection of `log_grid_epsilon` on [0, eps_max]: this many halvings.
BISECTIONS = 64
#: The largest exponent formed in `log_grid_delta` (a mass times e^eps above e^CAP is
#: capped: its sign is all that counts, and its square must not overflow).
CAP = 300.0


class LogPlan(NamedTuple):
    """The static shape of a log-space propagation (hashable, for jit)."""

    nodes: int  # N, the grid's nodes
    reach: int  # R: cells beyond an end a drift may deposit (farther: lost, or clipped
    # to R for a projected run, R > K, so that the noise keeps it beyond the end)
    kernel: int  # the most taps each side any grid of the plan uses (each step's own
    # half-width K, traced, is at most this)
    split: bool  # whether cells holding a breakpoint are split
    projected: bool  # whether the run projects onto [lo, lo + (N - 1) h]
    chunk: int  # steps per `advance_log` call
    every_step: bool  # record eps(delta) of every step


class LogState(NamedTuple):
    """Both worlds' log-masses and the log of the mass each has lost so far."""

    log_in: Float[Array, " n"]
    log_out: Float[Array, " n"]
    lost_in: Float[Array, ""]
    lost_out: Float[Array, ""]


def _lse_rows(values, axis):
    return jax.scipy.special.logsumexp(values, axis=axis)


def _deposit(y, lw, world, lo, h, plan: LogPlan):
    """Log-space linear-interpolation deposit of log-masses `lw` at positions `y` into a
    (2, N + 2R) array (node j at column j + R). Returns (array, log-mass sent beyond the
    reach per world: lost for an unprojected run, clipped to the reach for a projected
    one)."""
    n, r = plan.nodes, plan.reach
    width = n + 2 * r
    u = (y - lo) / h
    far = (u < -r) | (u > n - 1 + r)
    far_lw = jnp.where(far, lw, _NEG)
    far_mass = jnp.stack([_lse_rows(jnp.where(world == w, far_lw, _NEG), 0) for w in (0, 1)])
    if not plan.projected:
        lw = jnp.where(far, _NEG, lw)
    u = jnp.clip(u, -r, n - 1 + r)
    j = jnp.floor(u)
    f = u - j
    j = j.astype(jnp.int32) + r
    idx = jnp.concatenate([world * width + j, world * width + jnp.minimum(j + 1, width - 1)])
    vals = jnp.concatenate([lw + jnp.log1p(-f), lw + jnp.log(f)])
    segments = 2 * width
    top = jax.ops.segment_max(vals, idx, num_segments=segments)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    total = jax.ops.segment_sum(jnp.exp(vals - top[idx]), idx, num_segments=segments)
    out = jnp.where(total > 0, top + jnp.log(jnp.where(total > 0, total, 1.0)), _NEG)
    far_mass = jnp.where(plan.projected, _NEG, far_mass)
    return out.reshape(2, width), far_mass


def _log_kernel(ratio, taps, kernel: int, dtype):
    """log(h phi_s(k h)) for k = -kernel..kernel (ratio = s / h), -inf beyond `taps`."""
    k = jnp.arange(-kernel, kernel + 1, dtype=dtype)
    lk = -0.5 * (k / ratio) ** 2 - jnp.log(ratio) - 0.5 * math.log(2.0 * math.pi)
    return jnp.where(jnp.abs(k) <= taps, lk, _NEG)


def _diffuse(ext, ratio, taps, plan: LogPlan):
    """Both worlds (rows of `ext`, columns -R..N-1+R) convolved with the sampled Gaussian
    on the nodes 0..N-1, by a windowed log-sum-exp (a running maximum, then the sum of the
    exponentials below it); and the log-masses the noise sends below node 0 and beyond node
    N-1 (by the kernel's tail sums)."""
    n, r, k = plan.nodes, plan.reach, plan.kernel
    dtype = ext.dtype
    lk = _log_kernel(ratio, taps, k, dtype)
    padded = jnp.concatenate([jnp.full((2, k), _NEG, dtype), ext, jnp.full((2, k), _NEG, dtype)], 1)

    def window(t):
        # tap t (k = t - K): node j receives ext at node j - k, padded column j + R + 2K - t
        return jax.lax.dynamic_slice_in_dim(padded, r + 2 * k - t, n, axis=1) + lk[t]

    first, last = k - taps, k + taps + 1  # only the taps in use
    top = jax.lax.fori_loop(
        first, last, lambda t, m: jnp.maximum(m, window(t)), jnp.full((2, n), _NEG, dtype)
    )
    safe = jnp.where(jnp.isfinite(top), top, 0.0)
    total = jax.lax.fori_loop(
        first, last, lambda t, s: s + jnp.exp(window(t) - safe), jnp.zeros((2, n), dtype)
    )
    core = jnp.where(total > 0, safe + jnp.log(jnp.where(total > 0, total, 1.0)), _NEG)
    # Tail sums of the kernel: above[t] = log sum_{k' >= t - K} kernel, below[t] = log
    # sum_{k' <= t - K} kernel (t = 0..2K), -inf beyond the taps.
    above = jnp.concatenate([jax.lax.cumlogsumexp(lk, reverse=True), jnp.full((1,), _NEG)])
    below = jax.lax.cumlogsumexp(lk)
    node = jnp.arange(-r, n + r)
    # From node i, mass beyond N - 1 needs k >= N - i; below 0 needs k <= -1 - i.
    need_up = jnp.clip(n - node + k, 0, 2 * k + 1)
    up = jnp.where(n - node < -k, above[0], above[need_up])
    need_down = -1 - node + k
    down = jnp.where(need_down > 2 * k, below[2 * k], below[jnp.clip(need_down, 0, 2 * k)])
    down = jnp.where(need_down < 0, _NEG, down)
    right = _lse_rows(ext + up[None, :], 1)
    left = _lse_rows(ext + down[None, :], 1)
    return core, left, right


def _fold(core, left, right, plan: LogPlan):
    """The grid's log-masses: a projected run's spill becomes the atom at each end (which
    also takes half of the end node, as the grid propagation's fold), an unprojected run's
    is returned as lost."""
    if plan.projected:
        n = plan.nodes
        atoms = jnp.stack(
            [jnp.logaddexp(left, core[:, 0] - _LOG2), jnp.logaddexp(right, core[:, n - 1] - _LOG2)],
            axis=1,
        )
        core = core.at[:, 0].add(-_LOG2).at[:, n - 1].add(-_LOG2)
        return jnp.concatenate([core, atoms], axis=1), jnp.full((2,), _NEG, core.dtype)
    return core, jnp.logaddexp(left, right)


def log_grid_delta(log_p, log_q, epsilon, *, atoms: int = 0, xp=jnp):
    r"""$\delta(\varepsilon)$ of two laws given as log-masses on a grid's nodes (then
    `atoms` point masses): `advsim.exact.grid_delta`'s quadrature (the sign-change cells
    by linear interpolation) of $p$ against $e^\varepsilon q$, with $e^\varepsilon q$
    formed as $\exp(\log q + \varepsilon)$ so that neither underflows where it matters
    (and capped at $e^{300}$, far above the other term, where it would overflow)."""
    a, b = xp.exp(log_p), xp.exp(log_q)
    # Capped at e^CAP (>> 1, so that no sign changes): the quadrature squares these.
    a_up = xp.exp(xp.minimum(log_p + epsilon, CAP))
    b_up = xp.exp(xp.minimum(log_q + epsilon, CAP))
    return xp.maximum(
        _grid_hockey_stick(a, b_up, 1.0, atoms, xp), _grid_hockey_stick(b, a_up, 1.0, atoms, xp)
    )


def log_grid_epsilon(log_p, log_q, delta, eps_max, *, atoms: int = 0, xp=jnp):
    r"""$\varepsilon(\delta)$ of two laws given as log-masses (`log_grid_delta`), by
    bisection on $[0, \varepsilon_{\max}]$ (64 halvings); `+inf` if
    $\delta(\varepsilon_{\max}) > \delta$. With `xp=numpy` on the host, else jittable."""

    def excess(eps):
        return log_grid_delta(log_p, log_q, eps, atoms=atoms, xp=xp) > delta

    if xp is jnp:
        return bisect_epsilon(excess, eps_max, log_p.dtype)
    if not excess(0.0):
        return 0.0
    if excess(float(eps_max)):
        return math.inf
    lo, hi = 0.0, float(eps_max)
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) else (lo, mid)
    return hi


def _step(mech, plan: LogPlan, lo, h, m0, counts, log_probs, log_dropped, delta, eps_max,
          depth, state: LogState, t):  # fmt: skip
    dtype = jnp.float64
    pos, frac, drifts, present, eta, ratio = _moves(mech, plan, lo, h, m0, counts, t)
    log_weights = jnp.concatenate(
        [log_probs + jnp.log1p(-present), log_probs + jnp.log(present), log_probs]
    )
    world = jnp.repeat(jnp.arange(2, dtype=jnp.int32), jnp.array([2, 1]) * log_probs.shape[0],
                       total_repeat_length=3 * log_probs.shape[0])  # fmt: skip
    masses = jnp.stack([state.log_in, state.log_out])  # (2, N')
    log_frac = jnp.log(jnp.maximum(frac, 0.0))  # (a split's 1 - frac may round below 0)
    part = (masses[:, :, None] + log_frac[None]).reshape(2, -1)  # (2, NS)
    lw = part[world].T + log_weights[None, :]  # (NS, 3C)
    moved = pos.reshape(-1)[:, None] - eta * drifts
    ok = jnp.isfinite(moved)
    bad_x = jnp.min(jnp.where(~ok & jnp.isfinite(lw), pos.reshape(-1)[:, None], jnp.inf))
    worlds = jnp.broadcast_to(world[None, :], moved.shape)
    ext, far_mass = _deposit(
        jnp.where(ok, moved, lo).reshape(-1), jnp.where(ok, lw, _NEG).reshape(-1),
        worlds.reshape(-1), lo, h, plan,
    )  # fmt: skip
    # The taps down to e^-depth of the kernel's peak: K = ceil(sqrt(2 depth) s / h).
    taps = jnp.minimum(jnp.ceil(jnp.sqrt(2.0 * depth) * ratio).astype(jnp.int32) + 1,
                       plan.kernel)  # fmt: skip
    core, left, right = _diffuse(ext, ratio, taps, plan)
    new, spill = _fold(core, left, right, plan)
    totals = _lse_rows(masses, 1)
    # Every step: the taps left out (at most 2 Phi-bar(K / ratio) of the mass present)
    # and the count windows' tails (`log_dropped`), both counted as lost.
    cut = _LOG2 + jnorm.logsf(taps / ratio)
    lost = _lse_rows(jnp.stack([far_mass, spill, totals + log_dropped, totals + cut]), 0)
    new_state = LogState(new[0], new[1], jnp.logaddexp(state.lost_in, lost[0]),
                         jnp.logaddexp(state.lost_out, lost[1]))  # fmt: skip
    atoms = 2 if plan.projected else 0
    eps = (log_grid_epsilon(new[0], new[1], delta, eps_max, atoms=atoms)
           if plan.every_step else jnp.nan)  # fmt: skip
    return new_state, (jnp.where(jnp.isfinite(bad_x), bad_x, jnp.nan), jnp.asarray(eps, dtype))


@eqx.filter_jit
def advance_log(
    mech,
    plan: LogPlan,
    lo,
    h,
    m0,
    counts,
    log_probs,
    log_dropped,
    delta,
    eps_max,
    depth,
    state: LogState,
    t0,
    steps,
):
    """`plan.chunk` steps of one mechanism from step `t0` (steps past `steps` change
    nothing). `counts` (C, G) and `log_probs` (C,) are the count mixture, `log_dropped` the
    log of the mass its windows leave out per step, `depth` the L of the kernel's taps
    (down to e^-L of its peak). Returns the state and per step (the first position whose move
    is not finite or nan, eps(delta) or nan)."""

    def body(st, t):
        new, rec = _step(mech, plan, lo, h, m0, counts, log_probs, log_dropped, delta,
                         eps_max, depth, st, t)  # fmt: skip
        active = t <= steps
        new = jax.tree.map(lambda a, b: jnp.where(active, a, b), new, st)
        rec = jax.tree.map(lambda a: jnp.where(active, a, jnp.nan), rec)
        return new, rec

    ts = t0 + jnp.arange(plan.chunk, dtype=jnp.int32)
    return jax.lax.scan(body, state, ts)

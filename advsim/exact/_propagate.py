r"""One step of the exact law of a scalar DP-SGD run, on a grid, in JAX (float64).

The model $m_t$ of an `advsim.AbstractScalarLaw` mechanism is a Markov chain:

$$m_t = \Pi\Big(m_{t-1} - \eta_t\big(\textstyle\sum_j n_{j,t}\,\bar g_j(m_{t-1}, t)
    + b_t\,\bar g_c(m_{t-1}, t) + r'(m_{t-1}) + \sigma C \xi_t\big)\Big),$$

$\bar g = \mathrm{clip}_C(g)$ (in 1-D, clamping to $[-C, C]$), $n_{j,t}$ the sampled count of
group $j$ ($\mathrm{Binomial}(\mathrm{count}_j, q)$, or $\mathrm{count}_j$ for a fixed
batch), $b_t$ the canary's presence, $\xi_t \sim \mathcal{N}(0, 1)$, $\Pi$ the projection
onto an interval (or the identity). Its law is carried as masses $p_i$ on the nodes
$x_i = \mathrm{lo} + i h$, $i < N$ (a lattice: the masses are a quadrature of the density).
One step:

1. **Drift.** Every node's mass moves to $y = x - \eta_t D_c(x)$ (at step 1 the whole mass
   moves from $m_0$ itself) for each component $c$ of the mixture over the counts (a window
   of each binomial; the mass outside the window is counted as lost) and the canary's
   presence (probability $q$ or 1 at its steps, in the in-world only), with weight $\Pr(c)$.
   A node whose cell $[x - h/2, x + h/2]$ holds a declared breakpoint of a field
   (`field_breakpoints`) is split into its two sides, each moved from its centroid with its
   own side's field. The moved mass is shared between the two nodes around $y$ in proportion
   to the distance (linear interpolation: it keeps the mass and the mean, and adds at most
   $h^2/4$ of variance).
2. **Noise.** The masses are convolved with the Gaussian $\mathcal{N}(0, s_t^2)$,
   $s_t = \eta_t\sigma C$, sampled at the nodes ($h\,\varphi_{s_t}(kh)$): a circular FFT
   convolution over $M$ points ($K$ = 12 standard deviations in cells; $M \ge N + 4K$ for
   a projected run, whose spill must stay on its side, $M \ge N + K$ otherwise) whose
   kernel is known in closed form in frequency (Poisson summation:
   $\hat k(\nu) = \sum_{l} e^{-2\pi^2 (s_t/h)^2 (\nu + l)^2}$, $l \in \{-1, 0, 1\}$).
3. **Ends.** The mass that lands beyond the grid is, for a projected run, added to the
   end node (the projection's atom); otherwise it is counted as lost, never dropped
   unseen. Mass moved by the drift beyond the padding is likewise an atom or lost.

Everything is pure and jittable; `advance` runs a chunk of steps (a `lax.scan`), vmapped
over a batch of mechanisms that share one static `GridPlan` and differ in traced values
(their own grid origin and spacing, their parameters).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from advsim._dpsgd import clip_gradients
from advsim._mechanism import AbstractMechanism
from advsim.exact._divergence import grid_epsilon

__all__ = ["GridPlan", "GridState", "advance"]


class GridPlan(NamedTuple):
    """The static shape of a propagation (shared by a batch; hashable for jit)."""

    nodes: int  # N, the grid's nodes
    fft_size: int  # M: N + 4 kernel half-widths (projected), else N + 1 (+ 8 cells)
    reach: int  # cells beyond an end a drift may deposit in the padding; farther is far
    # (projected: (M - N) // 4 >= the kernel's half-width; else 2, the rest being lost)
    windows: tuple[int, ...]  # the count window's width of each data group
    split: bool  # whether cells holding a breakpoint are split
    projected: bool  # whether the run projects onto [lo, lo + (N - 1) h]
    chunk: int  # steps per `advance` call (T itself is a traced argument of `advance`)
    every_step: bool  # record eps(delta) of every step


class GridState(NamedTuple):
    """The two worlds' masses and the mass each has lost so far."""

    mass_in: Float[Array, " n"]
    mass_out: Float[Array, " n"]
    lost_in: Float[Array, ""]
    lost_out: Float[Array, ""]


class StepRecord(NamedTuple):
    """What one step reports (arrays over the chunk's steps)."""

    lost_in: Float[Array, ""]  # mass lost in this step
    lost_out: Float[Array, ""]
    bad_x: Float[Array, ""]  # a node whose move is not finite (nan if none)
    far_y: Float[Array, ""]  # how far from the grid's centre the drift sent mass beyond
    # the padding (nan if nowhere)
    epsilon: Float[Array, ""]  # eps(delta) after this step (nan unless every_step)
    first: Int[Array, ""]  # the first and last node holding more than the threshold
    last: Int[Array, ""]


def _particles(mech, x, h, plan: GridPlan):
    """Positions (N', S) and mass fractions (N', S) of each node's parts (N' = N, or N + 2
    with the projection's two atoms, which are never split)."""
    pos, frac = _node_parts(mech, x, h, plan)
    if plan.projected:
        ends = jnp.stack([x[0], x[-1]])
        extra = jnp.zeros((2, pos.shape[1] - 1), x.dtype)
        pos = jnp.concatenate([pos, jnp.concatenate([ends[:, None], extra + ends[:, None]], 1)])
        frac = jnp.concatenate([frac, jnp.concatenate([jnp.ones((2, 1), x.dtype), extra], 1)])
    return pos, frac


def _node_parts(mech, x, h, plan: GridPlan):
    if not plan.split:
        return x[:, None], jnp.ones_like(x)[:, None]
    bps = jnp.asarray(mech.field_breakpoints(), x.dtype)
    left, right = x - h / 2, x + h / 2
    inside = (bps[None, :] > left[:, None]) & (bps[None, :] < right[:, None])
    cut = jnp.min(jnp.where(inside, bps[None, :], right[:, None]), axis=1)
    frac = (cut - left) / h
    pos = jnp.stack([(left + cut) / 2, (cut + right) / 2], axis=1)
    return pos, jnp.stack([frac, 1.0 - frac], axis=1)


def _fields(mech: AbstractMechanism, pos, t):
    """Clipped canary and data fields and the regularizer's gradient at every position."""
    c = jnp.asarray(mech.clip_norm, pos.dtype)
    m = pos[:, None]
    canary = jax.vmap(lambda mi: mech.canary_gradient(mi, t))(m)
    data = jax.vmap(lambda mi: mech.data_gradients(mi, t))(m)
    reg = jax.vmap(lambda mi: mech.regularizer_gradient(mi, t))(m)
    canary = clip_gradients(canary.astype(pos.dtype), c)[:, 0]
    data = clip_gradients(data.astype(pos.dtype), c)[..., 0]
    return canary, data, reg.astype(pos.dtype)[:, 0]


def _deposit(y, w, world, lo, h, plan: GridPlan):
    """Linear-interpolation deposit of masses `w` at positions `y` into world `world`'s row
    of a (2, M) circular array (negative cells wrap to the row's end). Returns (array, far
    mass of each world, the farthest position reached beyond the padding or nan)."""
    n, size, reach = plan.nodes, plan.fft_size, plan.reach
    u = (y - lo) / h
    far = (u < -reach) | (u > n - 1 + reach)
    far_w = jnp.where(far, jnp.maximum(w, 0.0), 0.0)
    far_dist = jnp.max(jnp.where(far & (w > 0), jnp.abs(y - (lo + h * (n - 1) / 2)), -1.0))
    far_y = jnp.where(far_dist >= 0, far_dist, jnp.nan)
    if not plan.projected:
        w = w - far_w  # lost, counted by the caller
    u = jnp.clip(u, -reach, n - 1 + reach)
    j = jnp.floor(u)
    f = u - j
    j = j.astype(jnp.int32)
    base = world * size
    out = jnp.zeros((2 * size,), y.dtype)
    out = out.at[base + j % size].add(w * (1.0 - f)).at[base + (j + 1) % size].add(w * f)
    far_mass = jnp.zeros((2,), y.dtype).at[world].add(far_w)
    return out.reshape(2, size), (far_mass * 0.0 if plan.projected else far_mass), far_y


def _fold(ext, plan: GridPlan):
    """The grid's masses from the (2, M) array. Unprojected: the spill beyond the ends is
    returned as lost. Projected onto [a, b]: the masses are the N nodes followed by the two
    atoms at a and b; an atom takes the spill beyond its end and the outer half of the end
    node's cell, so the end nodes keep the trapezoid weight h/2 of the density."""
    n, size = plan.nodes, plan.fft_size
    half = n + (size - n) // 2
    right, left = jnp.sum(ext[:, n:half], axis=1), jnp.sum(ext[:, half:], axis=1)
    core = jnp.maximum(ext[:, :n], 0.0)
    if plan.projected:
        atoms = jnp.stack([left + 0.5 * core[:, 0], right + 0.5 * core[:, n - 1]], axis=1)
        core = core.at[:, 0].multiply(0.5).at[:, n - 1].multiply(0.5)
        return jnp.concatenate([core, jnp.maximum(atoms, 0.0)], axis=1), jnp.zeros((2,))
    return core, jnp.maximum(left + right, 0.0)


def _diffuse(ext, ratio, plan: GridPlan):
    """Both worlds (rows of `ext`) convolved with the node-sampled N(0, (ratio h)^2), by one
    complex FFT (in + i out: the kernel is real and even, so its transform is real and
    keeps the two apart), with the kernel's transform in closed form."""
    size = plan.fft_size
    nu = jnp.abs(jnp.fft.fftfreq(size).astype(ext.dtype))
    c = 2.0 * math.pi**2 * ratio**2
    khat = jnp.exp(-c * nu**2) + jnp.exp(-c * (1.0 - nu) ** 2) + jnp.exp(-c * (1.0 + nu) ** 2)
    both = jnp.fft.ifft(jnp.fft.fft(ext[0] + 1j * ext[1]) * khat)
    return jnp.stack([jnp.real(both), jnp.imag(both)])


def _support(mass, threshold, plan: GridPlan):
    """First and last node where either world holds more than `threshold` (N, -1 if none)."""
    above = jnp.any(mass[:, : plan.nodes] > threshold, axis=0)
    idx = jnp.arange(plan.nodes)
    return jnp.min(jnp.where(above, idx, plan.nodes)), jnp.max(jnp.where(above, idx, -1))


def _moves(mech, plan: GridPlan, lo, h, m0, counts, t):
    """Where step `t` moves each grid cell's particles, in both worlds.

    Shared by this propagation and the log-space one (`advsim.exact._logspace`): the
    particles of every node, their drifts for each count combination, the canary's
    presence probability, the step size and the noise's standard deviation in cells.

    Args:
        mech: the mechanism (its fields, schedule and step size).
        plan: the static plan (`GridPlan` or `LogPlan`).
        lo: the grid's first node.
        h: the grid's spacing.
        m0: the initial model (step 1 moves this point mass itself).
        counts: `(C, groups)`, the data groups' counts of each combination.
        t: the step, from 1.

    Returns:
        `(pos, frac, drifts, present, eta, ratio)`: the particles `(N', S)` and their
        fractions, the drifts `(NS, 3C)` (the in-world's components with the canary
        absent, then present, then the out-world's), the probability that the canary is
        in the batch, the step size, and `eta sigma C / h`.
    """
    dtype = jnp.float64
    x = lo + h * jnp.arange(plan.nodes, dtype=dtype)
    pos, frac = _particles(mech, x, h, plan)
    # Step 1 moves the point mass at m_0 itself (wherever it was deposited), so a field
    # that jumps or turns within a cell of m_0 acts on the first move as it does in a run.
    first = t == 1
    pos = jnp.where(first, jnp.asarray(m0, dtype), pos)
    frac = jnp.where(first, (jnp.arange(pos.shape[1]) == 0).astype(dtype)[None, :], frac)
    canary, data, reg = _fields(mech, pos.reshape(-1), t)
    base = reg[:, None] + jnp.sum(data[:, None, :] * counts[None, :, :], axis=-1)  # (NS, C)
    eta = jnp.asarray(mech.step_size(t), dtype)
    ratio = eta * jnp.asarray(mech.noise_multiplier, dtype) * jnp.asarray(mech.clip_norm, dtype)
    ratio = ratio / h
    schedule = mech.canary_schedule
    present = jnp.asarray(schedule.mask(t), dtype)
    if schedule.sampled and mech.batching == "poisson":
        present = present * jnp.asarray(mech.sampling_prob, dtype)
    # Both worlds' moves in one array: the in-world's components (canary absent, present),
    # then the out-world's (canary absent).
    drifts = jnp.concatenate([base, base + canary[:, None], base], axis=1)  # (NS, 3C)
    return pos, frac, drifts, present, eta, ratio


def _step(mech, plan: GridPlan, lo, h, m0, counts, probs, delta, threshold, state: GridState, t):
    dtype = jnp.float64
    pos, frac, drifts, present, eta, ratio = _moves(mech, plan, lo, h, m0, counts, t)
    dropped = jnp.maximum(1.0 - jnp.sum(probs), 0.0)
    weights = jnp.concatenate([probs * (1.0 - present), probs * present, probs])
    world = jnp.repeat(jnp.arange(2, dtype=jnp.int32), jnp.array([2, 1]) * probs.shape[0],
                       total_repeat_length=3 * probs.shape[0])  # fmt: skip
    masses = jnp.stack([state.mass_in, state.mass_out])  # (2, N')
    part = (masses[:, :, None] * frac[None]).reshape(2, -1)  # (2, NS)
    w = part[world].T * weights[None, :]  # (NS, 3C)
    moved = pos.reshape(-1)[:, None] - eta * drifts
    ok = jnp.isfinite(moved)
    bad_x = jnp.min(jnp.where(~ok & (w > 0), pos.reshape(-1)[:, None], jnp.inf))
    worlds = jnp.broadcast_to(world[None, :], moved.shape)
    ext, far_mass, far_y = _deposit(
        jnp.where(ok, moved, lo).reshape(-1), jnp.where(ok, w, 0.0).reshape(-1),
        worlds.reshape(-1), lo, h, plan,
    )  # fmt: skip
    new, spill = _fold(_diffuse(ext, ratio, plan), plan)
    lost = far_mass + spill + dropped * jnp.sum(masses, axis=1)
    first, last = _support(new, threshold, plan)
    new_state = GridState(new[0], new[1], state.lost_in + lost[0], state.lost_out + lost[1])
    atoms = 2 if plan.projected else 0
    eps = grid_epsilon(new[0], new[1], delta, atoms=atoms) if plan.every_step else jnp.nan
    record = StepRecord(
        lost[0], lost[1], jnp.where(jnp.isfinite(bad_x), bad_x, jnp.nan), far_y,
        jnp.asarray(eps, dtype), first.astype(jnp.int32), last.astype(jnp.int32),
    )  # fmt: skip
    return new_state, record


def _idle(plan: GridPlan) -> StepRecord:
    """The record of a step past T (nothing lost, nothing found)."""
    zero, nan = jnp.zeros((), jnp.float64), jnp.full((), jnp.nan, jnp.float64)
    return StepRecord(zero, zero, nan, nan, nan, jnp.int32(plan.nodes), jnp.int32(-1))


def _advance_one(
    mech, plan: GridPlan, lo, h, m0, counts, probs, delta, threshold, state: GridState, t0,
    steps,
):
    """`plan.chunk` steps from `t0` of one mechanism; a step past `steps` (T, traced) is
    computed and discarded (masked: a `lax.cond` here would skip it, but makes every step
    about twice as slow on the CPU, measured)."""

    def body(st, t):
        new, rec = _step(mech, plan, lo, h, m0, counts, probs, delta, threshold, st, t)
        active = t <= steps
        new = jax.tree.map(lambda a, b: jnp.where(active, a, b).astype(b.dtype), new, st)
        rec = jax.tree.map(lambda a, b: jnp.where(active, a, b), rec, _idle(plan))
        return new, rec

    ts = t0 + jnp.arange(plan.chunk, dtype=jnp.int32)
    return jax.lax.scan(body, state, ts)


@eqx.filter_jit
def advance(
    mechs, plan: GridPlan, lo, h, m0, counts, probs, delta, threshold, state: GridState, t0,
    steps,
):
    """`plan.chunk` steps from step `t0` (1-indexed; steps past `steps`, T as a traced
    int32, change nothing) for a batch of mechanisms (leading axis of every array leaf, of
    `lo`, `h`, `m0` (the initial model, which step 1 moves), `state`, and of the count
    mixture: `counts` (batch, C, G), `probs` (batch, C), from
    `advsim.exact._plan.count_components`). Each step also records the first and last
    node holding more than `threshold`. Nothing here reads `mechs.steps`: a batch whose
    methods do not read T either (`advsim.exact._programs.any_steps`) runs every T in one
    compiled program."""
    arrays, static = eqx.partition(mechs, eqx.is_array)

    def one(arr, lo_, h_, m0_, counts_, probs_, st):
        mech = eqx.combine(arr, static)
        return _advance_one(
            mech, plan, lo_, h_, m0_, counts_, probs_, delta, threshold, st, t0, steps
        )

    return jax.vmap(one)(arrays, lo, h, m0, counts, probs, state)

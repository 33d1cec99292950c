"""Host-side planning of an exact propagation: capability checks, grid, windows, memory.

Everything is decided before any propagation runs, from the mechanism's concrete values,
so a construction the engine cannot carry is refused at once with the reason, and a grid
that would not fit is refused with the size it would need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.fft
import scipy.stats

from advsim._mechanism import (
    AbstractMechanism,
    AbstractPerExampleData,
    AbstractProjected,
    AbstractScalarLaw,
)
from advsim._validation import check_in_interval, check_int
from advsim.exact._programs import any_steps
from advsim.exact._propagate import GridPlan, _fields

__all__ = [
    "NOISE_SDS",
    "Layout",
    "check_scalar_law",
    "count_components",
    "grid_reach",
    "grid_work",
    "layout",
]

#: The grid and the padding reach this many noise standard deviations beyond the drift.
NOISE_SDS = 12.0
#: Each binomial count window leaves out at most this much mass on each side.
WINDOW_TAIL = 1e-20
#: At most this many components (count combinations) per step.
MAX_COMPONENTS = 4096
#: Points at which the drift is evaluated to bound the reach of the chain.
REACH_POINTS = 257


def check_scalar_law(mech) -> None:
    """Raises a TypeError or ValueError naming what `mech` lacks for the exact engine."""
    name = type(mech).__name__
    if not isinstance(mech, AbstractMechanism):
        raise TypeError(f"the exact engine needs an advsim mechanism, got {name}")
    if not isinstance(mech, AbstractScalarLaw):
        raise TypeError(
            f"{name} lacks the capability advsim.AbstractScalarLaw (a scalar model whose "
            "gradients are functions of the model value and the step): the exact engine "
            "propagates only such one-dimensional chains"
        )
    if isinstance(mech, AbstractPerExampleData):
        raise TypeError(
            f"{name} has per-example data (AbstractPerExampleData): the exact engine needs "
            "the data as groups of identical examples (data_gradients with data_counts)"
        )
    with jax.enable_x64(True):
        model = eqx.filter_eval_shape(mech.init_model)
        if model.shape != (1,):
            raise ValueError(
                f"{name}.init_model() has shape {model.shape}: the exact engine needs a "
                "scalar model, shape (1,)"
            )
        m = jax.ShapeDtypeStruct((1,), jnp.float64)
        t = jax.ShapeDtypeStruct((), jnp.int32)
        counts = eqx.filter_eval_shape(mech.data_counts)
        shapes = {
            "canary_gradient": (eqx.filter_eval_shape(mech.canary_gradient, m, t).shape, (1,)),
            "regularizer_gradient": (
                eqx.filter_eval_shape(mech.regularizer_gradient, m, t).shape,
                (1,),
            ),
            "data_gradients": (
                eqx.filter_eval_shape(mech.data_gradients, m, t).shape,
                (counts.shape[0], 1),
            ),
        }
    for method, (found, expected) in shapes.items():
        if found != expected:
            raise ValueError(
                f"{name}.{method} returns shape {found}, expected {expected} for a scalar model"
            )


@dataclass(frozen=True)
class Layout:
    """One mechanism's grid at one resolution: origin, spacing, nodes, windows."""

    lo: float
    spacing: float
    nodes: int
    widest: float  # the largest step noise sd, eta_t sigma C
    k_lo: tuple[int, ...]
    windows: tuple[int, ...]
    split: bool
    projected: bool

    @property
    def hi(self) -> float:
        return self.lo + (self.nodes - 1) * self.spacing


#: Step sizes are evaluated in blocks of this many steps (one program for every T).
STEP_BLOCK = 256


@eqx.filter_jit
def _step_size_block(mech, first):
    """eta_t for t = first .. first + STEP_BLOCK - 1 (`first` traced)."""
    ts = first + jnp.arange(STEP_BLOCK, dtype=jnp.int32)
    return jax.vmap(mech.step_size)(ts)


def _step_sizes(mech):
    """eta_t for t = 1..T, in blocks (one compilation per mechanism structure, for every T
    where the step size does not read T: `any_steps`)."""
    traced = any_steps(mech)
    blocks = [np.asarray(_step_size_block(traced, jnp.int32(first)), np.float64).reshape(-1)
              for first in range(1, mech.steps + 1, STEP_BLOCK)]  # fmt: skip
    return np.concatenate(blocks)[: mech.steps]


@eqx.filter_jit
def _hulls(mech, counts, m0, steps, sigma, clip, sds):
    """The noise-free hulls of the first `steps` steps (traced) and how far the noise
    reaches beyond them: [a_t, b_t] = the extremes of the drift's images of REACH_POINTS
    points of [a_{t-1}, b_{t-1}] (every count corner, canary or not); returns (the least
    a_t - sds s_t, the largest b_t + sds s_t, with s_t the sd of the noise accumulated by
    step t (sigma C per unit step; `sds` is `NOISE_SDS` for the grid propagation), the
    first step where a move is not finite (0 if none), and the point there)."""
    dtype = jnp.float64

    def body(t, carry):
        a, b, var, low, high, bad_t, bad_x = carry
        xs = jnp.linspace(a, b, REACH_POINTS)
        canary, data, reg = _fields(mech, xs, t)
        base = reg[:, None] + jnp.sum(data[:, None, :] * counts[None], axis=-1)
        with_canary = jnp.where(mech.canary_schedule.mask(t), canary, 0.0)
        drifts = jnp.concatenate([base, base + with_canary[:, None]], axis=1)
        eta = jnp.asarray(mech.step_size(t), dtype)
        ys = xs[:, None] - eta * drifts
        finite = jnp.all(jnp.isfinite(ys), axis=1)
        first_bad = jnp.where(jnp.all(finite), jnp.nan, xs[jnp.argmin(finite)])
        new_bad = (bad_t == 0) & jnp.isfinite(first_bad)
        bad_t = jnp.where(new_bad, t, bad_t)
        bad_x = jnp.where(new_bad, first_bad, bad_x)
        ys = jnp.where(finite[:, None], ys, xs[:, None])
        a, b = jnp.min(ys), jnp.max(ys)
        var = var + (eta * sigma * clip) ** 2
        radius = sds * jnp.sqrt(var)
        return (a, b, var, jnp.minimum(low, a - radius), jnp.maximum(high, b + radius),
                bad_t, bad_x)  # fmt: skip

    m0 = jnp.asarray(m0, dtype)
    start = (m0, m0, jnp.zeros((), dtype), m0, m0, jnp.int32(0), jnp.full((), jnp.nan, dtype))
    out = jax.lax.fori_loop(1, steps + 1, body, start)
    return out[3], out[4], out[5], out[6]


def _host_values(mech):
    """Concrete per-step values: step sizes, noise sds, canary presence probability."""
    steps = mech.steps
    etas = np.asarray(_step_sizes(mech), np.float64).reshape(steps)
    sigma, c = float(mech.noise_multiplier), float(mech.clip_norm)
    noise = etas * sigma * c
    if not np.all(np.isfinite(noise) & (noise > 0)):
        t = int(np.argmin(np.isfinite(noise) & (noise > 0))) + 1
        raise ValueError(
            f"{type(mech).__name__}: step {t} has noise sd eta_t sigma C = {noise[t - 1]!r}; "
            "the exact engine needs every step's noise to be finite and > 0"
        )
    return etas, noise


def _windows(mech, tail: float = WINDOW_TAIL) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Each group's count window: (first count, width), leaving out at most `tail` of
    each binomial on each side."""
    counts = np.asarray(mech.data_counts()).reshape(-1)
    if counts.size == 0:
        return (), ()
    if mech.batching != "poisson":
        return tuple(int(n) for n in counts), (1,) * counts.size
    q = float(mech.sampling_prob)
    lows, widths = [], []
    for n in counts.tolist():
        n = int(n)
        if n == 0 or q >= 1.0:
            lows.append(n if q >= 1.0 else 0)
            widths.append(1)
            continue
        lo = max(0, int(scipy.stats.binom.ppf(tail, n, q)) - 1)
        hi = min(n, int(scipy.stats.binom.isf(tail, n, q)) + 1)
        lows.append(lo)
        widths.append(hi - lo + 1)
    if math.prod(widths) > MAX_COMPONENTS:
        raise ValueError(
            f"{type(mech).__name__}: the data groups' count windows ({widths} counts, for "
            f"data_counts {counts.tolist()} at sampling_prob {q:g}) give {math.prod(widths):,} "
            f"components per step, above {MAX_COMPONENTS:,}; use fewer or smaller Poisson "
            "groups"
        )
    return tuple(lows), tuple(widths)


def count_components(mech, k_lo, windows) -> tuple[np.ndarray, np.ndarray]:
    """Every combination of the data groups' sampled counts in their windows (group j: counts
    `k_lo[j]` to `k_lo[j] + windows[j] - 1`) with its probability, on the host (scipy's
    binomial pmf, float64): `(counts (C, G), probs (C,))`, C = prod(windows). The probs
    sum to 1 minus the tails the windows leave out; a count beyond a group's size (a window
    widened to a batch's) has probability 0. Fixed batching: the counts themselves, C = 1."""
    n = np.asarray(mech.data_counts(), np.float64).reshape(-1)
    if not windows:
        return np.zeros((1, 0)), np.ones(1)
    if mech.batching != "poisson":
        return n[None, :], np.ones(1)
    q = float(mech.sampling_prob)
    ks, pmfs = [], []
    for j, width in enumerate(windows):
        k = float(k_lo[j]) + np.arange(width, dtype=np.float64)
        valid = (k >= 0) & (k <= n[j])
        pmf = scipy.stats.binom.pmf(np.clip(k, 0.0, n[j]), n[j], q)
        ks.append(k)
        pmfs.append(np.where(valid, pmf, 0.0))
    combos = np.stack([g.reshape(-1) for g in np.meshgrid(*ks, indexing="ij")], axis=1)
    probs = math.prod(np.meshgrid(*pmfs, indexing="ij")).reshape(-1)
    return combos, probs


def _interval(mech, m0: float) -> tuple[float, float]:
    """The projection's interval [a, b], read off `project` far out on both sides."""
    with jax.enable_x64(True):
        far = jnp.asarray([[m0 - 1e12], [m0 + 1e12]], jnp.float64)
        a, b = (float(v[0]) for v in jax.vmap(mech.project)(far))
    if not (math.isfinite(a) and math.isfinite(b) and a <= m0 <= b and a < b):
        raise ValueError(
            f"{type(mech).__name__}.project must map the line onto a bounded interval "
            f"containing m_0 = {m0:g}; it maps -1e12, +1e12 to {a!r}, {b!r}"
        )
    return a, b


def _reach(mech, m0, k_lo, windows, sds: float = NOISE_SDS):
    """A first interval for the grid: the hull of the drift's images of the previous hull
    (every count and canary component; noise-free), widened by 12 standard deviations of
    the noise accumulated as if the drift map had slope 1 (a constant field). A contracting
    field stays well inside; an expanding one loses mass over the ends, which the coarsest
    propagation counts and answers by widening (`last_iterate_epsilon`)."""
    counts, _ = count_components(mech, k_lo, windows)
    # The drift is linear in the counts: its extremes are at the windows' corners.
    if counts.shape[1] > 0:
        low = counts.min(axis=0)
        high = counts.max(axis=0)
        corners = np.array(np.meshgrid(*[[a, b] for a, b in zip(low, high, strict=True)]))
        counts = corners.reshape(counts.shape[1], -1).T
    counts = jnp.asarray(counts, jnp.float64)

    low, high, bad_t, bad_x = _hulls(
        any_steps(mech), counts, jnp.float64(m0), jnp.int32(mech.steps),
        jnp.float64(float(mech.noise_multiplier)), jnp.float64(float(mech.clip_norm)),
        jnp.float64(sds),
    )  # fmt: skip
    if int(bad_t) > 0:
        raise FloatingPointError(
            f"{type(mech).__name__}: at step {int(bad_t)} a field or the step size is not "
            f"finite at m = {float(bad_x):.6g}"
        )
    return float(low), float(high)


def layout(
    mech,
    cells_per_sd: float,
    support: tuple[float, float] | None = None,
    *,
    sds: float = NOISE_SDS,
    tail: float = WINDOW_TAIL,
) -> Layout:
    """The grid of one mechanism: spacing = the smallest step noise sd / `cells_per_sd`;
    the automatic interval reaches `sds` accumulated noise sds beyond the drift's hull, the
    count windows leave out at most `tail` of each binomial on each side."""
    check_scalar_law(mech)
    with jax.enable_x64(True):
        m0 = float(np.asarray(mech.init_model(), np.float64).reshape(()))
        etas, noise = _host_values(mech)
        k_lo, windows = _windows(mech, tail)
        bps = np.asarray(mech.field_breakpoints(), np.float64).reshape(-1)
        if not np.all(np.isfinite(bps)):
            raise ValueError(f"{type(mech).__name__}.field_breakpoints() must be finite")
        # Finer than the noise of every step and than every step's clipped move eta_t C
        # (a large sigma must not make the grid coarser than the drift it resolves).
        spacing = float(min(noise.min(), (etas * float(mech.clip_norm)).min())) / cells_per_sd
        projected = isinstance(mech, AbstractProjected)
        if projected:
            a, b = _interval(mech, m0)
            nodes = int(math.ceil((b - a) / spacing)) + 1
            spacing = (b - a) / (nodes - 1)
            lo = a
        else:
            if support is None:
                lo, hi = _reach(mech, m0, k_lo, windows, sds)
            else:
                lo, hi = (float(v) for v in support)
                if not (math.isfinite(lo) and math.isfinite(hi) and lo <= m0 <= hi):
                    raise ValueError(
                        f"support must be finite (lo, hi) with lo <= m_0 = {m0:g} <= hi, got "
                        f"{support!r}"
                    )
            # m_0 on a node, a few cells of margin.
            below = int(math.ceil((m0 - lo) / spacing)) + 2
            above = int(math.ceil((hi - m0) / spacing)) + 2
            lo = m0 - below * spacing
            nodes = below + above + 1
    return Layout(lo, spacing, nodes, float(noise.max()), k_lo, windows, bps.size > 0, projected)


def grid_work(mech, cells_per_sd: float, support: tuple[float, float] | None = None) -> int:
    """The work of a propagation on the coarsest grid, before any is done: its nodes x the
    steps x the count components of a step (each finer grid costs about twice the one
    before, after the support is trimmed). Raises what `layout` raises."""
    lay = layout(mech, cells_per_sd, support)
    return lay.nodes * int(mech.steps) * math.prod(lay.windows)


def ladder(n: int) -> int:
    """The least size >= n of the form 2^k x {1, 1.25, 1.5, 1.75} (k >= 3): sizes that FFT
    fast and recur, so grids of nearby sizes share one compiled propagation."""
    k = 3
    while True:
        for m in (4, 5, 6, 7):
            size = m * 2 ** (k - 2)
            if size >= n:
                return size
        k += 1


def combine(
    layouts: list[Layout],
    chunk: int,
    every_step: bool,
    *,
    nodes: int = 0,
    fft_size: int = 0,
    mechs=None,
):
    """One static plan for a batch of layouts, and each one's `(lo, spacing, counts,
    probs)`: the grids widened to the batch's node count (at least `nodes`), rounded up to
    a `ladder` size (a projected grid gets finer; another one longer on both sides, m_0
    still on a node), the FFT at least `fft_size`, and each mechanism's count mixture
    (`count_components`, `mechs` in the layouts' order) over the batch's windows.

    The FFT's padding beyond the nodes: a projected run keeps every spill on its side (two
    reaches of at least the kernel's half-width each side, the spill becoming the atom of
    that end); an unprojected one only keeps the wrap-around of the noise off the grid (a
    kernel's half-width of 12 sds: everything that reaches the padding is lost mass, and
    the drift's far moves are counted as lost directly)."""
    projected = layouts[0].projected
    nodes = max(ladder(max(lay.nodes for lay in layouts)), nodes)
    spacing = [(lay.hi - lay.lo) / (nodes - 1) if lay.projected else lay.spacing
               for lay in layouts]  # fmt: skip
    lo = np.asarray([
        lay.lo if lay.projected else lay.lo - ((nodes - lay.nodes) // 2) * lay.spacing
        for lay in layouts
    ])  # fmt: skip
    kernel = max(
        int(math.ceil(NOISE_SDS * lay.widest / h)) + 1
        for lay, h in zip(layouts, spacing, strict=True)
    )
    pad = 4 * kernel + 8 if projected else kernel + 8
    size = max(ladder(nodes + pad), fft_size)
    reach = (size - nodes) // 4 if projected else 2
    widths = [lay.windows for lay in layouts]
    windows = tuple(max(w) for w in zip(*widths, strict=True)) if widths[0] else ()
    plan = GridPlan(
        nodes, size, reach, windows, layouts[0].split, projected, chunk, every_step,
    )  # fmt: skip
    mixtures = [
        count_components(m, lay.k_lo, windows) for m, lay in zip(mechs, layouts, strict=True)
    ]
    counts = np.stack([c for c, _ in mixtures])
    probs = np.stack([p for _, p in mixtures])
    return plan, lo, np.asarray(spacing), counts, probs


def plan_bytes(plan: GridPlan, batch: int) -> int:
    """The largest working set of one step, in bytes (deposit arrays and FFT buffers)."""
    parts = plan.nodes * (2 if plan.split else 1)
    components = 2 * math.prod(plan.windows)
    return batch * (parts * components * 8 * 8 + plan.fft_size * 8 * 8)


def grid_reach(mech, cells_per_sd: float = 6.0) -> tuple[float, float]:
    """The model values the exact engine's grid spans for `mech`: (lo, hi), the hull of the
    drift plus `NOISE_SDS` accumulated noise standard deviations on each side (for an
    `AbstractProjected` mechanism, its interval). A field's jumps inside it are what
    `field_breakpoints()` must declare; the grid never reaches those outside it. The finer
    grids of the ladder span the same interval, to within one coarse cell.

    Example:
        >>> from advsim.mechanisms import ThresholdLandscape
        >>> lo, hi = grid_reach(ThresholdLandscape(5, 1.0, 4))
        >>> bool(lo < 0.0 < hi)
        True
    """
    lay = layout(mech, cells_per_sd)
    return float(lay.lo), float(lay.hi)


def check_ladder(refinements, rtol) -> tuple[int, float | None]:
    """`(refinements, rtol)` checked: at most 6 grids, and two or more with a relative
    tolerance (its error estimate needs two grids).

    Raises:
        ValueError: naming the parameter, its value and the valid range.
    """
    refinements = check_int("refinements", refinements, minimum=1, maximum=6)
    if rtol is not None:
        rtol = check_in_interval("rtol", rtol, 0.0, 1.0)
        if refinements < 2:
            raise ValueError(
                f"refinements must be in [2, 6] with rtol (an error estimate needs two "
                f"grids), got {refinements!r}"
            )
    return refinements, rtol

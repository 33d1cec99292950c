r"""The public call: the exact epsilon of a scalar construction's last model, with its error.

`last_iterate_epsilon(mechanism, delta)` propagates the last model's law in both worlds on
three grids (spacing $h$, $h/2$, $h/4$), reads $\varepsilon(\delta)$ off each, and returns
the finest value with the differences between the three. `last_iterate_epsilons` does the
same for a batch of mechanisms that differ only in traced values (a heatmap over sigma and
B is one call: one compilation per grid, the cells vmapped).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from advsim._mechanism import AbstractMechanism, AbstractProjected
from advsim._validation import check_delta, check_int, check_positive
from advsim.exact._divergence import discrete_tradeoff, grid_delta, grid_epsilon_host
from advsim.exact._plan import combine, layout, plan_bytes
from advsim.exact._propagate import GridState, _fields, advance

__all__ = [
    "DEFAULT_CELLS_PER_SD",
    "ERROR_KIND",
    "ExactEpsilon",
    "GridTooLargeError",
    "LostMassError",
    "last_iterate_epsilon",
    "last_iterate_epsilons",
    "resolution_limit",
]

DEFAULT_CELLS_PER_SD = 6.0
"""Nodes per noise standard deviation on the coarsest grid (its spacing: the smallest of
every step's noise sd and clipped move, over this); the finer grids halve it, so with 3
refinements the finest has 24."""
ERROR_KIND = "refinement estimate"
"""What the `error` of a grid result is: the change between the two finest grids (plus the
lost mass's effect), an estimate of the discretisation error, not a bound."""
#: The finer grids cover the nodes where the coarsest grid held more than this times
#: delta at some step (plus a margin); what the cut leaves out is counted as lost mass.
SUPPORT_LEVEL = 1e-10
#: How many times the coarsest grid's automatic interval is widened (x3) when mass leaves.
WIDENINGS = 2
#: Default cap on one propagation's working set.
DEFAULT_MAX_BYTES = 8 * 2**30


MASS_FLOOR = 1e-14
"""Masses below this (relative to a total of 1) are at the level of the rounding of the FFT
convolutions (float64, ~1e-16 per step and node) and carry no information."""


def resolution_limit(delta: float) -> float:
    r"""The largest $\varepsilon(\delta)$ a float64 grid can resolve, $\log(\delta /
    10^{-14})$ (20.7 at $\delta = 10^{-5}$): the least likely event that sets
    $\varepsilon$ has out-world mass about $\delta e^{-\varepsilon}$, which must stay above
    the rounding floor `MASS_FLOOR`."""
    return math.log(delta / MASS_FLOOR)


class GridTooLargeError(ValueError):
    """The grid an exact propagation needs would not fit in the memory allowed."""


class LostMassError(FloatingPointError):
    """More mass left the grid (or a count window) than the tolerance allows."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


@dataclasses.dataclass(frozen=True)
class ExactEpsilon:
    r"""The last model's privacy from its law in both worlds, with the numerical error.

    Attributes:
        epsilon: $\varepsilon(\delta)$ of the last model on the finest grid (both
            directions, add/remove).
        delta: the $\delta$ it was computed at.
        error: $|\varepsilon_{h/2} - \varepsilon_{h/4}|$ plus the effect of the mass the
            grid lost (`lost_mass`): an estimate of the discretisation error, not a bound
            (`error_kind`). At first-order convergence it is the finest grid's error; at the
            second order it overstates it three times.
        error_kind: "refinement estimate" (see `error`).
        epsilons: $\varepsilon$ on each grid, coarsest first.
        spacings: each grid's spacing $h$ (model units).
        cells_per_sd: each grid's nodes per (smallest) noise standard deviation.
        differences: successive differences of `epsilons`.
        observed_order: $\log_2$ of the ratio of the two differences (nan when undefined):
            about 2 for smooth fields, 1 where the law has an atom or a kink.
        lost_mass: mass of (in, out) that left the finest grid or a count window, summed
            over the steps; never dropped silently.
        mass_error: $|1 - \text{mass kept} - \text{lost}|$ of the finest grid (rounding).
        resolved: False when $\varepsilon$ exceeds `resolution_limit(delta)`: the events that
            set it have out-world mass below the float64 grid's rounding floor, so the value
            means nothing (and `error` is inf).
        eps_bracket: $\varepsilon$ of the finest grid with $\delta$ moved by the lost mass
            and the rounding, both ways: the range the lost mass alone allows.
        nodes: the finest grid's nodes.
        atoms: 2 for a projected run (the last two masses are its atoms at the interval's
            ends, the end nodes then carry half a cell), else 0.
        grid: the finest grid's node positions (then the atoms' positions).
        mass_in, mass_out: the last model's masses on `grid` in each world.
        epsilon_per_step: $\varepsilon(\delta)$ after every step on the finest grid, when
            asked for (`every_step=True`), else None.
        seconds: wall time of the whole call.
    """

    epsilon: float
    delta: float
    error: float
    error_kind: str
    epsilons: tuple[float, ...]
    spacings: tuple[float, ...]
    cells_per_sd: tuple[float, ...]
    differences: tuple[float, ...]
    observed_order: float
    lost_mass: tuple[float, float]
    mass_error: float
    eps_bracket: tuple[float, float]
    resolved: bool
    nodes: int
    atoms: int
    grid: np.ndarray = dataclasses.field(repr=False)
    mass_in: np.ndarray = dataclasses.field(repr=False)
    mass_out: np.ndarray = dataclasses.field(repr=False)
    epsilon_per_step: np.ndarray | None = dataclasses.field(repr=False, default=None)
    seconds: float = 0.0

    def privacy_profile(self, epsilons) -> np.ndarray:
        r"""$\delta(\varepsilon)$ of the last model (finest grid) at each of `epsilons`
        (`grid_delta`, the same quadrature as `epsilon`)."""
        eps = np.atleast_1d(np.asarray(epsilons, np.float64))
        return np.array([grid_delta(self.mass_in, self.mass_out, e, atoms=self.atoms) for e in eps])

    def tradeoff(self) -> tuple[np.ndarray, np.ndarray]:
        """The last model's trade-off curve `(alpha, beta)` (finest grid)."""
        return discrete_tradeoff(self.mass_in, self.mass_out)

    def to_dict(self) -> dict:
        """The scalar fields, for a JSON or CSV row (no arrays)."""
        return {
            "exact_epsilon": self.epsilon,
            "exact_error": self.error,
            "exact_error_kind": self.error_kind,
            "exact_epsilons": list(self.epsilons),
            "exact_cells_per_sd": list(self.cells_per_sd),
            "exact_observed_order": self.observed_order,
            "exact_lost_mass": list(self.lost_mass),
            "exact_nodes": self.nodes,
            "exact_resolved": self.resolved,
            "delta": self.delta,
        }


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def _stack(mechanisms: Sequence[AbstractMechanism]):
    parts = [eqx.partition(m, eqx.is_array) for m in mechanisms]
    static = parts[0][1]
    structure = jax.tree.structure(parts[0][0])
    for i, (arrays, other) in enumerate(parts[1:], start=1):
        if jax.tree.structure(arrays) != structure or not eqx.tree_equal(other, static):
            raise ValueError(
                f"mechanisms[{i}] differs from mechanisms[0] in a static field (its class, "
                "steps, schedule, batching or another shape-setting field): a batch may "
                "differ only in traced values"
            )
    stacked = jax.tree.map(
        lambda *xs: np.stack([np.asarray(x) for x in xs]), *[a for a, _ in parts]
    )
    return eqx.combine(stacked, static)


def _diagnose(mech, x: float, t: int) -> str:
    """Which field is not finite at model value x in step t."""
    with jax.enable_x64(True):
        canary, data, reg = _fields(mech, jnp.asarray([x], jnp.float64), jnp.int32(t))
        eta = jnp.asarray(mech.step_size(jnp.int32(t)), jnp.float64)
    found = {
        "canary_gradient": float(canary[0]),
        "regularizer_gradient": float(reg[0]),
        "step_size": float(eta),
    }
    for j, v in enumerate(np.asarray(data).reshape(-1)):
        found[f"data_gradients[{j}]"] = float(v)
    bad = [f"{k} = {v!r}" for k, v in found.items() if not math.isfinite(v)]
    return ", ".join(bad) if bad else "the move overflows"


def _check_records(mechs, records, t0: int, lows, highs, lost_tolerance: float):
    """Raises at the first step of the chunk with a non-finite move or too much lost mass."""
    bad_x = np.asarray(records.bad_x)  # (batch, chunk)
    for i in range(bad_x.shape[0]):
        bad = np.flatnonzero(np.isfinite(bad_x[i]))
        if bad.size:
            t = t0 + int(bad[0])
            x = float(bad_x[i, bad[0]])
            raise FloatingPointError(
                f"{type(mechs[i]).__name__} (batch item {i}): at step {t} the move of the "
                f"mass at m = {x:.6g} is not finite ({_diagnose(mechs[i], x, t)})"
            )


def _check_lost(mechs, lost_steps, far_steps, lows, highs, lost_tolerance: float, t0: int):
    for i in range(lost_steps.shape[0]):
        cumulative = np.cumsum(lost_steps[i])
        over = np.flatnonzero(cumulative > lost_tolerance)
        if over.size:
            k = int(over[0])
            far = far_steps[i][np.isfinite(far_steps[i])]
            where = (f"; the drift sent mass {far[0]:.6g} away from the grid's centre"
                     if far.size else "")  # fmt: skip
            raise LostMassError(
                f"{type(mechs[i]).__name__} (batch item {i}): by step {t0 + k}, mass "
                f"{cumulative[k]:.3g} left the grid [{lows[i]:.6g}, {highs[i]:.6g}] or a "
                f"count window, above lost_tolerance = {lost_tolerance:.3g}{where}. Pass a "
                "wider support=(lo, hi) if the law is bounded, or raise lost_tolerance",
                i,
            )


def _level_plan(mechs, cells, supports, every_step, shape=(0, 0)):
    """The layouts and the batch's plan at `cells` per sd (at least `shape`'s nodes and FFT
    size, so that several grids share one compiled propagation)."""
    steps = mechs[0].steps
    chunk = math.ceil(steps / math.ceil(steps / 100))
    layouts = [layout(m, cells, sup) for m, sup in zip(mechs, supports, strict=True)]
    return layouts, combine(
        layouts, steps, chunk, every_step, nodes=shape[0], fft_size=shape[1], mechs=mechs
    )


def _run_level(
    mechs, stacked, delta, cells, supports, every_step, max_bytes, tolerance, bar, shape=(0, 0)
):
    steps = mechs[0].steps
    layouts, (plan, lo, spacing, counts, probs) = _level_plan(
        mechs, cells, supports, every_step, shape
    )
    chunk = plan.chunk
    needed = plan_bytes(plan, len(mechs))
    if needed > max_bytes:
        raise GridTooLargeError(
            f"the exact propagation needs a grid of {plan.nodes:,} nodes x "
            f"{2 * math.prod(plan.windows):,} components ({_size(needed)} for "
            f"{len(mechs)} mechanism(s) at cells_per_sd = {cells:g}), above max_bytes = "
            f"{_size(max_bytes)}; lower cells_per_sd or refinements, pass a "
            "narrower support=(lo, hi), or raise max_bytes"
        )
    highs = lo + (plan.nodes - 1) * spacing
    with jax.enable_x64(True):
        lo_j, h_j = jnp.asarray(lo), jnp.asarray(spacing)
        counts_j, probs_j = jnp.asarray(counts), jnp.asarray(probs)
        m0_j = jnp.asarray([_initial_model(m) for m in mechs])
        delta_j = jnp.asarray(delta, jnp.float64)
        level_j = jnp.asarray(SUPPORT_LEVEL * delta, jnp.float64)
        state = _initial_state(mechs, plan, lo, spacing)
        lost_steps, far_steps, eps_steps = [], [], []
        first = np.full(len(mechs), plan.nodes)
        last = np.full(len(mechs), -1)
        for t0 in range(1, steps + 1, chunk):
            state, rec = advance(
                stacked,
                plan,
                lo_j,
                h_j,
                m0_j,
                counts_j,
                probs_j,
                delta_j,
                level_j,
                state,
                jnp.int32(t0),
            )
            first = np.minimum(first, np.asarray(rec.first).min(axis=1))
            last = np.maximum(last, np.asarray(rec.last).max(axis=1))
            _check_records(mechs, rec, t0, lo, highs, tolerance)
            lost = np.maximum(np.asarray(rec.lost_in), np.asarray(rec.lost_out))
            lost_steps.append(lost)
            far_steps.append(np.asarray(rec.far_y))
            eps_steps.append(np.asarray(rec.epsilon))
            _check_lost(
                mechs, np.concatenate(lost_steps, 1), np.concatenate(far_steps, 1), lo, highs,
                tolerance, 1,
            )  # fmt: skip
            bar.update(min(chunk, steps - t0 + 1))
    atoms = 2 if plan.projected else 0
    eps = np.array([
        grid_epsilon_host(state.mass_in[i], state.mass_out[i], delta, atoms=atoms)
        for i in range(len(mechs))
    ])  # fmt: skip
    grids = [lo[i] + spacing[i] * np.arange(plan.nodes) for i in range(len(mechs))]
    if plan.projected:  # the two atoms sit at the ends
        grids = [np.concatenate([g, [g[0], g[-1]]]) for g in grids]
    per_step = np.concatenate(eps_steps, 1)[:, :steps] if every_step else None
    # Where every step's law holds more than SUPPORT_LEVEL * delta per node: the finer
    # grids need cover no more (plus a margin of two of the widest step's noise sds).
    widest = [lay.widest for lay in layouts]
    found = [None if last[i] < first[i] or layouts[i].projected else
             (lo[i] + spacing[i] * first[i] - 2 * widest[i] - 4 * spacing[i],
              lo[i] + spacing[i] * last[i] + 2 * widest[i] + 4 * spacing[i])
             for i in range(len(mechs))]  # fmt: skip
    return eps, state, grids, spacing, per_step, plan.nodes, found


def _widened(mechs, cells, supports):
    """Each grid interval three times as wide, around the same centre."""
    out = []
    for mech, sup in zip(mechs, supports, strict=True):
        lay = layout(mech, cells, sup)
        centre, half = (lay.lo + lay.hi) / 2, (lay.hi - lay.lo) / 2
        out.append((centre - 3 * half, centre + 3 * half))
    return out


def _initial_model(mech) -> float:
    """m_0 as a float64."""
    with jax.enable_x64(True):
        return float(np.asarray(mech.init_model(), np.float64).reshape(()))


def _initial_state(mechs, plan, lo, spacing) -> GridState:
    """Both worlds' masses at step 0: m_0 shared between its two nodes (an end node of a
    projected grid keeps half, its atom the other half, as every step leaves them)."""
    width = plan.nodes + (2 if plan.projected else 0)
    masses = np.zeros((len(mechs), width))
    for i, mech in enumerate(mechs):
        u = (_initial_model(mech) - lo[i]) / spacing[i]
        j = min(max(int(math.floor(u)), 0), plan.nodes - 1)
        f = min(max(u - j, 0.0), 1.0)
        masses[i, j] += 1.0 - f
        if f > 0:
            masses[i, j + 1] += f
        if plan.projected:
            for end, atom in ((0, plan.nodes), (plan.nodes - 1, plan.nodes + 1)):
                masses[i, atom] += 0.5 * masses[i, end]
                masses[i, end] *= 0.5
    with jax.enable_x64(True):
        zero = jnp.zeros((len(mechs),), jnp.float64)
        return GridState(jnp.asarray(masses), jnp.asarray(masses), zero, zero)


def _bracket(p, q, delta, slack, atoms):
    """eps of the grid laws with delta moved by `slack` down and up (lost mass, rounding)."""
    hi = math.inf if slack >= delta else grid_epsilon_host(p, q, delta - slack, atoms=atoms)
    up = delta + (math.exp(min(hi, 700.0)) if math.isfinite(hi) else 1.0) * slack
    lo = 0.0 if up >= 1.0 else grid_epsilon_host(p, q, up, atoms=atoms)
    return lo, hi


#: A compilation of the propagation costs about as much as running one mechanism on this
#: many nodes (all refinements; measured on a 2-core CPU): `_buckets` weighs the two.
COMPILE_NODES = 100_000


def _buckets(nodes: Sequence[int]) -> list[list[int]]:
    """Split a batch into groups that each run on one grid (the largest of the group): every
    group costs a compilation, every member the group's largest grid. Sorted by their
    coarsest grid's nodes, the batch is cut where that total is least (exact, by dynamic
    programming over the cut points); the result does not depend on the order given."""
    order = sorted(range(len(nodes)), key=lambda i: (nodes[i], i))
    size = [nodes[i] for i in order]
    best = [0.0] + [math.inf] * len(order)
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        for begin in range(end):
            cost = best[begin] + COMPILE_NODES + (end - begin) * size[end - 1]
            if cost < best[end]:
                best[end], cut[end] = cost, begin
    groups, end = [], len(order)
    while end > 0:
        groups.append(order[cut[end] : end])
        end = cut[end]
    return groups[::-1]


def _propagate_levels(mechs, delta, levels, support, every_step, max_bytes, tolerance, bar):
    """Every refinement level of one batch that shares its grids: the runs, coarsest first."""
    with jax.enable_x64(True):
        stacked = _stack(mechs)
    steps = mechs[0].steps
    runs = []
    supports = [support] * len(mechs)
    shape = (0, 0)
    for k, cells in enumerate(levels):
        bar.set_postfix_str(f"{cells:g} cells/sd")
        if k == 1 and len(levels) > 2 and not isinstance(mechs[0], AbstractProjected):
            # The finer grids cover the same interval: all run at the finest one's size,
            # so that they share one compilation (a projected grid's spacing is set by its
            # size, so each keeps its own).
            plan = _level_plan(mechs, levels[-1], supports, every_step)[1][0]
            shape = (plan.nodes, plan.fft_size)
        for widening in range(WIDENINGS + 1):
            try:
                runs.append(_run_level(
                    mechs, stacked, delta, cells, supports, every_step, max_bytes,
                    tolerance, bar, shape,
                ))  # fmt: skip
                break
            except LostMassError:
                # The first interval assumed a non-expanding drift; widen it (coarsest grid
                # only, automatic support only) before giving up.
                if k > 0 or support is not None or widening == WIDENINGS:
                    raise
                supports = _widened(mechs, cells, supports)
                bar.total += steps  # the coarsest grid again, wider
        if k == 0 and support is None:
            # The coarsest grid found where the mass is; the finer ones cover only that.
            supports = list(runs[0][-1])
    return runs


def last_iterate_epsilons(
    mechanisms: Sequence[AbstractMechanism],
    delta: float,
    *,
    cells_per_sd: float = DEFAULT_CELLS_PER_SD,
    refinements: int = 3,
    support: tuple[float, float] | None = None,
    every_step: bool = False,
    lost_tolerance: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: bool | None = None,
) -> list[ExactEpsilon]:
    """`last_iterate_epsilon` for a batch of mechanisms that differ only in traced values
    (the mechanisms vmapped on shared grids; grids of very different sizes are run in
    separate groups when that is cheaper than one grid for all, `_buckets`). Same
    arguments; one result each."""
    start_time = time.perf_counter()
    mechs = list(mechanisms)
    if not mechs:
        raise ValueError("mechanisms must hold at least one mechanism, got none")
    delta = check_delta("delta", delta)
    cells_per_sd = check_positive("cells_per_sd", cells_per_sd)
    if cells_per_sd < 2:
        raise ValueError(f"cells_per_sd must be >= 2 (nodes per noise sd), got {cells_per_sd!r}")
    refinements = check_int("refinements", refinements, minimum=1, maximum=6)
    tolerance = 0.01 * delta if lost_tolerance is None else float(lost_tolerance)
    with jax.enable_x64(True):
        _stack(mechs)  # a batch differing in a static field is refused before any work
    steps = mechs[0].steps
    levels = [cells_per_sd * 2**k for k in range(refinements)]
    buckets = _buckets([layout(m, cells_per_sd, support).nodes for m in mechs])
    if progress is None:
        progress = steps * refinements >= 200
    bar = tqdm(total=steps * refinements * len(buckets), desc="exact law", unit="step",
               disable=not progress, leave=False)  # fmt: skip
    runs_of = [None] * len(mechs)
    with bar:
        for bucket in buckets:
            group = [mechs[i] for i in bucket]
            try:
                runs = _propagate_levels(
                    group, delta, levels, support, every_step, max_bytes, tolerance, bar
                )
            except LostMassError as err:
                err.index = bucket[err.index]
                raise
            for j, i in enumerate(bucket):
                runs_of[i] = (runs, j)
    results = []
    elapsed = time.perf_counter() - start_time
    for original in range(len(mechs)):
        runs, i = runs_of[original]
        eps = [float(r[0][i]) for r in runs]
        _, state, grids, spacing, per_step, nodes, _ = runs[-1]
        p = np.asarray(state.mass_in[i])
        q = np.asarray(state.mass_out[i])
        lost = (float(state.lost_in[i]), float(state.lost_out[i]))
        mass_error = max(abs(1.0 - p.sum() - lost[0]), abs(1.0 - q.sum() - lost[1]))
        atoms = 2 if mechs[0] is not None and p.size == nodes + 2 else 0
        bracket = _bracket(p, q, delta, max(lost) + mass_error, atoms)
        diffs = tuple(b - a for a, b in zip(eps, eps[1:], strict=False))
        order = math.nan
        if len(diffs) >= 2 and diffs[-1] != 0 and diffs[-2] != 0:
            order = math.log2(abs(diffs[-2] / diffs[-1]))
        error = abs(diffs[-1]) if diffs else math.nan
        error = error + max(bracket[1] - eps[-1], eps[-1] - bracket[0])
        resolved = math.isfinite(eps[-1]) and eps[-1] <= resolution_limit(delta)
        if not resolved:
            error = math.inf
        results.append(
            ExactEpsilon(
                epsilon=eps[-1],
                delta=delta,
                error=error,
                error_kind=ERROR_KIND,
                epsilons=tuple(eps),
                spacings=tuple(float(r[3][i]) for r in runs),
                cells_per_sd=tuple(levels),
                differences=diffs,
                observed_order=order,
                resolved=resolved,
                lost_mass=lost,
                mass_error=float(mass_error),
                eps_bracket=bracket,
                nodes=nodes,
                atoms=atoms,
                grid=grids[i],
                mass_in=p,
                mass_out=q,
                epsilon_per_step=None if per_step is None else per_step[i],
                seconds=elapsed,
            )  # fmt: skip
        )
    return results


def last_iterate_epsilon(
    mechanism: AbstractMechanism,
    delta: float,
    *,
    cells_per_sd: float = DEFAULT_CELLS_PER_SD,
    refinements: int = 3,
    support: tuple[float, float] | None = None,
    every_step: bool = False,
    lost_tolerance: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: bool | None = None,
) -> ExactEpsilon:
    r"""The exact $\varepsilon(\delta)$ of the last model of a scalar construction.

    The mechanism's last model is a one-dimensional Markov chain (`advsim.AbstractScalarLaw`);
    its law in both worlds is propagated step by step on a grid (`advsim.exact`'s module
    docstring: drift as a mixture over the sampled counts, Gaussian noise by FFT, the
    projection's atoms, lost mass counted), and $\varepsilon(\delta)$ is read off the two
    laws exactly (hockey-stick divergence both ways). This is done on `refinements` grids,
    each twice as fine as the last; the result is the finest grid's value with the
    differences as its error estimate.

    Args:
        mechanism: an `AbstractScalarLaw` mechanism (scalar model, fields of (m, t)).
        delta: $\delta \in (0, 1)$.
        cells_per_sd: nodes per noise standard deviation (the smallest step's
            $\eta_t\sigma C$) on the coarsest grid, >= 2.
        refinements: how many grids (1-6), spacing halved each time.
        support: (lo, hi), the interval the grid covers (unprojected runs); default: the
            hull of the drift's images widened by 12 noise standard deviations.
        every_step: also compute $\varepsilon(\delta)$ after every step (finest grid).
        lost_tolerance: stop when more than this much mass of a world has left the grid or
            a count window (default delta / 100).
        max_bytes: refuse before any work a grid whose working set exceeds this.
        progress: a tqdm bar over the steps (default: when steps x refinements >= 200).

    Returns:
        An `ExactEpsilon`: the epsilon, its error (a refinement estimate, never a bound),
        the privacy profile and trade-off curve of the last model.

    Raises:
        TypeError: the mechanism lacks the capability (vector model, per-example data).
        ValueError: a parameter out of range.
        GridTooLargeError: the grid would exceed `max_bytes` (the message gives the size).
        FloatingPointError: a field not finite where mass is, or mass leaving the grid,
            with the step and the value.

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> from advsim.bounds import heuristic_epsilon
        >>> mech = LinearProcess(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
        >>> exact = last_iterate_epsilon(mech, 1e-5)
        >>> abs(exact.epsilon / heuristic_epsilon(1e-5, 10, 0.1, 1.0) - 1) < 1e-3
        True
    """
    (result,) = last_iterate_epsilons(
        [mechanism], delta, cells_per_sd=cells_per_sd, refinements=refinements,
        support=support, every_step=every_step, lost_tolerance=lost_tolerance,
        max_bytes=max_bytes, progress=progress,
    )  # fmt: skip
    return result

r"""The public call: the exact epsilon of a scalar construction's last model, with its error.

`last_iterate_epsilon(mechanism, delta)` propagates the last model's law in both worlds on
grids of spacing $h$, $h/2$, $h/4$, ..., reads $\varepsilon(\delta)$ off each, and
returns the finest value with the change between the two finest as its error estimate:
on `refinements` grids (default 3), or, with a relative tolerance `rtol`, on as few as
reach it (at least 2, at most `refinements`: the adaptive ladder).
`last_iterate_epsilons` does the same for a batch of mechanisms that differ only in traced
values (a heatmap over sigma and B is one call: one compilation per grid, the cells
vmapped). A value beyond `resolution_limit(delta)` is computed again in log space
(`advsim.exact._logladder`); a call predicted to be slow warns first
(`advsim.exact._cost`).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from advsim._mechanism import AbstractMechanism, AbstractProjected
from advsim._validation import check_delta, check_positive
from advsim.exact._cost import warn_if_slow_batch
from advsim.exact._divergence import grid_epsilon_host
from advsim.exact._errors import (  # noqa: F401 (Stopped, stop_when: the engine's stop)
    GridTooLargeError,
    LostMassError,
    Stopped,
    _check_lost,
    _check_stop,
    _size,
    stop_when,
)
from advsim.exact._host import (  # noqa: F401 (COMPILE_NODES: the cost model's constant)
    CHUNK,
    COMPILE_NODES,
    _bracket,
    _buckets,
    _check_records,
    _initial_model,
    _initial_state,
    _level_plan,
    _stack,
    _widened,
)
from advsim.exact._jumps import warn_planned_jumps
from advsim.exact._logladder import beyond_resolution
from advsim.exact._plan import check_ladder, layout, plan_bytes
from advsim.exact._programs import any_steps
from advsim.exact._propagate import advance
from advsim.exact._result import ExactEpsilon, ladder_fields

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
DEFAULT_REFINEMENTS = 3
"""Grids by default: the exact count without `rtol`, the most with it."""
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
    r"""The largest $\varepsilon(\delta)$ the grid propagation (masses in float64)
    resolves, $\log(\delta / 10^{-14})$ (20.7 at $\delta = 10^{-5}$): the least likely
    event that sets $\varepsilon$ has out-world mass about $\delta e^{-\varepsilon}$, which
    must stay above the rounding floor `MASS_FLOOR`. Beyond it `last_iterate_epsilon`
    propagates the laws in log space instead (`ExactEpsilon.log_space`)."""
    return math.log(delta / MASS_FLOOR)


def _run_level(
    mechs, stacked, delta, cells, supports, every_step, max_bytes, tolerance, bar, shape, share
):
    steps = mechs[0].steps
    layouts, (plan, lo, spacing, counts, probs) = _level_plan(
        mechs, cells, supports, every_step, shape, max_bytes, share
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
            _check_stop(t0, steps)
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
                jnp.int32(steps),
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


def _propagate_levels(
    mechs, delta, cells_per_sd, refinements, rtol, support, every_step, max_bytes, tolerance, bar
):
    """The refinement levels of one batch that shares its grids: the runs, coarsest first.
    Without `rtol`, `refinements` of them; with it, levels until every member's error
    estimate is within `rtol` of its epsilon (at least 2, at most `refinements`)."""
    with jax.enable_x64(True):
        stacked = any_steps(_stack(mechs), template=mechs[0])
    steps = mechs[0].steps
    runs = []
    supports = [support] * len(mechs)
    shape = (0, 0)
    projected = isinstance(mechs[0], AbstractProjected)
    for k in range(refinements):
        cells = cells_per_sd * 2**k
        bar.set_postfix_str(f"{cells:g} cells/sd")
        # The finer grids cover the same interval: each runs at the size of the finest
        # grid still to come (all of them without rtol, the next one with it), so that
        # they share one compilation (a projected grid's spacing is set by its size, so
        # each keeps its own).
        finest = refinements - 1 if rtol is None else min(k + 1, refinements - 1)
        if k >= 1 and not projected and (rtol is not None or k == 1) and finest > k:
            plan = _level_plan(
                mechs, cells_per_sd * 2**finest, supports, every_step, max_bytes=max_bytes,
                share=support is None,
            )[1][0]  # fmt: skip
            shape = (plan.nodes, plan.fft_size)
        for widening in range(WIDENINGS + 1):
            try:
                runs.append(_run_level(
                    mechs, stacked, delta, cells, supports, every_step, max_bytes,
                    tolerance, bar, shape, support is None,
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
        if rtol is not None and k >= 1 and k + 1 < refinements:
            if all(_converged(_summary(runs, i, delta), rtol) for i in range(len(mechs))):
                bar.total -= steps * (refinements - k - 1)  # the grids not needed
                break
    return runs


def _summary(runs, i: int, delta: float) -> dict:
    """Member `i`'s fields of `ExactEpsilon` from its runs (coarsest first): value, error
    estimate and diagnostics."""
    _, state, grids, _, per_step, nodes, _ = runs[-1]
    p = np.asarray(state.mass_in[i])
    q = np.asarray(state.mass_out[i])
    lost = (float(state.lost_in[i]), float(state.lost_out[i]))
    mass_error = max(abs(1.0 - p.sum() - lost[0]), abs(1.0 - q.sum() - lost[1]))
    atoms = 2 if p.size == nodes + 2 else 0
    eps = [float(r[0][i]) for r in runs]
    limit = resolution_limit(delta)
    fields = ladder_fields(
        eps, [float(r[3][i]) for r in runs],
        eps_bracket=_bracket(p, q, delta, max(lost) + mass_error, atoms),
        resolved=math.isfinite(eps[-1]) and eps[-1] <= limit, limit=limit,
        per_step=None if per_step is None else per_step[i],
        coarser_step=runs[-2][4][i] if per_step is not None and len(runs) > 1 else None,
    )  # fmt: skip
    return fields | {
        "grid": grids[i], "mass_in": p, "mass_out": q, "lost_mass": lost,
        "mass_error": float(mass_error), "atoms": atoms, "nodes": nodes,
    }  # fmt: skip


def _converged(summary: dict, rtol: float) -> bool:
    """Whether a member's error estimate is at most `rtol` times its epsilon (never for a
    nan or infinite error)."""
    return bool(summary["error"] <= rtol * abs(summary["epsilon"]))


def _check_mechanism(name: str, value) -> None:
    """Refuses anything but a mechanism (an adversary passed by mistake, a number)."""
    if not isinstance(value, AbstractMechanism):
        kind = "an adversary" if hasattr(value, "craft") else f"a {type(value).__name__}"
        raise TypeError(
            f"{name} must be a mechanism (an advsim.AbstractMechanism with the scalar "
            f"law, e.g. advsim.mechanisms.LinearProcess), got {kind} "
            f"({type(value).__module__}.{type(value).__qualname__})"
        )


def last_iterate_epsilons(
    mechanisms: Sequence[AbstractMechanism], delta: float, **settings
) -> list[ExactEpsilon]:
    r"""`last_iterate_epsilon` for a batch of mechanisms that differ only in traced values
    (the mechanisms vmapped on shared grids; grids of very different sizes are run in
    separate groups when that is cheaper than one grid for all). One result each.

    With `rtol`, the members of a group share their grids: a group refines until every
    member meets the tolerance (or `refinements` is reached), so a member may get more
    grids than it alone would have needed, never fewer.

    Args:
        mechanisms: one or more `AbstractScalarLaw` mechanisms of one class and static
            fields.
        delta: $\delta \in (0, 1)$.
        **settings: `last_iterate_epsilon`'s keywords (`cells_per_sd`, `refinements`,
            `rtol`, `support`, `every_step`, `lost_tolerance`, `max_bytes`, `progress`,
            `log_space`), with its defaults.

    Returns:
        A list of `ExactEpsilon`, in the order of `mechanisms`.

    Raises:
        TypeError: an unknown keyword, or as `last_iterate_epsilon`.
        ValueError: no mechanism, or as `last_iterate_epsilon`.
    """
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise TypeError(
            f"last_iterate_epsilons got unknown keyword(s) {unknown}; its settings are "
            f"{', '.join(_SETTINGS)}"
        )
    return _batch(list(mechanisms), delta, **{**_SETTINGS, **settings})


def _batch(
    mechs, delta, *, cells_per_sd, refinements, rtol, support, every_step, lost_tolerance,
    max_bytes, progress, log_space,
) -> list[ExactEpsilon]:  # fmt: skip
    start_time = time.perf_counter()
    if not mechs:
        raise ValueError("mechanisms must hold at least one mechanism, got none")
    for i, m in enumerate(mechs):
        _check_mechanism(f"mechanisms[{i}]", m)
    delta = check_delta("delta", delta)
    cells_per_sd = check_positive("cells_per_sd", cells_per_sd)
    if cells_per_sd < 2:
        raise ValueError(f"cells_per_sd must be >= 2 (nodes per noise sd), got {cells_per_sd!r}")
    refinements, rtol = check_ladder(refinements, rtol)
    tolerance = 0.01 * delta if lost_tolerance is None else float(lost_tolerance)
    with jax.enable_x64(True):
        _stack(mechs)  # a batch differing in a static field is refused before any work
    steps = mechs[0].steps
    layouts = [layout(m, cells_per_sd, support) for m in mechs]
    for m, lay in zip(mechs, layouts, strict=True):  # before any propagation: a jump left
        # out is an error that `error` does not cover; probed over the grid's own interval
        warn_planned_jumps(m, lay.lo, lay.hi, stacklevel=3)
    nodes = [lay.nodes for lay in layouts]
    buckets = _buckets(nodes)
    warn_if_slow_batch(mechs, buckets, nodes, delta, cells_per_sd, refinements, support)
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
                    group, delta, cells_per_sd, refinements, rtol, support, every_step,
                    max_bytes, tolerance, bar,
                )  # fmt: skip
            except LostMassError as err:
                err.index = bucket[err.index]
                raise
            for j, i in enumerate(bucket):
                runs_of[i] = (runs, j)
    results = []
    elapsed = time.perf_counter() - start_time
    for original in range(len(mechs)):
        runs, i = runs_of[original]
        m = _summary(runs, i, delta)
        if log_space and not m["resolved"]:  # beyond the grid's floor: in log space
            m = beyond_resolution(
                mechs[original], delta, cells_per_sd=cells_per_sd, refinements=refinements,
                rtol=rtol, support=support, every_step=every_step, max_bytes=max_bytes,
                progress=progress, stop=_check_stop,
            )  # fmt: skip
            elapsed = time.perf_counter() - start_time
        results.append(
            ExactEpsilon(
                **m,
                delta=delta,
                error_kind=ERROR_KIND,
                cells_per_sd=tuple(cells_per_sd * 2**k for k in range(len(m["epsilons"]))),
                seconds=elapsed,
                rtol=rtol,
                converged=None if rtol is None else _converged(m, rtol),
            )
        )
    return results


def last_iterate_epsilon(
    mechanism: AbstractMechanism,
    delta: float,
    *,
    cells_per_sd: float = DEFAULT_CELLS_PER_SD,
    refinements: int = DEFAULT_REFINEMENTS,
    rtol: float | None = None,
    support: tuple[float, float] | None = None,
    every_step: bool = False,
    lost_tolerance: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: bool | None = None,
    log_space: bool = True,
) -> ExactEpsilon:
    r"""The exact $\varepsilon(\delta)$ of the last model of a scalar construction.

    The mechanism's last model is a one-dimensional Markov chain (`advsim.AbstractScalarLaw`);
    its law in both worlds is propagated step by step on a grid (`advsim.exact`'s module
    docstring: drift as a mixture over the sampled counts, Gaussian noise by FFT, the
    projection's atoms, lost mass counted), and $\varepsilon(\delta)$ is read off the two
    laws exactly (hockey-stick divergence both ways). This is done on several grids, each
    twice as fine as the last; the result is the finest grid's value with the change
    between the two finest as its error estimate. Without `rtol`, exactly `refinements`
    grids; with `rtol`, the adaptive ladder: grids are added (at least 2) until the error
    estimate is at most `rtol * epsilon`, or `refinements` grids are reached (then
    `converged` is False, and the value and error are still the finest grid's). A value
    beyond `resolution_limit(delta)`, which the grid's float64 masses cannot resolve, is
    computed again by the same ladder with the laws carried as log-masses, sized for the
    epsilon asked (`ExactEpsilon.log_space`; up to 2048).

    Args:
        mechanism: an `AbstractScalarLaw` mechanism (scalar model, fields of (m, t)).
        delta: $\delta \in (0, 1)$.
        cells_per_sd: nodes per noise standard deviation (the smallest step's
            $\eta_t\sigma C$) on the coarsest grid, >= 2.
        refinements: how many grids (1-6), spacing halved each time: the exact count
            without `rtol`, the most with it (then 2-6).
        rtol: a relative tolerance in (0, 1) on the error estimate, or None (default: a
            fixed `refinements` grids). `advsim.experiment.exact_columns`, the exact
            column of audits and sweeps, asks for `EXACT_RTOL` there.
        support: (lo, hi), the interval the grid covers (unprojected runs); default: the
            hull of the drift's images widened by 12 noise standard deviations.
        every_step: also compute $\varepsilon(\delta)$ after every step (finest grid).
        lost_tolerance: stop when more than this much mass of a world has left the grid or
            a count window (default delta / 100).
        max_bytes: refuse before any work a grid whose working set exceeds this.
        progress: a tqdm bar over the steps (default: when steps x refinements >= 200).
        log_space: compute a value beyond `resolution_limit(delta)` again in log space
            (default); False returns the grid's value there, flagged `resolved=False`
            with an infinite `error` (cheaper, for callers that only need to know).

    Returns:
        An `ExactEpsilon`: the epsilon, its error (a refinement estimate, never a bound),
        the privacy profile and trade-off curve of the last model.

    Warns:
        ExactCostWarning: before a computation `estimate_seconds` predicts to take more
            than a minute (and again before the log-space ladder, if that one is).

    Raises:
        TypeError: the mechanism lacks the capability (vector model, per-example data).
        ValueError: a parameter out of range (`rtol` outside (0, 1), `refinements` < 2
            with `rtol`).
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
    _check_mechanism("mechanism", mechanism)
    (result,) = _batch(
        [mechanism], delta, cells_per_sd=cells_per_sd, refinements=refinements, rtol=rtol,
        support=support, every_step=every_step, lost_tolerance=lost_tolerance,
        max_bytes=max_bytes, progress=progress, log_space=log_space,
    )  # fmt: skip
    return result


#: `last_iterate_epsilon`'s keywords and their defaults (those of `last_iterate_epsilons`).
_SETTINGS = {
    name: p.default
    for name, p in inspect.signature(last_iterate_epsilon).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}

r"""The refinement ladder in log space: the exact epsilon where the grid's rounding hides it.

The grid propagation resolves $\varepsilon(\delta)$ up to `resolution_limit(delta)`
($\log(\delta / 10^{-14})$, 20.7 at $\delta = 10^{-5}$). Beyond it, `last_iterate_epsilon`
runs the same ladder of grids (6, 12, 24 cells per noise sd by default) with the laws
carried as log-masses (`advsim.exact._logspace`), sized for an epsilon up to
$\varepsilon_{\max}$ (`targets`: 128, then 512, then 2048 if the value exceeds the one
before, each lowered to the Gaussian-DP bound's `epsilon_bound` with a margin where that is
smaller): every mass down to $e^{-L}$ of the total,
$L = \varepsilon_{\max} + \log(1/\delta) + $ `MARGIN`, is kept. That sets

- the noise kernel's half-width, $\sqrt{2L}$ noise sds (the taps left out, below $e^{-L}$
  of its peak, are counted as lost mass);
- the grid's interval, the drift's hull widened by $\sqrt{2L} + 2$ accumulated noise sds
  (instead of 12), and the count windows, whose tails left out are at most $e^{-L}$ each
  (counted as lost mass);
- the spacing: the requested one, or a little finer so that it divides the smallest
  clipped move a whole number of times (`_cells`: a constant field then moves mass by whole
  cells, with no interpolation variance in the far tails);
- the lost mass allowed: $10^{-4} \delta e^{-\varepsilon_{\max}}$, so that the bracket the
  lost mass puts around $\varepsilon$ (`eps_bracket`: $\delta$ moved by the lost mass, and
  by $e^{\varepsilon}$ times it) stays far inside the error estimate.

The error is as on the grid: the change between the two finest grids plus the lost mass's
bracket. Rounding in log space is relative to each mass (about $10^{-16}$ of it per
operation), not to the largest, so it sets no floor on $\varepsilon$.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.stats
from tqdm.auto import tqdm

from advsim._mechanism import AbstractProjected
from advsim.exact._errors import GridTooLargeError, LostMassError, _size
from advsim.exact._host import _diagnose, _initial_model, _initial_state
from advsim.exact._logspace import LogPlan, LogState, advance_log, log_grid_epsilon
from advsim.exact._plan import _host_values, count_components, ladder, layout
from advsim.exact._programs import any_steps
from advsim.exact._result import ladder_fields

__all__ = ["EPS_TARGETS", "MARGIN", "beyond_resolution", "log_ladder", "log_plan_work"]

#: The largest epsilon each attempt is sized for, in order: a value above the first is
#: computed again sized for the second, and so on; above the last it is not resolved.
#: Each is lowered to the Gaussian-DP bound's (`epsilon_bound`) where that is smaller.
EPS_TARGETS = (128.0, 512.0, 2048.0)
#: Nats kept below the smallest mass that can matter, delta e^-eps_max.
MARGIN = 30.0
#: The lost mass allowed, as a fraction of delta e^-eps_max.
LOST_FRACTION = 1e-4
#: Steps per `advance_log` call.
CHUNK = 50
#: How many times the coarsest grid's automatic interval is widened (x3) when mass leaves.
WIDENINGS = 2
#: The most work (nodes x taps x steps) the coarser grids may add to run on the finest
#: grid's shape (one compilation instead of one per grid, each worth about this much).
SHARE_WORK = 3e8


def _depth(delta: float, eps_max: float) -> float:
    """L: the log of the smallest relative mass kept."""
    return eps_max + math.log(1.0 / delta) + MARGIN


def _gdp_epsilon(mu: float, delta: float) -> float:
    """epsilon(delta) of mu-GDP (Corollary 2.13 of arXiv:1905.02383), solved in log space:
    delta = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)."""
    norm = scipy.stats.norm

    def excess(eps):
        a, b = norm.logcdf(mu / 2 - eps / mu), norm.logcdf(-mu / 2 - eps / mu)
        ratio = min(eps + b - a, 0.0)
        return a + math.log1p(-math.exp(ratio)) - math.log(delta) if ratio < 0 else -math.inf

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(scipy.optimize.brentq(excess, 0.0, hi, xtol=1e-9, rtol=1e-12))


def epsilon_bound(mech, delta: float) -> float:
    r"""An upper bound on the last model's $\varepsilon(\delta)$ of any scalar
    construction: each step that can carry the canary is a Gaussian mechanism of
    sensitivity $\eta_t C / (\eta_t \sigma C) = 1/\sigma$ (the canary's clipped gradient,
    against the step's noise; Poisson sampling only lowers it), so the $n$ such steps
    compose to $\sqrt n / \sigma$-GDP (Corollary 3.3 of arXiv:1905.02383, adaptively), and
    the last model (post-processing, the projection included) is no less private."""
    n = len(mech.canary_schedule.steps(mech.steps))
    if n == 0:
        return 0.0
    return _gdp_epsilon(math.sqrt(n) / float(mech.noise_multiplier), delta)


def targets(mech, delta: float) -> list[float]:
    """The `EPS_TARGETS` to try, each at most 1.1 x `epsilon_bound` + 2 (the bound with a
    margin for the grids' own error), ending at the first that reaches it."""
    bound = 1.1 * epsilon_bound(mech, delta) + 2.0
    out = []
    for target in EPS_TARGETS:
        out.append(min(target, bound))
        if bound <= target:
            break
    return out


def _log_dropped(mech, k_lo, windows) -> float:
    """log of an upper bound on the mass the count windows leave out per step (the union
    of each group's two tails)."""
    if not windows or mech.batching != "poisson":
        return -math.inf
    n = np.asarray(mech.data_counts(), np.float64).reshape(-1)
    q = float(mech.sampling_prob)
    tails = []
    for j, width in enumerate(windows):
        lo, hi = k_lo[j], k_lo[j] + width - 1
        if lo > 0:
            tails.append(scipy.stats.binom.logcdf(lo - 1, n[j], q))
        if hi < n[j]:
            tails.append(scipy.stats.binom.logsf(hi, n[j], q))
    return float(np.logaddexp.reduce(tails)) if tails else -math.inf


def _chunk(steps: int) -> int:
    """Steps per call: the least power of 2 >= T up to `CHUNK` (so that nearby T share a
    program), else `CHUNK` (the steps past T masked)."""
    return min(CHUNK, 1 << max(steps - 1, 0).bit_length())


def _interval(mech, cells: float, delta: float, eps_max: float, support):
    """The interval every grid covers: the given `support`, or the drift's hull widened by
    sqrt(2 L) + 2 accumulated noise sds (`layout`), at the coarsest grid's `cells`."""
    depth = _depth(delta, eps_max)
    lay = layout(mech, cells, support, sds=math.sqrt(2.0 * depth) + 2.0,
                 tail=math.exp(-depth))  # fmt: skip
    return lay.lo, lay.hi


def _cells(mech, cells_per_sd: float, level: int) -> float:
    """Cells per sd of grid `level` (`cells_per_sd` x 2^level, or a little more): a spacing
    that divides the smallest clipped move eta_t C a whole number of times (n_0 2^level),
    so that a constant field moves the mass by whole cells, with no interpolation
    (the linear process, whose far tails the interpolation's variance would widen)."""
    etas, noise = _host_values(mech)
    move = float((etas * float(mech.clip_norm)).min())
    coarsest = min(float(noise.min()), move) / cells_per_sd
    spacing = move / (math.ceil(move / coarsest * (1 - 1e-12)) * 2**level)
    return min(float(noise.min()), move) / spacing


def _grid(mech, cells_per_sd: float, level: int, delta: float, eps_max: float, interval,
          nodes: int = 0):  # fmt: skip
    """Grid `level` of the ladder on `interval` (at least `nodes` nodes, widened about the
    same centre, m_0 on a node; a projected grid keeps its own size, `cells_per_sd` x
    2^level): (layout, nodes, lo, spacing, kernel half-width in cells)."""
    depth = _depth(delta, eps_max)
    if isinstance(mech, AbstractProjected):
        lay = layout(mech, cells_per_sd * 2**level, tail=math.exp(-depth))
    else:
        with jax.enable_x64(True):
            cells = _cells(mech, cells_per_sd, level)
        lay = layout(mech, cells, interval, tail=math.exp(-depth))
    kernel = int(math.ceil(math.sqrt(2.0 * depth) * lay.widest / lay.spacing)) + 1
    if lay.projected:
        return lay, lay.nodes, lay.lo, lay.spacing, kernel
    size = max(ladder(lay.nodes), nodes)
    return lay, size, lay.lo - ((size - lay.nodes) // 2) * lay.spacing, lay.spacing, kernel


def _plans(mech, cells_per_sd, refinements, delta, eps_max, interval, every_step):
    """Each level's (plan, layout, lo, spacing): on the finest level's shape (nodes, taps),
    one compiled program for all, where the work this adds stays within `SHARE_WORK`;
    else each on its own."""
    grids = [_grid(mech, cells_per_sd, k, delta, eps_max, interval)
             for k in range(refinements)]  # fmt: skip
    steps = mech.steps
    finest_nodes, finest_kernel = grids[-1][1], grids[-1][4]
    extra = sum((finest_nodes - g[1]) * (2 * g[4] + 1) * steps for g in grids[:-1])
    share = not grids[0][0].projected and extra <= SHARE_WORK
    plans = []
    for k, (lay, nodes, lo, spacing, kernel) in enumerate(grids):
        if share and k < refinements - 1:
            lay, nodes, lo, spacing, kernel = _grid(
                mech, cells_per_sd, k, delta, eps_max, interval, finest_nodes
            )
            kernel = finest_kernel
        kernel = ladder(kernel)  # (each step uses its own taps: nearby grids share a shape)
        reach = kernel + 2 if lay.projected else 2
        plan = LogPlan(nodes, reach, kernel, lay.split, lay.projected, _chunk(steps),
                       every_step)  # fmt: skip
        plans.append((plan, lay, lo, spacing))
    return plans


def log_plan_work(
    mech,
    delta: float,
    *,
    cells_per_sd: float,
    refinements: int,
    support=None,
    eps_max: float = EPS_TARGETS[0],
) -> list[tuple[int, int, int]]:
    """Each grid's (nodes, kernel taps, count components) in log space, before any work:
    a step costs about nodes x taps (the convolution) plus nodes x components (the
    drift)."""
    interval = _interval(mech, cells_per_sd, delta, eps_max, support)
    out = []
    for plan, lay, _, spacing in _plans(mech, cells_per_sd, refinements, delta, eps_max,
                                        interval, False):  # fmt: skip
        taps = 2 * math.ceil(math.sqrt(2.0 * _depth(delta, eps_max)) * lay.widest / spacing) + 3
        out.append((plan.nodes, min(taps, 2 * plan.kernel + 1), math.prod(lay.windows)))
    return out


def plan_bytes(plan: LogPlan, components: int) -> int:
    """The largest working set of one step, in bytes."""
    parts = (plan.nodes + 2) * (2 if plan.split else 1)
    width = plan.nodes + 2 * plan.reach + 2 * plan.kernel
    return 8 * (parts * 3 * components * 2 * 8 + width * 2 * 8)


def _run(mech, delta, level, eps_max, every_step, max_bytes, log_tolerance, bar, stop):
    """One grid: (eps, log_in, log_out, log of the lost mass (in, out), grid, spacing,
    per-step eps, nodes, atoms)."""
    plan, lay, lo, spacing = level
    counts, probs = count_components(mech, lay.k_lo, lay.windows)
    with np.errstate(divide="ignore"):
        log_probs = np.log(probs)
    log_dropped = _log_dropped(mech, lay.k_lo, lay.windows)
    needed = plan_bytes(plan, counts.shape[0])
    if needed > max_bytes:
        raise GridTooLargeError(
            f"the exact propagation in log space (epsilon up to {eps_max:g}) needs a grid of "
            f"{plan.nodes:,} nodes x {2 * plan.kernel + 1:,} kernel taps ({_size(needed)} at "
            f"{lay.widest / spacing:g} cells per sd), above max_bytes = {_size(max_bytes)}; "
            "lower cells_per_sd or refinements, or raise max_bytes"
        )
    steps = mech.steps
    hi = lo + (plan.nodes - 1) * spacing
    state0 = _initial_state([mech], plan, np.array([lo]), np.array([spacing]))
    with jax.enable_x64(True), np.errstate(divide="ignore"):
        traced = any_steps(mech)
        state = LogState(
            jnp.log(state0.mass_in[0]), jnp.log(state0.mass_out[0]),
            jnp.asarray(-jnp.inf), jnp.asarray(-jnp.inf),
        )  # fmt: skip
        args = (
            jnp.asarray(lo), jnp.asarray(spacing), jnp.asarray(_initial_model(mech)),
            jnp.asarray(counts, jnp.float64), jnp.asarray(log_probs, jnp.float64),
            jnp.asarray(log_dropped, jnp.float64), jnp.asarray(delta, jnp.float64),
            jnp.asarray(eps_max, jnp.float64), jnp.asarray(_depth(delta, eps_max)),
        )  # fmt: skip
        per_step = []
        for t0 in range(1, steps + 1, plan.chunk):
            stop(t0, steps)
            state, (bad_x, eps_t) = advance_log(
                traced, plan, *args, state, jnp.int32(t0), jnp.int32(steps)
            )
            bad = np.flatnonzero(np.isfinite(np.asarray(bad_x)))
            if bad.size:
                t, x = t0 + int(bad[0]), float(np.asarray(bad_x)[bad[0]])
                raise FloatingPointError(
                    f"{type(mech).__name__}: at step {t} the move of the mass at m = {x:.6g} "
                    f"is not finite ({_diagnose(mech, x, t)})"
                )
            log_lost = max(float(state.lost_in), float(state.lost_out))
            if log_lost > log_tolerance:
                raise LostMassError(
                    f"{type(mech).__name__}: by step {min(t0 + plan.chunk - 1, steps)}, mass "
                    f"e^{log_lost:.4g} left the log-space grid [{lo:.6g}, {hi:.6g}] or a "
                    f"count window, above e^{log_tolerance:.4g} (delta e^-{eps_max:g} / "
                    "10^4). Pass a wider support=(lo, hi) if the law is bounded",
                    0,
                )
            per_step.append(np.asarray(eps_t))
            bar.update(min(plan.chunk, steps - t0 + 1))
        log_in, log_out = np.asarray(state.log_in), np.asarray(state.log_out)
        lost = (float(state.lost_in), float(state.lost_out))
    atoms = 2 if plan.projected else 0
    eps = log_grid_epsilon(log_in, log_out, delta, eps_max, atoms=atoms, xp=np)
    grid = lo + spacing * np.arange(plan.nodes)
    if plan.projected:
        grid = np.concatenate([grid, [grid[0], grid[-1]]])
    eps_steps = np.concatenate(per_step)[:steps] if every_step else None
    return eps, log_in, log_out, lost, grid, spacing, eps_steps, plan.nodes, atoms


def _levels(mech, delta, cells_per_sd, refinements, rtol, support, every_step, max_bytes,
            eps_max, bar, stop):  # fmt: skip
    log_tolerance = math.log(LOST_FRACTION * delta) - eps_max
    interval = _interval(mech, cells_per_sd, delta, eps_max, support)
    args = (eps_max, every_step, max_bytes, log_tolerance, bar, stop)
    bar.set_postfix_str(f"{cells_per_sd:g} cells/sd, log space")
    for widening in range(WIDENINGS + 1):
        plans = _plans(mech, cells_per_sd, refinements, delta, eps_max, interval, every_step)
        try:
            runs = [_run(mech, delta, plans[0], *args)]
            break
        except LostMassError:
            # An expanding drift: the interval three times as wide (automatic only).
            if support is not None or widening == WIDENINGS:
                raise
            centre, half = (interval[0] + interval[1]) / 2, (interval[1] - interval[0]) / 2
            interval = (centre - 3 * half, centre + 3 * half)
            bar.total += mech.steps
    if not math.isfinite(runs[0][0]):
        return runs  # above eps_max: the caller sizes for a larger one
    for k in range(1, refinements):
        bar.set_postfix_str(f"{cells_per_sd * 2**k:g} cells/sd, log space")
        runs.append(_run(mech, delta, plans[k], *args))
        if rtol is not None and k + 1 < refinements:
            summary = _summary(runs, delta, eps_max)
            if summary["error"] <= rtol * summary["epsilon"]:
                bar.total -= mech.steps * (refinements - k - 1)
                break
    return runs


def _bracket(log_p, log_q, delta, log_slack, atoms, eps_max):
    """eps with delta moved by the lost mass (its log `log_slack`) both ways, as the
    grid's bracket: down by it, up by e^eps times it."""
    hi = math.inf if log_slack >= math.log(delta) else log_grid_epsilon(
        log_p, log_q, delta - math.exp(log_slack), eps_max, atoms=atoms, xp=np
    )  # fmt: skip
    up = delta + math.exp(min(hi + log_slack, 0.0) if math.isfinite(hi) else log_slack)
    lo = 0.0 if up >= 1.0 else log_grid_epsilon(log_p, log_q, up, eps_max, atoms=atoms, xp=np)
    return lo, hi


def _summary(runs, delta: float, eps_max: float) -> dict:
    """The fields of `ExactEpsilon` from the runs (coarsest first), as the grid ladder's
    summary gives them."""
    _, log_in, log_out, log_lost, grid, _, per_step, nodes, atoms = runs[-1]
    lost = (math.exp(log_lost[0]), math.exp(log_lost[1]))
    total_in = np.logaddexp.reduce(log_in)
    total_out = np.logaddexp.reduce(log_out)
    mass_error = max(abs(1.0 - math.exp(total_in) - lost[0]),
                     abs(1.0 - math.exp(total_out) - lost[1]))  # fmt: skip
    eps = [float(r[0]) for r in runs]
    fields = ladder_fields(
        eps, [float(r[5]) for r in runs],
        eps_bracket=_bracket(log_in, log_out, delta, max(log_lost), atoms, eps_max),
        resolved=all(math.isfinite(e) for e in eps), limit=math.inf,
        per_step=per_step, coarser_step=runs[-2][6] if len(runs) > 1 else None,
    )  # fmt: skip
    return fields | {
        "grid": grid, "mass_in": np.exp(log_in), "mass_out": np.exp(log_out),
        "lost_mass": lost, "mass_error": float(mass_error), "atoms": atoms, "nodes": nodes,
        "log_space": True,
    }  # fmt: skip


def log_ladder(mech, delta, *, cells_per_sd, refinements, rtol, support, every_step,
               max_bytes, bar, stop) -> dict:  # fmt: skip
    """The ladder of log-space grids for one mechanism, sized for each of `targets` in
    turn until the value is within it: the fields of `ExactEpsilon` (`_summary`), with
    `log_space` True."""
    for eps_max in targets(mech, delta):
        runs = _levels(mech, delta, cells_per_sd, refinements, rtol, support, every_step,
                       max_bytes, eps_max, bar, stop)  # fmt: skip
        summary = _summary(runs, delta, eps_max)
        if summary["resolved"]:
            return summary
    return summary


def beyond_resolution(mech, delta, *, cells_per_sd, refinements, rtol, support, every_step,
                      max_bytes, progress, stop) -> dict:  # fmt: skip
    """`log_ladder` for a mechanism whose grid value is beyond `resolution_limit(delta)`,
    after an `ExactCostWarning` if it is predicted to be slow, with its own progress bar
    (`stop(t0, steps)` is called between chunks: it raises to abandon the call)."""
    from advsim.exact._cost import estimate_seconds, warn_if_slow

    warn_if_slow(
        estimate_seconds(mech, delta, cells_per_sd=cells_per_sd, refinements=refinements,
                         support=support, log_space=True),
        f"the exact epsilon of {type(mech).__name__} (T = {mech.steps}) beyond the grid's "
        "resolution, in log space,",
        "lower cells_per_sd or refinements, or pass rtol",
        stacklevel=5,
    )  # fmt: skip
    bar = tqdm(total=mech.steps * refinements, desc="exact law (log space)", unit="step",
               disable=not progress, leave=False)  # fmt: skip
    with bar:
        summary = log_ladder(mech, delta, cells_per_sd=cells_per_sd, refinements=refinements,
                             rtol=rtol, support=support, every_step=every_step,
                             max_bytes=max_bytes, bar=bar, stop=stop)  # fmt: skip
    return summary

"""Host-side helpers of an exact call: the batch, its checks, its first state, its groups,
each grid's plan.

Kept apart from `advsim.exact._api` (the public call and the refinement ladder) so that
each module stays short; nothing here runs a propagation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim._mechanism import AbstractMechanism
from advsim.exact._divergence import grid_epsilon_host
from advsim.exact._plan import combine, layout, plan_bytes
from advsim.exact._programs import SHARE_BUDGET, shared_shapes
from advsim.exact._propagate import GridState, _fields


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


#: Steps per `advance` call, whatever T (the steps past T are masked): one chunk length
#: lets every T share the compiled propagation (`advsim.exact._programs`); a grid whose
#: masked steps would cost more than a compilation gets a chunk of its own (`_level_plan`).
CHUNK = 100


def _level_plan(mechs, cells, supports, every_step, shape=(0, 0), max_bytes=8 * 2**30, share=True):
    """The layouts and the batch's plan at `cells` per sd (at least `shape`'s nodes and FFT
    size, so that several grids share one compiled propagation): in chunks of `CHUNK`
    steps and, with `share`, on a shared shape (`advsim.exact._programs`), where the work
    this adds (masked steps, extra FFT points) stays within `SHARE_BUDGET`; not on a
    shared shape where the caller set the interval (the grid then keeps to it)."""
    layouts = [layout(m, cells, sup) for m, sup in zip(mechs, supports, strict=True)]
    steps, batch = mechs[0].steps, len(mechs)
    chunk = CHUNK

    def planned(nodes: int, fft_size: int):
        return combine(layouts, chunk, every_step, nodes=nodes, fft_size=fft_size, mechs=mechs)

    best = planned(*shape)
    own = best[0]
    budget = SHARE_BUDGET / batch
    if -steps % CHUNK * own.fft_size > budget:
        # The masked steps past T would cost too much: a chunk of its own that divides T
        # about evenly (as many calls, fewer steps masked than calls), on its own shape.
        chunk = math.ceil(steps / math.ceil(steps / CHUNK))
        return layouts, planned(*shape)
    if share and not own.projected:  # (a projected grid's spacing is set by its size)
        run = math.ceil(steps / CHUNK) * CHUNK  # the steps run, masked ones included
        for nodes, fft_size in shared_shapes(own.nodes, own.fft_size):
            if run * fft_size - steps * own.fft_size > budget:
                break
            candidate = planned(nodes, fft_size)
            plan = candidate[0]
            if (plan.nodes, plan.fft_size) == (nodes, fft_size):
                if plan_bytes(plan, batch) <= max_bytes:
                    best = candidate
                break
    return layouts, best

r"""Which compiled programs a propagation runs on: one for every T, and shared grid shapes.

Compiling the propagation (`advance`) costs seconds; running a grid of a few thousand
nodes for a few hundred steps costs a fraction of that. Two things let calls share the
compiled programs:

- **T is traced.** `advance` takes the step count as a traced value, and a mechanism whose
  methods do not read `steps` (the traced program of everything the engine asks of it is
  the same at its T and at `STEPS_PLACEHOLDER`) is passed with the placeholder for its
  static `steps` (`any_steps`): its law at every T then runs in the same programs (the
  propagation, the step sizes, the noise-free hulls). A mechanism that reads T keeps it
  (one program per T, as before): nothing is assumed, it is compared.
- **Shared shapes.** A grid's shape (nodes, FFT size) is static. Where it is cheap, a grid
  runs on a larger shared shape from a short list (`shared_shapes`: $3 \cdot 2^{k-2}$
  nodes on an FFT of $2^k$ points) instead of its own `ladder` size, so that grids of
  nearby sizes, other T and other refinement levels land on the same program; and the
  steps run in chunks of one length whatever T, the steps past T masked. It is cheap
  when the work this adds (extra FFT points and masked steps, times the batch) stays
  within `SHARE_BUDGET`, a quarter of what a compilation costs. The choice depends on
  the call's own values only (never on what ran before), so a value does not depend on
  the order of the calls. A wider grid holds the same nodes (same spacing, $m_0$ on a
  node) plus some far out: its value differs only by the FFT's rounding (at most 2e-8 for
  epsilon up to 8 on the accuracy table's rows; nearer the float64 resolution more:
  2.9e-5 at epsilon = 12.1, where the rounding it measures widens the error estimate).
"""

from __future__ import annotations

import copy
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim._mechanism import AbstractMechanism, AbstractProjected
from advsim.exact._propagate import _fields

__all__ = [
    "COMPILE_NODE_STEPS",
    "SHARE_BUDGET",
    "STEPS_PLACEHOLDER",
    "any_steps",
    "shared_shapes",
    "uses_steps",
]

#: The static `steps` that stands for every T in a compiled program (any value no
#: mechanism is built with would do; the same as the simulation engine's).
STEPS_PLACEHOLDER = 1_000_003
#: One compilation of the propagation costs about as much as running this many node-steps
#: of it (FFT points x steps x batch members): about 2 s of compiling against about
#: 150 ns per node-step, measured on 2 busy cores (the ratio, not the seconds, matters).
COMPILE_NODE_STEPS = 1e7
#: The most work (node-steps) a grid may add to run on a shared program (a larger shape,
#: steps masked past T): a quarter of a compilation, as what it adds is paid on every
#: call and the compilation it may save only when another grid reuses the program.
SHARE_BUDGET = COMPILE_NODE_STEPS / 4
#: The smallest FFT size of the shared shapes (a grid of a few hundred nodes and few steps
#: runs on 3,072 nodes for nothing).
SHARED_MIN_FFT = 4096

#: `uses_steps`'s answers by the mechanism's structure (class, static fields, shapes).
_READS: dict = {}
#: The traced program at `STEPS_PLACEHOLDER`, by the placeholder's structure.
_PLACEHOLDER_PROGRAMS: dict = {}
_MAX_KEPT = 256


def _with_steps(mech: AbstractMechanism, steps: int) -> AbstractMechanism:
    params = copy.copy(mech.params)
    object.__setattr__(params, "steps", steps)
    return eqx.tree_at(lambda m: m.params, mech, params)


def _structure(mech) -> tuple | None:
    """A hashable key of a mechanism's traced program: its pytree structure, static fields
    and array shapes (not their values); None where one cannot be made."""
    try:
        arrays, static = eqx.partition(mech, eqx.is_array)
        leaves, treedef = jax.tree.flatten(arrays)
        key = (treedef, static, tuple((np.shape(x), str(np.asarray(x).dtype)) for x in leaves))
        hash(key)
        return key
    except (TypeError, ValueError):  # an unhashable static field
        return None


def _uses(mech, x, t):
    """Everything the engine's traced code asks of a mechanism (`_step`, `_hulls`,
    `_step_sizes`): its fields, step size, schedule, breakpoints, counts, m_0, projection."""
    canary, data, reg = _fields(mech, x, t)
    out = [canary, data, reg, mech.step_size(t), mech.canary_schedule.mask(t),
           mech.field_breakpoints(), mech.data_counts(), mech.init_model(),
           mech.noise_multiplier, mech.clip_norm, mech.sampling_prob]  # fmt: skip
    if isinstance(mech, AbstractProjected):
        out.append(jax.vmap(mech.project)(x[:, None]))
    return out


def _program(mech) -> tuple | None:
    """`_uses`'s traced program with its constants, as comparable values (None when it
    cannot be traced)."""
    args = (jax.ShapeDtypeStruct((3,), jnp.float64), jax.ShapeDtypeStruct((), jnp.int32))
    try:
        with jax.enable_x64(True):
            jaxpr, _, static = eqx.filter_make_jaxpr(_uses)(mech, *args)
    except Exception:  # noqa: BLE001 (a method that cannot run at the placeholder's T)
        return None
    consts = tuple(
        (np.asarray(c).tobytes(), str(np.asarray(c).dtype), np.shape(c)) for c in jaxpr.consts
    )
    return str(jaxpr.jaxpr), consts, repr(static)


def _remember(table: dict, key, value):
    if key is not None:
        if len(table) >= _MAX_KEPT:
            table.clear()
        table[key] = value
    return value


def uses_steps(mech: AbstractMechanism) -> bool:
    """Whether the traced program of what the exact engine asks of `mech` (`_uses`) reads
    its `steps`: compared, constants included, at its T and at `STEPS_PLACEHOLDER`
    (True where it cannot be told). Remembered by structure."""
    key = _structure(mech)
    if key is not None and key in _READS:
        return _READS[key]
    placeholder = _with_steps(mech, STEPS_PLACEHOLDER)
    pkey = _structure(placeholder)
    there = _PLACEHOLDER_PROGRAMS[pkey] if pkey in _PLACEHOLDER_PROGRAMS else _remember(
        _PLACEHOLDER_PROGRAMS, pkey, _program(placeholder)
    )  # fmt: skip
    here = _program(mech)
    return _remember(_READS, key, here is None or here != there)


def any_steps(mech: AbstractMechanism, *, template: AbstractMechanism | None = None):
    """`mech` with `STEPS_PLACEHOLDER` for its static `steps` where nothing the engine
    traces reads T (`uses_steps` of `template`, default `mech`: a batch stacked from
    members of one structure asks one of them), so that its every T shares one compiled
    program; else `mech` itself. Only for traced code: the host keeps the real T."""
    if uses_steps(mech if template is None else template):
        return mech
    return _with_steps(mech, STEPS_PLACEHOLDER)


def shared_shapes(nodes: int, fft_size: int):
    """The shared shapes `(nodes', fft')` a grid of `nodes` nodes on `fft_size` FFT points
    could run on, smallest first: $3 \\cdot 2^{k-2}$ nodes on $2^k$ points,
    $2^k \\ge$ `SHARED_MIN_FFT`, with at least its nodes and FFT points (whether its
    kernel's padding fits is for `combine` to say)."""
    k = max(int(math.ceil(math.log2(max(fft_size, SHARED_MIN_FFT)))), 2)
    while True:
        shape = (3 * 2 ** (k - 2), 2**k)
        if shape[0] >= nodes:
            yield shape
        k += 1

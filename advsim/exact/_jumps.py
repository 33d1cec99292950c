r"""Jumps a scalar construction's fields make that `field_breakpoints()` does not declare.

The exact engine splits the grid cell that holds a declared jump into its two sides; a
cell that straddles an undeclared one moves as a whole, to one side: a first-order error in
the cell width that the refinement estimate (`ExactEpsilon.error`) is not built to cover,
and that the grids' observed order does not reveal. So the fields themselves are probed.

**The probe.** Every field the engine reads (the canary's and each data group's, clipped to
$C$ as the engine clips them, and the regularizer's gradient) is evaluated, in float64, on
`PROBE_CELLS` equal cells of `grid_reach(mechanism)` at `PROBE_STEPS` steps (every step
up to T = 16; beyond, 1, 2, T - 1, T and twelve steps evenly spread between them). Each
cell is then halved `HALVINGS` times, keeping the half whose ends differ most. A
continuous field's difference across the kept cell shrinks with its width: by
$2^{-\gamma k}$ over k halvings for a $\gamma$-Holder field (Lipschitz: $\gamma = 1$). A
jump's does not: it stays the jump's size. A cell is a jump when its difference after all
the halvings is at least `KEPT_SHARE` of what it was `COMPARE_HALVINGS` halvings before and
above `ABS_TOLERANCE` (relative to $C$ and the field's range). Then the cell is about
$10^{-12}$ of the reach wide and the jump's position is known to that precision; it is
undeclared when no breakpoint lies in the cell (to within 1e-9 of a first cell's width).

**What it can miss.** A jump smaller than the tolerance; two jumps in one of the first cells
(only the larger is followed: the other is found once the first is declared); a field whose
continuity exponent is below about 0.05 (it looks like a jump: a false alarm, on the safe
side). Beyond T = 16 it reads the fields at 16 steps, not at all T (a field that jumps
only at another step is not seen).
"""

from __future__ import annotations

import dataclasses
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim.exact._plan import check_scalar_law, grid_reach
from advsim.exact._programs import any_steps
from advsim.exact._propagate import _fields

__all__ = [
    "UndeclaredJump",
    "UndeclaredJumpWarning",
    "describe_jumps",
    "undeclared_jumps",
    "warn_undeclared_jumps",
]

#: Equal cells of the grid's reach that the probe starts from.
PROBE_CELLS = 1024
#: The steps read: all of them up to this T, else this many spread over [1, T].
PROBE_STEPS = 16
#: How many times each cell is halved.
HALVINGS = 36
#: The difference after all halvings is compared with the one this many halvings before.
COMPARE_HALVINGS = 16
#: A jump keeps at least this share of its difference over `COMPARE_HALVINGS` halvings
#: (a Lipschitz field keeps 2^-16, a 0.05-Holder one 0.57).
KEPT_SHARE = 0.6
#: The smallest jump reported, relative to max(C, the field's range on the reach).
ABS_TOLERANCE = 1e-9


class UndeclaredJumpWarning(UserWarning):
    """A field of a scalar construction jumps where `field_breakpoints()` declares no
    breakpoint: the exact epsilon then carries a first-order error its `error` does not
    cover (`advsim.exact.undeclared_jumps` says where)."""


@dataclasses.dataclass(frozen=True)
class UndeclaredJump:
    """One jump of a field that `field_breakpoints()` does not declare.

    Attributes:
        position: the model value of the jump (to about 1e-12 of the grid's reach).
        field: "canary", "data group i" or "regularizer".
        step: the step t at which it was seen.
        size: the field's jump there (clipped as the engine clips).
    """

    position: float
    field: str
    step: int
    size: float


@eqx.filter_jit
def _field_values(mech, x, steps):
    """(steps, points, fields): the canary's, each data group's (clipped) and the
    regularizer's field at every point of `x[k]` at step `steps[k]`."""

    def at(xk, t):
        canary, data, reg = _fields(mech, xk, t)
        return jnp.concatenate([canary[:, None], data.reshape(xk.shape[0], -1), reg[:, None]], 1)

    return jax.vmap(at)(x, steps)


def _probe_steps(steps: int) -> list[int]:
    """Every step when T <= `PROBE_STEPS`, else `PROBE_STEPS` of them: 1, 2, T - 1, T and
    steps evenly spread between them (so every T beyond shares one compiled shape)."""
    if steps <= PROBE_STEPS:
        return list(range(1, steps + 1))
    inner = np.linspace(3, steps - 2, PROBE_STEPS - 4).round().astype(int).tolist()
    return sorted({1, 2, steps - 1, steps, *inner})


def _field_name(column: int, columns: int) -> str:
    if column == 0:
        return "canary"
    if column == columns - 1:
        return "regularizer"
    return f"data group {column - 1}"


def _at_own_column(mech, x, ts):
    """(steps, fields, cells): field c's values at the points `x[:, c, :]` (every field is
    evaluated at every point; each keeps its own column)."""
    n, columns, cells = x.shape
    values = _field_values(mech, x.reshape(n, columns * cells), ts)
    values = values.reshape(n, columns, cells, columns)
    return jnp.moveaxis(jnp.diagonal(values, axis1=1, axis2=3), 2, 1)


@eqx.filter_jit
def _halve(mech, a, b, fa, fb, ts):
    """`HALVINGS` halvings of every cell, keeping the half whose ends differ most; also the
    difference `COMPARE_HALVINGS` halvings before the end. One compiled loop."""

    def body(k, carry):
        a, b, fa, fb, before = carry
        mid = 0.5 * (a + b)
        fm = _at_own_column(mech, mid, ts)
        left = jnp.abs(fm - fa) >= jnp.abs(fb - fm)
        a, b = jnp.where(left, a, mid), jnp.where(left, mid, b)
        fa, fb = jnp.where(left, fa, fm), jnp.where(left, fm, fb)
        before = jnp.where(k == HALVINGS - 1 - COMPARE_HALVINGS, jnp.abs(fb - fa), before)
        return a, b, fa, fb, before

    return jax.lax.fori_loop(0, HALVINGS, body, (a, b, fa, fb, jnp.zeros_like(a)))


def _jumps(mech, lo: float, hi: float, steps: list[int], clip: float) -> list[tuple]:
    """(position, field, step, size, cell width) of every jump the halvings keep.

    Every step's and field's cells are halved together, as one array of fixed shape
    (steps x fields x `PROBE_CELLS` points), in one compiled loop (`_halve`): one
    compilation per mechanism structure and number of steps read, whatever the number of
    candidate cells."""
    n, cells = len(steps), PROBE_CELLS
    ts = jnp.asarray(steps, jnp.int32)
    x = np.linspace(lo, hi, cells + 1)
    points = jnp.asarray(np.broadcast_to(x, (n, cells + 1)))
    values = np.asarray(_field_values(mech, points, ts))
    columns = values.shape[2]
    scale = max(clip, float(np.max(np.ptp(values, axis=1))))
    tol = ABS_TOLERANCE * scale
    # Cells as (step, field, cell) arrays.
    a = np.broadcast_to(x[:-1], (n, columns, cells)).copy()
    b = np.broadcast_to(x[1:], (n, columns, cells)).copy()
    fa = np.moveaxis(values[:, :-1], 2, 1).copy()
    fb = np.moveaxis(values[:, 1:], 2, 1).copy()
    live = np.abs(fb - fa) > tol
    if not live.any():
        return []
    a, b, fa, fb, before = (np.asarray(v) for v in _halve(mech, a, b, fa, fb, ts))
    size = np.abs(fb - fa)
    jump = live & (size > tol) & (size >= KEPT_SHARE * before)
    return [
        (0.5 * (a[s, c, i] + b[s, c, i]), _field_name(c, columns), steps[s],
         float(fb[s, c, i] - fa[s, c, i]), float(b[s, c, i] - a[s, c, i]))
        for s, c, i in zip(*np.nonzero(jump), strict=True)
    ]  # fmt: skip


def undeclared_jumps(mechanism, support: tuple[float, float] | None = None) -> list[UndeclaredJump]:
    """The jumps of `mechanism`'s fields inside `grid_reach(mechanism)` that its
    `field_breakpoints()` does not declare. Each field the engine reads (clipped as it
    clips them) is evaluated on 1024 cells of the reach at 16 steps (every step up to
    T = 16), and each cell halved 36 times keeping the half whose ends differ most: a
    continuous field's difference shrinks with the cell, a jump's does not
    (`docs/guide/exact.md`, "Declaring jumps": the thresholds, and what the probe can
    miss).

    `advsim.exact.last_iterate_epsilon` runs it before any work and warns
    (`UndeclaredJumpWarning`) when it finds one; `advsim.testing.check_mechanism` fails on
    one (its `"breakpoints"` check).

    Args:
        mechanism: an `advsim.AbstractScalarLaw` mechanism.
        support: the interval to probe (default `grid_reach(mechanism)`; the engine
            passes the interval of the grid it planned).

    Returns:
        One `UndeclaredJump` per field, step and position (the same jump seen at several
        steps is listed once, at the first), sorted by position; empty when every jump is
        declared.

    Raises:
        TypeError, ValueError: as `check_scalar_law`.

    Example:
        >>> from advsim.mechanisms import ThresholdLandscape
        >>> undeclared_jumps(ThresholdLandscape(5, 1.0, 4))  # its jump at h is declared
        []
    """
    if support is None:
        lo, hi = grid_reach(mechanism)  # checks the mechanism (`check_scalar_law`)
    else:
        check_scalar_law(mechanism)
        lo, hi = float(support[0]), float(support[1])
    if not hi > lo:
        raise ValueError(f"support must be (lo, hi) with lo < hi, got {(lo, hi)!r}")
    return _undeclared(mechanism, lo, hi)


def _undeclared(mechanism, lo: float, hi: float) -> list[UndeclaredJump]:
    """`undeclared_jumps` on [lo, hi] of a mechanism already checked (`check_scalar_law`)."""
    with jax.enable_x64(True):
        bps = np.asarray(mechanism.field_breakpoints(), np.float64).reshape(-1)
        template = any_steps(mechanism)
        clip = float(mechanism.clip_norm)
        seen: dict[tuple[str, float], UndeclaredJump] = {}
        cell = (hi - lo) / PROBE_CELLS
        found = _jumps(template, lo, hi, _probe_steps(mechanism.steps), clip)
        for position, field, t, size, width in sorted(found, key=lambda j: j[2]):
            if np.any(np.abs(bps - position) <= width + 1e-9 * cell):
                continue
            key = (field, round(position / (1e-6 * cell)))
            if key not in seen:
                seen[key] = UndeclaredJump(float(position), field, t, size)
    return sorted(seen.values(), key=lambda j: (j.position, j.field))


def describe_jumps(jumps: list[UndeclaredJump], most: int = 5) -> str:
    """The sentence that names undeclared jumps (the first `most`, then a count), shared by
    the engine's warning and `check_mechanism`'s failure."""
    shown = "; ".join(
        f"{j.field} at m = {j.position:.6g} (step {j.step}, size {j.size:.3g})"
        for j in jumps[:most]
    )
    more = f" and {len(jumps) - most} more" if len(jumps) > most else ""
    return f"a field jumps where field_breakpoints() declares no breakpoint: {shown}{more}"


def warn_undeclared_jumps(mechanism, support=None, *, stacklevel: int = 2) -> list[UndeclaredJump]:
    """`undeclared_jumps(mechanism, support)`, and an `UndeclaredJumpWarning` naming them
    (at most five) when there are any."""
    return _warn(mechanism, undeclared_jumps(mechanism, support), stacklevel + 1)


def warn_planned_jumps(mechanism, lo: float, hi: float, *, stacklevel: int = 2) -> list:
    """`warn_undeclared_jumps` on the interval of a grid the engine planned for
    `mechanism` (planning checked it: not checked again)."""
    return _warn(mechanism, _undeclared(mechanism, lo, hi), stacklevel + 1)


def _warn(mechanism, jumps: list[UndeclaredJump], stacklevel: int) -> list[UndeclaredJump]:
    if jumps:
        warnings.warn(
            f"{type(mechanism).__name__}: {describe_jumps(jumps)}. The exact epsilon then "
            "carries a first-order error that its `error` does not cover; declare every jump "
            "inside "
            "advsim.exact.grid_reach(mechanism) in field_breakpoints()",
            UndeclaredJumpWarning,
            stacklevel=stacklevel + 1,
        )
    return jumps

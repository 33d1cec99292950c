"""A found construction looked at: its gradient fields and its last model's law."""

from __future__ import annotations

import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from advsim._plot_style import save_figure, styled_pyplot, tex_number
from advsim.exact import last_iterate_epsilon
from advsim.exact._api import MASS_FLOOR

__all__ = ["plot_fields"]

#: The canary's line: its own colour, dashed, thicker and drawn over the other fields, so a
#: data group with the same field (the landscape's groups at step 1) never hides it.
_CANARY_STYLE = dict(color="black", ls=(0, (4, 2)), lw=2.2, zorder=6)


def _named_fields(mech):
    """(name, field) of the canary, every data group and the regularizer."""
    named = [("canary", mech.canary)] + [
        (f"group {i} (x{int(n)})", g)
        for i, (g, n) in enumerate(zip(mech.groups, mech.counts, strict=True))
    ]
    return named + [("regularizer", mech.regularizer)]


def _field_lines(mech, xs):
    """(name, label, values at xs) of every nonzero field, the first and last step's rows
    if they differ."""
    out = []
    with jax.enable_x64(True):
        m = jnp.asarray(xs, jnp.float64)
        for name, field in _named_fields(mech):
            first = np.asarray(field(m, jnp.int32(1)))
            last = np.asarray(field(m, jnp.int32(mech.steps)))
            if not np.any(first) and not np.any(last):
                continue
            if field.rows > 1 and not np.allclose(first, last):
                out.append((name, f"{name}, step 1", first))
                out.append((name, f"{name}, step {mech.steps}", last))
            else:
                out.append((name, name, first))
    return out


def _largest_fields(mech, xs) -> tuple[float, float]:
    """max |regularizer field| and max |canary or group field| (before clipping) over `xs`
    and every step's row: the bound on the regularizer applies to its knot values and its
    jumps one by one, so its field (values plus the jumps summed) may be larger."""
    reg, data = 0.0, 0.0
    with jax.enable_x64(True):
        m = jnp.asarray(xs, jnp.float64)
        for name, field in _named_fields(mech):
            largest = max(
                float(np.max(np.abs(np.asarray(field(m, jnp.int32(t))))))
                for t in range(1, field.rows + 1)
            )
            if name == "regularizer":
                reg = max(reg, largest)
            else:
                data = max(data, largest)
    return reg, data


def _has_shape(field) -> bool:
    """Whether a field's knots mean anything: it is not one constant (a linear loss)."""
    jumps = field.jumps is not None and np.any(field.jumps)
    return bool(jumps or np.ptp(field.values) > 0)


def _schedule_text(mech) -> str:
    """When the canary can be in the batch: "step 1 only, unsampled", "every step, sampled"."""
    s = mech.canary_schedule
    steps = s.steps(mech.steps)
    if len(steps) == 1:
        when = f"step {steps[0]} only"
    elif s.period == 1 and s.first == 1 and len(steps) == mech.steps:
        when = "every step"
    else:
        when = f"steps {', '.join(map(str, steps[:3]))}, ..."
    return f"{when}, {'sampled' if s.sampled else 'unsampled'}"


def cell_text(mech, delta: float) -> str:
    """The cell of a construction in one line: T, the batch (B or q), sigma, delta and when
    the canary is in the batch."""
    counts = [int(n) for n in np.asarray(mech.counts).reshape(-1)]
    if mech.batching == "fixed":
        b = sum(counts)
        batch = f"fixed batch B = {b}" + (f" ({'+'.join(map(str, counts))})" if len(counts) > 1
                                          else "")  # fmt: skip
    else:
        data = f"data {'+'.join(map(str, counts))}" if counts else "no data"
        batch = f"Poisson q = {float(mech.sampling_prob):g}, {data}"
    return (
        f"T = {mech.steps}, {batch}, $\\sigma$ = {float(mech.noise_multiplier):g}, "
        f"$\\delta$ = ${tex_number(delta)}$; canary at {_schedule_text(mech)}"
    )


def plot_fields(mech, path_stem: str | Path, *, title: str = "", exact=None,
                delta: float = 1e-5) -> list[Path]:  # fmt: skip
    r"""Three panels over the model value m, as `<path_stem>.png` and `.pdf` (each written
    atomically):

    - the construction's gradient fields (the canary's and the groups' as the engine clips
      them; the canary dashed in black, drawn over the groups, its knots marked);
    - the density of the last model in both worlds;
    - the log-likelihood ratio $\log(p_\text{in}(m) / p_\text{out}(m))$ of the last model,
      where both masses are above the engine's rounding floor (`MASS_FLOOR`, below which a
      mass is convolution noise), with $\pm\varepsilon(\delta)$: where it leaves that band
      is where the last model leaks.

    The title names the cell (T, B or q, sigma, delta, the canary's steps), then `title`
    (the caller's line), then the largest regularizer field and the largest canary or group
    field on the plotted range, at any step (the search bounds the regularizer's knot values
    and jumps separately, not its field).

    Args:
        mech: a `PiecewiseConstruction`.
        path_stem: where to write (without the extension).
        title: a line to add to the title (how the construction was found, its epsilon).
        exact: its `last_iterate_epsilon` result (computed at `delta` when None).
        delta: the delta of `exact` when it is computed here.
    """
    if exact is None:
        exact = last_iterate_epsilon(mech, delta, progress=False)
    n = np.asarray(exact.grid).size - int(exact.atoms)  # the atoms are not on the grid
    grid = np.asarray(exact.grid)[:n]
    p_in, p_out = np.asarray(exact.mass_in)[:n], np.asarray(exact.mass_out)[:n]
    mass = np.maximum(p_in, p_out)
    keep = np.flatnonzero(mass > 1e-12 * mass.max())
    lo, hi = grid[keep[0]], grid[keep[-1]]
    xs = np.linspace(lo, hi, 801)
    c = float(mech.clip_norm)
    plt = styled_pyplot()
    fig, (top, middle, bottom) = plt.subplots(
        3, 1, figsize=(6.2, 7.2), sharex=True, height_ratios=[1.2, 1.0, 1.0]
    )
    colours = iter(f"C{i}" for i in range(10))
    for name, label, values in _field_lines(mech, xs):
        if name == "canary":
            continue
        clipped = values if name == "regularizer" else np.clip(values, -c, c)
        top.plot(xs, clipped, label=label, color=next(colours))
    for name, label, values in _field_lines(mech, xs):
        if name != "canary":
            continue
        top.plot(xs, np.clip(values, -c, c), label=f"{label} ({_schedule_text(mech)})",
                 **_CANARY_STYLE)  # fmt: skip
        knots = np.asarray(mech.canary.knots)
        knots = knots[(knots >= lo) & (knots <= hi)]
        if _has_shape(mech.canary) and knots.size:
            at = np.interp(knots, xs, np.clip(values, -c, c))
            top.plot(knots, at, ls="none", marker="D", ms=4, color="black", zorder=7,
                     label="canary's knots")  # fmt: skip
    top.axhline(0.0, color="0.6", lw=0.6)
    top.set_ylabel("gradient at m")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    h = float(exact.spacings[-1])
    middle.plot(grid, p_in / h, label="canary in", color="C3")
    middle.plot(grid, p_out / h, label="canary out", color="C0", ls="--")
    middle.set_ylabel(f"density of $m_{{{mech.steps}}}$")
    middle.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    both = (p_in > MASS_FLOOR) & (p_out > MASS_FLOOR)
    llr = np.full(grid.shape, np.nan)
    llr[both] = np.log(p_in[both] / p_out[both])
    eps = float(exact.epsilon)
    bottom.plot(grid, llr, color="C4", label="log-likelihood ratio")
    band = rf"$\pm\varepsilon(\delta)$ = $\pm${eps:.3g}"
    bottom.axhline(eps, color="0.35", ls=":", lw=1.0, label=band)
    bottom.axhline(-eps, color="0.35", ls=":", lw=1.0)
    bottom.axhline(0.0, color="0.6", lw=0.6)
    bottom.set_ylabel(r"$\log\,p_\mathrm{in}(m) / p_\mathrm{out}(m)$")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
                  title=f"where both masses\n> {MASS_FLOOR:g} (rounding)",
                  title_fontsize=6)  # fmt: skip
    bottom.set_xlim(lo, hi)
    bottom.set_xlabel("model value m")
    reg, data = _largest_fields(mech, xs)
    lines = [cell_text(mech, float(exact.delta))]
    if title:
        lines.append(title)
    lines.append(
        f"largest |field| on the plotted range, any step: regularizer {reg:.3g}, "
        f"canary or group {data:.3g} (clipped to C = {c:g})"
    )
    lines = "\n".join(lines).split("\n")
    fig.suptitle("\n".join(textwrap.fill(line, 120) for line in lines), fontsize=7)
    return save_figure(fig, path_stem)

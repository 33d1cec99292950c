"""A found construction looked at: its gradient fields and its last model's law."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from advsim._plot_style import save_figure, styled_pyplot
from advsim.exact import last_iterate_epsilon

__all__ = ["plot_fields"]


def _field_lines(mech, xs):
    """(label, values at xs) of every field, the first and last step's rows if they differ."""
    out = []
    named = [("canary", mech.canary)] + [
        (f"group {i} (x{int(n)})", g)
        for i, (g, n) in enumerate(zip(mech.groups, mech.counts, strict=True))
    ]
    named.append(("regularizer", mech.regularizer))
    with jax.enable_x64(True):
        m = jnp.asarray(xs, jnp.float64)
        for name, field in named:
            first = np.asarray(field(m, jnp.int32(1)))
            last = np.asarray(field(m, jnp.int32(mech.steps)))
            if not np.any(first) and not np.any(last):
                continue
            if field.rows > 1 and not np.allclose(first, last):
                out.append((f"{name}, step 1", first))
                out.append((f"{name}, step {mech.steps}", last))
            else:
                out.append((name, first))
    return out


def plot_fields(mech, path_stem: str | Path, *, title: str = "", exact=None) -> list[Path]:
    """The construction's gradient fields against the model value (top; the canary's and
    the groups' fields as the engine clips them) and its last model's law in both worlds
    (bottom, from `last_iterate_epsilon` at delta = 1e-5 unless `exact` is given), as
    `<path_stem>.png` and `.pdf`, each written atomically."""
    if exact is None:
        exact = last_iterate_epsilon(mech, 1e-5, progress=False)
    grid = np.asarray(exact.grid)
    mass = np.maximum(np.asarray(exact.mass_in), np.asarray(exact.mass_out))
    keep = np.flatnonzero(mass > 1e-12 * mass.max())
    lo, hi = grid[keep[0]], grid[keep[-1]]
    xs = np.linspace(lo, hi, 801)
    c = float(mech.clip_norm)
    plt = styled_pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5.5, 5.0), sharex=True)
    for label, values in _field_lines(mech, xs):
        clipped = values if label.startswith("regularizer") else np.clip(values, -c, c)
        top.plot(xs, clipped, label=label)
    top.axhline(0.0, color="0.6", lw=0.6)
    top.set_ylabel("gradient at m")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    h = float(exact.spacings[-1])
    bottom.plot(grid, np.asarray(exact.mass_in) / h, label="canary in")
    bottom.plot(grid, np.asarray(exact.mass_out) / h, label="canary out", ls="--")
    bottom.set_xlim(lo, hi)
    bottom.set_xlabel("model value m")
    bottom.set_ylabel(f"density of $m_{{{mech.steps}}}$")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=7)
    return save_figure(fig, path_stem)

"""A found construction looked at (its fields) and confirmed (by simulation)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from advsim._plot_style import save_figure, styled_pyplot
from advsim._simulate import simulate
from advsim.adversaries import GridLikelihoodRatio
from advsim.audits import audit, certify_violation
from advsim.bounds import bounds_for
from advsim.exact import last_iterate_epsilon

__all__ = ["Confirmation", "confirm", "plot_fields"]


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


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """A construction's exact epsilon confirmed by simulation.

    Attributes:
        exact_epsilon, exact_error: `last_iterate_epsilon` (refinement estimate).
        eps_lower: the assumption-free `"eps_delta"` audit (held-out threshold, confidence
            `confidence`) of the Neyman-Pearson score (`GridLikelihoodRatio`) over `runs`
            runs per world; sound when it is at most `exact_epsilon`.
        guarantee: what `eps_lower` certifies.
        runs: runs per world.
        heuristic: the last-iterate heuristic at the cell.
        certified: where the exact epsilon beats the heuristic, whether
            `certify_violation(..., "heuristic")` certifies it at these runs (None where it
            does not beat it).
        seed: the simulation's key.
    """

    exact_epsilon: float
    exact_error: float
    eps_lower: float
    guarantee: str
    runs: int
    heuristic: float
    certified: bool | None
    seed: int

    @property
    def sound(self) -> bool:
        """eps_lower <= exact epsilon + its error."""
        return self.eps_lower <= self.exact_epsilon + self.exact_error


def confirm(mech, delta: float, runs: int, *, seed: int = 0, confidence: float = 0.95,
            progress: bool | None = None) -> Confirmation:  # fmt: skip
    """Runs `mech` through the simulation engine (`runs` per world) with the
    Neyman-Pearson score of its exact law, audits it assumption-free with a held-out
    threshold, and, where its exact epsilon beats the heuristic, asks `certify_violation`
    whether the runs certify it."""
    exact = last_iterate_epsilon(mech, delta, progress=False)
    adversary = GridLikelihoodRatio.from_exact(exact)
    scores = simulate(mech, adversary, runs, key=seed, progress=progress)
    result = audit(scores, "eps_delta", delta=delta, confidence=confidence,
                   threshold_selection="split", seed=seed)  # fmt: skip
    acc = mech.accounting()
    heuristic = float(bounds_for(acc, delta)["heuristic"])
    certified = None
    if exact.epsilon - exact.error > heuristic:
        cert = certify_violation(scores, "heuristic", acc, delta=delta, confidence=confidence,
                                 seed=seed)  # fmt: skip
        certified = bool(cert.certified)
    return Confirmation(
        exact_epsilon=exact.epsilon, exact_error=exact.error,
        eps_lower=float(result.eps_lower), guarantee=result.guarantee.label, runs=int(runs),
        heuristic=heuristic, certified=certified, seed=seed,
    )  # fmt: skip

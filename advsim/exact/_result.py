"""`ExactEpsilon`: the exact epsilon of a scalar construction's last model, with its error
estimate, the grids it was read on and the two laws it was read from (`last_iterate_epsilon`
in `advsim.exact._api` computes it)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from advsim.exact._divergence import discrete_tradeoff, grid_delta

__all__ = ["ExactEpsilon", "ladder_fields"]


@dataclasses.dataclass(frozen=True)
class ExactEpsilon:
    r"""The last model's privacy from its law in both worlds, with the numerical error.

    Attributes:
        epsilon: $\varepsilon(\delta)$ of the last model on the finest grid (both
            directions, add/remove).
        delta: the $\delta$ it was computed at.
        error: the change between the two finest grids (on three grids
            $|\varepsilon_{h/2} - \varepsilon_{h/4}|$) plus the effect of the mass the
            grid lost (`lost_mass`): an estimate of the discretisation error, not a bound
            (`error_kind`). At first-order convergence it is the finest grid's error; at the
            second order it overstates it three times. nan with a single grid. Measured to
            cover the actual error where `error_reliable`, and not reliably beyond.
        error_kind: "refinement estimate" (see `error`).
        epsilons: $\varepsilon$ on each grid used, coarsest first (`grids` of them).
        spacings: each grid's spacing $h$ (model units).
        cells_per_sd: each grid's nodes per (smallest) noise standard deviation: which
            grids were used (with `rtol`, as many as reached it).
        differences: successive differences of `epsilons`.
        observed_order: $\log_2$ of the ratio of the two differences (nan when undefined):
            about 2 for smooth fields, 1 where the law has an atom or a kink.
        lost_mass: mass of (in, out) that left the finest grid or a count window, summed
            over the steps; never dropped silently.
        mass_error: $|1 - \text{mass kept} - \text{lost}|$ of the finest grid (rounding).
        resolved: False when no value was resolved (then `error` is inf): beyond
            `resolution_limit(delta)` the laws are propagated in log space (`log_space`),
            which resolves $\varepsilon$ up to 512; False only above that.
        eps_bracket: $\varepsilon$ of the finest grid with $\delta$ moved by the lost mass
            and the rounding, both ways: the range the lost mass alone allows.
        nodes: the finest grid's nodes.
        atoms: 2 for a projected run (the last two masses are its atoms at the interval's
            ends, the end nodes then carry half a cell), else 0.
        grid: the finest grid's node positions (then the atoms' positions).
        mass_in, mass_out: the last model's masses on `grid` in each world.
        epsilon_per_step: $\varepsilon(\delta)$ after every step on the finest grid, when
            asked for (`every_step=True`), else None.
        error_per_step: the error estimate of each of `epsilon_per_step`, as `error`: the
            change between the two finest grids after that step plus the last step's
            lost-mass term (its last entry is `error`); None without `every_step`, nan
            with a single grid.
        seconds: wall time of the whole call.
        rtol: the relative tolerance asked for (`last_iterate_epsilon`'s `rtol`), or None
            for a fixed number of grids.
        converged: with `rtol`, whether `error <= rtol * epsilon` (False: the most grids
            allowed, `refinements`, did not reach it; the value and its error are still
            those of the finest grid); None without `rtol`.
        log_space: whether the laws were propagated as log-masses (an epsilon beyond
            `resolution_limit(delta)`; `docs/guide/exact.md`, "Large epsilons"): then
            `nodes`, `spacings` and `eps_bracket` are those of the log-space grids.
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
    error_per_step: np.ndarray | None = dataclasses.field(repr=False, default=None)
    seconds: float = 0.0
    rtol: float | None = None
    converged: bool | None = None
    log_space: bool = False

    @property
    def grids(self) -> int:
        """How many grids were propagated (each twice as fine as the one before)."""
        return len(self.epsilons)

    @property
    def error_reliable(self) -> bool:
        """Whether `error` is in the regime where it was measured to cover the actual
        error: an `observed_order` of at most 3, or none (fewer than three grids, or
        differences that do not shrink).

        Measured (`scripts/exact_error_coverage.py --n 120 --seed 1`, the table in
        `docs/guide/exact.md`): all 109 resolved constructions with an order of at most 3
        were covered (the actual error at most 0.87 of `error`); of the 4 above 3, one was
        (up to 6.6x `error`), the differences shrinking faster than the error. There the
        previous difference, `differences[-2]`, covered every case, at 10-50x. False also
        for an unresolved or infinite `error`."""
        if not (self.resolved and math.isfinite(self.error)):
            return False
        return not (math.isfinite(self.observed_order) and self.observed_order > 3.0)

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
            "exact_rtol": self.rtol,
            "exact_converged": self.converged,
            "exact_error_reliable": self.error_reliable,
            "exact_log_space": self.log_space,
            "delta": self.delta,
        }


def ladder_fields(epsilons, spacings, *, eps_bracket, resolved, limit, per_step, coarser_step):
    """The fields of `ExactEpsilon` that come from the ladder of grids as a whole (its
    value, differences, observed order and error estimates), read alike by the grid and
    the log-space ladders.

    Args:
        epsilons: eps on each grid, coarsest first.
        spacings: each grid's spacing.
        eps_bracket: the finest grid's bracket (`ExactEpsilon.eps_bracket`).
        resolved: whether the ladder resolved a value (else `error` is inf).
        limit: the largest eps a grid resolves; a per-step value above it, or not
            finite, gets an infinite error.
        per_step: eps after every step on the finest grid, or None.
        coarser_step: the same on the grid before it (None with one grid).
    """
    eps = [float(e) for e in epsilons]
    diffs = tuple(b - a for a, b in zip(eps, eps[1:], strict=False))
    order = math.nan
    if len(diffs) >= 2 and diffs[-1] != 0 and diffs[-2] != 0:
        order = math.log2(abs(diffs[-2] / diffs[-1]))
    lost_term = max(eps_bracket[1] - eps[-1], eps[-1] - eps_bracket[0])
    error = (abs(diffs[-1]) if diffs else math.nan) + lost_term if resolved else math.inf
    step_error = None
    if per_step is not None:
        finest = np.asarray(per_step, np.float64)
        change = np.full_like(finest, np.nan)
        if coarser_step is not None:
            with np.errstate(invalid="ignore"):  # inf - inf beyond the resolution
                change = np.abs(finest - np.asarray(coarser_step, np.float64))
        usable = np.isfinite(finest) & (finest <= limit)
        step_error = np.where(usable, change + lost_term, np.inf)
    return {
        "epsilon": eps[-1], "epsilons": tuple(eps), "spacings": tuple(spacings),
        "differences": diffs, "observed_order": order, "error": error,
        "resolved": bool(resolved), "eps_bracket": eps_bracket,
        "epsilon_per_step": per_step, "error_per_step": step_error,
    }  # fmt: skip

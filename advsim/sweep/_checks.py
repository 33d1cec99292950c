"""What a cell would refuse when it runs, found before the first cell runs.

`parse_config` builds every cell's mechanism once; `check_cell` then reads its accounting
(a canary schedule that names no step of the run fails there) and checks that the
accountant can reach the cell: a noise multiplier whose PLD grid would not fit in memory,
a `target_epsilon` that no noise multiplier the accountant takes reaches, a strategy with
too few runs to split. Each check is cheap (no PLD is built), so a sweep of thousands of
cells is checked in seconds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from advsim.audits import as_threshold_strategy
from advsim.bounds import gdp_epsilon
from advsim.bounds._composition import _VDI as COMPOSITION_VDI
from advsim.bounds._pld_fast import MAX_GRID_POINTS, grid_size, smallest_sigma
from advsim.sweep._settings import strategy_options

__all__ = ["CellError", "check_cell"]

#: Below this delta the accountant's mass at infinite loss (from truncating tails, about
#: 1e-15 a step) may decide the composition epsilon: `target_epsilon` is not checked
#: there, the calibration says what it finds.
_CHECKED_DELTA = 1e-9


class CellError(ValueError):
    """A cell the computation would refuse, found before the sweep runs.

    Attributes:
        key: the cell parameter at fault ("noise_multiplier", "target_epsilon", ...).
        params: the cell's parameters.
        reason: what is wrong, without the cell's description.
    """

    def __init__(self, where: str, key: str, params: Mapping, reason: str):
        super().__init__(f"{where}: {reason}")
        self.key, self.params, self.reason = key, dict(params), reason


@functools.lru_cache(maxsize=256)
def _smallest_sigma(q: float, vdi: float) -> float:
    return smallest_sigma(q, vdi)


def _grid_note(mode: str, vdi: float) -> str:
    knob = "composition_discretization = " if mode == "bounds" else "grid spacing "
    return f"the composition bound's PLD accountant ({knob}{vdi:g})"


def _coarser(mode: str) -> str:
    return " or a coarser composition_discretization" if mode == "bounds" else ""


def check_cell(config, cell, mechanism, where: str) -> tuple[int, float, int]:
    """Refuses a cell that would fail when run; returns its run's `(T, q, n)` (steps,
    the canary's sampling rate and its number of steps, from `mechanism.accounting()`),
    which calibrating its sigma needs.

    `mechanism` is the cell's, built by `parse_config` (sigma 1 standing in where the cell
    gives `target_epsilon`); `where` names the cell in the messages.

    Raises:
        CellError: naming the cell, the parameter, its value and its valid range.
        ValueError: the mechanism's accounting refuses the run (e.g. a canary schedule
            that names no step of it).
    """
    p = cell.params
    acc = mechanism.accounting()
    q, n = acc.sampling_prob, acc.num_canary_steps
    selection = p.get("threshold_selection")
    if config.mode == "audit" and selection is not None and not p.get("streaming"):
        least = as_threshold_strategy(selection, **strategy_options(p)).min_scores
        if p["trials"] < least:
            raise CellError(
                where,
                "trials",
                p,
                f"threshold_selection={selection!r} needs trials >= {least} (the scores "
                f"per world it takes), got trials={p['trials']}",
            )
    vdi = p.get("composition_discretization", COMPOSITION_VDI)
    if q == 1.0:  # the composition is exactly Gaussian: no grid
        return acc.steps, q, n
    low = None
    if "target_epsilon" in p:
        target, delta = p["target_epsilon"], p["delta"]
        if delta >= _CHECKED_DELTA:
            low = _smallest_sigma(q, vdi)
            # At sigma = low the composition epsilon is at most full-batch GDP's plus the
            # grid's rounding (at most vdi a step): a larger target needs a smaller sigma.
            reach = gdp_epsilon(delta, math.sqrt(n) / low) + n * vdi
            if target > reach:
                raise CellError(
                    where,
                    "target_epsilon",
                    p,
                    f"target_epsilon={target:g} is out of reach: it needs a noise "
                    f"multiplier below {low:.3g}, the smallest that {_grid_note(config.mode, vdi)} "
                    f"takes at sampling_prob={q:g} (there the composition epsilon is at most "
                    f"{reach:.4g} at delta={delta:g} over {n} canary steps); choose a "
                    f"target_epsilon <= {reach:.4g}{_coarser(config.mode)}, or give "
                    "noise_multiplier",
                )
        return acc.steps, q, n
    sigma = acc.noise_multiplier
    size = grid_size(q, sigma, vdi)
    if size > MAX_GRID_POINTS:
        low = _smallest_sigma(q, vdi)
        raise CellError(
            where,
            "noise_multiplier",
            p,
            f"noise_multiplier={sigma:g} is too small for {_grid_note(config.mode, vdi)} "
            f"at sampling_prob={q:g}: one step's privacy-loss grid would hold {size:.3g} "
            f"points (at most {MAX_GRID_POINTS:.0e}); choose noise_multiplier >= "
            f"{low:.3g}{_coarser(config.mode)}",
        )
    return acc.steps, q, n

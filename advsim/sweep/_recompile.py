"""A sweep's warning about cells that compile again for a float field jit treats as static."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from advsim._mechanism import AbstractScalarLaw
from advsim._static_floats import RecompileWarning, recompile_advice, static_float_fields
from advsim.sweep._config import Cell, SweepConfig, build_mechanism

__all__ = ["warn_recompiles"]


def _compiles(config: SweepConfig, mechanism) -> bool:
    """Whether a cell compiles programs of its mechanism: a simulation (audit mode) or the
    exact epsilon (a scalar law, unless the sweep sets `exact = false`)."""
    return config.mode == "audit" or (config.exact and isinstance(mechanism, AbstractScalarLaw))


def warn_recompiles(config: SweepConfig, cells: Sequence[Cell], stacklevel: int = 3) -> None:
    """Warns (`RecompileWarning`), once per mechanism class, where `cells` hold more than
    one value of a float field stored as a plain Python float: jit treats it as static,
    so each value compiles the cell's programs again. Names each such field, how many
    values the cells give it, and the fix. A cell whose mechanism cannot be built is left
    to its run, which reports it."""
    values: dict[type, dict[str, set]] = {}
    for cell in cells:
        try:
            mechanism = build_mechanism(config, cell.params, noise_multiplier=1.0)
        except (TypeError, ValueError):
            continue
        if not _compiles(config, mechanism):
            continue
        fields = values.setdefault(type(mechanism), {})
        for path, value in static_float_fields(mechanism).items():
            fields.setdefault(path, set()).add(value)
    for cls, fields in values.items():
        varying = [path for path, seen in fields.items() if len(seen) > 1]
        if varying:
            notes = {path: f"{len(fields[path])} values in this sweep" for path in varying}
            warnings.warn(
                recompile_advice(cls.__name__, varying, notes), RecompileWarning, stacklevel
            )

"""A sweep's warning about cells that compile again for a float field jit treats as static."""

from __future__ import annotations

import warnings

from advsim._mechanism import AbstractMechanism, AbstractScalarLaw
from advsim._static_floats import RecompileWarning, recompile_advice, static_float_fields

__all__ = ["StaticFloatsSeen"]


class StaticFloatsSeen:
    """The values a sweep's cells give each plain-float field, by mechanism class: filled
    while the cells are checked (each cell's mechanism is built there once), then `warn`
    says, once per class, which fields take more than one value."""

    def __init__(self, mode: str, exact: bool):
        self._mode, self._exact = mode, exact
        self._values: dict[type, dict[str, set]] = {}

    def _compiles(self, mechanism: AbstractMechanism) -> bool:
        """Whether a cell compiles programs of its mechanism: a simulation (audit mode) or
        the exact epsilon (a scalar law, unless the sweep sets `exact = false`)."""
        return self._mode == "audit" or (self._exact and isinstance(mechanism, AbstractScalarLaw))

    def add(self, mechanism: AbstractMechanism) -> None:
        """Notes the plain-float fields of one cell's mechanism."""
        if self._compiles(mechanism):
            fields = self._values.setdefault(type(mechanism), {})
            for path, value in static_float_fields(mechanism).items():
                fields.setdefault(path, set()).add(value)

    def warn(self, stacklevel: int = 2) -> None:
        """Warns (`RecompileWarning`), once per mechanism class, where the cells hold more
        than one value of a float field stored as a plain Python float: jit treats it as
        static, so each value compiles the cell's programs again. Names each such field,
        how many values the cells give it, and the fix."""
        for cls, fields in self._values.items():
            varying = [path for path, seen in fields.items() if len(seen) > 1]
            if varying:
                notes = {path: f"{len(fields[path])} values in this sweep" for path in varying}
                message = recompile_advice(cls.__name__, varying, notes)
                warnings.warn(message, RecompileWarning, stacklevel=stacklevel + 1)

"""The record every closed-form hidden-state bound of one run returns: `HiddenStateBound`.

`langevin_bound`, `strongly_convex_gdp_bound` and `shifted_interpolation_bound` each
return a final subclass that adds its own values (a Renyi slope, a GDP parameter, the
limits it is compared with); what they share (the epsilon at a delta, the horizon, the
assumptions and the source) is declared here once, so a caller can read any of them
alike. The assumptions and the source are the bound's, not the run's: a subclass sets them
as class attributes (`assumptions = ASSUMPTIONS`, `reference = REFERENCE`), so no record
can be built that states other ones. A subclass is declared
`@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)`, so that its repr, this
one, shows its own values first.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

__all__ = ["HiddenStateBound"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class HiddenStateBound:
    r"""What a closed-form bound on the last model of one run states, besides its value.

    Attributes:
        epsilon: $\varepsilon(\delta)$ of the bound (each subclass says how it converts),
            or None when no delta was given.
        delta: the delta of `epsilon`, or None.
        steps: $T$.
        assumptions: the conditions under which the bound is an upper bound; it is one
            only where all hold. A class attribute, the same for every record of a bound.
        reference: where the formula comes from. A class attribute, as `assumptions`.
    """

    epsilon: float | None
    delta: float | None
    steps: int
    assumptions: ClassVar[tuple[str, ...]]
    reference: ClassVar[str]

    def __init_subclass__(cls, **kwargs):
        """Refuse a bound that does not say what it assumes and where it comes from."""
        super().__init_subclass__(**kwargs)
        missing = [n for n in ("assumptions", "reference") if not hasattr(cls, n)]
        if missing:
            raise TypeError(f"{cls.__name__} must set the class attributes {missing} (a "
                            "HiddenStateBound states its assumptions and its source)")  # fmt: skip

    def __repr__(self) -> str:
        """The subclass's own values first, then these (a dataclass would put them last)."""
        shared = [f.name for f in dataclasses.fields(HiddenStateBound)]
        names = [f.name for f in dataclasses.fields(self) if f.name not in shared] + shared
        names += ["assumptions", "reference"]
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

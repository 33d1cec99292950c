"""The protocol of a searched construction class, and the family of a class of your own.

Any scalar-law mechanism (`advsim.AbstractScalarLaw`) can be searched: its class names the
arrays the search varies and their box (`SearchableConstruction`), and is built from the
config's cell. The built-in `advsim.mechanisms.PiecewiseConstruction` is one
implementation (its fields' values and jumps); the search starts from the construction as
built (the start "given"), plus `random_starts` members drawn uniformly in the box. The
best member is saved as its arrays (`best.eqx`, `eqx.tree_serialise_leaves`) beside the
config that builds the class and the class's path (`search.json`), and `load_best(folder)`
rebuilds it as that class.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import equinox as eqx
import numpy as np

from advsim._mechanism import AbstractScalarLaw
from advsim.exact import grid_reach
from advsim.search._config import SearchConfig, config_from_mapping
from advsim.search._family import Family, box_vectors

__all__ = [
    "ParameterFamily",
    "SearchableConstruction",
    "build_parameter_family",
    "class_path",
    "load_best",
]

#: The start a class-defined search begins from: the construction as the config builds it.
GIVEN = "given"


@runtime_checkable
class SearchableConstruction(Protocol):
    """What `advsim.search` needs of a construction class besides being an
    `advsim.AbstractScalarLaw`.

    - `search_parameters()`: the searched arrays, a tuple of the mechanism's own array
      fields (float, any shape). A member is the template with these arrays replaced,
      `eqx.tree_at(lambda m: m.search_parameters(), template, new_arrays)`, so the method
      must return the arrays themselves, not copies;
    - `search_box()`: for each of them, the (lo, hi) bounds of its entries (scalars or
      arrays broadcastable to its shape), finite with lo < hi;
    - the constructor (or the `module:Class.factory` the config names) takes
      `steps, sampling_prob, noise_multiplier` and the config's `construction_args` by
      keyword.

    `advsim.mechanisms.PiecewiseConstruction` implements it (its fields' values and jumps,
    in [-C, C] for the clipped fields).
    """

    def search_parameters(self) -> tuple[Any, ...]: ...

    def search_box(self) -> tuple[tuple[Any, Any], ...]: ...


def class_path(obj) -> str:
    """`"module:Class"` of an object's class: how a search records what it found."""
    cls = type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def _construct(cfg: SearchConfig):
    """The construction the config names, built at its cell, checked against the protocol."""
    from advsim.sweep import resolve

    plugin = resolve("mechanism", cfg.construction, "construction")
    mech = plugin.build(
        steps=cfg.steps,
        sampling_prob=cfg.sampling_prob,
        noise_multiplier=cfg.noise_multiplier,
        **dict(cfg.construction_args or {}),
    )
    name = type(mech).__name__
    if not isinstance(mech, AbstractScalarLaw):
        raise ValueError(
            f"construction {cfg.construction!r} built a {name}, not an advsim.AbstractScalarLaw: "
            "the search reads its exact epsilon"
        )
    missing = [m for m in ("search_parameters", "search_box") if not hasattr(mech, m)]
    if missing:
        raise ValueError(
            f"construction {cfg.construction!r}: {name} has no {' or '.join(missing)} "
            "(advsim.search.SearchableConstruction: the arrays it varies and their box)"
        )
    return mech


@dataclasses.dataclass
class ParameterFamily(Family):
    """The family of a class that names its searched arrays (`search_parameters`):
    the template's arrays varied in the box its `search_box` gives; no knots, no jumps."""

    def _leaves(self, mech):
        return list(mech.search_parameters())

    def _jump_mask(self) -> np.ndarray:
        return np.zeros(self.lower.size, bool)

    def random(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` members drawn uniformly in the box."""
        return rng.uniform(self.lower, self.upper, size=(size, self.lower.size))


def build_parameter_family(cfg: SearchConfig) -> ParameterFamily:
    """The family of `cfg.construction` at the config's cell, started from the construction
    as built. The search grid spans `cfg.span`, else the construction's grid
    (`advsim.exact.grid_reach`).

    Raises:
        ValueError: a class outside the protocol, a box with lo >= hi or of the wrong
            size, a construction outside its own box.
    """
    template = _construct(cfg)
    name = type(template).__name__
    lower, upper = box_vectors(template, template.search_parameters(), template.search_box())
    span = cfg.span if cfg.span is not None else grid_reach(template, cfg.cells_per_sd)
    family = ParameterFamily(cfg, np.asarray(span, np.float64), template, lower, upper, {})
    theta = family.vector(template)
    if np.any(theta < family.lower) or np.any(theta > family.upper):
        raise ValueError(f"the construction as built lies outside {name}.search_box()")
    family.starts[GIVEN] = theta
    return family


def save_best(folder: Path, best) -> Path:
    """The best member's arrays (`eqx.tree_serialise_leaves`), beside search.json's config."""
    path = Path(folder) / "best.eqx"
    tmp = path.with_name(".best.eqx.tmp")
    eqx.tree_serialise_leaves(tmp, best)
    tmp.replace(path)
    return path


def load_best(folder: str | Path):
    """The best construction a finished search wrote in `folder`, as the class it recorded
    (`construction_class` in `search.json`): a class of your own is built from the
    recorded config and given the saved arrays (`best.eqx`); the built-in family is read
    from `best.json` (`PiecewiseConstruction.load`).

    Raises:
        ValueError: no finished search in `folder`, or a config that now builds another
            class than the one the search recorded.
    """
    folder = Path(folder)
    try:
        summary = json.loads((folder / "search.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"no finished search in {str(folder)!r}: {err}") from None
    cfg = config_from_mapping(summary["config"])
    if cfg.construction is None:
        from advsim.mechanisms import PiecewiseConstruction

        best = PiecewiseConstruction.load(folder / "best.json")
    else:
        best = eqx.tree_deserialise_leaves(folder / "best.eqx", _construct(cfg))
    recorded = summary.get("construction_class", class_path(best))
    if class_path(best) != recorded:
        raise ValueError(
            f"the search in {str(folder)!r} found a {recorded}; its config "
            f"construction = {cfg.construction!r} now builds a {class_path(best)}"
        )
    return best

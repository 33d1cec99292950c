"""A construction class of your own, searched through the arrays it names.

Any scalar-law mechanism (`advsim.AbstractScalarLaw`) can be searched: its class names the
arrays the search varies and their box, and is built from the config's cell. The protocol:

- `search_parameters(self) -> tuple[Array, ...]`: the searched arrays, each a field of the
  mechanism (float, any shape); the search replaces them with `eqx.tree_at`;
- `search_box(self) -> tuple[tuple[lo, hi], ...]`: for each of them, the bounds of its
  entries (scalars or arrays broadcastable to its shape), lo < hi;
- the constructor takes `steps, sampling_prob, noise_multiplier` and the config's
  `construction_args` by keyword.

The search starts from the construction as built (the start "given"), plus
`random_starts` members drawn uniformly in the box; the best member is saved as the
arrays' values (`best.eqx`, `eqx.tree_serialise_leaves`) beside the config that builds
the class, and `load_best(folder)` rebuilds it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import equinox as eqx
import numpy as np

from advsim._mechanism import AbstractScalarLaw
from advsim.exact import grid_reach
from advsim.search._config import SearchConfig, config_from_mapping
from advsim.search._family import Family

__all__ = ["ParameterFamily", "build_parameter_family", "load_best"]

#: The start a class-defined search begins from: the construction as the config builds it.
GIVEN = "given"


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
            "(advsim.search's protocol: the arrays it varies and their box)"
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
    params = [np.asarray(p, np.float64) for p in template.search_parameters()]
    box = list(template.search_box())
    if len(box) != len(params):
        raise ValueError(
            f"{name}.search_box() gives {len(box)} (lo, hi) pairs for {len(params)} "
            "search_parameters()"
        )
    lower, upper = [], []
    for i, (p, (lo, hi)) in enumerate(zip(params, box, strict=True)):
        lo = np.broadcast_to(np.asarray(lo, np.float64), p.shape).reshape(-1)
        hi = np.broadcast_to(np.asarray(hi, np.float64), p.shape).reshape(-1)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
            raise ValueError(f"{name}.search_box()[{i}] must be finite with lo < hi")
        lower.append(lo)
        upper.append(hi)
    span = cfg.span if cfg.span is not None else grid_reach(template, cfg.cells_per_sd)
    family = ParameterFamily(
        cfg, np.asarray(span, np.float64), template, np.concatenate(lower),
        np.concatenate(upper), {},
    )  # fmt: skip
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
    """The best construction a finished search wrote in `folder`: a class of your own is
    built from the config recorded in `search.json` and given the saved arrays; the
    built-in family is read from `best.json` (`PiecewiseConstruction.load`).

    Raises:
        ValueError: no finished search in `folder`.
    """
    folder = Path(folder)
    try:
        summary = json.loads((folder / "search.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"no finished search in {str(folder)!r}: {err}") from None
    cfg = config_from_mapping(summary["config"])
    if cfg.construction is None:
        from advsim.mechanisms import PiecewiseConstruction

        return PiecewiseConstruction.load(folder / "best.json")
    return eqx.tree_deserialise_leaves(folder / "best.eqx", _construct(cfg))

r"""Counterexamples found by search: the piecewise-linear family against its exact epsilon.

`search(config, folder)` maximises the exact last-iterate epsilon at one cell (T, q,
sigma, delta, batch structure) over `advsim.mechanisms.PiecewiseConstruction`: projected
Adam through the exact-law engine's fixed-grid value (`advsim.exact.FixedGridEpsilon`,
differentiated by the implicit function theorem) from the papers' constructions and
random members, beside random search at the same budget. Every reported epsilon is
recomputed by `advsim.exact.last_iterate_epsilon`. `confirm` runs a construction through
the simulation engine and audits it; `plot_fields` draws it. The CLI is `advsim search
CONFIG`.

A construction class of your own is searched the same way (`construction = "module:Class"`
in the config, loaded as sweeps and the CLI load a mechanism): any `advsim.AbstractScalarLaw`
that follows `SearchableConstruction`, naming the arrays the search varies,
`search_parameters()`, and their box, `search_box()`; `PiecewiseConstruction` is one such
class. `search.json` records the best member's class (`construction_class`), its arrays are
saved in `best.eqx`, and `load_best(folder)` rebuilds it as that class.
"""

from advsim.search._config import (
    FIELDS,
    START_KINDS,
    SearchConfig,
    config_from_mapping,
    load_config,
)
from advsim.search._confirm import Confirmation, confirm, decisive_events
from advsim.search._family import Family, build_family, paper_start
from advsim.search._parameters import (
    ParameterFamily,
    SearchableConstruction,
    build_parameter_family,
    load_best,
)
from advsim.search._report import plot_fields
from advsim.search._run import SearchResult, search

__all__ = [
    "FIELDS",
    "START_KINDS",
    "Confirmation",
    "Family",
    "ParameterFamily",
    "SearchConfig",
    "SearchResult",
    "SearchableConstruction",
    "build_family",
    "build_parameter_family",
    "config_from_mapping",
    "confirm",
    "decisive_events",
    "load_best",
    "load_config",
    "paper_start",
    "plot_fields",
    "search",
]

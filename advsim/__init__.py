"""advsim: simulate and audit DP-SGD when only the last model is released.

The flow (see the README): a mechanism (one DP-SGD run, `advsim.mechanisms`) and an
adversary (`advsim.adversaries`) go through `simulate`, which returns the scores of both
worlds; an audit (`advsim.audits`) turns them into an empirical epsilon, read beside the
heuristic, composition and full-batch bounds (`advsim.bounds`, re-exported here).

A new mechanism or adversary is built from the names here (the bases, their capabilities,
`DPSGDParams`, `clip_gradients`, ...) and the constructor checks of `advsim.validation`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The public names are imported on first use (`__getattr__` below), so that `import advsim`
# does not import jax: the command line (`advsim --help`) starts at once. The imports here
# name them for type checkers and for the API reference (read statically).
if TYPE_CHECKING:
    from advsim._accounting import Accounting
    from advsim._adversary import AbstractAdversary
    from advsim._counting import ThresholdCounts, simulate_counts
    from advsim._dpsgd import bernoulli_from_bits, clip_gradients, dpsgd_update, run_mechanism
    from advsim._exports import export_modules
    from advsim._mechanism import (
        AbstractCanaryExample,
        AbstractCoordinateLaws,
        AbstractDirectedCanary,
        AbstractMechanism,
        AbstractMultiCanary,
        AbstractPerExampleData,
        AbstractProjected,
        AbstractProjectionLaw,
        AbstractScalarLaw,
        AbstractSumEncoding,
        AbstractThresholdLandscape,
        poisson_batch_bound,
    )
    from advsim._records import DPSGDOptions, DPSGDParams
    from advsim._schedule import CanarySchedule
    from advsim._scores import NonFiniteScoresError, Scores
    from advsim._simulate import block_size, default_chunk_size, simulate

__version__ = "0.1.0"

# One JAX host device per CPU core, asked for before JAX starts (ADVSIM_CPU_DEVICES=1 turns
# it off): `simulate` shards its runs over them, with the same scores (see advsim._cores).
import advsim._cores as _cores  # noqa: E402

_cores.use_every_core()

__all__ = [
    "AbstractAdversary",
    "AbstractCanaryExample",
    "AbstractCoordinateLaws",
    "AbstractDirectedCanary",
    "AbstractMechanism",
    "AbstractMultiCanary",
    "AbstractPerExampleData",
    "AbstractProjected",
    "AbstractProjectionLaw",
    "AbstractScalarLaw",
    "AbstractSumEncoding",
    "AbstractThresholdLandscape",
    "Accounting",
    "CanarySchedule",
    "DPSGDOptions",
    "DPSGDParams",
    "NonFiniteScoresError",
    "Scores",
    "ThresholdCounts",
    "bernoulli_from_bits",
    "block_size",
    "clip_gradients",
    "default_chunk_size",
    "dpsgd_update",
    "export_modules",
    "poisson_batch_bound",
    "run_mechanism",
    "simulate",
    "simulate_counts",
]


def _static_imports() -> dict[str, str]:
    """`name -> module` of the imports under `if TYPE_CHECKING:` above, read off this
    file's source (no module is imported): the one list of the public names' modules."""
    import ast

    with open(__file__, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    ]
    return {alias.name: node.module for node in block.body for alias in node.names}


#: The module that defines each public name: `__getattr__` imports it on first use.
_SOURCES = _static_imports()

#: The subpackages and public modules `advsim.NAME` reaches after a plain `import advsim`.
_SUBMODULES = frozenset(
    {
        "adversaries", "audits", "bounds", "cli", "exact", "experiment", "figures",
        "mechanisms", "one_run", "plotting", "sweep", "testing", "validation",
    }
)  # fmt: skip


def __getattr__(name: str):
    """A public name or submodule, imported on first use (then kept as an attribute)."""
    if name in _SOURCES:
        value = getattr(importlib.import_module(_SOURCES[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})

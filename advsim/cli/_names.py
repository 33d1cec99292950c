"""The registries' names the parser shows, readable without importing jax, so that
`advsim --help` and `advsim COMMAND --help` start at once.

The audit methods and their assumptions (`advsim.audits.AUDITS`), the threshold
selections and the options each takes (`advsim.audits.THRESHOLD_SELECTIONS`), the values
of `sides` (`advsim.audits.SIDES`), the sweep's mechanism aliases
(`advsim.sweep.MECHANISM_ALIASES`) and the options' sweep keys (`STRATEGY_KEYS` and
`AUDIT_OPTION_KEYS` of `advsim.sweep._config`) are defined beside code that imports jax;
the parser needs only their names and words. They are written out here, and
tests/advsim/test_cli_startup.py checks that each equals its source: a new audit,
strategy or alias fails that test until it is named here too. The built-in audit config
is read from its TOML file directly (`advsim.sweep.builtin_config` imports the sweep
runner).
"""

from __future__ import annotations

import tomllib
from importlib import resources

__all__ = [
    "AUDIT_ASSUMPTIONS",
    "AUDIT_METHODS",
    "AUDIT_OPTION_KEYS",
    "MECHANISM_ALIASES",
    "SIDES",
    "STRATEGY_KEYS",
    "THRESHOLD_SELECTIONS",
    "builtin_config",
]

#: Each audit method (`advsim.audits.AUDIT_METHODS`, sorted) and what its eps_lower
#: assumes (`advsim.audits.AUDITS[name].assumption`).
AUDIT_ASSUMPTIONS: dict[str, str] = {
    "eps_delta": "none beyond (eps, delta)-DP of the run",
    "family": "the run's privacy is exactly that of the last-iterate heuristic family "
    "Binomial(n_c, q) + N(0, T sigma^2) vs N(0, T sigma^2) with known T, q, n_c; "
    "sigma_upper bounds its noise multiplier",
    "gdp": "mu_lower bounds the GDP parameter; eps_lower = gdp_epsilon(delta, mu_lower) "
    "assumes the trade-off curve is exactly Gaussian (G_mu)",
    "tradeoff": "none for eps_lower (the composition curve of the run's q and T is only the "
    "yardstick of eps_composition_violated)",
}

#: `advsim.audits.AUDIT_METHODS`.
AUDIT_METHODS: tuple[str, ...] = tuple(AUDIT_ASSUMPTIONS)

#: `advsim.audits.THRESHOLD_SELECTIONS`: each threshold selection, in order, with the
#: options of `advsim.audits.audit` it takes.
THRESHOLD_SELECTIONS: dict[str, tuple[str, ...]] = {
    "by_sample_size": (),
    "split": (),
    "same": (),
    "explicit": ("threshold",),
    "multi_split": ("num_splits",),
    "projected_split": ("selection_fraction",),
    "bonferroni": (),
    "rank_split": ("selection_fraction",),
}

#: The threshold options by their sweep key (`STRATEGY_KEYS` of `advsim.sweep._config`):
#: the explicit strategy's `threshold` is `audit_threshold` there.
STRATEGY_KEYS: dict[str, str] = {
    ("audit_threshold" if option == "threshold" else option): option
    for options in THRESHOLD_SELECTIONS.values()
    for option in options
}

#: `advsim.audits.SIDES`: both orders of the neighbouring pair, or only "score high means
#: canary in".
SIDES: tuple[str, ...] = ("two", "one")

#: `AUDIT_OPTION_KEYS` of `advsim.sweep._config`: the audit's options beyond the strategy's,
#: by sweep key, with their defaults (None: the cell's seed).
AUDIT_OPTION_KEYS: dict[str, object] = {"sides": "two", "min_count": 50, "audit_seed": None}

#: The names of `advsim.sweep.MECHANISM_ALIASES`, in order.
MECHANISM_ALIASES: tuple[str, ...] = ("linear", "linear-data", "landscape", "gradient-canary")


def builtin_config(name: str) -> dict:
    """`advsim.sweep.builtin_config(name)`: the tables of `advsim/sweep/<name>.toml`.

    Raises:
        ValueError: no built-in config has this name.
    """
    path = resources.files("advsim").joinpath("sweep").joinpath(f"{name}.toml")
    if not path.is_file():
        raise ValueError(f"no built-in sweep config named {name!r}")
    return tomllib.loads(path.read_text())

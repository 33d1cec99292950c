"""Sweeps: a grid of configurations, one audit (or bounds only) per cell, resumable.

A sweep is a TOML file (or the same content as a dict) naming a mechanism and an
adversary by class path, fixed parameters, and a grid of swept ones:

```toml
[sweep]
mode = "audit"          # "audit": simulate + audit + bounds; "bounds": bounds only
seed = 0
trials = 20000          # runs per world (audit mode)
delta = 1e-5

[mechanism]
name = "advsim.mechanisms:LinearProcess"   # or the alias "linear"; the other keys are
steps = 10                                  # passed to its constructor

[adversary]
name = "projection"     # alias of "advsim.adversaries:ProjectionScore" (audit mode)

[grid]                  # cartesian product, first key varies slowest
noise_multiplier = [1.0, 2.0, 3.0, 4.0]
sampling_prob = [0.02, 0.05, 0.1, 0.2, 0.5]
```

`name` is a class path `"module:Class"` (any importable module: a user's own class needs
no change to this package), a classmethod returning an instance `"module:Class.factory"`
(e.g. `"advsim.mechanisms:LinearProcess.with_data"`), or a short alias of a built-in
(`advsim.sweep.MECHANISM_ALIASES`, `ADVERSARY_ALIASES`: "linear", "linear-data",
"landscape", "gradient-canary"; "projection", "llr", "landscape-threshold",
"biased-coordinate", "biased-coordinate-random", "random-direction",
"simulated-biased-dimension"). Only subclasses of `advsim.AbstractMechanism` /
`advsim.AbstractAdversary` are accepted. The constructor validates the keys; a string
`canary_schedule` ("every_step", "every:K", "every:K@F", "only:S") with an optional
`canary_sampled` (default true) becomes a `CanarySchedule` (`CanarySchedule.parse`).

An optional `[[cases]]` array adds sub-grids: each case's keys (scalars or lists) replace
the grid's, and the cells are the union over cases of the case-merged product, in order
(e.g. three (q, sigma) regimes, each over the same list of T). A cell's parameters can be
any mechanism parameter, `target_epsilon` (sigma is then calibrated so that composition
gives it at `delta`), the settings `delta`, `trials`, `method`, `confidence`,
`threshold_selection` (any of `advsim.audits.THRESHOLD_SELECTIONS`) with its strategy's
option (`selection_fraction` of "projected_split", `num_splits` of "multi_split",
`audit_threshold` of "explicit"), `pilot_runs` (below) and `replicate` (a label that only
changes the cell's seed).

`streaming = true` in `[sweep]` audits every cell by a streaming audit
(`advsim.streaming.audit_streaming` through `advsim.experiment.run_audit`): a pilot of
`pilot_runs` runs per world (default: 10% of `trials` within [10^4, 2 x 10^7]) plans up
to 6 threshold tests, the cell's `trials` runs per world are only counted (memory does not
grow with them), and `eps_lower` is the assumption-free (eps, delta) bound, rigorous
(held out by construction). Its method is "eps_delta" (the default then; any other is
refused) and it takes no threshold strategy: its rows read `threshold_selection =
"streaming"`.

Each cell gets a stable id (a hash of everything that determines its result) and a seed
derived from the sweep seed and that id, so a cell's numbers do not depend on which other
cells exist or on the order they run in (`common_seed = true` in `[sweep]` runs every cell
with the sweep seed itself instead: common random numbers, as `advsim audit` uses over T;
its config ships as `advsim/sweep/audit.toml`, `builtin_config("audit")`). The output
folder holds

- `run.json`: the config, provenance (package versions, JAX backend and devices, git
  commit) and one entry per session (first run and every resume);
- `cells/<id>.json`: one file per finished cell, written atomically (temporary file, then
  rename) with a SHA-256 checksum of its content, so a killed sweep loses at most the
  cell in flight and a damaged file is detected, never mixed in;
- `.advsim-lock`, while a sweep runs: a lock (`flock`) that refuses a second process in
  the same folder (two `--resume` runs at once), naming the process that holds it; it
  goes with its process, so a killed sweep leaves nothing locked;
- `results.csv` and `results.json`: the tidy table, one row per cell in cell order, with
  every parameter, eps_lower, eps_point, heuristic, composition, full_batch, the exact
  epsilon (below), trials, seed, wall time and where it went (`TIME_COLUMNS`), and what
  each eps_lower certifies:
  `guarantee` ("rigorous", "assumes Gaussian", "assumes family", "optimistic"),
  `assumption`, `assumption_rejected` (the audit's held-out check of its assumption),
  `eps_point_above_composition` (an estimate outside the possible range) and the reasons
  for missing numbers; results.json also carries run.json's provenance.

**The exact epsilon.** Every cell whose mechanism has the capability
(`advsim.AbstractScalarLaw`: a scalar model whose gradients are functions of (m, t), e.g.
the linear process with dim = 1, `ZeroingRegularizer`, `QuadraticRegularizer`,
`ThresholdLandscape`, `ProjectedLinearCanary`, or a class of your own) gets, beside
eps_lower and the bounds, `exact_epsilon` (the exact epsilon(delta) of the last model,
`advsim.exact.last_iterate_epsilon`), `exact_error` (its numerical error as a refinement
estimate: the change between the two finest grids, not a bound) and `exact_error_kind`
("refinement estimate"), in both modes (`advsim.experiment.exact_columns`). The other
cells (a vector model, per-example data) leave them empty, with the reason in
`exact_note`, and so does a cell the engine refuses (a grid over its memory cap, mass
leaving the grid) or whose grid would take minutes (over
`advsim.experiment.EXACT_MAX_WORK` nodes x steps, e.g. the linear process at T = 10^4
with q = 0.001: call `advsim.exact` for it): a missing exact value never fails a cell.
It is on by default; the engine compiles one propagation per grid shape for every T of a
mechanism (a few seconds each) and adds grids until its error estimate is within
`advsim.experiment.EXACT_RTOL` of epsilon; `exact = false` in `[sweep]` turns it off
(`exact_refinements = N`, 2 to 6, default 3: the most grids). Each distinct mechanism is
computed once per process, so replicates and repeated parameters reuse it; each cell's
value is computed on its own grid, never batched with other cells, so it does not depend
on which other cells exist (a resumed sweep gives the uninterrupted table). An audit
sweep run locally computes the exact columns of its cells from the second on beside the
simulations, on a thread of its own (the same values). Its time is `exact_time_s`, what
the computation took wherever it ran, compilation included.

The audit method defaults, per cell, to "family" (the last-iterate paper's) for a built
mechanism in the heuristic's family (`AbstractMechanism.in_heuristic_family()`: a
`LinearProcess` without data, the heuristic's tight case), and to the assumption-free
"eps_delta" for every other one (`advsim.experiment.default_audit_method`, the rule of
`run_audit` and `advsim audit` too); cells whose mechanisms disagree are refused until the
config names the method.

Cells with the same shapes (same T, same dimensions) share one compiled simulation: the
mechanisms keep their numeric hyperparameters as traced arrays, so `advsim.simulate`
compiles once per shape, and every cell's trials run through the same chunked,
device-sharded runner. A class of your own that keeps a float hyperparameter as a plain
Python float (jit treats it as static) compiles again for each of its values: reading a
config whose cells give such a field more than one value warns, once per mechanism class
(`RecompileWarning`, naming the fields and the fix: `self.alpha = as_traced_float("alpha",
alpha, check_finite)`, from `advsim.validation`; `advsim.testing.check_mechanism` reports
the same fields). Cells are independent, so they
can also run on a Ray cluster (`executor="ray"`) into the same folder layout: a sweep
started locally can be resumed on a cluster and vice versa.

Example:
    >>> from advsim.sweep import parse_config
    >>> cfg = parse_config({"sweep": {"mode": "bounds", "delta": 1e-6},
    ...                     "mechanism": {"name": "linear", "sampling_prob": 0.1,
    ...                                   "noise_multiplier": 1.0},
    ...                     "grid": {"steps": [1, 3]}})
    >>> [c.params["steps"] for c in cfg.cells()]
    [1, 3]
"""

from advsim._static_floats import RecompileWarning
from advsim.sweep._classes import (
    ADVERSARY_ALIASES,
    MECHANISM_ALIASES,
    Alias,
    register_adversary,
    register_mechanism,
    resolve,
)
from advsim.sweep._config import (
    Cell,
    SweepConfig,
    SweepError,
    builtin_config,
    load_config,
    parse_config,
)
from advsim.sweep._plots import plot_sweep
from advsim.sweep._runner import CalibrationError, run_cell, run_sweep
from advsim.sweep._store import AUDIT_COLUMNS, BOUNDS_COLUMNS, TIME_COLUMNS, load_results

__all__ = [
    "ADVERSARY_ALIASES",
    "AUDIT_COLUMNS",
    "BOUNDS_COLUMNS",
    "MECHANISM_ALIASES",
    "RecompileWarning",
    "TIME_COLUMNS",
    "Alias",
    "CalibrationError",
    "Cell",
    "SweepConfig",
    "SweepError",
    "builtin_config",
    "load_config",
    "load_results",
    "parse_config",
    "plot_sweep",
    "register_adversary",
    "register_mechanism",
    "resolve",
    "run_cell",
    "run_sweep",
]

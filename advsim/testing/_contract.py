"""The contract of a mechanism and of an adversary, as checks to run on any class.

`check_mechanism` and `check_adversary` run the suite the built-in mechanisms and
adversaries pass on a user's own class, and raise an AssertionError naming the class, the
check that failed and what was found. Each check is named, so a test can run a subset:

Mechanism checks (`MECHANISM_CHECKS`):

- `"shapes"`: every method the engine calls returns the shape it expects (the check
  `advsim.simulate` runs before any run: a float model of shape (d,), gradients of shape
  (d,) and (g, d), counts of shape (g,), a scalar step size, ...), and the counts are
  non-negative;
- `"clipping"`: the engine's step (`advsim.dpsgd_update`, without noise) moves the model
  by at most lr_t * C when the canary joins the batch, and when one more example of any
  data group does, whatever gradients the mechanism returns; run under `eqx.filter_jit`,
  so every method is jittable;
- `"accounting"`: `accounting()` agrees with the canary schedule and the batching;
- `"one_program"`: no method the engine calls, nor the adversary's `score`, reads `steps`
  (`steps_readers`: each is traced at the mechanism's T and at another, and the two
  programs compared), so `simulate` runs every T in one compiled program; a class that
  reads T by design passes when it says why (`reads_steps`);
- `"static_floats"`: no float field is a plain Python float, which jit treats as static
  (each is set to a second value, 1.37 x + 0.1, and the traced programs of the methods the
  engine calls, and jit's key, compared with the first), so a sweep over it compiles once
  rather than once per value. Such a mechanism computes the right numbers, only slowly,
  so this check warns rather than fails: a `RecompileWarning` (`advsim.sweep`) naming each
  field, the methods that read it and the fix, `as_traced_float`. Where warnings are
  errors (pytest's `filterwarnings = error`) it fails like the others;
- `"breakpoints"`: for a mechanism the exact engine propagates (`check_scalar_law`: an
  `advsim.AbstractScalarLaw` with a scalar model), every jump of its fields inside the
  engine's reach is declared in `field_breakpoints()` (`advsim.exact.undeclared_jumps`,
  which names each one left out; a jump left out is a first-order error of the exact
  epsilon that its `error` does not cover); nothing to check for another mechanism;
- `"determinism"`: the same key gives identical scores, another key different ones;
- `"finite"`: every score is finite, one per run;
- `"chunking"`: the scores do not depend on the chunk size, bit for bit: one block per
  chunk against block + 1 runs, rounded up to two blocks (two chunks, the second holding
  only the tail; one more compilation: the slowest check).

Adversary checks (`ADVERSARY_CHECKS`):

- `"craft"`: `craft` returns a mechanism, the same one when called twice, with the
  mechanism's accounting (the bounds are read against it), that the adversary's own
  `check_mechanism` accepts (the reason it gives, where it does not);
- `"shapes"`: the crafted mechanism's shapes, and `score` returns one scalar per run;
- `"determinism"`: the same key gives identical scores;
- `"finite"`: every score is finite, one per run;
- `"sign"`: higher scores mean "canary in": the in-world scores are not significantly
  below the out-world ones (a one-sided Mann-Whitney test at level `SIGN_LEVEL`). A
  reversed sign makes every audit return 0; it comes from a flipped score, or from a
  mechanism whose dynamics undo the canary's push along what the score reads (data
  gradients that overshoot it), where another pairing or statistic is needed.

The simulations use `trials` runs per world (default: a little over two blocks per device,
so chunks of one block and a partial tail) and the integer seeds `seed` and `seed + 1`.
A mechanism with `requires_x64` needs `jax_enable_x64` set before the check.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

import advsim
from advsim import AbstractAdversary, AbstractMechanism, Scores
from advsim._simulate import check_shapes, steps_readers
from advsim._static_floats import RecompileWarning, recompile_advice, recompiling_floats
from advsim.adversaries import ProjectionScore
from advsim.exact import check_scalar_law, undeclared_jumps
from advsim.exact._jumps import describe_jumps

__all__ = [
    "ADVERSARY_CHECKS",
    "MECHANISM_CHECKS",
    "SIGN_LEVEL",
    "check_adversary",
    "check_mechanism",
]

MECHANISM_CHECKS = (
    "shapes",
    "clipping",
    "accounting",
    "one_program",
    "static_floats",
    "breakpoints",
    "determinism",
    "finite",
    "chunking",
)
"""The checks of `check_mechanism`, in the order they run."""
ADVERSARY_CHECKS = ("craft", "shapes", "determinism", "finite", "sign")
"""The checks of `check_adversary`, in the order they run."""
SIGN_LEVEL = 1e-4
"""The `"sign"` check fails when the one-sided test that the in-world scores are lower
than the out-world ones has a p-value below this level."""


class _Runs:
    """The simulations one contract check shares: `simulate` once per (seed, chunk size).

    Sizes are read off the mechanism when a simulation first needs them, so a check that
    simulates nothing (shapes, clipping, accounting, craft) builds nothing here."""

    def __init__(self, mechanism, adversary, trials, seed, release):
        self.mechanism, self.adversary, self.release = mechanism, adversary, release
        self._trials, self.seed = trials, int(seed)
        self._memo: dict[tuple[int, int], Scores] = {}

    @property
    def block(self) -> int:
        """Runs in one block on every device."""
        return advsim.block_size(self.mechanism, self.release) * len(jax.devices())

    @property
    def trials(self) -> int:
        """Runs per world: several chunks of one block and a partial tail by default."""
        return 2 * self.block + 37 if self._trials is None else int(self._trials)

    def fresh(self, seed: int, chunk_size: int = 1) -> Scores:
        return advsim.simulate(
            self.mechanism,
            self.adversary,
            self.trials,
            seed,
            chunk_size=chunk_size,
            release=self.release,
            check_finite=False,
            progress=False,
        )

    def __call__(self, seed: int, chunk_size: int = 1) -> Scores:
        if (seed, chunk_size) not in self._memo:
            self._memo[seed, chunk_size] = self.fresh(seed, chunk_size)
        return self._memo[seed, chunk_size]


def _run_checks(subject: str, checks, known, table: dict[str, Callable[[], None]]) -> None:
    """Runs the named checks in `known`'s order; any failure becomes an AssertionError
    naming the subject and the check."""
    checks = tuple(known if checks is None else checks)
    unknown = sorted(set(checks) - set(known))
    if unknown:
        raise ValueError(f"unknown checks {unknown}; valid checks are {list(known)}")
    for name in (c for c in known if c in checks):
        try:
            table[name]()
        except Exception as err:  # AssertionError included: each is reported by its check
            detail = str(err) if isinstance(err, AssertionError) else f"{type(err).__name__}: {err}"
            raise AssertionError(f"{subject} fails the {name!r} check: {detail}") from err


# --- mechanism checks -------------------------------------------------------------------------


def _check_shapes(mechanism, adversary=None, release: str = "last") -> None:
    try:
        check_shapes(mechanism, adversary, release)
    except ValueError as err:  # a wrong shape: the message names the method and both shapes
        raise AssertionError(str(err)) from err


def _check_mechanism_shapes(mechanism: AbstractMechanism) -> None:
    _check_shapes(mechanism)
    counts = np.asarray(mechanism.data_counts())
    if np.any(counts < 0):
        raise AssertionError(f"data_counts() has negative counts: {counts.tolist()}")


@eqx.filter_jit
def _engine_displacements(mechanism, model, t):
    """How far the engine's step (no noise) moves m_t when the canary joins the batch, and
    when one more example of each data group does: everything else equal, so the
    regularizer cancels."""
    counts = jnp.asarray(mechanism.data_counts(), jnp.int32)
    zero = jnp.zeros_like(model)

    def step(present, cts):
        return advsim.dpsgd_update(mechanism, model, t, jnp.asarray(present), cts, zero)

    canary = step(True, counts) - step(False, counts)
    base = jnp.zeros_like(counts)
    one_each = jnp.eye(counts.shape[0], dtype=jnp.int32)
    data = jax.vmap(lambda c: step(False, c) - step(False, base))(one_each)
    return jnp.linalg.norm(canary), jnp.linalg.norm(data, axis=-1)


def _check_clipping(mechanism: AbstractMechanism) -> None:
    """At m_0 and a shifted model, at steps 1, 2, T // 2 and T: each addition moves the
    model by at most lr_t * C (with float32 rounding at the model's scale)."""
    m0 = mechanism.init_model()
    shifted = m0 + jax.random.normal(jax.random.key(1), m0.shape, m0.dtype)
    steps = sorted({1, min(2, mechanism.steps), max(1, mechanism.steps // 2), mechanism.steps})
    for label, model in (("m_0", m0), ("a shifted model", shifted)):
        for t in steps:
            lr = float(mechanism.step_size(jnp.int32(t)))
            scale = 1.0 + float(jnp.max(jnp.abs(model)))
            bound = lr * float(mechanism.clip_norm) * (1 + 1e-5) + 1e-5 * scale
            canary, data = _engine_displacements(mechanism, model, jnp.int32(t))
            where = f"at step {t} from {label}"
            if not float(canary) <= bound:
                raise AssertionError(
                    f"adding the canary {where} moves the model by {float(canary):.6g} > "
                    f"lr * C = {bound:.6g}"
                )
            data = np.asarray(data)
            if data.size and not np.all(data <= bound):
                group = int(np.argmax(np.where(data <= bound, -np.inf, data)))
                raise AssertionError(
                    f"one more example of data group {group} {where} moves the model by "
                    f"{float(data[group]):.6g} > lr * C = {bound:.6g}"
                )


def _check_accounting(mechanism: AbstractMechanism) -> None:
    acc = mechanism.accounting()
    schedule = mechanism.canary_schedule
    mask = np.asarray(schedule.mask(jnp.arange(1, mechanism.steps + 1)))
    expected_steps = tuple(int(t) for t in np.flatnonzero(mask) + 1)
    sampled = schedule.sampled and mechanism.batching == "poisson"
    expected = {
        "steps": mechanism.steps,
        "canary_steps": expected_steps,
        "noise_multiplier": float(mechanism.noise_multiplier),
        "sampling_prob": float(mechanism.sampling_prob) if sampled else 1.0,
    }
    for field, value in expected.items():
        if getattr(acc, field) != value:
            raise AssertionError(
                f"accounting().{field} is {getattr(acc, field)!r}, expected {value!r} "
                f"(from the canary schedule {schedule} and batching {mechanism.batching!r})"
            )
    if schedule.steps(mechanism.steps) != expected_steps:
        raise AssertionError(
            f"canary_schedule.steps({mechanism.steps}) is {schedule.steps(mechanism.steps)}, "
            f"but its mask holds at the steps {expected_steps}"
        )


def _check_one_program(mechanism: AbstractMechanism, adversary: AbstractAdversary) -> None:
    readers = steps_readers(mechanism, adversary)
    declared = type(mechanism).reads_steps
    if readers and not declared:
        raise AssertionError(
            f"{', '.join(readers)} read(s) `steps` (T as a shape, a constant or a Python "
            "branch), so every T compiles its own simulation program (a sweep over T "
            "compiles once per cell). Keep T out of the methods the engine calls (a value "
            "derived from T can be an array field set in __init__), or say why the class "
            "needs it: reads_steps: ClassVar[str] = '<why>'"
        )


def _check_static_floats(mechanism: AbstractMechanism, adversary: AbstractAdversary) -> None:
    """Warns (`RecompileWarning`, at the caller of `check_mechanism`) naming each float
    field that changes the compiled program, and the methods that read it."""
    found = recompiling_floats(mechanism, adversary)
    if found:
        notes = {
            f.path: f"= {f.value!r}, read by {', '.join(f.readers)}"
            if f.readers
            else f"= {f.value!r}, read by no method the engine calls, yet part of jit's key"
            for f in found
        }
        message = recompile_advice(type(mechanism).__name__, [f.path for f in found], notes)
        # stacklevel: here, the check's lambda, _run_checks, check_mechanism, its caller.
        warnings.warn(message, RecompileWarning, stacklevel=5)


def _check_determinism(runs: _Runs, distinct: bool) -> None:
    first, again = runs(runs.seed), runs.fresh(runs.seed)
    for world in ("canary_in", "canary_out"):
        if not np.array_equal(getattr(first, world), getattr(again, world)):
            raise AssertionError(f"the same key gave different {world} scores")
    if distinct:
        other = runs(runs.seed + 1)
        for world in ("canary_in", "canary_out"):
            if np.array_equal(getattr(first, world), getattr(other, world)):
                raise AssertionError(
                    f"keys {runs.seed} and {runs.seed + 1} gave the same {world} scores"
                )


def _check_finite(runs: _Runs) -> None:
    scores = runs(runs.seed)
    for world in ("canary_in", "canary_out"):
        values = np.asarray(getattr(scores, world))
        if values.shape != (runs.trials,):
            raise AssertionError(f"{world} has shape {values.shape}, expected ({runs.trials},)")
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise AssertionError(
                f"{bad.size} non-finite {world} scores, the first at run {bad[0]}: {values[bad[0]]}"
            )


def _check_chunking(runs: _Runs) -> None:
    base, chunk_size = runs(runs.seed), runs.block + 1
    other = runs(runs.seed, chunk_size)
    for world in ("canary_in", "canary_out"):
        if not np.array_equal(getattr(base, world), getattr(other, world)):
            raise AssertionError(
                f"chunk_size={chunk_size} gave other {world} scores than chunk_size=1"
            )


def check_mechanism(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary | None = None,
    *,
    checks: Sequence[str] | None = None,
    trials: int | None = None,
    seed: int = 0,
) -> None:
    """Runs the mechanism contract on `mechanism` (see `MECHANISM_CHECKS`).

    Args:
        mechanism: the mechanism under test, built.
        adversary: scores the simulated runs (default: `ProjectionScore()`, the
            projection on the canary's descent direction).
        checks: the names of the checks to run (default: all of `MECHANISM_CHECKS`);
            they run in that tuple's order.
        trials: runs per world of each simulation (default: a little over two blocks
            per device).
        seed: the integer seed of the simulations (`seed + 1` gives the other key).

    Warns:
        RecompileWarning: (`advsim.sweep.RecompileWarning`) the `"static_floats"` check's
            finding: float fields stored as plain Python floats, named with the fix. Not
            a failure (the numbers are right; each value only compiles its own program),
            unless warnings are errors.

    Raises:
        AssertionError: naming the mechanism, the failed check and what was found.
        ValueError: an unknown check name.

    Example:
        >>> from advsim.mechanisms import LinearProcess
        >>> check_mechanism(LinearProcess(10, 0.1, 1.0), checks=("shapes", "clipping"))
    """
    adversary = ProjectionScore() if adversary is None else adversary
    runs = _Runs(mechanism, adversary, trials, seed, "last")
    table = {
        "shapes": lambda: _check_mechanism_shapes(mechanism),
        "one_program": lambda: _check_one_program(mechanism, adversary),
        "static_floats": lambda: _check_static_floats(mechanism, adversary),
        "clipping": lambda: _check_clipping(mechanism),
        "accounting": lambda: _check_accounting(mechanism),
        "breakpoints": lambda: _check_breakpoints(mechanism),
        "determinism": lambda: _check_determinism(runs, distinct=True),
        "finite": lambda: _check_finite(runs),
        "chunking": lambda: _check_chunking(runs),
    }
    _run_checks(type(mechanism).__name__, checks, MECHANISM_CHECKS, table)


def _check_breakpoints(mechanism: AbstractMechanism) -> None:
    try:
        check_scalar_law(mechanism)
    except (TypeError, ValueError):  # not a chain the exact engine propagates (e.g. d > 1)
        return
    jumps = undeclared_jumps(mechanism)
    if jumps:
        raise AssertionError(
            f"{describe_jumps(jumps)}; declare every jump inside "
            "advsim.exact.grid_reach(mechanism)"
        )


# --- adversary checks --------------------------------------------------------------------------


def _check_craft(adversary: AbstractAdversary, mechanism: AbstractMechanism) -> None:
    crafted = adversary.craft(mechanism)
    if not isinstance(crafted, AbstractMechanism):
        raise AssertionError(f"craft returned a {type(crafted).__name__}, not an AbstractMechanism")
    reason = adversary.check_mechanism(crafted)
    if reason is not None:
        raise AssertionError(f"it cannot score runs of {type(crafted).__name__}: {reason}")
    if not bool(eqx.tree_equal(crafted, adversary.craft(mechanism))):
        raise AssertionError("craft returned different mechanisms for the same mechanism")
    if crafted.accounting() != mechanism.accounting():
        raise AssertionError(
            f"the crafted mechanism's accounting {crafted.accounting()} differs from the "
            f"mechanism's {mechanism.accounting()}"
        )


def _check_sign(runs: _Runs) -> None:
    scores = runs(runs.seed)
    test = scipy.stats.mannwhitneyu(scores.canary_in, scores.canary_out, alternative="less")
    if test.pvalue < SIGN_LEVEL:
        auc = test.statistic / (scores.n_in * scores.n_out)
        raise AssertionError(
            f"the canary-in scores are below the canary-out scores (P(in > out) = {auc:.3f}, "
            f"one-sided p = {test.pvalue:.2g}); higher scores must mean 'canary in': negate "
            "the score"
        )


def check_adversary(
    adversary: AbstractAdversary,
    mechanism: AbstractMechanism,
    *,
    checks: Sequence[str] | None = None,
    trials: int | None = None,
    seed: int = 0,
    release: str = "last",
) -> None:
    """Runs the adversary contract on `adversary`, against `mechanism` (see
    `ADVERSARY_CHECKS`).

    Args:
        adversary: the adversary under test, built.
        mechanism: a mechanism it applies to (before crafting).
        checks: the names of the checks to run (default: all of `ADVERSARY_CHECKS`);
            they run in that tuple's order.
        trials: runs per world of the simulation (default: a little over two blocks per
            device).
        seed: the integer seed of the simulation.
        release: what the adversary scores, "last" (m_T) or "all" (m_0, ..., m_T).

    Raises:
        AssertionError: naming the adversary, the mechanism, the failed check and what
            was found.
        ValueError: an unknown check name.

    Example:
        >>> from advsim.adversaries import ProjectionScore
        >>> from advsim.mechanisms import LinearProcess
        >>> check_adversary(ProjectionScore(), LinearProcess(10, 0.1, 1.0), checks=("shapes",))
    """
    runs = _Runs(mechanism, adversary, trials, seed, release)
    table = {
        "craft": lambda: _check_craft(adversary, mechanism),
        "shapes": lambda: _check_shapes(adversary.craft(mechanism), adversary, release),
        "determinism": lambda: _check_determinism(runs, distinct=False),
        "finite": lambda: _check_finite(runs),
        "sign": lambda: _check_sign(runs),
    }
    subject = f"{type(adversary).__name__} on {type(mechanism).__name__}"
    _run_checks(subject, checks, ADVERSARY_CHECKS, table)

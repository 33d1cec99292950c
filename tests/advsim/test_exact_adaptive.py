"""The exact engine's adaptive ladder (`rtol`) and its programs shared across T.

Where the expected values come from:

- `PINNED`: the exact engine's value and error on its fixed three grids (6, 12, 24 cells
  per noise sd, one `last_iterate_epsilon(mech, delta)` call per row, as
  `advsim.experiment.exact_columns` makes them) computed by the code of commit 4c8d5f3,
  a ladder with neither `rtol` nor programs shared across T, on the rows of the accuracy
  table (`tests/advsim/test_exact.py::_accuracy_rows`, `docs/guide/exact.md`; both build
  their mechanisms with `tests/advsim/_accuracy_rows.py`) and on the seven rows of
  `advsim audit` (linear process, q = 0.01, T = 1 ... 1000, sigma calibrated to
  composition eps = 8 at delta = 1e-5 by `calibrate_noise_multipliers` at that commit:
  `AUDIT_SIGMAS`). The adaptive value must lie within its own stated error of it.
- The linear process's exact epsilon is `heuristic_epsilon` (Theorem 1 of
  arXiv:2410.06186).
- A grid count and a `converged` flag follow from the definition of the ladder: at least
  2 grids, at most `refinements`, stopping at the first whose error <= rtol * epsilon.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import pytest

from advsim.bounds import heuristic_epsilon
from advsim.exact import last_iterate_epsilon, last_iterate_epsilons
from advsim.exact._programs import STEPS_PLACEHOLDER, any_steps, uses_steps
from advsim.exact._propagate import advance
from advsim.experiment import EXACT_REFINEMENTS, EXACT_RTOL, exact_columns
from advsim.mechanisms import LinearProcess

from ._accuracy_rows import accuracy_mechanism

DELTA = 1e-5
AUDIT_SIGMAS = {1: 0.3425588693398479, 5: 0.3738635224783458, 10: 0.39000507686113034,
                50: 0.43859392342147285, 100: 0.46452841426243907, 500: 0.541509937713052,
                1000: 0.5862602729787919}  # fmt: skip

#: (row, mechanism, delta, epsilon and error on the fixed three grids at commit 4c8d5f3).
PINNED = [
    *[(f"audit T={t}", ("linear", t, 0.01, AUDIT_SIGMAS[t]), DELTA, eps, err) for t, eps, err in (
        (1, 7.998377352830204, 7.12e-3),
        (5, 2.380867713204655, 8.13e-5),
        (10, 1.5197332646755768, 4.22e-4),
        (50, 1.1133372343728363, 2.45e-4),
        (100, 1.2213710151497204, 8.0e-5),
        (500, 1.912240966529626, 5.86e-5),
        (1000, 2.431065933993004, 1.67e-4),
    )],
    *[(f"landscape T={t} B={b}", ("landscape", t, b), DELTA, eps, err) for t, b, eps, err in (
        (2, 1, 2.943014449598706, 6.88e-4),
        (2, 4, 4.2263385752371265, 1.24e-4),
        (2, 16, 4.367308327773969, 8.49e-6),
        (25, 1, 1.0845405976825606, 2.58e-4),
        (25, 4, 2.5952848476974903, 3.23e-5),
        (25, 16, 4.156227065358905, 7.41e-6),
    )],
    *[(f"quadratic alpha={a}", ("quadratic", a), 1e-6, eps, err) for a, eps, err in (
        (0.0, 2.22218691653728, 6.35e-4),
        (0.5, 2.273882127457778, 3.05e-3),
        (1.0, 2.1810281546949786, 1.94e-3),
    )],
    ("zeroing", ("zeroing",), DELTA, 3.0240013041531677, 4.15e-3),
    ("projected", ("projected",), DELTA, 2.277474853849503, 1.19e-3),
    *[(f"linear T={t} q={q}", ("linear", t, q, 1.0), DELTA, eps, err) for t, q, eps, err in (
        (1, 0.01, 0.1993422622717974, 2.99e-4),
        (1, 0.1, 1.6839857619173202, 1.52e-3),
        (1, 0.5, 3.5332831674451266, 2.03e-3),
        (10, 0.01, 0.17316939835687, 1.31e-5),
        (10, 0.1, 2.153012189917702, 1.56e-4),
        (10, 0.5, 10.224950352859628, 6.36e-4),
        (100, 0.01, 0.41078051651703296, 2.31e-6),
        (100, 0.1, 5.3582128002941065, 3.18e-5),
        (100, 0.2, 12.099953340744387, 1.22e-4),
        (1000, 0.01, 1.2777556706102111, 6.51e-7),
        (1000, 0.03, 4.41185776107428, 2.47e-6),
        (1000, 0.05, 8.068093801043307, 1.19e-5),
    )],
]  # fmt: skip


#: The cheap rows (a few seconds in all): the linear process at T = 1 and 10.
FAST = [row for row in PINNED if row[0].startswith(("linear T=1 ", "linear T=10 "))]


def _check_against_pinned(rows):
    lines = []
    for name, spec, delta, pinned, pinned_error in rows:
        mech = accuracy_mechanism(*spec)
        law = last_iterate_epsilon(mech, delta, rtol=EXACT_RTOL, progress=False)
        diff = abs(law.epsilon - pinned)
        lines.append(f"{name:<24} grids {law.grids}  |adaptive - fixed| {diff:.2e}  "
                     f"error {law.error:.2e} (fixed: {pinned_error:.2e})")  # fmt: skip
        assert 2 <= law.grids <= EXACT_REFINEMENTS, name
        assert law.converged == (law.error <= EXACT_RTOL * law.epsilon), name
        if law.grids < EXACT_REFINEMENTS:  # stopped early: only because it met the tolerance
            assert law.converged, name
        assert diff <= law.error, (name, diff, law.error)
    print("\n" + "\n".join(lines))


def test_adaptive_values_are_within_their_error_of_the_fixed_ladder_fast():
    _check_against_pinned(FAST)


@pytest.mark.slow
def test_adaptive_values_are_within_their_error_of_the_fixed_ladder():
    _check_against_pinned(PINNED)


# --- the ladder ---------------------------------------------------------------------------


def test_without_rtol_the_count_is_exact_and_with_it_a_maximum():
    mech = LinearProcess(10, 0.1, 1.0)
    fixed = last_iterate_epsilon(mech, DELTA)
    assert fixed.grids == 3 and fixed.rtol is None and fixed.converged is None
    assert fixed.cells_per_sd == (6.0, 12.0, 24.0)
    # Loose: two grids suffice (the change between them is 6.6e-4 of 2.153, 3e-4 relative).
    loose = last_iterate_epsilon(mech, DELTA, rtol=1e-2)
    assert loose.grids == 2 and loose.converged and loose.rtol == 1e-2
    assert loose.cells_per_sd == (6.0, 12.0)
    assert loose.epsilons == fixed.epsilons[:2]  # the same two grids, the same numbers
    assert loose.error >= abs(loose.epsilons[1] - loose.epsilons[0])
    assert loose.error <= 1e-2 * loose.epsilon and math.isnan(loose.observed_order)
    # Tight: the most grids allowed, not reached, said so; the fixed ladder's numbers.
    tight = last_iterate_epsilon(mech, DELTA, rtol=1e-9)
    assert tight.grids == 3 and tight.converged is False
    assert (tight.epsilon, tight.error) == (fixed.epsilon, fixed.error)
    assert tight.to_dict()["exact_converged"] is False
    assert last_iterate_epsilon(mech, DELTA, rtol=1e-9, refinements=2).grids == 2


def test_a_batch_refines_until_every_member_meets_the_tolerance():
    # On two grids q = 0.5 meets 3e-4 (its change 2.7e-3 of 10.22, 2.7e-4), q = 0.01 does
    # not (5.5e-5 of 0.173, 3.2e-4; measured): the batch takes a third grid for both.
    mechs = [LinearProcess(10, 0.5, 1.0), LinearProcess(10, 0.01, 1.0)]
    alone = last_iterate_epsilon(mechs[0], DELTA, rtol=3e-4)
    batch = last_iterate_epsilons(mechs, DELTA, rtol=3e-4)
    assert alone.grids == 2 and [law.grids for law in batch] == [3, 3]
    assert [law.converged for law in batch] == [True, True]
    assert abs(batch[0].epsilon - alone.epsilon) <= alone.error


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rtol": 0.0}, r"rtol must be in \(0, 1\), got 0.0"),
        ({"rtol": 1.5}, r"rtol must be in \(0, 1\), got 1.5"),
        ({"rtol": math.nan}, "rtol must be a number"),
        ({"rtol": 1e-3, "refinements": 1}, r"refinements must be in \[2, 6\] with rtol"),
    ],
)
def test_bad_tolerances_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        last_iterate_epsilon(LinearProcess(3, 0.1, 1.0), DELTA, **kwargs)
    with pytest.raises(ValueError, match=match):
        exact_columns(LinearProcess(3, 0.1, 1.0), DELTA, **kwargs)


def test_the_exact_column_asks_the_tolerance():
    mech = LinearProcess(10, 0.01, 1.0)
    cols = exact_columns(mech, DELTA)
    law = last_iterate_epsilon(mech, DELTA, rtol=EXACT_RTOL, refinements=EXACT_REFINEMENTS)
    assert (cols["exact_epsilon"], cols["exact_error"]) == (law.epsilon, law.error)
    fixed = exact_columns(mech, DELTA, rtol=None)
    assert fixed["exact_epsilon"] == last_iterate_epsilon(mech, DELTA).epsilon
    assert cols["exact_error_kind"] == "refinement estimate"


# --- one program for every T ----------------------------------------------------------


class StepsInSchedule(LinearProcess):
    """The linear process with a step size that reads T: eta_t = 1 for t <= T (the same
    law), but T is a constant of its traced program."""

    def step_size(self, t):
        return jnp.where(t <= self.steps, 1.0, 0.0)


def test_every_t_shares_the_compiled_propagation():
    # T = 3 ... 40 at q = 0.05: every grid fits the shared 3,072 nodes on 4,096 points.
    before = advance._cached._cache_size()
    laws = [last_iterate_epsilon(LinearProcess(t, 0.05, 1.0), DELTA, rtol=1e-3)
            for t in (3, 7, 20, 40)]  # fmt: skip
    assert advance._cached._cache_size() - before <= 1
    for t, law in zip((3, 7, 20, 40), laws, strict=True):
        assert abs(law.epsilon - heuristic_epsilon(DELTA, t, 0.05, 1.0)) <= law.error
    assert not uses_steps(LinearProcess(7, 0.05, 1.0))
    assert any_steps(LinearProcess(7, 0.05, 1.0)).steps == STEPS_PLACEHOLDER


def test_a_mechanism_that_reads_t_keeps_it():
    mech = StepsInSchedule(7, 0.05, 1.0)
    assert uses_steps(mech) and any_steps(mech) is mech
    law = last_iterate_epsilon(mech, DELTA, rtol=1e-3)
    assert law.epsilons == last_iterate_epsilon(LinearProcess(7, 0.05, 1.0), DELTA,
                                                rtol=1e-3).epsilons  # fmt: skip

"""The vectorised single-step PLD (advsim/bounds/_pld_fast.py) against dp_accounting.

Reference: dp_accounting's own code path, called directly: `PLDAccountant` composing
`SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), n)`, and
`from_gaussian_mechanism`. The fast path must give the same PMFs and epsilons bit for
bit (compared with ==), across sampling rates near 0 and 1, noise multipliers whose grids
are sparse (<= 1000 points) and dense, and several discretizations.
"""

import itertools

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from advsim.bounds._pld_fast import MAX_GRID_POINTS, composed_pld, gaussian_pld, grid_size

from ._dp_accounting import accountant, assert_same_pmf

# 48 cases, 0.1-1 s each against the reference: 13 of them in the fast suite (both ends of
# q and sigma, sparse and dense grids), the rest marked slow.
FAST = {(q, s, n, 1e-2) for q in (1e-3, 0.3, 0.999) for s in (0.3, 5.0) for n in (1, 7)}
FAST.add((0.01, 1.0, 7, 1e-3))
CASES = [
    c if c in FAST else pytest.param(*c, marks=pytest.mark.slow)
    for c in itertools.product([1e-3, 0.01, 0.3, 0.999], [0.3, 1.0, 5.0], [1, 7], [1e-2, 1e-3])
]


@pytest.mark.parametrize(("q", "sigma", "n", "vdi"), CASES)
def test_composed_pld_is_the_accountants_bit_for_bit(q, sigma, n, vdi):
    acc = accountant(q, sigma, n, vdi)
    fast = composed_pld(q, sigma, n, vdi)
    assert_same_pmf(fast._pmf_remove, acc._pld._pmf_remove)
    assert_same_pmf(fast._pmf_add, acc._pld._pmf_add)
    for delta in (1e-3, 1e-5, 1e-10):
        assert fast.get_epsilon_for_delta(delta) == acc.get_epsilon(delta)
    assert fast.get_delta_for_epsilon(1.0) == acc.get_delta(1.0)


@pytest.mark.parametrize(
    ("q", "sigma"),
    [
        (1.0, 3.0),
        pytest.param(0.5, 2.0, marks=pytest.mark.slow),
        pytest.param(1.0, 0.7, marks=pytest.mark.slow),
        pytest.param(0.05, 0.45, marks=pytest.mark.slow),
    ],
)
def test_single_step_is_from_gaussian_mechanism_bit_for_bit(q, sigma):
    # Includes q = 1 (symmetric: one PMF) and, at vdi = 1e-4, a dense grid of ~10^5 points.
    vdi = 1e-4
    ref = pld_lib.from_gaussian_mechanism(sigma, value_discretization_interval=vdi, sampling_prob=q)
    fast = gaussian_pld(sigma, q, vdi)
    assert fast._symmetric == ref._symmetric
    assert_same_pmf(fast._pmf_remove, ref._pmf_remove)
    assert_same_pmf(fast._pmf_add, ref._pmf_add)


def test_grid_size_counts_the_points_built():
    pld = gaussian_pld(0.8, 0.01, 1e-3)
    assert grid_size(0.01, 0.8, 1e-3) == pld._pmf_remove.size + pld._pmf_add.size


def test_a_grid_too_large_is_a_clear_error():
    # sigma = 1e-9: privacy losses up to ~1e18, i.e. ~1e22 grid points at 1e-4 (dp_accounting
    # itself fails with numpy's "Maximum allowed size exceeded").
    assert grid_size(0.1, 1e-9, 1e-4) > MAX_GRID_POINTS
    with pytest.raises(ValueError, match=r"noise_multiplier=1e-09 is too small.*at most"):
        gaussian_pld(1e-9, 0.1, 1e-4)

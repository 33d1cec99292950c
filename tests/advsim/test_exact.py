"""`advsim.exact`: the last model's law of a scalar construction, propagated on a grid.

Where the expected values come from:

- Two discrete laws: randomised response with ratio 99 has eps(0) = log 99 (its privacy
  loss takes the values +-log 99 only).
- Two Gaussians N(1, s^2), N(0, s^2) sampled on a grid: eps(delta) of the continuous pair
  is `gdp_epsilon(delta, 1/s)` (Corollary 2.13 of arXiv:1905.02383); the grid quadrature
  with the threshold cell interpolated must reproduce it to ~1e-6 at 50 nodes per s.
- The linear process: `heuristic_epsilon` is its exact epsilon (Theorem 1 of
  arXiv:2410.06186: P = Binomial(n, q) + N(0, T sigma^2) against N(0, T sigma^2)).
- The accuracy table (slow): the values the project knew before the engine, each from its
  own derivation: the threshold landscape at sigma = 1 (T = 2: the closed form
  `two_step_epsilon`; T = 25: an independent cell grid, see tests/mechanisms/
  test_landscape.py), the quadratic regularizer's exact mixture (`quadratic_exact_epsilon`,
  Section 4.2 of arXiv:2410.06186; 2.27487 checked with mpmath), the zeroing regularizer's
  one-step epsilon (Section 4.1 there), the projected canary's dense chain (limit about
  2.2779, tests/mechanisms/test_projected.py) and the heuristic for the linear process.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import advsim
from advsim import AbstractPerExampleData, AbstractScalarLaw, DPSGDParams
from advsim.bounds import (
    gdp_epsilon,
    heuristic_epsilon,
    quadratic_exact_epsilon,
    two_step_epsilon,
)
from advsim.exact import (
    GridTooLargeError,
    LostMassError,
    discrete_epsilon,
    discrete_tradeoff,
    grid_epsilon,
    last_iterate_epsilon,
    last_iterate_epsilons,
    resolution_limit,
)
from advsim.exact._divergence import grid_epsilon_host
from advsim.mechanisms import (
    GradientCanary,
    LinearProcess,
    ProjectedLinearCanary,
    QuadraticRegularizer,
    ThresholdLandscape,
    ZeroingRegularizer,
)

from ._accuracy_rows import accuracy_mechanism

DELTA = 1e-5


class _FromZero(AbstractScalarLaw):
    """A user's scalar construction written the documented way: m_0 = 0, the DP-SGD
    hyperparameters in `params` and one static `value` that shapes the fields."""

    params: DPSGDParams
    value: object = eqx.field(static=True)

    def __init__(self, steps, sampling_prob, noise_multiplier, value, **dpsgd):
        self.params = DPSGDParams(steps, sampling_prob, noise_multiplier, **dpsgd)
        self.value = value

    def init_model(self):
        return jnp.zeros((1,))


class Regularized(_FromZero):
    """The linear canary (-C) with a regularizer field given as a function (`value`; for
    the error paths)."""

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        return self.value(model)


class JumpNearStart(_FromZero):
    """A canary that pushes (-C) left of the jump `value` and not at all right of it, with
    m_0 = 0 just left of the jump: every run's first move is the full push."""

    def canary_gradient(self, model, t):
        return jnp.where(model < self.value, -1.0, 0.0)

    def field_breakpoints(self):
        return (self.value,)


# --- reading privacy off two laws -------------------------------------------------------------


def test_discrete_epsilon_of_randomised_response(x64):
    p, q = jnp.array([0.99, 0.01]), jnp.array([0.01, 0.99])
    assert float(discrete_epsilon(p, q, 0.0)) == pytest.approx(math.log(99), rel=1e-12)
    # delta = 0.01 removes the 0.99 - e^eps 0.01 excess down to eps = log(0.98 / 0.01).
    assert float(discrete_epsilon(p, q, 0.01)) == pytest.approx(math.log(98), rel=1e-12)
    alpha, beta = discrete_tradeoff(np.asarray(p), np.asarray(q))
    np.testing.assert_allclose(alpha, [0.0, 0.01, 1.0])
    np.testing.assert_allclose(beta, [1.0, 0.01, 0.0], atol=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize(("scale", "delta"), [(1.0, 1e-5), (0.5, 1e-5), (2.0, 1e-3)])
def test_grid_epsilon_of_sampled_gaussians(scale, delta, x64):
    want = gdp_epsilon(delta, 1.0 / scale)

    def errors(per_sd):
        h = scale / per_sd
        x = np.arange(-20 * scale, 1 + 20 * scale, h)
        p = scipy.stats.norm.pdf(x, 1.0, scale) * h
        q = scipy.stats.norm.pdf(x, 0.0, scale) * h
        return abs(grid_epsilon_host(p, q, delta) / want - 1), abs(
            float(discrete_epsilon(p, q, delta)) / want - 1
        )

    # Second order and smooth in the spacing (so refinement measures it); the lattice sum
    # alone (discrete_epsilon) puts the threshold on a node, an error that depends on where
    # the threshold falls between nodes (sometimes small, never predictable).
    coarse, _ = errors(25)
    fine, _ = errors(50)
    h = scale / 50
    x = np.arange(-20 * scale, 1 + 20 * scale, h)
    p, q = scipy.stats.norm.pdf(x, 1.0, scale) * h, scipy.stats.norm.pdf(x, 0.0, scale) * h
    assert float(grid_epsilon(p, q, delta)) == pytest.approx(grid_epsilon_host(p, q, delta))
    assert fine < 1e-4
    assert 3.0 < coarse / fine < 5.0


# --- the engine against the heuristic's exact case ----------------------------------------------


@pytest.mark.slow
def test_linear_process_is_the_heuristic():
    mechs = [LinearProcess(5, q, 1.0) for q in (0.05, 0.2, 0.7)]
    for mech, law in zip(mechs, last_iterate_epsilons(mechs, DELTA), strict=True):
        want = heuristic_epsilon(DELTA, mech.accounting())
        assert law.epsilon == pytest.approx(want, rel=1e-3), float(mech.sampling_prob)
        assert abs(law.epsilon - want) <= 3 * law.error + 1e-6
        assert law.error_kind == "refinement estimate" and len(law.epsilons) == 3
        assert law.lost_mass[0] < 1e-12 and law.lost_mass[1] < 1e-12
        # The profile and the trade-off curve are the same law's.
        assert law.privacy_profile([law.epsilon])[0] == pytest.approx(DELTA, rel=1e-6)
        alpha, beta = law.tradeoff()
        assert alpha[0] == 0 and beta[0] == 1 and np.all(np.diff(alpha) >= 0)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.5, 1.0])
def test_a_jump_within_a_cell_of_m0_acts_on_the_whole_first_move(sigma):
    """T = 1, the canary always present: the in-world's model is N(eta C, (eta sigma C)^2)
    and the out-world's N(0, same), so eps(delta) is that of mu-GDP, mu = 1 / sigma
    (`gdp_epsilon`, Dong et al. 2022, Cor. 2.13). The jump at 0.01 lies within half a cell
    of m_0 = 0 on every grid (the finest has sigma / 24): moving each cell's parts from
    their centroids would split the first move (the error this test was written for)."""
    exact = last_iterate_epsilon(JumpNearStart(1, 1.0, sigma, 0.01 * sigma), DELTA)
    assert exact.epsilon == pytest.approx(gdp_epsilon(DELTA, 1.0 / sigma), rel=1e-3)


@pytest.mark.slow
def test_a_batch_equals_its_members_and_calls_repeat():
    mech = ZeroingRegularizer(4, 0.1, 1.0)
    one = last_iterate_epsilon(mech, DELTA)
    both = last_iterate_epsilons([mech, mech], DELTA)
    assert [b.epsilon for b in both] == [one.epsilon, one.epsilon]
    assert last_iterate_epsilon(mech, DELTA).epsilons == one.epsilons  # deterministic
    assert one.epsilon == pytest.approx(heuristic_epsilon(DELTA, 1, 0.1, 1.0), rel=1e-3)


def test_a_batch_is_cut_where_one_grid_for_all_would_cost_more():
    # Cost model of `_buckets`: a compilation = one member on COMPILE_NODES nodes; every
    # member runs on its group's largest grid. Nearby sizes share; a 20-fold one does not.
    from advsim.exact._api import COMPILE_NODES, _buckets

    assert _buckets([1000, 1200, 1100]) == [[0, 2, 1]]
    # 4 members on 24,000 nodes cost less than a second compilation: one group.
    assert _buckets([24_000, 1000, 1200, 23_000]) == [[1, 2, 3, 0]]
    # At 10x the size, two groups cost less than one.
    sizes = [240_000, 1000, 1200, 230_000]
    assert 2 * COMPILE_NODES + 2 * 1200 + 2 * 240_000 < COMPILE_NODES + 4 * 240_000
    assert _buckets(sizes) == [[1, 2], [3, 0]]
    assert _buckets(list(reversed(sizes))) == [[2, 1], [0, 3]]  # the same groups


@pytest.mark.slow
def test_a_batch_of_very_different_grids_gives_each_members_value():
    # Landscape cells whose coarsest grids differ ~20-fold run in separate groups, each
    # value equal (to the rounding of a longer or shorter grid) to the member's own call.
    mechs = [ThresholdLandscape(3, 1.0, 1), ThresholdLandscape(3, 1.0, 16)]
    batch = last_iterate_epsilons(mechs, DELTA)
    for mech, got in zip(mechs, batch, strict=True):
        assert got.epsilon == pytest.approx(last_iterate_epsilon(mech, DELTA).epsilon, rel=1e-9)


@pytest.mark.slow
def test_every_step_is_the_epsilon_after_each_step():
    # The landscape at T = 2 in closed form (two_step_epsilon), T = 1 the Gaussian.
    law = last_iterate_epsilon(ThresholdLandscape(2, 2.0, 4), DELTA, every_step=True)
    assert law.epsilon_per_step.shape == (2,)
    assert law.epsilon_per_step[0] == pytest.approx(gdp_epsilon(DELTA, 0.5), rel=1e-3)
    assert law.epsilon_per_step[1] == pytest.approx(two_step_epsilon(DELTA, 2.0, 4), rel=1e-3)
    assert law.epsilon_per_step[1] == pytest.approx(law.epsilon, rel=1e-9)


# --- bad input and long work --------------------------------------------------------------------


def test_a_mechanism_without_the_capability_is_refused():
    with pytest.raises(TypeError, match="AbstractScalarLaw"):
        last_iterate_epsilon(GradientCanary(5, 0.1, 1.0, dim=3), DELTA)
    with pytest.raises(ValueError, match=r"shape \(2,\).*scalar model"):
        last_iterate_epsilon(LinearProcess(5, 0.1, 1.0, dim=2), DELTA)

    class PerExample(AbstractPerExampleData, AbstractScalarLaw):
        params: DPSGDParams
        num_examples: int = eqx.field(static=True, default=4)
        max_batch_size: int = eqx.field(static=True, default=4)

        def __init__(self):
            self.params = DPSGDParams(3, 0.5, 1.0)

        def init_model(self):
            return jnp.zeros((1,))

        def canary_gradient(self, model, t):
            return -jnp.ones_like(model)

        def example_gradients(self, model, indices, t):
            return jnp.zeros((indices.shape[0], 1))

    with pytest.raises(TypeError, match="per-example data"):
        last_iterate_epsilon(PerExample(), DELTA)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": 0.0}, "delta"),
        ({"cells_per_sd": 1.0}, "cells_per_sd"),
        ({"refinements": 0}, "refinements"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, match):
    args = {"delta": DELTA, **kwargs}
    with pytest.raises(ValueError, match=match):
        last_iterate_epsilon(LinearProcess(3, 0.1, 1.0), **args)


def test_a_grid_that_would_not_fit_is_refused_before_any_work():
    with pytest.raises(GridTooLargeError, match=r"nodes.*cells_per_sd = 6.*max_bytes"):
        last_iterate_epsilon(ThresholdLandscape(25, 1.0, 16), DELTA, max_bytes=2**20)


def test_a_field_that_is_not_finite_stops_with_the_step_and_the_value():
    # log(m + 3) is nan below m = -3, where the noise puts (tiny) mass from step 1 on.
    mech = Regularized(5, 0.1, 1.0, lambda m: jnp.log(m + 3.0))
    with pytest.raises(FloatingPointError, match=r"step \d.*m = -\d.*regularizer_gradient = nan"):
        last_iterate_epsilon(mech, DELTA, refinements=1)


def test_mass_leaving_the_grid_is_counted_and_reported():
    mech = Regularized(10, 0.1, 1.0, lambda m: 0.0 * m)
    with pytest.raises(
        LostMassError, match=r"by step 1, mass .* left the grid \[-1\.\d+, 2\.\d+\]"
    ):
        last_iterate_epsilon(mech, DELTA, support=(-1.0, 2.0), refinements=1)
    # Below the tolerance the lost mass is reported, not hidden.
    law = last_iterate_epsilon(mech, DELTA, support=(-1.0, 2.0), refinements=1,
                               lost_tolerance=1.0)  # fmt: skip
    assert law.lost_mass[1] > 0.1 and law.eps_bracket[1] > law.eps_bracket[0]


def test_a_batch_must_share_its_static_fields():
    with pytest.raises(ValueError, match=r"mechanisms\[1\] differs"):
        last_iterate_epsilons([LinearProcess(3, 0.1, 1.0), LinearProcess(4, 0.1, 1.0)], DELTA)


def test_a_batch_takes_the_single_call_settings_and_refuses_others():
    mech = LinearProcess(3, 0.1, 1.0)
    (batch,) = last_iterate_epsilons([mech], DELTA, refinements=2, cells_per_sd=4.0)
    single = last_iterate_epsilon(mech, DELTA, refinements=2, cells_per_sd=4.0)
    assert batch.epsilons == single.epsilons and batch.cells_per_sd == (4.0, 8.0)
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) \['refinement'\]"):
        last_iterate_epsilons([mech], DELTA, refinement=2)


def test_long_propagations_show_a_progress_bar(capsys):
    last_iterate_epsilon(LinearProcess(3, 0.1, 1.0), DELTA, refinements=1, progress=True)
    assert "exact law" in capsys.readouterr().err


# --- accuracy against every exact value known before the engine ----------------------------------


def _accuracy_rows():
    """`(construction, parameters, mechanism, delta, reference, source)`."""
    rows = []
    for t, refs in ((2, (2.94326, 4.22638, 4.36731)), (25, (1.08463, 2.59530, 4.15623))):
        for b, ref in zip((1, 4, 16), refs, strict=True):
            source = "closed form (two_step_epsilon)" if t == 2 else "independent cell grid"
            mech = accuracy_mechanism("landscape", t, b)
            rows.append(("landscape", f"sigma=1 T={t} B={b}", mech, DELTA, ref, source))
    for alpha in (0.0, 0.5, 1.0):
        ref = quadratic_exact_epsilon(1e-6, 3, 0.1, 1.0, alpha)
        rows.append(("quadratic", f"T=3 q=0.1 sigma=1 alpha={alpha}",
                     accuracy_mechanism("quadratic", alpha), 1e-6, ref,
                     "exact mixture (Sec. 4.2)"))  # fmt: skip
    rows.append(("zeroing", "T=10 q=0.01 sigma=0.5", accuracy_mechanism("zeroing"), DELTA,
                 heuristic_epsilon(DELTA, 1, 0.01, 0.5), "one step (Sec. 4.1)"))  # fmt: skip
    rows.append(("projected", "T=50 sigma=1 R=0.5", accuracy_mechanism("projected"),
                 DELTA, 2.2779, "dense chain, extrapolated"))  # fmt: skip
    # Up to the float64 grid's resolution (resolution_limit: 20.7 at delta = 1e-5); the
    # rows beyond it must say so (test_beyond_the_resolution_the_result_says_so).
    for t, qs in ((1, (0.01, 0.1, 0.5)), (10, (0.01, 0.1, 0.5)), (100, (0.01, 0.1, 0.2)),
                  (1000, (0.01, 0.03, 0.05))):  # fmt: skip
        for q in qs:
            mech = accuracy_mechanism("linear", t, q, 1.0)
            rows.append(("linear", f"T={t} q={q} sigma=1", mech, DELTA,
                         heuristic_epsilon(DELTA, t, q, 1.0), "heuristic (Thm. 1)"))  # fmt: skip
    return rows


@pytest.mark.slow
def test_accuracy_table():
    rows = _accuracy_rows()
    # One batched call per static structure (class, steps, schedule): the q's of the linear
    # process at each T, the B's of the landscape at each T, the quadratic's alphas.
    groups: dict = {}
    for i, row in enumerate(rows):
        key = (type(row[2]).__name__, row[2].steps, row[3])
        groups.setdefault(key, []).append(i)
    laws = [None] * len(rows)
    for (_, _, delta), idx in groups.items():
        for i, law in zip(idx, last_iterate_epsilons([rows[i][2] for i in idx], delta),
                          strict=True):  # fmt: skip
            laws[i] = law
    lines = [f"{'construction':<11} {'parameters':<32} {'reference':>9} {'exact':>9} "
             f"{'error est.':>10} {'rel. diff':>9}  source"]  # fmt: skip
    worst = 0.0
    for (name, params, _, _, ref, source), law in zip(rows, laws, strict=True):
        rel = abs(law.epsilon / ref - 1)
        worst = max(worst, rel)
        lines.append(f"{name:<11} {params:<32} {ref:9.5f} {law.epsilon:9.5f} "
                     f"{law.error:10.2e} {rel:9.1e}  {source}")  # fmt: skip
    print("\n" + "\n".join(lines))
    assert worst <= 1e-3, worst


def test_beyond_the_resolution_the_result_says_so():
    # T = 100, q = 0.5, sigma = 1: the heuristic's exact 37.7 at delta = 1e-5 rests on
    # out-world masses of about delta e^-37.7 ~ 4e-22, far below float64 rounding: the
    # grid's value is beyond resolution_limit, so the laws are propagated in log space and
    # the value is the heuristic's (Theorem 1 of arXiv:2410.06186), on one grid.
    assert resolution_limit(DELTA) == pytest.approx(math.log(1e9))
    law = last_iterate_epsilon(LinearProcess(100, 0.5, 1.0), DELTA, refinements=1)
    assert law.log_space and law.resolved and law.epsilon > resolution_limit(DELTA)
    assert law.epsilon == pytest.approx(heuristic_epsilon(DELTA, 100, 0.5, 1.0), rel=1e-3)
    assert math.isnan(law.error)  # one grid: no refinement estimate


def test_every_builtin_scalar_construction_has_the_capability():
    for mech in (LinearProcess(2, 0.1, 1.0), ZeroingRegularizer(2, 0.1, 1.0),
                 QuadraticRegularizer(2, 0.1, 1.0, alpha=0.3), ThresholdLandscape(2, 1.0, 2),
                 ThresholdLandscape(2, 1.0, 2, orientation="restore"),
                 ProjectedLinearCanary(2, 1.0, radius=1.0)):  # fmt: skip
        assert isinstance(mech, advsim.AbstractScalarLaw)
        advsim.exact.check_scalar_law(mech)

"""The fixed-grid epsilon and its derivative (`advsim.exact.FixedGridEpsilon`).

Expected values: `last_iterate_epsilon` on the same single grid (the same propagation);
central finite differences of the grid value at a generic point (no lattice alignment, no
symmetry, where the grid value is smooth); and the closed form of two Gaussians: for
N(mu, 1) against N(0, 1), delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
(Corollary 2.13 of Dong, Roth & Su, "Gaussian differential privacy"), so by the implicit
function theorem d eps / d mu = -(d delta / d mu) / (d delta / d eps).
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from advsim.exact import FixedGridEpsilon, last_iterate_epsilon
from advsim.exact._gradient import implicit_epsilon
from advsim.mechanisms import PiecewiseConstruction, PiecewiseField


def _gdp_delta(eps, mu):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_implicit_derivative_matches_the_gaussian_closed_form():
    mu, delta = 1.3, 1e-5
    with jax.enable_x64(True):
        x = jnp.linspace(-12.0, 14.0, 26_001)
        h = x[1] - x[0]

        def eps_of(m):
            p = h * jnp.exp(-0.5 * (x - m) ** 2) / jnp.sqrt(2 * jnp.pi)
            q = h * jnp.exp(-0.5 * x**2) / jnp.sqrt(2 * jnp.pi)
            return implicit_epsilon(p, q, delta)

        eps, slope = jax.value_and_grad(eps_of)(mu)
    # The closed form's epsilon and derivative (finite differences of delta, step 1e-6).
    lo, hi = 0.0, 20.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _gdp_delta(mid, mu) > delta else (lo, mid)
    e = 1e-6
    d_mu = (_gdp_delta(hi, mu + e) - _gdp_delta(hi, mu - e)) / (2 * e)
    d_eps = (_gdp_delta(hi + e, mu) - _gdp_delta(hi - e, mu)) / (2 * e)
    assert float(eps) == pytest.approx(hi, rel=1e-6)
    assert float(slope) == pytest.approx(-d_mu / d_eps, rel=1e-4)


def _generic_member():
    # A landscape-like member, off every symmetry and lattice alignment: threshold 0.3,
    # fields scaled by 0.37, a regularizer.
    mech = PiecewiseConstruction.threshold_landscape(6, 2.0, 4, threshold=0.3)
    group = mech.groups[0]
    field = PiecewiseField(group.knots, group.values * 0.37, group.jumps * 0.37, steps=6)
    return eqx.tree_at(lambda m: (m.groups[0], m.regularizer), mech,
                       (field, PiecewiseField([-2.0, 3.0], [0.21, -0.13])))  # fmt: skip


def test_fixed_grid_value_is_the_engines_on_the_same_grid():
    mech = _generic_member()
    ref = last_iterate_epsilon(mech, 1e-5, refinements=1, cells_per_sd=4.0, support=(-30, 30))
    objective = FixedGridEpsilon(mech, 1e-5, cells_per_sd=4.0, support=(-30.0, 30.0))
    with jax.enable_x64(True):
        eps, lost = eqx.filter_jit(objective)(mech)
    assert float(eps) == pytest.approx(ref.epsilon, abs=1e-12)
    assert float(np.max(np.asarray(lost))) < 1e-12


@pytest.mark.slow  # ~10-15 s on 2 cores: four exact evaluations besides the gradient
def test_gradient_matches_finite_differences():
    mech = _generic_member()
    objective = FixedGridEpsilon(mech, 1e-5, cells_per_sd=4.0, support=(-30.0, 30.0))
    with jax.enable_x64(True):
        value = eqx.filter_jit(lambda m: objective(m)[0])
        grad = eqx.filter_jit(eqx.filter_grad(lambda m: objective(m)[0]))(mech)

        def moved(d, row):
            values = np.array(mech.groups[0].values)
            values[row, 0] += d
            return eqx.tree_at(lambda m: m.groups[0].values, mech, values)

        e = 1e-5
        for row in (1, 3, 5):
            fd = (float(value(moved(e, row))) - float(value(moved(-e, row)))) / (2 * e)
            ad = float(np.asarray(grad.groups[0].values)[row, 0])
            assert ad == pytest.approx(fd, rel=2e-3, abs=1e-6)
            assert abs(ad) > 1e-4  # the derivative is not trivially zero here


def test_a_template_of_another_structure_is_refused():
    mech = _generic_member()
    objective = FixedGridEpsilon(mech, 1e-5, support=(-30.0, 30.0))
    other = PiecewiseConstruction.linear_loss(6, 0.5, 2.0)
    with jax.enable_x64(True), pytest.raises(ValueError, match="differs from the template"):
        objective(other)

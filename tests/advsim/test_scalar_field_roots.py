"""Holder root terms of `advsim.testing.ScalarField`, h sign(m - rho)|m - rho|^gamma, and
the construction files that replay a construction (`save_construction` /
`load_construction`).

Expected values: the closed form of the root term (numpy, float64), its Holder constant
|h| 2^(1 - gamma) (the sharp constant of sign(x)|x|^gamma, reached at x = -y), and the
file round trip (the same `describe()` and the same field values)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from advsim import CanarySchedule
from advsim.testing import (
    ProjectedScalarFieldConstruction,
    ScalarField,
    ScalarFieldConstruction,
    load_construction,
    save_construction,
)
from advsim.testing._facts import holder_constant

ROOT = ScalarField(-0.5, roots=[0.1], root_heights=[0.4], root_exponents=[0.5])


def test_the_root_term_is_its_closed_form_on_host_and_device():
    x = np.linspace(-2.0, 2.0, 401)
    want = -0.5 + 0.4 * np.sign(x - 0.1) * np.abs(x - 0.1) ** 0.5
    np.testing.assert_allclose(ROOT.values(x), want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(ROOT(jnp.asarray(x, jnp.float32))), want, atol=1e-6)


def test_what_a_root_term_certifies():
    assert ROOT.lipschitz() == math.inf and ROOT.is_nondecreasing()
    assert ROOT.slope_bounds() == (0.0, math.inf)
    # sup |g| on [-2, 2]: |offset| + 0.4 * 2.1^0.5 (the farther end from rho)
    assert ROOT.sup_abs(-2.0, 2.0) == pytest.approx(0.5 + 0.4 * 2.1**0.5, rel=1e-15)
    # Holder: exponent 0.5 -> 0.4 * 2^0.5; a lower exponent on [-2, 2] -> times D^(0.5-b)
    assert holder_constant(ROOT, 0.5, 2.0) == pytest.approx(0.4 * 2**0.5, rel=1e-15)
    assert holder_constant(ROOT, 0.25, 2.0) == pytest.approx(0.4 * 2**0.5 * 4**0.25, rel=1e-15)
    assert holder_constant(ROOT, 0.75, 2.0) == math.inf  # not 0.75-Holder at rho
    assert holder_constant(ROOT, 0.25, math.inf) == math.inf  # grows on the line
    x = np.linspace(-2.0, 2.0, 4001)
    g = ROOT.values(x)
    i, j = np.triu_indices(x.size, 1)[0][::97], np.triu_indices(x.size, 1)[1][::97]
    ratio = np.abs(g[i] - g[j]) / np.abs(x[i] - x[j]) ** 0.5
    assert ratio.max() <= holder_constant(ROOT, 0.5, 2.0) * (1 + 1e-12)
    with pytest.raises(ValueError, match="root_exponents must be in"):
        ScalarField(roots=[0.0], root_heights=[1.0], root_exponents=[1.5])


@pytest.mark.parametrize("projected", [False, True])
def test_a_construction_file_replays_the_construction(projected, tmp_path):
    kwargs = dict(
        canary=ROOT, groups=[ScalarField(0.2, 0.1, bump_centres=[0.3], bump_heights=[0.2],
                                         bump_widths=[0.5])],
        counts=[3], regularizer=ScalarField(0.01, 0.2), init=0.25, learning_rate=0.3,
        batching="fixed", canary_schedule=CanarySchedule.every(2, sampled=False),
    )  # fmt: skip
    mech = (
        ProjectedScalarFieldConstruction(4, 1.0, 1.5, radius=2.0, **kwargs)
        if projected
        else ScalarFieldConstruction(4, 1.0, 1.5, **kwargs)
    )
    path = save_construction(tmp_path / "c.json", mech, found_by="test")
    back = load_construction(path)
    assert type(back) is type(mech) and back.describe() == mech.describe()
    x = np.linspace(-2, 2, 9)
    for a, b in zip((mech.canary, *mech.groups, mech.regularizer),
                    (back.canary, *back.groups, back.regularizer), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a.values(x), b.values(x))
    with pytest.raises(ValueError, match="not a advsim-scalar-field-construction"):
        (tmp_path / "bad.json").write_text("{}")
        load_construction(tmp_path / "bad.json")

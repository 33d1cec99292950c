"""`advsim.bounds.renyi_epsilon` against dp_accounting's RDP conversion (`compute_epsilon`
of its RDP accountant, the same Proposition 12 of arXiv:2004.00010, an independent
implementation) and against the Gaussian mechanism's exact epsilon, which it must not be
below (an RDP conversion is an upper bound)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

from advsim.bounds import RENYI_ORDERS, gdp_epsilon, renyi_epsilon


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_the_gaussian_mechanism_matches_dp_accounting_and_stays_above_the_truth(sigma, delta):
    orders = np.asarray(RENYI_ORDERS)
    rdp = orders / (2.0 * sigma**2)  # Gaussian mechanism, sensitivity 1 (Mironov 2017)
    ours = renyi_epsilon(delta, lambda a: a / (2.0 * sigma**2))
    theirs, _ = compute_epsilon(orders, rdp, delta)
    assert ours == pytest.approx(float(theirs), rel=1e-12)
    assert ours >= gdp_epsilon(delta, 1.0 / sigma) * (1 - 1e-12)  # the exact epsilon


def test_values_at_the_orders_infinite_orders_and_bad_input():
    orders = (2.0, 4.0, 8.0)
    values = [0.5, math.inf, 1.0]
    expected = min(
        v + math.log1p(-1 / a) - (math.log(1e-5) + math.log(a)) / (a - 1)
        for a, v in zip(orders, values, strict=True)
        if math.isfinite(v)
    )
    assert renyi_epsilon(1e-5, values, orders) == pytest.approx(expected, rel=1e-14)
    assert renyi_epsilon(1e-5, [math.inf], (2.0,)) == math.inf
    with pytest.raises(ValueError, match="orders must be finite and > 1"):
        renyi_epsilon(1e-5, [0.1], (1.0,))
    with pytest.raises(ValueError, match="one value per order"):
        renyi_epsilon(1e-5, [0.1, 0.2], (2.0,))
    with pytest.raises(ValueError, match="delta"):
        renyi_epsilon(0.0, [0.1], (2.0,))

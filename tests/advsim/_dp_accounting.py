"""dp-accounting as the reference of the composition bounds' tests: its PLD accountant on
the Poisson-subsampled Gaussian, and the check that two of its PMFs are the same."""

import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant


def accountant(q, sigma, n, vdi):
    """dp-accounting's PLDAccountant after n Poisson(q)-subsampled Gaussian(sigma) steps."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=vdi)
    event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    acc.compose(dp_event.SelfComposedDpEvent(event, n))
    return acc


def assert_same_pmf(a, b):
    """The same PMF, bit for bit: type, infinity mass, and the dense or sparse losses."""
    assert type(a) is type(b)
    assert a._infinity_mass == b._infinity_mass
    if hasattr(a, "_probs"):  # dense
        assert a._lower_loss == b._lower_loss
        assert a._probs.dtype == b._probs.dtype
        assert np.array_equal(a._probs, b._probs)
    else:  # sparse
        assert a._loss_probs == b._loss_probs

"""The real-model adversaries: what they read off the last model, checked against the
mechanism's own loss / margin / gradient (independent: jax.grad of the loss, the flat
displacement), their errors, and (slow) that a canary's presence raises the scores."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import advsim
from advsim.adversaries import BiasedCoordinate, CanaryGradientProjection, CanaryLoss
from advsim.mechanisms import GradientCanary, RealModelGradientCanary, RealModelInputCanary


def _moved(mech, seed=3):
    m0 = mech.init_model()
    return m0 + 0.2 * jax.random.normal(jax.random.key(seed), m0.shape)


def test_canary_loss_reads_the_last_model():
    mech = RealModelInputCanary(4, 0.2, 1.0, num_examples=8)
    last = _moved(mech)
    x, y = jnp.asarray(mech.canary_x), mech.canary_y
    loss = float(mech.loss(last, x, y))
    assert float(CanaryLoss("loss").score(mech, last)) == pytest.approx(-loss, rel=1e-6)
    # Binary cross-entropy on the signed margin z: loss = softplus(-z).
    margin = float(CanaryLoss("margin").score(mech, last))
    assert np.log1p(np.exp(-margin)) == pytest.approx(loss, rel=1e-5)
    trajectory = jnp.stack([mech.init_model(), last])  # release="all": the last row counts
    assert float(CanaryLoss().score(mech, trajectory)) == pytest.approx(-loss, rel=1e-6)


def test_canary_loss_needs_an_input_canary():
    with pytest.raises(ValueError, match="statistic must be 'loss' or 'margin'"):
        CanaryLoss("logit")
    with pytest.raises(TypeError, match="AbstractCanaryExample"):
        CanaryLoss().craft(GradientCanary(3, 0.1, 1.0))
    with pytest.raises(TypeError, match="AbstractCanaryExample"):
        CanaryLoss().craft(RealModelGradientCanary(3, 0.1, 1.0, num_examples=4))


def test_projection_on_the_canary_gradient():
    gc = RealModelGradientCanary(4, 0.2, 1.0, num_examples=8).with_direction(5)
    last = _moved(gc)
    disp = np.asarray(last - gc.init_model())
    # A crafted gradient -C e_5: the projection is the biased coordinate's displacement.
    assert float(CanaryGradientProjection().score(gc, last)) == pytest.approx(disp[5], rel=1e-5)
    assert float(BiasedCoordinate(5).score(gc, last)) == pytest.approx(disp[5], rel=1e-5)
    ic = RealModelInputCanary(4, 0.2, 1.0, model="mlp", width=3, num_examples=8)
    last = _moved(ic)
    g = np.asarray(jax.grad(ic.canary_loss)(ic.init_model()), np.float64)
    expected = -np.dot(np.asarray(last - ic.init_model(), np.float64), g) / np.linalg.norm(g)
    assert float(CanaryGradientProjection().score(ic, last)) == pytest.approx(expected, rel=1e-4)


@pytest.mark.slow
def test_canary_presence_raises_the_scores():
    # Low noise (sigma = 0.3), the mislabeled canary sampled at every step with q = 0.5:
    # with the canary in, its loss at the last model is lower on average than without it.
    mech = RealModelInputCanary(10, 0.5, 0.3, num_examples=32, learning_rate=0.2)
    for adversary in (CanaryLoss("loss"), CanaryLoss("margin"), CanaryGradientProjection()):
        scores = advsim.simulate(mech, adversary, 512, 0)
        assert np.mean(scores.canary_in) > np.mean(scores.canary_out) + 0.1 * np.std(
            scores.canary_out
        ), adversary

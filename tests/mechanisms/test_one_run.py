"""OneRunGradientCanaries and simulate_one_run: the scores' exact law, no interference on
separate coordinates (and interference on shared directions), the engine's contract
(clipping, determinism, batch invariance), the exact epsilon, clear errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import advsim.bounds as bounds
from advsim import AbstractMultiCanary
from advsim._dpsgd import run_mechanism
from advsim.audits import one_run_audit
from advsim.mechanisms import GradientCanary, OneRunGradientCanaries
from advsim.one_run import OneRunScores, simulate_one_run

DELTA = 1e-5


def _mech(**kw):
    return OneRunGradientCanaries(**{"steps": 4, "noise_multiplier": 1.0, "num_canaries": 64, **kw})


@pytest.fixture(scope="module")
def separate():
    """40 repetitions of 64 canaries on separate coordinates (one compilation, shared)."""
    return simulate_one_run(_mech(), 40, key=0, batch=40)


@pytest.mark.slow
def test_scores_have_the_exact_law(separate):
    # Separate coordinates, fixed batch, T = 4, sigma = 1, eta = C = 1: an included
    # canary's score is T + N(0, T sigma^2) = N(4, 4), an excluded one's N(0, 4)
    # (module docstring). 40 x 64 scores: KS tests at level 1e-3 against those laws.
    out = separate
    s, b = out.scores, out.included
    assert isinstance(out, OneRunScores) and s.shape == (40, 64)
    assert scipy.stats.kstest(s[b], scipy.stats.norm(4.0, 2.0).cdf).pvalue > 1e-3
    assert scipy.stats.kstest(s[~b], scipy.stats.norm(0.0, 2.0).cdf).pvalue > 1e-3
    # Inclusion bits are fair coins: 2560 draws, within 4 standard deviations of 1/2.
    assert abs(b.mean() - 0.5) < 4 * 0.5 / np.sqrt(b.size)


@pytest.mark.slow
def test_poisson_canaries_follow_the_heuristics_law():
    # Poisson-sampled canaries: an included canary's score is Binomial(T, q) + N(0, T
    # sigma^2), the mixture of Theorem 1 of arXiv:2410.06186; its mean is T q = 2.
    mech = _mech(batching="poisson", sampling_prob=0.5)
    out = simulate_one_run(mech, 40, key=1)
    s, b = out.scores, out.included
    se = np.sqrt((4 * 0.25 + 4.0) / b.sum())
    assert abs(s[b].mean() - 2.0) < 5 * se and abs(s[~b].mean()) < 5 * 2.0 / np.sqrt((~b).sum())
    assert mech.epsilon(DELTA) == pytest.approx(bounds.heuristic_epsilon(DELTA, 4, 0.5, 1.0))


@pytest.mark.slow
def test_separate_canaries_do_not_interfere_shared_ones_do():
    # Same key, bits differing only in canary 0: on separate coordinates every other
    # canary's score is bit for bit the same; on shared directions they all move.
    for layout, dim in (("separate", None), ("shared", 16)):
        mech = _mech(layout=layout, dim=dim)
        bits = np.arange(64) % 2 == 0
        key = jax.random.key(3)
        a = mech.canary_scores(run_mechanism(mech.with_included(bits), False, key=key))
        bits[0] = False
        c = mech.canary_scores(run_mechanism(mech.with_included(bits), False, key=key))
        changed = np.asarray(a != c)
        assert changed[0]
        assert (not changed[1:].any()) if layout == "separate" else changed[1:].all()


@pytest.mark.slow
def test_interference_weakens_the_audit():
    # 16 directions shared by 64 canaries add sum_i N_i <u_i, u_j> (variance about
    # 32 * 16 / 16 = 32) to the noise variance 4: the one-run bound drops (measured median
    # 1.10 separate vs 0.0 shared over 10 repetitions).
    sep = simulate_one_run(_mech(), 10, key=4).audit(delta=DELTA)
    shared = simulate_one_run(_mech(layout="shared", dim=16), 10, key=4).audit(delta=DELTA)
    assert np.median([r.eps_lower for r in shared]) < np.median([r.eps_lower for r in sep])


def test_each_canary_has_sensitivity_c():
    # The engine clips every data group to C (its contract, tests/mechanisms/
    # test_contract.py); here every canary's gradient already has norm exactly C along its
    # own direction, so clipping is a no-op and one canary moves the model by eta C (the
    # per-canary sensitivity the exact epsilon assumes). Separate: orthogonal rows.
    for layout in ("separate", "shared"):
        mech = _mech(clip_norm=0.5, num_canaries=8, dim=8 if layout == "separate" else 3,
                     layout=layout)  # fmt: skip
        g = np.asarray(mech.data_gradients(mech.init_model(), 1))
        np.testing.assert_allclose(np.linalg.norm(g, axis=1), 0.5, rtol=1e-6)
        if layout == "separate":
            np.testing.assert_array_equal(g, -0.5 * np.eye(8))


def test_deterministic_and_padding_invariant(separate):
    # Repetition i depends on fold_in(key, i) alone: the same key gives the same scores
    # bit for bit, another key other scores (batch sizes: test_batch_invariant, slow).
    again = simulate_one_run(_mech(), 40, key=0, batch=40)
    np.testing.assert_array_equal(again.scores, separate.scores)
    other = simulate_one_run(_mech(), 40, key=1, batch=40)
    assert not np.array_equal(other.scores, separate.scores)


@pytest.mark.slow
def test_batch_invariant():
    mech = _mech(num_canaries=16)
    a = simulate_one_run(mech, 5, key=7, batch=1)
    b = simulate_one_run(mech, 5, key=7, batch=3)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.included, b.included)


def test_exact_epsilon_and_accounting():
    mech = _mech(steps=9, noise_multiplier=1.5)
    # Fixed batch: mu = sqrt(T) / sigma = 2 (Corollary 2.13 of arXiv:1905.02383).
    assert mech.epsilon(DELTA) == pytest.approx(bounds.gdp_epsilon(DELTA, 2.0), rel=1e-12)
    acc = mech.accounting()
    assert acc.steps == 9 and acc.sampling_prob == 1.0 and len(acc.canary_steps) == 9
    assert isinstance(mech, AbstractMultiCanary)


def test_audit_stays_below_the_exact_epsilon(separate):
    # 40 repetitions of m = 64 canaries (mu = sqrt(4) / 1 = 2, exact eps 10.0): no
    # eps_lower above it, and the audit sees the canaries (measured median 1.25).
    results = separate.audit(delta=DELTA)
    assert all(0 <= r.eps_lower <= _mech().epsilon(DELTA) for r in results)
    assert np.median([r.eps_lower for r in results]) > 0.5


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="layout must be one of"):
        _mech(layout="diagonal")
    with pytest.raises(ValueError, match="dim"):
        _mech(dim=10)  # separate coordinates need d >= m = 64
    with pytest.raises(ValueError, match="num_canaries"):
        _mech(num_canaries=0)
    with pytest.raises(ValueError, match="included must have shape"):
        _mech().with_included(jnp.ones(3, bool))
    with pytest.raises(ValueError, match="repetitions"):
        simulate_one_run(_mech(), 0, key=0)
    with pytest.raises(TypeError, match="AbstractMultiCanary"):
        simulate_one_run(GradientCanary(2, 1.0, 1.0), 2, key=0)


def test_result_feeds_the_audit_directly(separate):
    r = one_run_audit(separate.scores[0], separate.included[0], delta=DELTA)
    assert r.num_canaries == 64 and separate.repetitions == 40 and separate.num_canaries == 64

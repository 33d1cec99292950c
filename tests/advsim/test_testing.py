"""Tests of advsim.testing itself: strategies draw valid values in their bounds, checks
fail with reports that name what is needed to replay, calibration counts correctly."""

import dataclasses
import linecache
import math
import re
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import advsim
import advsim.testing as tst
from advsim import Accounting, Scores
from advsim.adversaries import ProjectionScore
from advsim.bounds import binomial_mixture, gdp_epsilon, heuristic_epsilon
from advsim.mechanisms import LinearProcess
from advsim.testing import (
    PROFILE,
    SETTINGS,
    DrawnDPSGDParams,
    Mixture,
    assert_audit_below,
    assert_bound_below,
    assert_monotone,
    calibration_fraction,
    clopper_pearson_interval,
    dpsgd_params,
    gaussian_sampler,
    linear_mechanisms,
    mixture_sampler,
    mixtures,
)

# ----------------------------------------------------------------------------------------
# Settings profile


def test_profile_is_registered_derandomized_and_not_loaded():
    assert PROFILE == "advsim"
    profile = settings.get_profile(PROFILE)
    assert profile.derandomize and profile.deadline is None and profile.database is None
    assert SETTINGS.derandomize and SETTINGS.deadline is None


def test_settings_is_a_parent_for_per_test_settings():
    s = settings(SETTINGS, max_examples=7)
    assert s.max_examples == 7 and s.derandomize and s.deadline is None


# ----------------------------------------------------------------------------------------
# Strategies


@settings(SETTINGS, max_examples=60)
@given(dpsgd_params(period=(1, 10)))
def test_dpsgd_params_are_valid_and_in_default_ranges(p):
    assert isinstance(p, DrawnDPSGDParams)
    assert 1 <= p.steps <= 1000 and 1e-4 <= p.sampling_prob <= 1.0
    assert 0.3 <= p.noise_multiplier <= 10.0 and 1e-12 <= p.delta <= 1e-2
    assert 0.1 <= p.clip_norm <= 10.0 and 1 <= p.batch_size <= 1024 and 0 <= p.alpha <= 1
    assert 1 <= p.period <= 10
    assert p.num_canary_steps == len(range(1, p.steps + 1, p.period))
    acc = p.accounting()
    assert isinstance(acc, Accounting) and acc.num_canary_steps == p.num_canary_steps
    assert p.bound_args == (p.delta, p.steps, p.sampling_prob, p.noise_multiplier)
    assert p.bound_kwargs == {"canary_steps": p.num_canary_steps}


@settings(SETTINGS, max_examples=40)
@given(
    dpsgd_params(
        steps=(3, 7),
        sampling_prob=0.25,
        noise_multiplier=st.sampled_from([0.5, 2.0]),
        delta=(1e-6, 1e-6),
    )
)
def test_dpsgd_params_keywords_narrow_fix_or_replace(p):
    assert 3 <= p.steps <= 7 and p.sampling_prob == 0.25 and p.period == 1
    assert p.noise_multiplier in (0.5, 2.0) and p.delta == 1e-6


def test_strategy_ranges_hit_both_ends():
    seen = set()

    @settings(SETTINGS, max_examples=80)
    @given(tst.sampling_probs(min_value=1e-3))
    def collect(q):
        assert 1e-3 <= q <= 1.0
        seen.add(q)

    collect()
    assert {1e-3, 1.0} <= seen  # the ends (q = 1: no subsampling) are drawn, not just near


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: tst.steps(min_value=5, max_value=2), r"min_steps must be <= max_steps"),
        (lambda: tst.sampling_probs(max_value=1.5), r"max_sampling_prob must be in \(0, 1\]"),
        (lambda: tst.deltas(min_value=0.0), r"min_delta must be in \(0, 1\)"),
        (lambda: tst.noise_multipliers(min_value=-1.0), r"min_noise_multiplier must be in"),
        (lambda: tst.alphas(max_value=2.0), r"max_alpha must be in \[0, 1\]"),
        (lambda: dpsgd_params(steps=(0, 3)), r"min_steps must be an integer in \[1, inf\)"),
        (lambda: mixtures(scale=(2.0, 1.0)), r"min_scale must be <= max_scale"),
    ],
)
def test_bad_bounds_raise_when_the_strategy_is_built(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("make", [tst.linear_constructions, tst.scalar_constructions])
def test_construction_strategies_name_an_unknown_run_keyword(make):
    # The run's keywords are a RunRanges: a misspelt one is refused when the strategy is
    # built, with the keywords it takes, not silently ignored.
    with pytest.raises(TypeError, match=r"unexpected keyword\(s\) \['noise'\].*noise_multiplier"):
        make(noise=(0.5, 1.0))


def test_dpsgd_params_record_validates():
    with pytest.raises(ValueError, match="sampling_prob must be in"):
        DrawnDPSGDParams(steps=1, sampling_prob=0.0, noise_multiplier=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="alpha must be in"):
        DrawnDPSGDParams(steps=1, sampling_prob=1.0, noise_multiplier=1.0, delta=1e-5, alpha=1.5)


@settings(SETTINGS, max_examples=60)
@given(mixtures())
def test_mixtures_are_valid_distributions(m):
    support, probs, scale = m.args
    assert support.shape == probs.shape and np.all(support >= 0) and np.any(support > 0)
    assert np.all(probs > 0) and math.fsum(probs.tolist()) == pytest.approx(1.0, abs=1e-12)
    assert 0.2 <= scale <= 5.0


@settings(SETTINGS, max_examples=20)
@given(mixtures(zero_atom=True, atoms=(2, 2)), mixtures(zero_atom=False))
def test_mixtures_zero_atom_flag(with_zero, without):
    assert with_zero.support[0] == 0.0 and len(with_zero.support) == 3
    assert all(x > 0 for x in without.support)


def test_mixture_from_params_is_the_heuristic_pair():
    p = DrawnDPSGDParams(steps=9, sampling_prob=0.3, noise_multiplier=0.7, delta=1e-5, period=2)
    m = Mixture.from_params(p)
    support, probs = binomial_mixture(5, 0.3)  # steps 1, 3, 5, 7, 9
    np.testing.assert_array_equal(m.args[0], support)
    np.testing.assert_array_equal(m.args[1], probs)
    assert m.scale == pytest.approx(3 * 0.7)


@settings(SETTINGS, max_examples=20)
@given(linear_mechanisms(period=(1, 3), batching=st.sampled_from(["poisson", "fixed"])))
def test_linear_mechanisms_are_built(mech):
    assert isinstance(mech, LinearProcess) and mech.steps in (1, 2, 5, 10)
    acc = mech.accounting()
    assert 0.5 <= acc.noise_multiplier <= 4.0
    assert acc.sampling_prob == 1.0 or (mech.batching == "poisson" and acc.sampling_prob >= 0.05)


# ----------------------------------------------------------------------------------------
# Checks


def test_assert_bound_below_passes_and_returns_both_values():
    p = DrawnDPSGDParams(steps=3, sampling_prob=0.1, noise_multiplier=1.0, delta=1e-6)
    lo, hi = assert_bound_below(heuristic_epsilon, lambda *a, **k: 100.0, p)
    assert lo == pytest.approx(2.222, abs=1e-3) and hi == 100.0
    assert assert_bound_below(lambda x, y: x, lambda x, y: y, (1.0, 2.0)) == (1.0, 2.0)
    assert assert_bound_below(lambda a: a, lambda a: a + 1, {"a": 1.0}) == (1.0, 2.0)
    # rtol / atol allow rounding
    assert_bound_below(lambda: 1.0 + 1e-12, lambda: 1.0, (), rtol=1e-9)


def test_assert_bound_below_report_names_functions_values_and_params():
    p = DrawnDPSGDParams(steps=3, sampling_prob=0.1, noise_multiplier=1.0, delta=1e-6)

    def tiny(delta, steps, q, sigma, *, canary_steps):
        return 0.5

    with pytest.raises(AssertionError) as err:
        assert_bound_below(heuristic_epsilon, tiny, p)
    msg = str(err.value)
    assert "heuristic_epsilon exceeds" in msg and "tiny = 0.5" in msg
    assert "steps=3" in msg and "sampling_prob=0.1" in msg and "delta=1e-06" in msg


def test_assert_bound_below_fails_on_nan():
    with pytest.raises(AssertionError, match="nan"):
        assert_bound_below(lambda: math.nan, lambda: 1.0, ())
    with pytest.raises(AssertionError, match="nan"):
        assert_bound_below(lambda: 0.0, lambda: math.nan, ())


def test_assert_monotone():
    assert_monotone([1, 2, 3], [3.0, 2.0, 2.0], decreasing=True)
    assert_monotone([1, 2, 3], [1.0, 1.0 - 1e-15, 2.0], rtol=1e-12)
    with pytest.raises(AssertionError, match=r"not non-increasing: 2 at 2 -> 2.5 at 3"):
        assert_monotone([1, 2, 3], [3.0, 2.0, 2.5], decreasing=True, params={"T": 1})
    with pytest.raises(AssertionError, match="is NaN at 2"):
        assert_monotone([1, 2], [0.0, math.nan])


def test_assert_audit_below_passes_for_the_exact_epsilon():
    mech = LinearProcess(steps=1, sampling_prob=1.0, noise_multiplier=1.0)
    result = assert_audit_below(
        mech, ProjectionScore(), gdp_epsilon(1e-5, 1.0), delta=1e-5, method="gdp", seed=3
    )
    # The Gaussian mechanism (T = 1, q = 1): the GDP audit's assumption holds exactly, and
    # its result still says it rests on it (only assumption-free bounds are rigorous).
    assert result.guarantee.held_out and result.guarantee.assumption == "gaussian_tradeoff"
    assert 0 < result.eps_lower <= gdp_epsilon(1e-5, 1.0)


def test_assert_audit_below_report_has_parameters_bound_and_replay_seed():
    mech = LinearProcess(steps=1, sampling_prob=1.0, noise_multiplier=0.5)
    with pytest.raises(AssertionError) as err:
        assert_audit_below(
            mech, ProjectionScore(), 0.1, delta=1e-5, method="family", seed=7, label="made-up"
        )
    msg = str(err.value)
    assert "audit lower bound exceeds the made-up" in msg
    assert re.search(r"eps_lower: \d+\.\d+ \(method 'family', confidence 0.95", msg)
    assert "made-up: 0.1" in msg and "noise_multiplier=0.5" in msg and "steps=1" in msg
    assert "seed=7)" in msg and "trials=2000" in msg and "replay: assert_audit_below(" in msg


# ----------------------------------------------------------------------------------------
# Calibration


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (7, 200)])
def test_clopper_pearson_interval_matches_scipy(k, n):
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    lo, hi = clopper_pearson_interval(k, n, 0.9)
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)


def test_samplers_are_deterministic_per_seed():
    g = gaussian_sampler(1.0, 500)
    a, b = g(4), g(4)
    np.testing.assert_array_equal(a.canary_in, b.canary_in)
    assert not np.array_equal(g(5).canary_in, a.canary_in)
    m = mixture_sampler(Mixture((0.0, 2.0), (0.5, 0.5), 1.0), 20_000)(0)
    assert isinstance(m, Scores) and m.n_in == m.n_out == 20_000
    assert np.mean(m.canary_in) == pytest.approx(1.0, abs=0.05)
    assert np.std(m.canary_out) == pytest.approx(1.0, abs=0.05)


def test_calibration_of_a_sound_audit_passes():
    truth = gdp_epsilon(1e-5, 1.0)
    cal = calibration_fraction(gaussian_sampler(1.0, 1000), truth, "gdp", delta=1e-5, repeats=30)
    assert cal.passed and cal.check() is cal
    assert cal.repeats == 30 and cal.max_failures == scipy.stats.binom.ppf(0.999, 30, 0.05)
    assert 0 <= cal.fraction <= cal.interval[1] and 0 < cal.median_eps_lower < truth
    assert "gdp on the Gaussian mechanism (mu=1, 1000 runs per world), split" in str(cal)


def test_calibration_catches_a_wrong_truth_and_names_seeds():
    # Claiming mu = 1 is 0.5-GDP: most lower bounds exceed the "truth".
    cal = calibration_fraction(
        gaussian_sampler(1.0, 1000), gdp_epsilon(1e-5, 0.5), "gdp", delta=1e-5, repeats=20, seed=100
    )
    assert not cal.passed and cal.failures > cal.max_failures
    assert cal.interval[0] > 0.05 and all(100 <= s < 120 for s in cal.failing_seeds)
    with pytest.raises(
        AssertionError, match=r"(?s)audit is not calibrated: .*replay: sampler\(seed\)"
    ):
        cal.check()


# ----------------------------------------------------------------------------------------
# README


def _readme_section(title: str) -> str:
    # The section's python blocks on the tutorial page (fences carry markdown-exec's
    # attributes: ```python exec="on" ...).
    page = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "property_testing.md"
    text = page.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(
        r"```python[^\n]*\n(.*?)```", text[start : end if end != -1 else None], flags=re.S
    )
    assert blocks, f"no python code in README section {title!r}"
    return "\n".join(blocks)


@pytest.mark.slow
def test_readme_property_testing_section_runs():
    code = _readme_section("Property testing")
    # hypothesis reads each test's source (inspect.getsource) to seed it: give the extracted
    # code a file name of its own in linecache, or it reads unrelated lines of README.md.
    name = "<README.md: Property testing>"
    linecache.cache[name] = (len(code), None, code.splitlines(keepends=True), name)
    exec(compile(code, name, "exec"), {"__name__": "readme_property_testing"})


# ----------------------------------------------------------------------------------------
# Contract checks: each check passes on a built-in and fails, by name, on a class that
# breaks it.


class _Offset(advsim.AbstractMechanism):
    """A d-dimensional canary of gradient -e_1 scaled by `scale`, no data."""

    params: advsim.DPSGDParams
    dim: int = eqx.field(static=True)
    canary: int = eqx.field(static=True)

    def __init__(self, steps=5, sampling_prob=0.5, noise_multiplier=0.5, dim=2, canary=None):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier)
        self.dim, self.canary = dim, dim if canary is None else canary

    def init_model(self):
        return jnp.zeros((self.dim,))

    def canary_gradient(self, model, t):
        return -3.0 * jnp.eye(self.canary)[0]


class _Doubling(_Offset, advsim.AbstractProjected):
    """Doubles the model after each step: not a projection, the canary moves it 2 lr C."""

    @property
    def diameter(self):
        return math.inf

    def project(self, model):
        return 2.0 * model


class _Unsampled(_Offset):
    """Accounts the Poisson-sampled canary as present in every step."""

    def accounting(self):
        return dataclasses.replace(super().accounting(), sampling_prob=1.0)


class _Constant(advsim.AbstractAdversary):
    def score(self, mechanism, release):
        return jnp.zeros((), release.dtype)


class _Infinite(advsim.AbstractAdversary):
    def score(self, mechanism, release):
        return jnp.log(jnp.abs(release[0]) * 0.0)


class _Negated(advsim.AbstractAdversary):
    def score(self, mechanism, release):
        return -ProjectionScore().score(mechanism, release)


class _Louder(advsim.AbstractAdversary):
    """Crafts the run with half the noise: its accounting no longer holds."""

    def craft(self, mechanism):
        sigma = np.asarray(mechanism.noise_multiplier / 2)
        return eqx.tree_at(lambda m: m.params.noise_multiplier, mechanism, sigma)

    def score(self, mechanism, release):
        return ProjectionScore().score(mechanism, release)


def test_check_mechanism_passes_on_a_builtin():
    tst.check_mechanism(_Offset(), checks=("shapes", "clipping", "accounting"))
    assert tst.MECHANISM_CHECKS[:3] == ("shapes", "clipping", "accounting")


@pytest.mark.parametrize(
    ("mechanism", "check", "message"),
    [
        (
            _Offset(canary=1),
            "shapes",
            r"_Offset fails the 'shapes' check: _Offset\.canary_gradient returned shape "
            r"\(1,\); expected shape \(2,\)",
        ),
        (
            _Doubling(),
            "clipping",
            r"_Doubling fails the 'clipping' check: adding the canary at step 1 from m_0 "
            r"moves the model by 2 > lr \* C = 1",
        ),
        (
            _Unsampled(),
            "accounting",
            r"_Unsampled fails the 'accounting' check: accounting\(\)\.sampling_prob is "
            r"1\.0, expected 0\.5",
        ),
    ],
    ids=["shapes", "clipping", "accounting"],
)
def test_check_mechanism_names_the_failed_check(mechanism, check, message):
    with pytest.raises(AssertionError, match=message):
        tst.check_mechanism(mechanism, checks=(check,))


def test_check_mechanism_simulated_checks():
    with pytest.raises(AssertionError, match="fails the 'determinism' check: keys 0 and 1"):
        tst.check_mechanism(_Offset(), _Constant(), checks=("determinism",))
    with pytest.raises(AssertionError, match="fails the 'finite' check: 4133 non-finite"):
        tst.check_mechanism(_Offset(dim=1), _Infinite(), checks=("finite",), trials=4133)
    with pytest.raises(ValueError, match=r"unknown checks \['speed'\]; valid checks are"):
        tst.check_mechanism(_Offset(), checks=("speed",))


@pytest.mark.slow
def test_check_adversary_passes_on_a_builtin_and_catches_a_reversed_sign():
    mechanism = LinearProcess(10, 0.5, 0.5)
    tst.check_adversary(ProjectionScore(), mechanism)
    with pytest.raises(AssertionError, match="_Negated on LinearProcess fails the 'sign' check"):
        tst.check_adversary(_Negated(), mechanism, checks=("sign",))


def test_check_adversary_names_craft_and_shape_failures():
    mechanism = LinearProcess(10, 0.5, 0.5)
    with pytest.raises(AssertionError, match="fails the 'craft' check: the crafted mechanism's"):
        tst.check_adversary(_Louder(), mechanism, checks=("craft",))
    with pytest.raises(AssertionError, match=r"'shapes' check: _Infinite\.score returned shape"):
        tst.check_adversary(_Infinite(), mechanism, checks=("shapes",), release="all")

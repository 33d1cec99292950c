"""A float field stored as a plain Python float is part of jit's cache key, so every new
value compiles the simulation again: `check_mechanism` names such a field with the fix
(`as_traced_float`), and a sweep whose cells give it several values warns once per class
before its first cell runs. The traced version of the same class gives neither."""

import warnings

import jax
import pytest

import advsim
from advsim._simulate import _chunk_scores
from advsim._static_floats import recompiling_floats, static_float_fields
from advsim.adversaries import ProjectionScore
from advsim.sweep import RecompileWarning, parse_config, run_sweep
from advsim.testing import check_mechanism

# The same scalar construction twice: DP-SGD on -C m plus a restoring force alpha m^3, with
# alpha a plain float (static) or a traced 0-d array; `unread` is read by no method. The
# sweeps import it by path, as a user's module; the tests below run the same classes.
MODULE = '''
import jax.numpy as jnp
import numpy as np

import advsim
from advsim.validation import as_traced_float, check_nonnegative


class StaticCubic(advsim.AbstractMechanism):
    params: advsim.DPSGDParams
    alpha: float
    unread: float

    def __init__(self, steps=3, sampling_prob=1.0, noise_multiplier=1.0, alpha=0.01,
                 unread=2.0):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier)
        self.alpha, self.unread = float(alpha), float(unread)

    def init_model(self):
        return jnp.zeros((1,))

    def canary_gradient(self, model, t):
        return -jnp.ones_like(model)

    def regularizer_gradient(self, model, t):
        return self.alpha * model**3


class TracedCubic(StaticCubic):
    alpha: np.ndarray
    unread: np.ndarray

    def __init__(self, steps=3, sampling_prob=1.0, noise_multiplier=1.0, alpha=0.01,
                 unread=2.0):
        self.params = advsim.DPSGDParams(steps, sampling_prob, noise_multiplier)
        self.alpha = as_traced_float("alpha", alpha, check_nonnegative)
        self.unread = as_traced_float("unread", unread, check_nonnegative)
'''
_CLASSES: dict = {}
exec(MODULE, _CLASSES)
StaticCubic, TracedCubic = _CLASSES["StaticCubic"], _CLASSES["TracedCubic"]


def test_check_mechanism_names_each_static_float_field_and_the_fix():
    with pytest.warns(RecompileWarning) as record:
        check_mechanism(StaticCubic(), ProjectionScore(), checks=["static_floats"])
    assert len(record) == 1
    message = str(record[0].message)
    assert "`alpha` (= 0.01, read by StaticCubic.regularizer_gradient)" in message
    assert "`unread` (= 2.0, read by no method the engine calls, yet part of jit's key)" in message
    assert 'self.alpha = as_traced_float("alpha", alpha, check_finite)' in message
    assert static_float_fields(StaticCubic()) == {"alpha": 0.01, "unread": 2.0}


def test_traced_fields_pass_the_check_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_mechanism(TracedCubic(), ProjectionScore(), checks=["static_floats"])
    assert recompiling_floats(TracedCubic()) == ()


@pytest.mark.slow  # 7.5 s: five compilations of the chunk program
def test_a_field_no_method_reads_still_compiles_again():
    # What the check claims of `unread`: jit keys its cache on it. Counted on the engine's
    # own compiled function, three values of the unread field give three programs.
    def chunk(mech):
        return advsim.simulate(mech, ProjectionScore(), 64, jax.random.key(0), chunk_size=64)

    chunk(StaticCubic(unread=2.0))
    before = _chunk_scores._cached._cache_size()
    chunk(StaticCubic(unread=3.0))
    chunk(StaticCubic(unread=4.0))
    assert _chunk_scores._cached._cache_size() == before + 2
    chunk(TracedCubic(unread=3.0))
    after = _chunk_scores._cached._cache_size()
    chunk(TracedCubic(unread=4.0))
    assert _chunk_scores._cached._cache_size() == after


def _sweep(tmp_path, monkeypatch, cls: str, alphas: list):
    """The config of an audit sweep over alpha, the class imported by path (a user's
    module on the import path); the cells' mechanisms are built as it is parsed."""
    (tmp_path / "cubics.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return parse_config(
        {
            "sweep": {"mode": "audit", "trials": 200, "delta": 1e-3, "exact": False},
            "mechanism": {"name": f"cubics:{cls}", "steps": 2, "sampling_prob": 1.0,
                          "noise_multiplier": 1.0},
            "grid": {"alpha": alphas},
        }
    )  # fmt: skip


def test_a_two_cell_sweep_over_a_static_float_warns_once(tmp_path, monkeypatch):
    # The cells' mechanisms are built when the config is parsed: the warning comes then,
    # before any cell compiles.
    with pytest.warns(RecompileWarning) as record:
        _sweep(tmp_path, monkeypatch, "StaticCubic", [0.01, 0.02])
    recompiles = [w for w in record if issubclass(w.category, RecompileWarning)]
    assert len(recompiles) == 1, [str(w.message) for w in record]
    assert recompiles[0].filename == __file__  # pointed at the line that read the config
    assert "StaticCubic" in str(recompiles[0].message)
    assert "`alpha` (2 values in this sweep)" in str(recompiles[0].message)
    assert "`unread`" not in str(recompiles[0].message)  # one value in every cell


def test_the_traced_sweep_does_not_warn(tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)
        _sweep(tmp_path, monkeypatch, "TracedCubic", [0.01, 0.02])


@pytest.mark.slow  # 6.8 s on 2 CPU cores: three compilations of the chunk program
def test_the_warned_sweep_compiles_per_cell_and_the_traced_one_once(tmp_path, monkeypatch):
    # What the warning says, counted on the engine's compiled function: the two cells of
    # the plain-float class compile a program each, those of the traced class share one;
    # running the cells adds no warning to the one given when the config was read.
    with pytest.warns(RecompileWarning):
        static = _sweep(tmp_path, monkeypatch, "StaticCubic", [0.01, 0.02])
    traced = _sweep(tmp_path, monkeypatch, "TracedCubic", [0.01, 0.02])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)
        for cfg, programs in ((static, 2), (traced, 1)):
            before = _chunk_scores._cached._cache_size()
            rows = run_sweep(cfg, tmp_path / f"out{programs}", progress=False)
            assert len(rows) == 2
            assert _chunk_scores._cached._cache_size() == before + programs

"""Counts, Clopper-Pearson bounds and candidate thresholds."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advsim.audits import (
    candidate_thresholds,
    clopper_pearson_upper,
    counts_at,
    split_halves,
)


def test_clopper_pearson_zero_successes_closed_form():
    # With k = 0 the one-sided bound solves (1 - p)^n = alpha: p = 1 - alpha^(1/n).
    for n in (1, 10, 1000, 10**6):
        for alpha in (0.025, 0.005):
            got = float(clopper_pearson_upper(0, n, alpha))
            assert got == pytest.approx(-math.expm1(math.log(alpha) / n), rel=1e-10)


def test_clopper_pearson_all_successes_is_one_and_monotone():
    k = np.arange(0, 101)
    ub = clopper_pearson_upper(k, 100, 0.025)
    assert ub[-1] == 1.0
    assert np.all(np.diff(ub) > 0)
    assert np.all(ub >= k / 100)


def test_clopper_pearson_equals_jax_privacy():
    auditing = pytest.importorskip("jax_privacy.auditing")
    for n in (2, 7, 1000, 123457):
        k = np.unique(np.r_[0, 1, n // 3, n - 1, n])
        for significance in (0.05, 0.01, 0.3):
            ours = clopper_pearson_upper(k, n, significance / 2)
            theirs = auditing._clopper_pearson_upper(k, n, significance / 2)
            np.testing.assert_array_equal(ours, theirs)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(
    st.lists(st.integers(-5, 5), min_size=1, max_size=30),
    st.lists(st.integers(-5, 5), min_size=1, max_size=30),
    st.lists(st.floats(-6, 6, allow_nan=False), min_size=1, max_size=5),
)
def test_counts_match_naive_loop(ins, outs, taus):
    # Integer scores force ties; "in" iff score >= tau.
    si, so = np.sort(np.array(ins, float)), np.sort(np.array(outs, float))
    fp, fn = counts_at(si, so, taus)
    for t, a, b in zip(taus, fp, fn, strict=True):
        assert a == sum(o >= t for o in outs)
        assert b == sum(i < t for i in ins)


def test_candidates_reach_both_tails_and_stay_small():
    rng = np.random.default_rng(0)
    n = 10**6
    si, so = np.sort(rng.normal(1, 1, n)), np.sort(rng.normal(0, 1, n))
    c = candidate_thresholds(si, so)
    fp, fn = counts_at(si, so, c)
    assert c.size < 2000
    assert fp.min() == 0 and fn.min() == 0  # FP = 0 and FN = 0 are both candidates
    assert np.any(fp == 1) and np.any(fn == 1)  # the log grids start at one count
    # Log grid: every decade of FP counts from 1 to n holds candidates.
    for lo in 10.0 ** np.arange(0, 6):
        assert np.any((fp >= lo) & (fp < 10 * lo))


def test_split_halves_is_a_partition():
    x = np.arange(11.0)
    a, b = split_halves(x, np.random.default_rng(3))
    assert (a.size, b.size) == (5, 6)
    np.testing.assert_array_equal(np.sort(np.r_[a, b]), x)

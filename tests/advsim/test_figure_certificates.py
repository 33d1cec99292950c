"""The certificates table (certified violations of the heuristic): its held-out size search
against the normal approximation, and a small run of its compute hook (slow)."""

import dataclasses
import math
import types

import numpy as np
import pytest
import scipy.stats

from advsim.figures import load_figure
from advsim.figures._tables_certify import (
    _held_out_size_needed,
    _median_index,
    _median_sigma_star,
    compute_certificates,
)


def test_held_out_size_matches_the_normal_approximation():
    # A straight "curve" f(a) = 1 - a - gap and a test point (alpha, 1 - alpha - 2 gap): the
    # certificate needs CP_up(beta) < f(CP_up(alpha)); with the normal approximation of both
    # one-sided upper limits, z (sqrt(a(1-a)) + sqrt(b(1-b))) / sqrt(h) = gap, so
    # h = (z (sqrt(a(1-a)) + sqrt(b(1-b))) / gap)^2. Clopper-Pearson is a little wider.
    alpha, gap, level = 0.3, 0.01, 0.025
    beta = 1 - alpha - 2 * gap
    h = _held_out_size_needed(alpha, beta, lambda a: 1 - a - gap, level)
    z = scipy.stats.norm.isf(level)
    normal = (z * (math.sqrt(alpha * (1 - alpha)) + math.sqrt(beta * (1 - beta))) / gap) ** 2
    assert normal <= h <= 1.05 * normal
    assert _held_out_size_needed(alpha, 1 - alpha + gap, lambda a: 1 - a, level) == math.inf


def _cert(certified, sigma_star, eps):
    return types.SimpleNamespace(certified=certified, sigma_star=sigma_star, eps_equivalent=eps)


def test_medians_over_seeds_leave_the_index_blank_unless_most_seeds_certify():
    # An uncertified seed has no curve index (below every index), a seed without sigma*
    # counts as +inf: the index is given only when more than half of the seeds certify.
    most = [_cert(True, 0.4, 1.6), _cert(True, 0.45, 1.2), _cert(False, 0.6, None)]
    assert _median_index(most) == 1.2 and _median_sigma_star(most) == 0.45
    half = [_cert(True, 0.4, 1.6), _cert(False, 0.6, None)]
    assert _median_index(half) is None
    few = [_cert(True, 0.4, 1.6), _cert(False, None, None), _cert(False, None, None)]
    assert _median_index(few) is None and _median_sigma_star(few) is None


@pytest.mark.slow
def test_compute_certificates_small(tmp_path):
    fig = load_figure("certificates", quick=True, out=tmp_path)
    params = dict(
        fig.params,
        constructions=fig.params["constructions"][:1],
        trials_divisor=64,
        seeds=3,
        seeds_max_over_steps=1,
    )
    params["linear"] = dict(params["linear"], repeats=5)
    tables = compute_certificates(dataclasses.replace(fig, params=params), {})
    (row,) = tables["certificates"]
    assert row["max_trials"] == 16_000 and row["exact_eps"] == pytest.approx(3.025, abs=1e-3)
    assert row["heuristic_eps"] < row["exact_eps"]
    # Power over seeds: the fraction of the 3 seeds certifying at each size of the grid
    # 1000 * 2^k <= 16000; trials_needed is the first size where it reaches 90% (3 of 3).
    fractions = row["certified_fractions"]
    assert list(fractions) == [1000, 2000, 4000, 8000, 16000] and row["seeds"] == 3
    assert all(f in (0.0, 1 / 3, 2 / 3, 1.0) for f in fractions.values())
    assert row["certified_fraction"] == fractions[16000]
    reached = [n for n, f in fractions.items() if f >= 0.9]
    assert row["trials_needed"] == (reached[0] if reached else None)
    if reached:
        assert row["certified_fraction_at_needed"] == fractions[reached[0]]
    # The curve index eps_equiv is an index, never in a column named as an epsilon, and
    # blank unless more than half of the seeds certify (2 of 3 here).
    assert "heuristic_equivalent_eps" not in row and "heuristic_sigma_index" not in row
    index = row["heuristic_curve_index_eps_equiv"]
    assert (index is None) == (row["certified_fraction"] < 0.5)
    if index is not None:  # the heuristic's epsilon at a sigma* <= the run's sigma
        assert index >= row["heuristic_eps"]
    assert row["seeds_max_over_steps"] == 1
    # The power table: one column per size of the grid, the fractions above.
    (power,) = tables["certificates_power"]
    assert power == {
        "construction": row["construction"],
        "seeds": 3,
        **{f"certified_at_{n}": f for n, f in fractions.items()},
    }
    quad = {r["orientation"]: r for r in tables["quadratic"]}
    # Section 4.2's example: exact 2.2749 against a heuristic 2.222 at delta = 1e-6.
    assert quad["canary_out_null"]["exact_eps"] == pytest.approx(2.2749, abs=1e-3)
    assert 1e8 < quad["canary_out_null"]["trials_per_world_needed"] < 1e9
    (linear,) = tables["linear_process"]
    assert linear["passed"] and linear["repeats"] == 5
    assert np.isfinite(linear["sigma_star_median"])

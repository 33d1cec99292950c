"""The threshold figure's derived columns from cached cells (fast): the oracle's columns,
the defaults' own sets and the paired intervals, on small hand-made values whose medians
and ratios are worked out here."""

import numpy as np
import pytest

from advsim.figures._tables_threshold_strategies import _paired, _with_defaults, _with_oracle


def _row():
    return {"advsim_strategy": "rank_split", "jax_strategy": "Bonferroni() one-sided",
            "advsim_median_eps_lower": 2.0, "jax_median_eps_lower": 1.6}  # fmt: skip


def _strategies():
    return [
        {"library": "advsim", "strategy": "rank_split", "median_eps_lower": 2.0,
         "values": [1.0, 2.0, 3.0]},
        {"library": "jax_privacy", "strategy": "Bonferroni() one-sided",
         "median_eps_lower": 1.6, "values": [1.0, 1.6, 2.0]},
    ]  # fmt: skip


def test_the_better_oracle_is_the_limit_and_every_ratio_is_over_it():
    row, strategies = _row(), _strategies()
    oracle = {"tests": {"value": ["value", 0.5, 0.3], "rank": ["upper", 4.0, 0.9]},
              "values": {"value": [2.0, 2.5, 3.0], "rank": [1.0, 1.5, 4.0]}}  # fmt: skip
    best = _with_oracle(row, strategies, oracle)
    assert best == [2.0, 2.5, 3.0]  # median 2.5 against the rank test's 1.5
    assert row["oracle_test"] == "value 0.5 (FPR share 0.3)"
    assert row["oracle_median_eps_lower"] == 2.5
    assert (row["oracle_value_median"], row["oracle_rank_median"]) == (2.5, 1.5)
    assert row["advsim_over_oracle"] == pytest.approx(2.0 / 2.5)
    assert row["jax_over_oracle"] == pytest.approx(1.6 / 2.5)
    assert [s["over_oracle"] for s in strategies] == pytest.approx([0.8, 0.64])


def test_the_defaults_columns_come_from_their_own_sets():
    row = {**_row(), "oracle_median_eps_lower": 2.5}
    defaults = {"ours": [1.0, 3.0, 2.0, 4.0, 5.0], "theirs": [2.0, 2.0, 2.0, 1.0, 1.0]}
    _with_defaults(row, defaults)
    assert row["default_seeds"] == 5
    assert (row["default_median_eps_lower"], row["jax_default_median_eps_lower"]) == (3.0, 2.0)
    assert row["default_ratio"] == pytest.approx(1.5)
    assert row["default_over_oracle"] == pytest.approx(3.0 / 2.5)


def test_paired_counts_and_intervals():
    row, strategies = _row(), _strategies()
    defaults = {"ours": [1.0, 1.0, 3.0], "theirs": [2.0, 0.5, 3.0]}
    _paired(row, strategies, defaults, oracle=[2.0, 2.5, 3.0])
    assert row["advsim_ahead_in"] == "3/3"
    assert row["default_advsim_ahead_in"] == "2/3"
    assert row["advsim_ahead_of_oracle_in"] == "1/3"
    for low, high, point in (("ratio_low", "ratio_high", 2.0 / 1.6),
                             ("default_ratio_low", "default_ratio_high", 1.0 / 2.0),
                             ("advsim_over_oracle_low", "advsim_over_oracle_high", 2.0 / 2.5)):
        assert row[low] <= point <= row[high]  # fmt: skip
    # every resample of identical sets gives the same ratio: a degenerate interval
    same = {"ours": [2.0] * 4, "theirs": [1.0] * 4}
    _paired(row, strategies, same, oracle=[2.0, 2.0, 2.0])
    assert row["default_ratio_low"] == row["default_ratio_high"] == 2.0
    assert np.isclose(row["advsim_over_oracle_high"], max(np.array([1, 2, 3]) / 2.0))

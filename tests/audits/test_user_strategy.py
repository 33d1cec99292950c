"""A threshold strategy written by a user from public names only (`STRATEGY`, under 40
lines) runs through `audit()`, a sweep and `advsim audit`, by value and by class path."""

import json

import numpy as np
import pytest

from advsim import Scores
from advsim.audits import Explicit, audit, get_audit
from advsim.cli import main
from advsim.sweep import parse_config, run_sweep

# The user's module: the threshold at a quantile of the out-scores of one random half,
# counted on the other half (held out, so rigorous for eps_delta). Public names only.
STRATEGY = '''
import numpy as np

from advsim import Scores
from advsim.audits import ThresholdStrategy


class OutQuantile(ThresholdStrategy):
    """The test at the `quantile` of half the out-scores, counted on the other half."""

    quantile: float = 0.99

    def run(self, audit, scores, *, delta, accounting=None):
        rng = np.random.default_rng(audit.seed)
        x_in, x_out = np.asarray(scores.canary_in), np.asarray(scores.canary_out)
        order_in, order_out = rng.permutation(x_in.size), rng.permutation(x_out.size)
        half_in, half_out = x_in.size // 2, x_out.size // 2
        tau = np.quantile(x_out[order_out[:half_out]], self.quantile)
        counting = Scores(x_in[order_in[half_in:]], x_out[order_out[half_out:]])
        return audit.at_threshold(
            counting, tau, delta=delta, accounting=accounting, held_out=True,
            multiplicity=f"the {self.quantile} quantile of half the out-scores",
        )
'''


def test_the_user_strategy_is_short():
    assert len(STRATEGY.strip().splitlines()) < 40


@pytest.fixture
def strategy(tmp_path, monkeypatch):
    (tmp_path / "my_strategy.py").write_text(STRATEGY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_strategy

    return my_strategy


def _reference(scores: Scores, seed: int, delta: float) -> float:
    """The same test written out: the split drawn as the strategy draws it, then
    `Explicit(tau, chosen_in_advance=True)` on the counting half."""
    rng = np.random.default_rng(seed)
    x_in, x_out = np.asarray(scores.canary_in), np.asarray(scores.canary_out)
    order_in, order_out = rng.permutation(x_in.size), rng.permutation(x_out.size)
    tau = np.quantile(x_out[order_out[: x_out.size // 2]], 0.99)
    counting = Scores(x_in[order_in[x_in.size // 2 :]], x_out[order_out[x_out.size // 2 :]])
    return audit(counting, delta=delta, threshold_selection=Explicit(tau, chosen_in_advance=True),
                 seed=seed).eps_lower  # fmt: skip


def test_audit_takes_the_strategy_by_value_and_by_path(strategy):
    rng = np.random.default_rng(3)
    scores = Scores(rng.normal(2.0, 1.0, 20_000), rng.normal(0.0, 1.0, 20_000))
    by_value = audit(scores, delta=1e-5, threshold_selection=strategy.OutQuantile(), seed=4)
    by_path = audit(scores, delta=1e-5, threshold_selection="my_strategy:OutQuantile", seed=4)
    assert by_value.to_dict() == by_path.to_dict()
    assert by_value.rigorous and by_value.n_in == 10_000
    assert by_value.extras["threshold_selection"] == "my_strategy:OutQuantile"
    assert by_value.guarantee.multiplicity == "the 0.99 quantile of half the out-scores"
    # the number is the explicit test at the same threshold on the same half
    assert by_value.eps_lower == pytest.approx(_reference(scores, 4, 1e-5), rel=1e-12)
    # it composes with every one-threshold audit, which reads its own statement off it
    gdp = strategy.OutQuantile()(get_audit("gdp", seed=4), scores, delta=1e-5)
    assert gdp.threshold == by_value.threshold and gdp.guarantee.assumption != "none"


def test_a_class_path_that_is_not_a_strategy_is_refused(strategy):
    with pytest.raises(ValueError, match="must name a subclass of advsim.audits.ThresholdStrategy"):
        audit([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], threshold_selection="my_strategy:Scores")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        audit([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], threshold_selection="my_strategy:Nope")


def test_a_sweep_runs_the_strategy_by_class_path(strategy, tmp_path):
    cfg = parse_config(
        {
            "sweep": {"mode": "audit", "trials": 4000, "delta": 1e-5, "exact": False,
                      "method": "eps_delta",
                      "threshold_selection": "my_strategy:OutQuantile"},
            "mechanism": {"name": "linear", "steps": 1, "sampling_prob": 1.0},
            "grid": {"noise_multiplier": [0.5, 1.0]},
        }
    )  # fmt: skip
    rows = run_sweep(cfg, tmp_path / "out", progress=False)
    assert [r["threshold_selection"] for r in rows] == ["my_strategy:OutQuantile"] * 2
    assert all(r["guarantee"] == "rigorous" and r["eps_lower"] > 0 for r in rows)


def test_the_cli_runs_the_strategy_by_class_path(strategy, tmp_path):
    out = tmp_path / "out"
    code = main(["audit", "--steps", "1", "--sampling-prob", "1", "--noise-multiplier", "0.5",
                 "--trials", "4000", "--no-exact", "--quiet", "--method", "eps_delta",
                 "--threshold", "my_strategy:OutQuantile", "--out", str(out)])  # fmt: skip
    assert code == 0
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["sweep"]["threshold_selection"] == "my_strategy:OutQuantile"
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert rows and all(r["threshold_selection"] == "my_strategy:OutQuantile" for r in rows)
    assert all(r["guarantee"] == "rigorous" and r["eps_lower"] > 0 for r in rows)

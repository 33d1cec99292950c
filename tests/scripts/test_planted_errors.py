"""`scripts/planted_errors.py`: the scaling it plants, the functions it checks, and one real
check (a planted error the bound's own tests catch, and pass without)."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest


def test_every_float_a_result_holds_is_scaled_and_nothing_else(load_script):
    scaled = load_script("planted_errors")._scaled

    @dataclasses.dataclass(frozen=True)
    class Result:
        epsilon: float
        steps: int

    assert scaled(2.0, 1.5) == 3.0 and scaled(np.float32(2.0), 1.5) == np.float32(3.0)
    assert scaled(True, 1.5) is True and scaled(3, 1.5) == 3 and scaled("eps", 1.5) == "eps"
    np.testing.assert_allclose(scaled(np.array([1.0, 2.0]), 1.5), [1.5, 3.0])
    np.testing.assert_allclose(scaled(jnp.array([2.0]), 1.5), [3.0])
    assert scaled(np.array([1, 2]), 1.5).tolist() == [1, 2]
    assert scaled([1.0, {"eps": 2.0, "n": 4}, (3.0,)], 2.0) == [2.0, {"eps": 4.0, "n": 4}, (6.0,)]
    result = Result(epsilon=1.0, steps=3)
    assert scaled(result, 2.0) == Result(epsilon=2.0, steps=3)
    assert result.epsilon == 1.0  # a copy is scaled, the original is left alone

    @dataclasses.dataclass(frozen=True)
    class Audit:
        eps_lower: float
        credible_interval: tuple
        threshold: float
        n_in: int

    assert scaled(Audit(1.0, (0.5, 2.0), 3.0, 10), 2.0) == Audit(2.0, (1.0, 4.0), 3.0, 10)


def test_the_checked_functions_are_the_public_epsilon_functions(load_script):
    targets = load_script("planted_errors").targets()
    for spec in ("advsim.bounds._composition:composition_epsilon",
                 "advsim.exact._api:last_iterate_epsilon",
                 "advsim.mechanisms.history:history_epsilon",
                 "advsim.mechanisms.landscape:landscape_epsilon_curve",
                 "advsim.audits._tradeoff:TradeoffAudit",
                 "advsim.audits._threshold:clopper_pearson_upper",
                 "advsim.audits._one_run_order:one_run_order_audit",
                 "advsim.audits.jax_privacy:CanaryScoreAuditor.epsilon_one_run"):  # fmt: skip
        assert spec in targets
    assert len(targets) >= 70 and len(set(targets)) == len(targets)
    assert not any(name.endswith((":ThresholdLandscape", ":Accounting", ":get_audit",
                                  ":gaussian_channel", ":fdp_one_run_margin"))
                   for name in targets)  # fmt: skip


@pytest.mark.slow  # two pytest runs of one or two test files each (~20 s each)
@pytest.mark.parametrize(
    "spec, files",
    [
        ("advsim.bounds._langevin:langevin_rdp", ["tests/advsim/test_bounds_langevin.py"]),
        # An audit class: its __call__ is planted, so its results' eps_lower is scaled.
        ("advsim.audits._tradeoff:TradeoffAudit",
         ["tests/audits/test_contract.py", "tests/audits/test_tradeoff.py"]),
    ],
)  # fmt: skip
def test_a_planted_error_is_caught_by_its_tests(load_script, spec, files):
    bench = load_script("planted_errors")
    result = bench.check(spec, 1.02)
    assert result["files"] == files
    assert result["verdict"] == "caught", result


def test_the_report_is_a_table_and_fails_on_a_missed_error(load_script, capsys):
    report = load_script("planted_errors").report
    caught = {"function": "m:f", "verdict": "caught", "summary": "1 failed"}
    report([caught], "function", 1.02, lambda r: r["summary"])
    assert "| `m:f` | caught | 1 failed |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        report([caught, {**caught, "function": "m:g", "verdict": "missed"}], "function", 1.02,
               lambda r: r["summary"])  # fmt: skip
    assert stop.value.code == 1 and "not caught: ['m:g']" in capsys.readouterr().err

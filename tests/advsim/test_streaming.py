"""Streaming audits: counts without scores, a pilot's plan, the bound, resume, calibration.

References: the counts are checked against `advsim.simulate`'s scores counted in numpy
(the same runs); the bound against `audits.audit(..., threshold_selection="explicit")`
and `audits.eps_from_counts` on those counts; the true epsilon of one Gaussian step
(LinearProcess, T = 1, q = 1, sigma = 1: mu = 1) is the mu-GDP closed form of Corollary
2.13 of arXiv:1905.02383 (`advsim.bounds.gdp_epsilon`).
"""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from scipy import optimize, stats

import advsim
import advsim._counting as counting
from advsim import Scores, simulate, simulate_counts
from advsim.adversaries import ProjectionScore
from advsim.audits import audit, counts_audit, eps_from_counts, fixed_tests, plan_tests
from advsim.bounds import gdp_epsilon
from advsim.mechanisms import LinearProcess
from advsim.streaming import audit_streaming, default_pilot_runs

MECH = LinearProcess(steps=10, sampling_prob=0.1, noise_multiplier=1.0)
GAUSS = LinearProcess(steps=1, sampling_prob=1.0, noise_multiplier=1.0)  # mu = 1


def _numpy_counts(scores, thresholds):
    return (
        tuple(int(np.sum(scores.canary_in >= t)) for t in thresholds),
        tuple(int(np.sum(scores.canary_out >= t)) for t in thresholds),
    )


# --- the counts ---------------------------------------------------------------------------------


def test_counts_are_those_of_simulate_scores_for_any_chunk_size():
    scores = simulate(MECH, ProjectionScore(), 5000, key=3)
    taus = [-1.0, 0.0, 0.5, 1.0, 2.5, 4.0]
    want = _numpy_counts(scores, taus)
    for chunk_size in (None, 3000):
        c = simulate_counts(MECH, ProjectionScore(), 5000, 3, taus, chunk_size=chunk_size)
        assert (c.in_at_or_above, c.out_at_or_above) == want
        assert c.runs == 5000 and c.thresholds == tuple(taus)


def test_a_resumed_count_gives_the_counts_of_an_uninterrupted_one(tmp_path, monkeypatch):
    taus = [0.0, 1.0, 3.0]
    want = simulate_counts(MECH, ProjectionScore(), 20000, 4, taus, chunk_size=1024)
    path = tmp_path / "counts.json"
    calls = {"n": 0}
    real = counting._counted_chunk

    def interrupted(*args):
        calls["n"] += 1
        if calls["n"] > 2:  # the in-world's third chunk: Ctrl-C
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(counting, "CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(counting, "_counted_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        simulate_counts(MECH, ProjectionScore(), 20000, 4, taus, chunk_size=1024, checkpoint=path)
    saved = counting.read_counts_checkpoint(path)
    assert 0 < saved["worlds"]["canary_in"]["done"] < 20000
    assert saved["worlds"]["canary_out"]["done"] == 0
    monkeypatch.setattr(counting, "_counted_chunk", real)
    # resumed with another chunk size: the counts of runs [done, 20000) are added
    got = simulate_counts(MECH, ProjectionScore(), 20000, 4, taus, chunk_size=2048,
                          checkpoint=path)  # fmt: skip
    assert got.resumed_from["canary_in"] == saved["worlds"]["canary_in"]["done"]
    assert (got.in_at_or_above, got.out_at_or_above) == (
        want.in_at_or_above, want.out_at_or_above)  # fmt: skip


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    path = tmp_path / "counts.json"
    simulate_counts(MECH, ProjectionScore(), 1000, 4, [0.0], checkpoint=path)
    with pytest.raises(ValueError, match="written for another run"):
        simulate_counts(MECH, ProjectionScore(), 1000, 5, [0.0], checkpoint=path)
    with pytest.raises(ValueError, match="written for another run"):
        simulate_counts(MECH, ProjectionScore(), 1000, 4, [0.5], checkpoint=path)
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(ValueError, match="not a counts checkpoint"):
        simulate_counts(MECH, ProjectionScore(), 1000, 4, [0.0], checkpoint=tmp_path / "other.json")


_DEVICE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    assert len(jax.devices()) == int(sys.argv[1]), jax.devices()
    from advsim import simulate_counts
    from advsim.adversaries import ProjectionScore
    from advsim.mechanisms import LinearProcess
    c = simulate_counts(LinearProcess(10, 0.1, 1.0), ProjectionScore(), 5000, 3,
                        [0.0, 1.0, 2.5], chunk_size=1024)
    print(json.dumps([c.in_at_or_above, c.out_at_or_above]))
    """
)


@pytest.mark.slow
def test_counts_are_the_same_on_one_and_two_devices(tmp_path):
    script = tmp_path / "count_devices.py"
    script.write_text(_DEVICE_SCRIPT)
    outs = []
    for n in (1, 2):
        env = {k: v for k, v in os.environ.items()
               if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS", "ADVSIM_CPU_DEVICES")}  # fmt: skip
        env.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu")
        run = subprocess.run([sys.executable, str(script), str(n)], env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr
        outs.append(run.stdout.strip().splitlines()[-1])
    assert outs[0] == outs[1]


# --- the bound ----------------------------------------------------------------------------------


def test_streaming_equals_the_in_memory_audit_of_the_same_runs():
    # One test given in advance: the streaming audit counts the runs of
    # simulate(mech, adv, N, key) and bounds them as the in-memory explicit-threshold
    # eps_delta audit of those scores does (same counts, same Clopper-Pearson bound).
    runs, tau = 20_000, 2.0
    scores = simulate(MECH, ProjectionScore(), runs, key=11)
    memory = audit(scores, "eps_delta", delta=1e-5, confidence=0.95,
                   threshold_selection="explicit", threshold=tau)  # fmt: skip
    stream = audit_streaming(MECH, ProjectionScore(), runs, 11, thresholds=[tau], delta=1e-5)
    assert stream.rigorous and stream.method == "streaming"
    assert stream.eps_lower == memory.eps_lower > 0
    for name in ("fpr", "fnr", "fpr_upper", "fnr_upper", "n_in", "n_out", "threshold"):
        assert getattr(stream, name) == getattr(memory, name), name


@pytest.mark.slow
def test_k_streaming_tests_are_each_bounded_at_the_bonferroni_level():
    # K tests: each at confidence 1 - (1 - c) / K on the numpy counts of the same scores.
    runs = 20_000
    scores = simulate(MECH, ProjectionScore(), runs, key=11)
    taus = [0.5, 1.5, 2.5, 3.5]
    stream = audit_streaming(MECH, ProjectionScore(), runs, 11, thresholds=taus, delta=1e-5)
    tp, fp = _numpy_counts(scores, taus)
    want = max(
        eps_from_counts(a, b, runs - b, runs - a, 1e-5, confidence=1 - 0.05 / 4).value
        for a, b in zip(tp, fp, strict=True)
    )
    assert stream.eps_lower == want
    assert [t["tp"] for t in stream.extras["tests"]] == list(tp)
    assert [t["fp"] for t in stream.extras["tests"]] == list(fp)


def test_a_resumed_streaming_audit_reads_its_plan_and_counts_back(tmp_path):
    path = tmp_path / "stream.json"
    first = audit_streaming(GAUSS, ProjectionScore(), 20_000, 3, pilot_runs=2000, checkpoint=path)
    again = audit_streaming(GAUSS, ProjectionScore(), 20_000, 3, pilot_runs=2000, checkpoint=path)
    assert again.extras["resumed_from"] == {"canary_in": 20_000, "canary_out": 20_000}
    assert again.eps_lower == first.eps_lower and again.extras["tests"] == first.extras["tests"]
    with pytest.raises(ValueError, match="holds a run of other thresholds"):
        audit_streaming(GAUSS, ProjectionScore(), 20_000, 3, thresholds=[0.0], checkpoint=path)


def test_the_pilot_is_its_own_seed_and_plans_both_tails():
    r = audit_streaming(GAUSS, ProjectionScore(), 200_000, 0, pilot_runs=20_000)
    plan = r.extras["plan"]
    assert plan["pilot_runs"] == 20_000 and r.extras["runs"] == 200_000
    assert set(plan["directions"]) == {"in above", "out below"}
    assert len(plan["thresholds"]) == 6
    # the pilot's runs are not the main run's: simulate with fold_in(key, 2)
    pilot = simulate(GAUSS, ProjectionScore(), 20_000, jax.random.fold_in(jax.random.key(0), 2))
    again = plan_tests(pilot, 200_000, delta=1e-5, planned_on=plan["planned_on"])
    assert list(again.thresholds) == plan["thresholds"]
    # truth: mu = 1 GDP; a rigorous bound below it, and most of it at 2 x 10^5 runs
    truth = gdp_epsilon(1e-5, 1.0)
    assert 0.6 * truth < r.eps_lower < truth


def test_plan_tests_reads_the_tails_of_a_gaussian_pilot():
    # N(1, 1) against N(0, 1): the "in above" test sits in the upper tail, the "out
    # below" one in the lower tail; projected values are estimates, not bounds.
    rng = np.random.default_rng(0)
    pilot = Scores(rng.normal(1.0, 1.0, 10**5), rng.normal(0.0, 1.0, 10**5))
    plan = plan_tests(pilot, 10**7, delta=1e-5, num_tests=4)
    assert plan.num_tests == 4
    for tau, direction in zip(plan.thresholds, plan.directions, strict=True):
        assert (tau > 2.0) if direction == "in above" else (tau < -1.0)
    assert all(p > 0 for p in plan.projected)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: audit_streaming(MECH, ProjectionScore(), 0, 0), "runs must be"),
        (lambda: audit_streaming(MECH, ProjectionScore(), 100, 0, pilot_runs=200),
         r"pilot_runs must be at most runs \(100\)"),
        (lambda: audit_streaming(MECH, ProjectionScore(), 100, 0, thresholds=[]),
         "plans no test"),
        (lambda: simulate_counts(MECH, ProjectionScore(), 100, 0, []), "plans no test"),
        (lambda: simulate_counts(MECH, ProjectionScore(), 100, 0, [np.nan]), "finite"),
        (lambda: fixed_tests([]), "plans no test"),
        (lambda: audit_streaming(MECH, ProjectionScore(), 100, 0, num_tests=0), "num_tests"),
        (lambda: counts_audit(fixed_tests([0.0]), [5], [101], 100, 100, delta=1e-5),
         r"counts must lie in \[0, runs\]"),
        (lambda: counts_audit(fixed_tests([0.0, 1.0]), [5], [1], 100, 100, delta=1e-5),
         "one entry per planned test"),
    ],
)  # fmt: skip
def test_bad_input_gets_a_one_line_error(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_default_pilot():
    assert default_pilot_runs(10**9) == 20_000_000
    assert default_pilot_runs(10**6) == 100_000
    assert default_pilot_runs(100) == 100


def _optimal_threshold(delta: float) -> float:
    """The half-line test {y >= tau} that attains eps(delta) of N(1, 1) vs N(0, 1): eps(delta)
    = sup_tau log((P(y >= tau) - delta) / Q(y >= tau)) (the hockey-stick divergence's
    optimal sets are half-lines for a monotone likelihood ratio), maximised with scipy."""
    res = optimize.minimize_scalar(
        lambda t: -np.log((stats.norm.sf(t - 1.0) - delta) / stats.norm.sf(t)),
        bounds=(-3.0, 3.0), method="bounded",
    )  # fmt: skip
    assert abs(-res.fun - gdp_epsilon(delta, 1.0)) < 1e-8  # the two references agree
    return float(res.x)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("confidence", "tests", "runs", "tight"),
    [(0.95, "pilot", 4000, 0.6), (0.95, "optimal", 20_000, 0.85), (0.6, "optimal", 20_000, 0.9)],
)
def test_calibration_over_200_seeds(confidence, tests, runs, tight):
    # One Gaussian step (mu = 1) at delta = 0.2, where the optimal test's rates are
    # moderate: with that test given, eps_lower sits near the truth and an overshoot is an
    # event a wrong bound would make frequent (measured: 26 of 200 seeds at c = 0.6, 1 at
    # c = 0.95). Soundness: the rigorous audit exceeds the truth in at most a fraction
    # 1 - c of the seeds, asserted at the binomial's 99.9% quantile; then tightness: the
    # mean eps_lower over the seeds is at least `tight` x the truth.
    delta, seeds = 0.2, 200
    truth = gdp_epsilon(delta, 1.0)
    kw = {"pilot_runs": 1000} if tests == "pilot" else {"thresholds": [_optimal_threshold(delta)]}
    values = np.array([
        audit_streaming(GAUSS, ProjectionScore(), runs, seed, confidence=confidence,
                        delta=delta, progress=False, **kw).eps_lower
        for seed in range(seeds)
    ])  # fmt: skip
    over = int(np.sum(values > truth))
    assert over <= stats.binom.ppf(0.999, seeds, 1 - confidence), over
    assert values.mean() >= tight * truth, values.mean() / truth


def test_a_given_optimal_test_is_sound_and_tight_on_ten_seeds():
    # The fast check of the bound against the GDP closed form: 10 seeds of the optimal
    # test at c = 0.95 (the slow test above runs 200): none above the truth, mean >= 0.85.
    truth, tau = gdp_epsilon(0.2, 1.0), _optimal_threshold(0.2)
    values = [audit_streaming(GAUSS, ProjectionScore(), 20_000, seed, delta=0.2,
                              thresholds=[tau], progress=False).eps_lower
              for seed in range(10)]  # fmt: skip
    assert max(values) <= truth and np.mean(values) >= 0.85 * truth


def test_the_api_is_public():
    assert advsim.simulate_counts is simulate_counts
    assert "simulate_counts" in advsim.__all__ and "ThresholdCounts" in advsim.__all__

"""The search over the piecewise-linear family, on a tiny cell (T = 3).

Expected values: the landscape start is a member (tests/mechanisms/test_piecewise.py), so
the search's best is at least its exact epsilon (recomputed by `last_iterate_epsilon`)
minus the engine's stated error; composition bounds every member (all iterates released,
the last one is post-processing); an interrupted search resumed gives the uninterrupted
search's result (same seeds, same steps).
"""

import json

import numpy as np
import pytest

from advsim.cli import main
from advsim.mechanisms import PiecewiseConstruction
from advsim.search import SearchConfig, config_from_mapping, load_config, search
from advsim.search import _run as run

TINY = dict(
    steps=3, noise_multiplier=2.0, batching="fixed", counts=(4,), canary_schedule="only:1",
    canary_sampled=False, step_sizes="landscape", knots=3, per_step=("groups",),
    search=("groups", "regularizer"), starts=("landscape",), random_starts=0, iterations=4,
    random_candidates=8,
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("search")
    return search(SearchConfig(**TINY), folder, progress=False)


@pytest.mark.slow  # the README's test command stays under 5 minutes
def test_search_is_at_least_its_start_and_below_composition(tiny):
    start = tiny.starts["landscape"]["before"]
    assert tiny.best_paper == start
    assert tiny.exact_epsilon >= start - tiny.exact_error
    assert tiny.exact_epsilon <= tiny.composition + tiny.exact_error
    assert tiny.heuristic < tiny.composition


@pytest.mark.slow  # the README's test command stays under 5 minutes
def test_search_writes_its_files_and_the_best_reloads(tiny):
    folder = tiny.folder
    for name in ("best.json", "search.json", "trace.csv", "state.json", "fields.png"):
        assert (folder / name).exists(), name
    summary = json.loads((folder / "search.json").read_text())
    assert summary["exact_epsilon"] == tiny.exact_epsilon
    assert summary["config"]["steps"] == 3 and "git_commit" in summary and "versions" in summary
    trace = (folder / "trace.csv").read_text().splitlines()
    assert len(trace) == 1 + (TINY["iterations"] + 1) + TINY["random_candidates"]
    again = PiecewiseConstruction.load(folder / "best.json")
    from advsim.exact import last_iterate_epsilon

    # Alone, or batched with the other candidates on a grid widened to the batch's size:
    # the same value to rounding (1e-9, five orders below the engine's error).
    assert last_iterate_epsilon(again, 1e-5).epsilon == pytest.approx(tiny.exact_epsilon, abs=1e-9)


@pytest.mark.slow
def test_an_interrupted_search_resumes_to_the_same_result(tiny, tmp_path, monkeypatch):
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "_random_arm", stop)
    with pytest.raises(KeyboardInterrupt):
        search(SearchConfig(**TINY), tmp_path, progress=False)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["gradient"]["landscape"]["iteration"] == TINY["iterations"]
    monkeypatch.undo()
    with pytest.raises(FileExistsError, match="resume"):
        search(SearchConfig(**TINY), tmp_path, progress=False)
    resumed = search(SearchConfig(**TINY), tmp_path, resume=True, progress=False)
    assert resumed.exact_epsilon == tiny.exact_epsilon
    assert resumed.best_from == tiny.best_from
    first = (tiny.folder / "trace.csv").read_text()
    assert (tmp_path / "trace.csv").read_text() == first


@pytest.mark.slow  # the README's test command stays under 5 minutes
def test_resuming_another_config_is_refused(tiny):
    other = SearchConfig(**{**TINY, "iterations": 5})
    with pytest.raises(ValueError, match=r"another config \(differs in \['iterations'\]\)"):
        search(other, tiny.folder, resume=True, progress=False)


@pytest.mark.slow  # the README's test command stays under 5 minutes
def test_a_search_resumes_whatever_its_confirmation_settings(tiny):
    # The confirm_* keys decide only the confirmation: the search's state is the same.
    other = SearchConfig(**{**TINY, "confirm_runs": 3 * 10**8, "confirm_streaming": True})
    again = search(other, tiny.folder, resume=True, progress=False)
    assert again.exact_epsilon == tiny.exact_epsilon and again.best_from == tiny.best_from


@pytest.mark.slow
def test_cli_search_confirms_by_a_streaming_audit(tmp_path, capsys):
    cfg = tmp_path / "cell.toml"
    lines = [f"{k} = {json.dumps(list(v) if isinstance(v, tuple) else v)}" for k, v in TINY.items()]
    cfg.write_text("[search]\n" + "\n".join(lines) + "\nconfirm_runs = 40000\n"
                   "confirm_streaming = true\nconfirm_pilot_runs = 4000\n")  # fmt: skip
    assert main(["search", str(cfg), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "40,000 runs per world, a streaming audit" in out and "decisive event" in out
    assert (tmp_path / "out" / "confirm-stream.json").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"knotz": 3}, r"unknown key\(s\) \['knotz'\]"),
        ({"search": ["canary", "loss"]}, r"search names fields \['loss'\]"),
        ({"starts": ["zeroes"]}, "starts names 'zeroes'"),
        ({"starts": ["quadratic:x"]}, "quadratic:ALPHA"),
        ({"steps": 0}, "steps"),
        ({"span": [1.0, -1.0]}, "lo < hi"),
        ({"counts": "4"}, "counts must be a list"),
        ({"confirm_runs": 2 * 10**8}, r"confirm_runs must be"),
        ({"confirm_runs": 10**6, "confirm_pilot_runs": 1000}, "streaming confirmation only"),
        ({"confirm_runs": 10**6, "confirm_streaming": True, "confirm_pilot_runs": 2 * 10**6},
         "confirm_pilot_runs"),
        ({"confirm_streaming": "yes"}, "confirm_streaming must be true or false"),
    ],
)
def test_bad_configs_are_refused_before_any_work(changes, message):
    with pytest.raises(ValueError, match=message):
        config_from_mapping({**{k: v for k, v in TINY.items()}, **changes})


def test_a_start_outside_the_box_is_refused():
    # The zeroing regularizer's field m / eta reaches the span's ends: far above 0.1.
    cfg = SearchConfig(steps=3, noise_multiplier=1.0, sampling_prob=0.5,
                       starts=("zeroing",), regularizer_bound=0.1)  # fmt: skip
    from advsim.search import build_family

    with pytest.raises(ValueError, match="start 'zeroing' leaves the box"):
        build_family(cfg)


def test_config_file_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "cell.toml"
    path.write_text("\ufeff[search]\nsteps = 3\nnoise_multiplier = 1.0\n", encoding="utf-8")
    assert load_config(path).steps == 3
    path.write_text("[search]\nsteps = 3\nnoise_multiplier = 1.0\n[other]\n")
    with pytest.raises(ValueError, match="one \\[search\\] table"):
        load_config(path)


def test_cli_refuses_a_bad_config_in_one_line(tmp_path, capsys):
    path = tmp_path / "cell.toml"
    path.write_text("[search]\nsteps = 3\nnoise_multiplier = 1.0\nfields = ['canary']\n")
    assert main(["search", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key(s) ['fields']" in err[0]
    assert not (tmp_path / "out").exists()


def test_random_members_stay_in_the_box():
    from advsim.search import build_family

    family = build_family(SearchConfig(**TINY))
    draws = family.random(np.random.default_rng(0), 50)
    assert np.all(draws >= family.lower) and np.all(draws <= family.upper)

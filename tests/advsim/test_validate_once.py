"""Validate once, build once: one range per parameter wherever it is given, one mechanism
built per sweep cell when it runs, `block_size` computed once per `simulate` call."""

import textwrap

import pytest

import advsim._layout as layout_module
from advsim import simulate
from advsim.adversaries import ProjectionScore
from advsim.cli import main
from advsim.experiment import run_audit, threshold_search
from advsim.mechanisms import LinearProcess, ThresholdLandscape
from advsim.sweep import parse_config, run_sweep

# ------------------------------------------------------------------------------ trials

_TRIALS_RANGE = "must be an integer in [2, 4294967295]"


def _sweep_trials(trials):
    parse_config(
        {
            "sweep": {"mode": "audit", "trials": trials},
            "mechanism": {"name": "linear", "sampling_prob": 0.1, "noise_multiplier": 1.0},
            "grid": {"steps": [2]},
        }
    )


@pytest.mark.parametrize("trials", [1, 2**32])
def test_trials_has_one_range_everywhere(trials, capsys, tmp_path, monkeypatch):
    mech = LinearProcess(2, 0.5, 1.0)
    entry_points = {
        "simulate": lambda: simulate(mech, ProjectionScore(), trials, key=0),
        "run_audit": lambda: run_audit(mech, ProjectionScore(), trials=trials),
        "threshold_search": lambda: threshold_search(ThresholdLandscape(4, 1.0, 2), trials, 0),
        "sweep": lambda: _sweep_trials(trials),
    }
    for name, call in entry_points.items():
        with pytest.raises(ValueError) as err:
            call()
        assert f"trials {_TRIALS_RANGE}, got {trials}" in str(err.value), name
    monkeypatch.chdir(tmp_path)
    argv = ["audit", "--trials", str(trials), "--noise-multiplier", "1", "--steps", "2"]
    assert main(argv) == 2
    assert f"--trials {_TRIALS_RANGE}, got {trials}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ builds

_COUNTED = """
from advsim.mechanisms import LinearProcess

BUILT = []


class CountedLinear(LinearProcess):
    \"\"\"The linear process, recording each construction's (steps, sigma).\"\"\"

    def __init__(self, steps, sampling_prob, noise_multiplier, **kwargs):
        BUILT.append((steps, float(noise_multiplier)))
        super().__init__(steps, sampling_prob, noise_multiplier, **kwargs)
"""


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """A mechanism class, by class path, that records its constructions."""
    (tmp_path / "counted_mechanism.py").write_text(textwrap.dedent(_COUNTED))
    monkeypatch.syspath_prepend(str(tmp_path))
    import counted_mechanism

    counted_mechanism.BUILT.clear()
    return counted_mechanism.BUILT


def _steps_built(built) -> list[int]:
    return sorted(steps for steps, _ in built)


@pytest.mark.parametrize(
    "mode",
    ["bounds", pytest.param("audit", marks=pytest.mark.slow)],  # audit: 10-15 s
)
def test_each_cell_builds_its_mechanism_once(tmp_path, counted, mode):
    """Checking the config builds each cell once (sigma 1 standing in for a calibrated
    one); running the sweep builds each cell once more, at its own sigma, calibrated
    cells included: never twice."""
    sweep = {"mode": mode, "delta": 1e-5, "exact": False}
    if mode == "audit":
        sweep |= {"trials": 64, "method": "eps_delta"}
    else:
        sweep["composition_discretization"] = 1e-2
    config = parse_config(
        {
            "sweep": sweep,
            "mechanism": {"name": "counted_mechanism:CountedLinear", "sampling_prob": 0.1},
            "grid": {"steps": [1, 3]},
            "cases": [{"noise_multiplier": [1.0, 2.0]}, {"target_epsilon": 4.0}],
        }
    )
    assert len(config.cells()) == 6
    assert _steps_built(counted) == [1, 1, 1, 3, 3, 3]  # one check per cell
    counted.clear()
    rows = run_sweep(config, tmp_path / "out", progress=False)
    assert _steps_built(counted) == [1, 1, 1, 3, 3, 3], counted  # one build per cell
    # Each built at the sigma its row reports (calibrated ones: at the calibrated sigma).
    assert sorted(counted) == sorted((r["steps"], r["noise_multiplier"]) for r in rows)
    assert sum(sigma not in (1.0, 2.0) for _, sigma in counted) == 2


def test_block_size_is_computed_once_per_call(monkeypatch):
    calls = []
    real = layout_module.block_size

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(layout_module, "block_size", counting)
    scores = simulate(LinearProcess(3, 0.5, 1.0), ProjectionScore(), 100, key=0)
    assert len(calls) == 1 and scores.n_in == 100  # both worlds share one layout

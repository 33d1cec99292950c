"""The sweep's audit options: `sides`, `min_count` and `audit_seed` pass through to the
audit, are checked before the sweep runs, and leave the cells of a config without them as
they were (their ids: a sweep folder started before them resumes)."""

import hashlib
import json

import pytest

import advsim.sweep._runner as runner
from advsim.sweep import parse_config
from advsim.sweep._config import AUDIT_OPTION_KEYS, audit_options


def _config(mechanism: str = "linear", **sweep) -> dict:
    return {
        "sweep": {"seed": 3, "trials": 200, "delta": 1e-3, **sweep},
        "mechanism": {"name": mechanism, "steps": 2, "noise_multiplier": 1.0},
        "grid": {"sampling_prob": [0.5, 0.25]},
    }


def _ids(config) -> list[str]:
    return [c.cell_id for c in config.cells()]


@pytest.mark.parametrize("selection", [None, "by_sample_size", "split"])
def test_a_config_without_them_keeps_its_cell_ids(selection):
    """The id is 16 hex digits of SHA-256 over the canonical JSON of mode, mechanism,
    adversary, parameters and seed, recomputed here from those alone: no other audit
    option enters it, so a config that leaves them out keeps its ids. The strategy is a
    parameter, its default ("by_sample_size") filled in: a config that sets the default has
    the same cells, one that sets "split" the cells of "split"."""
    given = {} if selection is None else {"threshold_selection": selection}
    config = parse_config(_config(**given))
    for cell, q in zip(config.cells(), (0.5, 0.25), strict=True):
        params = {
            "confidence": 0.95, "delta": 1e-3, "method": "family", "noise_multiplier": 1.0,
            "steps": 2, "threshold_selection": selection or "by_sample_size", "trials": 200,
            "sampling_prob": q,
        }  # fmt: skip
        ident = {
            "mode": "audit",
            "mechanism": "linear",
            "adversary": ["projection", {}],
            "params": params,
            "seed": 3,
        }
        text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
        assert cell.cell_id == hashlib.sha256(text.encode()).hexdigest()[:16]
        assert cell.params == params
    # Set to their defaults they are the same config: same identity, same cells.
    if selection is not None:
        return
    same = parse_config(_config(sides="two", min_count=50))
    assert same.identity() == config.identity() and _ids(same) == _ids(config)


def test_set_otherwise_they_enter_every_cell():
    config = parse_config(_config(method="eps_delta", sides="one", min_count=7, audit_seed=11))
    for cell in config.cells():
        assert audit_options(cell.params) == {"sides": "one", "min_count": 7, "audit_seed": 11}
    assert config.to_dict()["sweep"]["sides"] == "one"
    assert set(_ids(config)).isdisjoint(_ids(parse_config(_config(method="eps_delta"))))
    # Unset, each takes its default.
    assert audit_options({}) == AUDIT_OPTION_KEYS == {
        "sides": "two", "min_count": 50, "audit_seed": None
    }  # fmt: skip
    # A grid over sides: two cells, "two" counted once.
    grid = _config(method="eps_delta")
    grid["grid"] = {"sampling_prob": [0.5], "sides": ["two", "one"]}
    assert [c.params["sides"] for c in parse_config(grid).cells()] == ["two", "one"]
    twice = _config(method="eps_delta")
    twice["cases"] = [{"sides": ["two"]}, {"min_count": [50]}]
    with pytest.raises(ValueError, match="are the same cell"):
        parse_config(twice)


@pytest.mark.parametrize(
    ("sweep", "match"),
    [
        ({"sides": "both"}, r"sweep.sides: sides must be one of \['two', 'one'\], got 'both'"),
        ({"min_count": 0}, r"sweep.min_count: min_count must be an integer in \[1"),
        ({"audit_seed": -1}, r"sweep.audit_seed: audit_seed must be an integer in \[0"),
        ({"audit_seed": 1.5}, r"sweep.audit_seed: audit_seed must be an integer"),
        (
            {"sides": "one"},
            r"cell \{sampling_prob=0.5\}: sides='one' does not apply to the "
            "'family' audit",
        ),  # fmt: skip
        ({"mode": "bounds", "sides": "one"}, r"sweep.sides has no effect in bounds mode"),
    ],
)
def test_bad_values_are_refused_before_the_sweep(sweep, match):
    data = _config(**sweep)
    if sweep.get("mode") == "bounds":
        data["sweep"].pop("trials")
    with pytest.raises(ValueError, match=match):
        parse_config(data)


def test_a_cell_passes_them_to_run_audit(monkeypatch, tmp_path):
    """What `run_cell` hands `run_audit`: the cell's options, each at its default where the
    cell does not set it (audit_seed None: the audit splits with the cell's seed)."""
    calls = []

    class Stop(Exception):
        pass

    def fake_run_audit(mechanism, adversary, **kwargs):
        calls.append(kwargs)
        raise Stop

    monkeypatch.setattr(runner, "run_audit", fake_run_audit)
    for sweep, expected in [
        ({}, {"sides": "two", "min_count": 50, "audit_seed": None, "method": "family"}),
        (
            {"method": "eps_delta", "sides": "one", "min_count": 3, "audit_seed": 8},
            {"sides": "one", "min_count": 3, "audit_seed": 8, "method": "eps_delta"},
        ),
    ]:
        config = parse_config(_config(**sweep))
        with pytest.raises(Stop):
            runner.run_cell(config, config.cells()[0], progress=False)
        got = calls.pop()
        assert {k: got[k] for k in expected} == expected
        assert got["seed"] == config.cells()[0].seed

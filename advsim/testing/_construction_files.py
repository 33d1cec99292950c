"""Scalar field constructions as JSON files: `save_construction`, `load_construction`.

A counterexample found by `check_bound` is saved so that it can be replayed exactly
(`load_construction(path)` rebuilds the same construction, float for float).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from advsim._io import write_json
from advsim._schedule import CanarySchedule
from advsim.testing._fields import (
    ProjectedScalarFieldConstruction,
    ScalarField,
    ScalarFieldConstruction,
)

__all__ = ["construction_to_dict", "load_construction", "save_construction"]

FILE_FORMAT = "advsim-scalar-field-construction-1"


def construction_to_dict(mech) -> dict[str, Any]:
    """A `ScalarFieldConstruction` or `ProjectedScalarFieldConstruction` as JSON-ready
    data (every float exactly: JSON keeps float64's shortest repr)."""
    if not isinstance(mech, ScalarFieldConstruction | ProjectedScalarFieldConstruction):
        raise TypeError(f"not a scalar field construction: {type(mech).__name__}")
    sched = mech.canary_schedule
    radius = float(mech.radius) if isinstance(mech, ProjectedScalarFieldConstruction) else None
    return {
        "format": FILE_FORMAT,
        "class": type(mech).__name__,
        "steps": mech.steps,
        "sampling_prob": float(mech.sampling_prob),
        "noise_multiplier": float(mech.noise_multiplier),
        "clip_norm": float(mech.clip_norm),
        "learning_rate": float(mech.learning_rate),
        "batching": mech.batching,
        "canary_schedule": dict(
            period=sched.period, first=sched.first, last=sched.last, sampled=sched.sampled
        ),
        "init": float(mech.init),
        "radius": radius,
        "canary": mech.canary.to_dict(),
        "groups": [g.to_dict() for g in mech.groups],
        "counts": np.asarray(mech.counts).tolist(),
        "regularizer": mech.regularizer.to_dict(),
        "describe": mech.describe(),
    }


def save_construction(path: str | os.PathLike, mech, **metadata) -> Path:
    """Writes `mech` to a JSON file (atomically), with `metadata` beside it."""
    data = construction_to_dict(mech)
    if metadata:
        data["metadata"] = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in metadata.items()
        }
    path = Path(path)
    write_json(path, data)
    return path


def load_construction(path: str | os.PathLike):
    """The construction `save_construction` wrote at `path`.

    Raises:
        ValueError: naming the path, for a file that cannot be read or is not one.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read a construction from path {str(path)!r}: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise ValueError(f"path {str(path)!r} is not a {FILE_FORMAT} file")
    sched = data["canary_schedule"]
    kwargs = dict(
        canary=ScalarField.from_dict(data["canary"]),
        groups=[ScalarField.from_dict(g) for g in data["groups"]],
        counts=data["counts"],
        regularizer=ScalarField.from_dict(data["regularizer"]),
        init=data["init"],
        clip_norm=data["clip_norm"],
        learning_rate=data["learning_rate"],
        batching=data["batching"],
        canary_schedule=CanarySchedule(
            sched["period"], sched["first"], sched["last"], sched["sampled"]
        ),
    )
    args = (data["steps"], data["sampling_prob"], data["noise_multiplier"])
    if data["radius"] is not None:
        return ProjectedScalarFieldConstruction(*args, radius=data["radius"], **kwargs)
    return ScalarFieldConstruction(*args, **kwargs)

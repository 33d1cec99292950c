"""Scores: the adversary's one number per simulated run, for each world."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["NonFiniteScoresError", "Scores"]


class NonFiniteScoresError(ValueError):
    """Raised when a simulation produced NaN or inf scores; no epsilon is computed from them."""


@dataclasses.dataclass(frozen=True)
class Scores:
    """Scores of both worlds; higher means "canary in".

    Attributes:
        canary_in: one score per run with the canary present, shape `(n_in,)`.
        canary_out: one score per run without the canary, shape `(n_out,)`.
    """

    canary_in: np.ndarray
    canary_out: np.ndarray

    def __post_init__(self):
        for name in ("canary_in", "canary_out"):
            arr = np.asarray(getattr(self, name))
            if arr.ndim != 1:
                raise ValueError(f"{name} must be a 1-D array of scores, got shape {arr.shape}")
            if arr.size < 1:
                raise ValueError(f"{name} must hold at least one score, got 0")
            if arr.dtype.kind not in "biuf":  # complex, strings, objects: no order to test
                raise TypeError(
                    f"{name} must hold real numbers (a bool, integer or float array), got "
                    f"dtype {arr.dtype}"
                )
            if not np.issubdtype(arr.dtype, np.floating):
                arr = arr.astype(np.float64)
            object.__setattr__(self, name, arr)

    @property
    def n_in(self) -> int:
        return int(self.canary_in.size)

    @property
    def n_out(self) -> int:
        return int(self.canary_out.size)

    def nonfinite_counts(self) -> tuple[int, int]:
        """Numbers of NaN/inf scores in (canary_in, canary_out)."""
        return (
            int(np.count_nonzero(~np.isfinite(self.canary_in))),
            int(np.count_nonzero(~np.isfinite(self.canary_out))),
        )

    def check_finite(self) -> Scores:
        """Returns self, or raises NonFiniteScoresError naming how many scores are bad
        (`advsim.simulate` adds the mechanism and adversary that produced them)."""
        bad_in, bad_out = self.nonfinite_counts()
        if bad_in or bad_out:
            raise NonFiniteScoresError(
                f"{bad_in} of {self.n_in} canary_in and {bad_out} of {self.n_out} canary_out "
                "scores are NaN or inf; no epsilon is computed from non-finite scores"
            )
        return self

    def save(self, path) -> None:
        """Writes both arrays to a `.npz` file (atomically: temporary file, then rename;
        with the permissions the user's umask gives a new file)."""
        from advsim._io import atomic_path

        with atomic_path(path) as tmp, tmp.open("wb") as f:
            np.savez(f, canary_in=self.canary_in, canary_out=self.canary_out)

    @classmethod
    def load(cls, path) -> Scores:
        with np.load(path) as data:
            return cls(canary_in=data["canary_in"], canary_out=data["canary_out"])

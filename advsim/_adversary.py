"""The adversary abstraction: crafts the run (optionally) and scores what was released."""

from __future__ import annotations

import abc

import equinox as eqx
from jaxtyping import Array, Float

from advsim._mechanism import AbstractMechanism

__all__ = ["AbstractAdversary"]


class AbstractAdversary(eqx.Module):
    """An adversary: optionally crafts the mechanism, then scores each released output.

    `score` must be a pure, jittable function of the mechanism and the release: the final
    model, shape `(d,)`, when only the last iterate is released (the default), or the whole
    trajectory `m_0, ..., m_T`, shape `(T + 1, d)`, when `simulate(..., release="all")`.
    Higher scores mean "canary in".
    """

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        """Returns the mechanism that is actually run (default: unchanged).

        Gradient-crafting adversaries (a chosen canary gradient, a chosen loss landscape)
        override this; the crafted mechanism still goes through the engine's clipping,
        sampling and noise, so the accounting stays valid.
        """
        return mechanism

    def check_mechanism(self, mechanism: AbstractMechanism) -> str | None:
        """Why this adversary cannot score runs of `mechanism`, or None where it can.

        `simulate` calls it on the crafted mechanism before any run and raises a
        ValueError with the reason; `advsim.testing.check_adversary` reports it too. An
        adversary overrides it where some mechanisms would give it meaningless scores
        (`ProjectionScore` on a zero canary gradient: no direction to project on). It
        runs eagerly, on the host, once per simulation (default: None, no condition).
        """
        del mechanism
        return None

    @abc.abstractmethod
    def score(self, mechanism: AbstractMechanism, release: Float[Array, ...]) -> Float[Array, ""]:
        """One number per run; higher means "canary in"."""

"""A found construction confirmed by simulation: audited black-box against its exact law."""

from __future__ import annotations

import dataclasses

from advsim._simulate import simulate
from advsim.adversaries import GridLikelihoodRatio
from advsim.audits import audit, certify_violation
from advsim.bounds import bounds_for
from advsim.exact import last_iterate_epsilon

__all__ = ["Confirmation", "confirm"]


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """A construction's exact epsilon confirmed by simulation.

    Attributes:
        exact_epsilon, exact_error: `last_iterate_epsilon` (refinement estimate).
        eps_lower: the assumption-free `"eps_delta"` audit (held-out threshold, confidence
            `confidence`) of the Neyman-Pearson score (`GridLikelihoodRatio`) over `runs`
            runs per world; sound when it is at most `exact_epsilon`.
        guarantee: what `eps_lower` certifies.
        runs: runs per world.
        heuristic: the last-iterate heuristic at the cell.
        certified: where the exact epsilon beats the heuristic, whether
            `certify_violation(..., "heuristic")` certifies it at these runs (None where it
            does not beat it).
        seed: the simulation's key.
    """

    exact_epsilon: float
    exact_error: float
    eps_lower: float
    guarantee: str
    runs: int
    heuristic: float
    certified: bool | None
    seed: int

    @property
    def sound(self) -> bool:
        """eps_lower <= exact epsilon + its error."""
        return self.eps_lower <= self.exact_epsilon + self.exact_error


def confirm(mech, delta: float, runs: int, *, seed: int = 0, confidence: float = 0.95,
            progress: bool | None = None) -> Confirmation:  # fmt: skip
    """Runs `mech` through the simulation engine (`runs` per world) with the
    Neyman-Pearson score of its exact law, audits it assumption-free with a held-out
    threshold, and, where its exact epsilon beats the heuristic, asks `certify_violation`
    whether the runs certify it."""
    exact = last_iterate_epsilon(mech, delta, progress=False)
    adversary = GridLikelihoodRatio.from_exact(exact)
    scores = simulate(mech, adversary, runs, key=seed, progress=progress)
    result = audit(scores, "eps_delta", delta=delta, confidence=confidence,
                   threshold_selection="split", seed=seed)  # fmt: skip
    acc = mech.accounting()
    heuristic = float(bounds_for(acc, delta)["heuristic"])
    certified = None
    if exact.epsilon - exact.error > heuristic:
        cert = certify_violation(scores, "heuristic", acc, delta=delta, confidence=confidence,
                                 seed=seed)  # fmt: skip
        certified = bool(cert.certified)
    return Confirmation(
        exact_epsilon=exact.epsilon, exact_error=exact.error,
        eps_lower=float(result.eps_lower), guarantee=result.guarantee.label, runs=int(runs),
        heuristic=heuristic, certified=certified, seed=seed,
    )  # fmt: skip

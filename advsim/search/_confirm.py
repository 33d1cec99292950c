"""A found construction confirmed by simulation: audited black-box against its exact law."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from advsim._simulate import simulate
from advsim.adversaries import GridLikelihoodRatio
from advsim.audits import audit, certify_violation
from advsim.bounds import bounds_for
from advsim.exact import last_iterate_epsilon
from advsim.streaming import audit_streaming

__all__ = ["Confirmation", "confirm", "decisive_events"]


def decisive_events(mass_in, mass_out, epsilon: float) -> dict:
    r"""The events that decide a law's epsilon: the optimal tests of both orders of the pair.

    For last-model laws $P$ (canary in) and $Q$ (canary out) on one grid, at
    $\varepsilon$: $S_+ = \{P > e^\varepsilon Q\}$ attains
    $H_{e^\varepsilon}(P, Q) = P(S_+) - e^\varepsilon Q(S_+)$ and
    $S_- = \{Q > e^\varepsilon P\}$ attains $H_{e^\varepsilon}(Q, P)$; the order with the
    larger divergence is the one whose delta the epsilon was solved at. An audit counting
    $N$ runs per world sees about $N P(S)$ and $N Q(S)$ of them: when the rarer is a few
    hundred or fewer, no threshold test can certify most of the epsilon.

    Returns:
        A dict: `order` ("in/out" for $S_+$, "out/in" for $S_-$), `p_in` and `p_out` (the
        decisive event's probability under each world), and `hockey_stick` (its divergence).
    """
    p = np.asarray(mass_in, np.float64)
    q = np.asarray(mass_out, np.float64)
    g = math.exp(epsilon)
    plus, minus = p > g * q, q > g * p
    h_plus = float(np.sum(p[plus]) - g * np.sum(q[plus]))
    h_minus = float(np.sum(q[minus]) - g * np.sum(p[minus]))
    if h_plus >= h_minus:
        return {"order": "in/out", "p_in": float(np.sum(p[plus])),
                "p_out": float(np.sum(q[plus])), "hockey_stick": h_plus}  # fmt: skip
    return {"order": "out/in", "p_in": float(np.sum(p[minus])),
            "p_out": float(np.sum(q[minus])), "hockey_stick": h_minus}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """A construction's exact epsilon confirmed by simulation.

    Attributes:
        exact_epsilon, exact_error: `last_iterate_epsilon` (refinement estimate).
        eps_lower: the assumption-free held-out (eps, delta) audit (confidence
            `confidence`) of the Neyman-Pearson score (`GridLikelihoodRatio`) over `runs`
            runs per world; sound when it is at most `exact_epsilon`.
        guarantee: what `eps_lower` certifies.
        runs: runs per world.
        heuristic: the last-iterate heuristic of the process as it ran (at its
            learning-rate schedule: `bounds_for(mech.accounting())`).
        certified: where the exact epsilon beats the heuristic, whether the runs certify
            it (None where it does not beat it): in memory, `certify_violation(...,
            "heuristic")`; streaming, `eps_lower` > the heuristic's epsilon at the same
            delta (the run is then not (heuristic, delta)-DP, with the audit's confidence).
        seed: the simulation's key.
        audit: "in memory" (`audit(..., "eps_delta")`, one split) or "streaming"
            (`advsim.streaming.audit_streaming`: a pilot plans, the main run counts).
        pilot_runs: the streaming audit's pilot, runs per world (None in memory).
        decisive_in, decisive_out: the probabilities, in each world, of the event that
            decides the exact epsilon (`decisive_events`).
        seconds: wall time of the simulation and audit.
    """

    exact_epsilon: float
    exact_error: float
    eps_lower: float
    guarantee: str
    runs: int
    heuristic: float
    certified: bool | None
    seed: int
    audit: str = "in memory"
    pilot_runs: int | None = None
    decisive_in: float | None = None
    decisive_out: float | None = None
    seconds: float | None = None

    @property
    def sound(self) -> bool:
        """eps_lower <= exact epsilon + its error."""
        return self.eps_lower <= self.exact_epsilon + self.exact_error

    @property
    def ratio(self) -> float:
        """eps_lower / exact epsilon: how much of the truth the black-box audit sees."""
        return self.eps_lower / self.exact_epsilon if self.exact_epsilon > 0 else math.nan


def confirm(mech, delta: float, runs: int, *, seed: int = 0, confidence: float = 0.95,
            progress: bool | None = None, streaming: bool = False,
            pilot_runs: int | None = None, checkpoint=None) -> Confirmation:  # fmt: skip
    """Runs `mech` through the simulation engine (`runs` per world) with the
    Neyman-Pearson score of its exact law and audits it assumption-free with held-out
    thresholds; where its exact epsilon beats the heuristic (of the process as it ran),
    asks whether the runs certify it.

    With `streaming=True` the audit is `advsim.streaming.audit_streaming` (a pilot of
    `pilot_runs` per world plans the tests, the main run is only counted, resumable from
    `checkpoint`): what $10^8$-$10^9$ runs need. Otherwise the scores are held and split
    once (`audit(..., "eps_delta")`) and certification is `certify_violation`'s.
    """
    exact = last_iterate_epsilon(mech, delta, progress=False)
    adversary = GridLikelihoodRatio.from_exact(exact)
    decisive = decisive_events(exact.mass_in, exact.mass_out, exact.epsilon)
    acc = mech.accounting()
    heuristic = float(bounds_for(acc, delta)["heuristic"])
    beats = exact.epsilon - exact.error > heuristic
    start = time.perf_counter()
    if streaming:
        result = audit_streaming(mech, adversary, runs, seed, delta=delta,
                                 confidence=confidence, pilot_runs=pilot_runs,
                                 checkpoint=checkpoint, progress=progress)  # fmt: skip
        certified = bool(result.eps_lower > heuristic) if beats else None
    else:
        scores = simulate(mech, adversary, runs, key=seed, progress=progress)
        result = audit(scores, "eps_delta", delta=delta, confidence=confidence,
                       threshold_selection="split", seed=seed)  # fmt: skip
        certified = None
        if beats:
            cert = certify_violation(scores, "heuristic", acc, delta=delta,
                                     confidence=confidence, seed=seed)  # fmt: skip
            certified = bool(cert.certified)
    return Confirmation(
        exact_epsilon=exact.epsilon, exact_error=exact.error,
        eps_lower=float(result.eps_lower), guarantee=result.guarantee.label, runs=int(runs),
        heuristic=heuristic, certified=certified, seed=seed,
        audit="streaming" if streaming else "in memory",
        pilot_runs=result.extras.get("pilot_runs") if streaming else None,
        decisive_in=decisive["p_in"], decisive_out=decisive["p_out"],
        seconds=time.perf_counter() - start,
    )  # fmt: skip

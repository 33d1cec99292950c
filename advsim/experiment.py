"""One audit end to end: simulate both worlds, audit the scores, read the bounds beside it.

`run_audit` is the unit every driver uses (the `advsim audit` command, sweeps, the figure
scripts): it returns one flat record with the parameters, the empirical epsilon (a lower
bound at the stated confidence and a point estimate) and the heuristic, composition and
full-batch bounds computed from `mechanism.accounting()` of the mechanism actually run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import jax

from advsim._adversary import AbstractAdversary
from advsim._mechanism import AbstractMechanism
from advsim._simulate import simulate
from advsim._validation import check_delta, check_in_interval, check_int
from advsim.audits import audit
from advsim.bounds import bounds_for, calibrate_noise_multiplier

__all__ = ["AuditRecord", "DEFAULT_STEPS", "default_experiment", "run_audit"]

#: Steps of the built-in experiment (the last-iterate paper's gradient-canary setting,
#: Figure 3 of arXiv:2410.06186: q = 0.01, sigma calibrated to composition eps = 8).
DEFAULT_STEPS = (1, 5, 10, 50, 100, 500, 1000)


@dataclasses.dataclass(frozen=True)
class AuditRecord:
    """One audited configuration: parameters, empirical epsilon and the three bounds.

    Besides the numbers, the record says what `eps_lower` certifies (`guarantee`: the
    audit's `Guarantee.label`, "rigorous" only for an assumption-free held-out bound;
    `assumption`: what it rests on; `assumption_rejected`: the verdict of the audit's
    check of that assumption on the held-out runs, None where it assumes nothing), why
    an epsilon is missing (`eps_lower_note`, `eps_point_note`), and whether the point
    estimate lies above the composition bound (`eps_point_above_composition`: no
    DP-SGD run can have such an eps, so it is an estimate outside the possible range).
    """

    mechanism: str
    adversary: str
    method: str
    steps: int
    sampling_prob: float
    noise_multiplier: float
    num_canary_steps: int
    delta: float
    confidence: float
    threshold_selection: str
    trials: int
    seed: int
    eps_lower: float | None
    eps_point: float | None
    heuristic: float
    composition: float
    full_batch: float
    rigorous: bool
    guarantee: str
    assumption: str
    assumption_rejected: bool | None
    eps_point_above_composition: bool
    eps_lower_note: str | None
    eps_point_note: str | None
    threshold: float
    fpr: float
    fnr: float
    wall_time_s: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def run_audit(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary,
    *,
    trials: int,
    seed: int = 0,
    method: str = "family",
    delta: float = 1e-5,
    confidence: float = 0.95,
    threshold_selection: str = "split",
    chunk_size: int | None = None,
    progress: bool | None = None,
) -> AuditRecord:
    """Simulates, audits and bounds one configuration.

    Args:
        mechanism: the DP-SGD run.
        adversary: crafts it and scores its releases.
        trials: runs per world.
        seed: the simulation key is `jax.random.key(seed)`; the split of runs into
            threshold-choosing and counting halves also uses `seed`.
        method: "family" (needs T and q: the last-iterate paper's audit; assumes the
            run is in the heuristic's family), "gdp" (assumes a Gaussian trade-off),
            "eps_delta" or "tradeoff" (assumption-free); see `advsim.audits`.
        delta: the delta at which every epsilon is reported.
        confidence: of the Clopper-Pearson intervals behind `eps_lower`.
        threshold_selection: "split" (rigorous) or "same" (optimistic, as in the papers).
        chunk_size: runs per compiled chunk (results do not depend on it).
        progress: tqdm bar (default: automatic for long simulations).

    Returns:
        An `AuditRecord`.
    """
    trials = check_int("trials", trials, minimum=2)
    delta = check_delta("delta", delta)
    confidence = check_in_interval("confidence", confidence, 0.5, 1.0)
    start = time.perf_counter()
    crafted = adversary.craft(mechanism)
    accounting = crafted.accounting()
    scores = simulate(
        mechanism, adversary, trials, jax.random.key(seed), chunk_size=chunk_size,
        progress=progress,
    )
    result = audit(
        scores,
        method,
        delta=delta,
        accounting=accounting,
        confidence=confidence,
        threshold_selection=threshold_selection,
        seed=seed,
    )
    bounds = bounds_for(accounting, delta)
    composition = float(bounds["composition"])
    return AuditRecord(
        mechanism=type(crafted).__name__,
        adversary=type(adversary).__name__,
        method=method,
        steps=accounting.steps,
        sampling_prob=accounting.sampling_prob,
        noise_multiplier=accounting.noise_multiplier,
        num_canary_steps=accounting.num_canary_steps,
        delta=delta,
        confidence=confidence,
        threshold_selection=threshold_selection,
        trials=trials,
        seed=seed,
        eps_lower=result.eps_lower,
        eps_point=result.eps_point,
        heuristic=float(bounds["heuristic"]),
        composition=composition,
        full_batch=float(bounds["full_batch"]),
        rigorous=bool(result.rigorous),
        guarantee=result.guarantee.label,
        assumption=result.guarantee.assumption,
        assumption_rejected=result.assumption_rejected,
        eps_point_above_composition=result.eps_point is not None
        and result.eps_point > composition * (1 + 1e-9),
        eps_lower_note=result.eps_lower_note,
        eps_point_note=result.eps_point_note,
        threshold=float(result.threshold),
        fpr=float(result.fpr),
        fnr=float(result.fnr),
        wall_time_s=time.perf_counter() - start,
    )


def default_experiment(
    steps: Sequence[int] = DEFAULT_STEPS,
    *,
    sampling_prob: float = 0.01,
    target_epsilon: float = 8.0,
    delta: float = 1e-5,
) -> list[dict]:
    """The built-in `advsim audit` grid: one linear-process config per T.

    For each T, sigma is the smallest noise multiplier for which composition (dp-accounting's
    PLD accountant) gives `target_epsilon` at `delta`, as in the gradient-canary experiment of
    the last-iterate paper (Section 3.1 and Figure 3 of arXiv:2410.06186).

    Returns:
        A list of `{"steps", "sampling_prob", "noise_multiplier"}` dicts.
    """
    configs = []
    for t in steps:
        sigma = calibrate_noise_multiplier(target_epsilon, delta, t, sampling_prob)
        configs.append({"steps": int(t), "sampling_prob": sampling_prob, "noise_multiplier": sigma})
    return configs

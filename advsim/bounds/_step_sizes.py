r"""The last-iterate heuristic at a learning-rate schedule.

Theorem 1 of arXiv:2410.06186 is stated for one learning rate. For a linear loss and a
schedule $\eta_1, \dots, \eta_T$ fixed before training (`Accounting.step_sizes`) the last
model is

$$m_T = m_0 + \sum_{t=1}^T \eta_t (b_t C + \sigma C \xi_t),$$

with $b_t$ the canary's presence ($\mathrm{Bernoulli}(q)$ at a canary step when it is
sampled, 1 when it is not, 0 at the other steps) and $\xi_t \sim \mathcal{N}(0, 1)$. In
units of $C$ (and of the largest step size), projected on the canary's direction, the two
worlds are

$$P = \mathcal{N}(X, s^2), \quad Q = \mathcal{N}(0, s^2), \qquad
X = \sum_{t \in \text{canary steps}} \eta_t b_t, \quad
s = \sigma \sqrt{\textstyle\sum_{t=1}^T \eta_t^2},$$

the Gaussian location mixture of `advsim.bounds._mixture`; with one step size it is
Theorem 1's pair ($X \sim \mathrm{Binomial}(n, q)$, $s = \sqrt{T}\sigma$, after dividing
by $\eta$). Every step's noise counts, a canary step's signal only when it is present.

**Closed form.** Grouping the canary steps by their step size,
$X = \sum_g \eta_g \mathrm{Binomial}(n_g, q)$ (a point mass when $q = 1$). Its atoms are
built by convolving the groups' Binomial atoms (`_binomial_log_atoms`) in log space, one
group at a time: equal atoms are merged (their probabilities summed as a log-sum-exp), and
atoms more than `log_tol` below the largest log-probability are dropped and the rest
renormalised. The epsilon and delta use `log_tol` = 800 as the constant-rate heuristic
does: at most $N$ atoms are dropped, each below $e^{-800}$, so the mass dropped is below
$N e^{-800} < 10^{-330}$ for any $N$ this module reaches (at most `MAX_ATOMS` kept and
`MAX_PRODUCT` formed per group): far below any representable delta. The privacy profile
of the mixture is then evaluated by the batched threshold solver of
`advsim.bounds._mixture` (`_Batch`), exactly as the constant-rate heuristic's.

**When it refuses.** The number of atoms grows with the number of distinct step sizes
among the canary steps: $\prod_g (n_g + 1)$ before merging and cutting. When a group's
convolution would form more than `MAX_PRODUCT` = $2^{22}$ pairs, or more than
`MAX_ATOMS` = $2^{20}$ atoms remain after merging and cutting, the closed form is refused
with a ValueError that says so and names the alternative: the exact law of the linear
process at that schedule, `advsim.exact.last_iterate_epsilon` of
`advsim.mechanisms.PiecewiseConstruction.linear_loss(..., step_sizes=...)` (a grid
computation with a refinement error estimate, not a closed form). Schedules with a few
distinct step sizes over the canary steps (a constant rate, step decay, the threshold
landscape's 1 then 1/B) stay far below the caps.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from advsim._accounting import Accounting
from advsim.bounds._heuristic import _LOG_TOL, _binomial_log_atoms
from advsim.bounds._mixture import _Batch

__all__ = [
    "MAX_ATOMS",
    "MAX_PRODUCT",
    "ScheduleAtoms",
    "schedule_atoms",
    "schedule_batch",
    "schedule_delta",
    "schedule_epsilon",
]

#: The most atoms X may keep after merging and cutting.
MAX_ATOMS = 1 << 20
#: The most (atom, group atom) pairs one group's convolution may form.
MAX_PRODUCT = 1 << 22


class ScheduleAtoms(NamedTuple):
    """The atoms of X = sum_g eta_g Binomial(n_g, q), in units of the largest step size.

    Attributes:
        x: distinct atoms, increasing, >= 0.
        logp: their log-probabilities, normalised to sum to 1.
        windows: (n_g, first kept k, last kept k) of each group's Binomial atoms.
        pruned: the probability of the product's atoms dropped by the cut (in the law of
            the kept groups' product), summed in float64.
        pruned_count: how many product atoms were dropped.
        scale: sqrt(sum_t eta_t^2) in the same units, i.e. s / sigma.
    """

    x: np.ndarray
    logp: np.ndarray
    windows: tuple[tuple[int, int, int], ...]
    pruned: float
    pruned_count: int
    scale: float


class _TooMany(Exception):
    """X has more atoms than the caps allow (the message says which cap)."""


def _groups(accounting: Accounting) -> tuple[tuple[tuple[float, int], ...], float]:
    """The canary steps' (eta_g, n_g) by distinct step size, and sqrt(sum_t eta_t^2), both
    relative to the largest step size (only ratios matter, and no square overflows)."""
    etas = np.asarray(accounting.step_sizes, dtype=np.float64)
    etas = etas / etas.max()
    canary = etas[np.asarray(accounting.canary_steps, dtype=np.int64) - 1]
    values, counts = np.unique(canary, return_counts=True)
    groups = tuple(zip(values.tolist(), counts.tolist(), strict=True))
    return groups, float(np.sqrt(np.sum(etas * etas)))


def _merge(x: np.ndarray, logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct atoms, the log-probabilities of equal atoms log-sum-exp'ed."""
    order = np.argsort(x, kind="stable")
    x, logp = x[order], logp[order]
    first = np.flatnonzero(np.concatenate(([True], x[1:] != x[:-1])))
    if first.size == x.size:
        return x, logp
    top = np.maximum.reduceat(logp, first)
    sizes = np.diff(np.append(first, x.size))
    total = np.add.reduceat(np.exp(logp - np.repeat(top, sizes)), first)
    return x[first], top + np.log(total)


def _normalised(logp: np.ndarray) -> np.ndarray:
    """log p - log(sum p), summed as max + log1p(rest), so that a probability within 1e-17
    of 1 keeps its log (as `_binomial_log_atoms` normalises)."""
    i = int(np.argmax(logp))
    rel = logp - logp[i]
    others = np.arange(logp.size) != i
    return rel - math.log1p(float(np.sum(np.exp(rel[others]))))


@functools.lru_cache(maxsize=64)
def _atoms(groups, q: float, log_tol: float):
    """(x, logp, windows, pruned, pruned_count) of X for the groups (see `ScheduleAtoms`)."""
    x, logp = np.zeros(1), np.zeros(1)
    windows, pruned, pruned_count = [], 0.0, 0
    for eta, n in groups:
        k, lk = _binomial_log_atoms(n, q, log_tol)
        windows.append((n, int(k[0]), int(k[-1])))
        if x.size * k.size > MAX_PRODUCT:
            raise _TooMany(f"would form more than MAX_PRODUCT = {MAX_PRODUCT} atoms")
        x, logp = _merge(np.add.outer(x, eta * k).ravel(), np.add.outer(logp, lk).ravel())
        keep = logp >= np.max(logp) - log_tol
        if not np.all(keep):
            pruned += float(np.sum(np.exp(logp[~keep])))
            pruned_count += int(keep.size - np.count_nonzero(keep))
            x, logp = x[keep], logp[keep]
        logp = _normalised(logp)
        if x.size > MAX_ATOMS:
            raise _TooMany(f"has more than MAX_ATOMS = {MAX_ATOMS} atoms")
    x.setflags(write=False)
    logp.setflags(write=False)
    return x, logp, tuple(windows), pruned, pruned_count


def schedule_atoms(accounting: Accounting, log_tol: float = _LOG_TOL) -> ScheduleAtoms:
    """The atoms of X and the noise scale of an accounting with a schedule (the atoms are
    cached per step-size groups, q and `log_tol`; the noise multiplier does not enter).

    Raises:
        ValueError: the accounting has no schedule, or X has too many atoms (module
            docstring; the message names the schedule and the alternative).
    """
    if accounting.step_sizes is None:
        raise ValueError("schedule_atoms needs an Accounting with step_sizes, got None")
    groups, scale = _groups(accounting)
    try:
        parts = _atoms(groups, accounting.sampling_prob, float(log_tol))
    except _TooMany as err:
        raise ValueError(
            f"the last-iterate heuristic at this learning-rate schedule "
            f"({accounting.describe_step_sizes()}) needs the law of X = sum_t eta_t b_t "
            f"over the canary steps, which here ({len(groups)} distinct step sizes over "
            f"{accounting.num_canary_steps} canary steps, q = {accounting.sampling_prob:g}) "
            f"{err}; its closed form is refused. Compute the linear process at this "
            "schedule exactly with advsim.exact.last_iterate_epsilon(advsim.mechanisms."
            "PiecewiseConstruction.linear_loss(steps, q, sigma, step_sizes=..., "
            "canary_schedule=...)), or use fewer distinct step sizes over the canary steps"
        ) from None
    return ScheduleAtoms(*parts, scale)


def schedule_batch(
    accounting: Accounting, log_tol: float = _LOG_TOL
) -> tuple[_Batch, ScheduleAtoms]:
    """The one-row `_Batch` of the pair in noise units, z = x / s, and its atoms."""
    atoms = schedule_atoms(accounting, log_tol)
    s = accounting.noise_multiplier * atoms.scale
    return _Batch((atoms.x / s)[None, :], np.array(atoms.logp)[None, :]), atoms


def schedule_epsilon(delta: float, accounting: Accounting) -> float:
    """eps(delta) of N(X, s^2) vs N(0, s^2) at the accounting's schedule (checked delta)."""
    batch, _ = schedule_batch(accounting)
    return float(batch.epsilon(delta)[0])


def schedule_delta(eps: float, accounting: Accounting) -> float:
    """delta(eps) of N(X, s^2) vs N(0, s^2) at the accounting's schedule (checked eps).

    Far out the answer is 0 without the solver, as in `heuristic_delta`: with z the
    largest atom in noise units, delta_+(eps) <= Phi(z - eps / z) < 1e-349 once
    eps >= z (z + 40); delta_- vanishes for eps >= -log p0 when X has an atom at 0
    (P >= p0 Q), and equals delta_+ when X is a point mass (two Gaussians).
    """
    batch, atoms = schedule_batch(accounting)
    z = float(batch.zmax[0])
    far = z * (z + 40.0)
    if atoms.x.size > 1:
        far = max(far, -float(atoms.logp[0])) if atoms.x[0] == 0.0 else math.inf
    if eps >= far:
        return 0.0
    return float(batch.delta(eps)[0])

"""Algorithm 5 of arXiv:2405.14457: `run_threshold_search` audits every threshold of an
`advsim.adversaries.ThresholdSearch` on the same runs' keys and keeps the best
(`ThresholdSearchResult`)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
from tqdm.auto import tqdm

from advsim._limits import check_trials
from advsim._mechanism import AbstractMechanism
from advsim._simulate import as_key, simulate
from advsim._validation import check_delta
from advsim.adversaries import ThresholdSearch
from advsim.audits import DEFAULT_THRESHOLD_SELECTION, AssumptionRejectedWarning, audit


@dataclasses.dataclass(frozen=True)
class ThresholdSearchResult:
    """The table of Algorithm 5: one audit per threshold, and the best.

    Attributes:
        alpha: the Type I error rates $\\alpha_i$.
        threshold: $h_i$.
        eps_lower, eps_point: the audits' epsilons per threshold (NaN where an audit
            gives none; its result says why).
        best: index of the largest `eps_lower`.
        results: the `AuditResult` of each threshold.
        confidence: the confidence at which `best_eps` holds: with
            `multiplicity="bonferroni"` every audit ran at `1 - (1 - confidence) / K`
            over the K thresholds, so the maximum holds at `confidence`; with `"none"`
            (the paper's practice) each audit ran at `confidence` and the maximum over
            K of them does NOT hold at it (say so wherever it is printed).
        multiplicity: `"bonferroni"` or `"none"`.
    """

    alpha: np.ndarray
    threshold: np.ndarray
    eps_lower: np.ndarray
    eps_point: np.ndarray
    best: int
    results: tuple
    confidence: float = 0.95
    multiplicity: str = "bonferroni"

    @property
    def best_threshold(self) -> float:
        return float(self.threshold[self.best])

    @property
    def best_eps(self) -> float:
        return float(self.eps_lower[self.best])

    def rows(self) -> list[dict]:
        """One dict per threshold (for CSV/JSON)."""
        return [
            {
                "alpha": float(a),
                "threshold": float(h),
                "eps_lower": None if np.isnan(lo) else float(lo),
                "eps_point": None if np.isnan(pt) else float(pt),
                "guarantee": r.guarantee.label,
                "assumption_rejected": r.assumption_rejected,
                "confidence_each": r.confidence,
                "threshold_selection": r.extras.get("threshold_selection"),
                "multiplicity": self.multiplicity,
                "mu_lower": float(r.extras.get("mu_lower", np.nan)),
                "mu_point": float(r.extras.get("mu_point", np.nan)),
            }
            for a, h, lo, pt, r in zip(
                self.alpha,
                self.threshold,
                self.eps_lower,
                self.eps_point,
                self.results,
                strict=True,
            )
        ]


def run_threshold_search(
    search,
    mechanism: AbstractMechanism,
    trials: int,
    key,
    *,
    delta: float = 1e-5,
    method: str = "eps_delta",
    confidence: float = 0.95,
    threshold_selection: str = DEFAULT_THRESHOLD_SELECTION,
    multiplicity: str = "bonferroni",
    chunk_size: int | None = None,
    progress: bool = False,
) -> ThresholdSearchResult:
    """Algorithm 5 of arXiv:2405.14457: audits $A_S^{h_i}$ for every threshold of a search.

    The search (`advsim.adversaries.ThresholdSearch`) gives the thresholds
    (`search.thresholds(mechanism)`) and the adversary of each (`search.adversary(h)`);
    every threshold is simulated with the same runs' keys and audited.

    The best of K audits is a maximum over K statistics: with
    `multiplicity="bonferroni"` (default) each audit runs at confidence
    `1 - (1 - confidence) / K`, so that `best_eps` holds at `confidence` (union
    bound); `"none"` reproduces the paper's Algorithm 5, each audit at `confidence`,
    and the result records that the maximum is not covered.

    Args:
        search: a `ThresholdSearch`.
        mechanism: a `ThresholdLandscape` (its own threshold is replaced).
        trials: runs per world for each threshold.
        key: a `jax.random.key` or int seed, shared by every threshold (common random
            numbers: the thresholds are compared on the same noise draws).
        delta, method, confidence, threshold_selection: as `advsim.audits.audit`. The
            method defaults to the assumption-free `"eps_delta"`; the paper audits with
            `"gdp"` (Nasr et al. 2023), whose Gaussian assumption the threshold
            landscape does not meet (its eps can exceed the exact one several times):
            pass `method="gdp"` to reproduce the paper's numbers, with
            `threshold_selection="split"` (half of the runs choose the threshold of
            each audit, the other half audit it).
        multiplicity: `"bonferroni"` or `"none"` (see above).
        chunk_size: as `advsim.simulate`.
        progress: a tqdm bar over the thresholds.

    Returns:
        A `ThresholdSearchResult`.
    """
    trials = check_trials("trials", trials)
    delta = check_delta("delta", delta)
    if multiplicity not in ("bonferroni", "none"):
        raise ValueError(f"multiplicity must be 'bonferroni' or 'none', got {multiplicity!r}")
    key = as_key(key)
    hs = search.thresholds(mechanism)
    each = confidence
    if multiplicity == "bonferroni":
        each = 1.0 - (1.0 - confidence) / len(hs)
    results = []
    # One warning for the search, not one per threshold (see below).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AssumptionRejectedWarning)
        for h in tqdm(hs, desc="thresholds", disable=not progress):
            scores = simulate(mechanism, search.adversary(h), trials, key, chunk_size=chunk_size)
            results.append(
                audit(
                    scores,
                    method,
                    delta=delta,
                    accounting=mechanism.accounting(),
                    confidence=each,
                    threshold_selection=threshold_selection,
                )
            )
    rejected = sum(bool(r.assumption_rejected) for r in results)
    if rejected:
        warnings.warn(
            AssumptionRejectedWarning(
                f"{rejected} of {len(results)} {method!r} audits of the threshold search "
                "had their assumption rejected by the held-out runs (see each row's "
                "assumption_rejected); their eps_lower rests on it"
            ),
            stacklevel=2,
        )
    lower = np.array([np.nan if r.eps_lower is None else r.eps_lower for r in results])
    point = np.array([np.nan if r.eps_point is None else r.eps_point for r in results])
    return ThresholdSearchResult(
        alpha=np.asarray(search.alphas),
        threshold=hs,
        eps_lower=lower,
        eps_point=point,
        best=int(np.nanargmax(lower)) if np.any(np.isfinite(lower)) else 0,
        results=tuple(results),
        confidence=confidence,
        multiplicity=multiplicity,
    )


def threshold_search(
    mechanism: AbstractMechanism, trials: int, key, *, alphas=None, **kwargs
) -> ThresholdSearchResult:
    """Algorithm 5 of arXiv:2405.14457 over the Type I error rates `alphas` (default: the
    grid of `advsim.adversaries.ThresholdSearch`): `run_threshold_search(
    ThresholdSearch(alphas), mechanism, trials, key, **kwargs)`; see there for the
    keyword arguments."""
    return run_threshold_search(ThresholdSearch(alphas), mechanism, trials, key, **kwargs)

r"""The loss-landscape adversary $A_S^h$ and the threshold search of Algorithm 5.

Section 6 and Appendix F of Cebere, Bellet & Papernot, "Tighter Privacy Auditing of
DP-SGD in the Hidden State Threat Model" (arXiv:2405.14457, ICLR 2025).

- `ThresholdAdversary` is $A_S^h$: it crafts the landscape of
  `advsim.mechanisms.ThresholdLandscape` with threshold h (default $h^* = C/2$) and
  scores the last model by its coordinate $\theta_T$ (higher means "canary in": the
  canary moved $\theta_1$ up by C and the landscape keeps the side).
- `ThresholdSearch` is Algorithm 5 (Appendix F; "Algorithm 6" is its caption in the arXiv
  version): a grid of Type I error rates $\alpha_i$, thresholds
  $h_i = F^{-1}(1 - \alpha_i)$ with F the CDF of the out-world law of $\theta_1$,
  $\mathcal{N}(0, \sigma^2 C^2)$ (the test "$\theta_1 > h_i$" then has Type I error
  $\alpha_i$), one landscape per $h_i$, each audited on the same runs' keys, and the
  best kept.

A note on the maximum: each audit's `eps_lower` holds with its confidence c; the maximum
over d thresholds holds with confidence $1 - d(1 - c)$ only (union bound). Pass
`confidence` accordingly (e.g. $1 - 0.05/d$) when the maximum itself is the claim; the
paper reports the maximum of GDP estimates.
"""

from __future__ import annotations

import dataclasses
import warnings

import equinox as eqx
import jax
import numpy as np
import scipy.stats
from jaxtyping import Array, Float

from advsim._adversary import AbstractAdversary
from advsim._mechanism import AbstractMechanism
from advsim._validation import check_delta, check_int

__all__ = ["ThresholdAdversary", "ThresholdSearch", "ThresholdSearchResult", "threshold_search"]


def _check_landscape(mechanism) -> None:
    if not hasattr(mechanism, "threshold") or not hasattr(mechanism, "batch_size"):
        raise TypeError(
            f"needs an advsim.mechanisms.ThresholdLandscape, got {type(mechanism).__name__}"
        )


class ThresholdAdversary(AbstractAdversary):
    r"""$A_S^h$ (Section 6 of arXiv:2405.14457): the landscape's threshold h, score $\theta_T$.

    Args:
        threshold: h (default None: the mechanism's own, $h^* = C/2$ unless set).

    Example:
        >>> from advsim.mechanisms import ThresholdLandscape
        >>> mech = ThresholdAdversary(threshold=0.3).craft(ThresholdLandscape(2, 1.0, 4))
        >>> float(mech.threshold)
        0.3
    """

    # A traced 0-d array (not static), so a threshold grid reuses one compiled simulation.
    threshold: np.ndarray | None

    def __init__(self, threshold: float | None = None):
        if threshold is not None:
            value = float(threshold)
            if not np.isfinite(value):
                raise ValueError(f"threshold must be a finite number or None, got {threshold!r}")
            threshold = np.asarray(value, np.float64)
        self.threshold = threshold

    def craft(self, mechanism: AbstractMechanism) -> AbstractMechanism:
        _check_landscape(mechanism)
        if self.threshold is None:
            return mechanism
        return eqx.tree_at(lambda m: m.threshold, mechanism, self.threshold)

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        model = release if release.ndim == 1 else release[-1]
        return (model - mechanism.init_model())[0]


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


class ThresholdSearch(eqx.Module):
    r"""Algorithm 5 of arXiv:2405.14457 (Appendix F) as an adversary variant.

    $h_i = \sigma C\, \Phi^{-1}(1 - \alpha_i)$ for each $\alpha_i$ in `alphas`; each
    $A_S^{h_i}$ (`ThresholdAdversary`) is audited by `run`, and the maximum is returned.
    The paper's grid is `linspace(0, Phi(C / (2 sigma^2)), d)`; its first point,
    $\alpha = 0$, gives $h = +\infty$ (never "above"), so the default grid is d points
    evenly spaced strictly inside (0, 1).

    Args:
        alphas: Type I error rates in (0, 1) (default: 19 points 0.05, ..., 0.95).

    Example:
        >>> from advsim.mechanisms import ThresholdLandscape
        >>> search = ThresholdSearch(alphas=[0.5])
        >>> search.thresholds(ThresholdLandscape(2, 1.0, 4)).tolist()
        [0.0]
    """

    alphas: tuple = eqx.field(static=True)

    def __init__(self, alphas=None):
        if alphas is None:
            alphas = np.linspace(0.0, 1.0, 21)[1:-1]
        a = np.atleast_1d(np.asarray(alphas, np.float64))
        if a.ndim != 1 or a.size == 0 or not np.all((a > 0) & (a < 1)):
            raise ValueError(
                f"alphas must be a non-empty list of numbers in (0, 1), got {alphas!r}"
            )
        self.alphas = tuple(float(x) for x in a)

    def thresholds(self, mechanism: AbstractMechanism) -> np.ndarray:
        """$h_i$: the $(1 - \\alpha_i)$ quantiles of $\\theta_1$ out, $N(0, \\sigma^2 C^2)$."""
        _check_landscape(mechanism)
        scale = float(mechanism.noise_multiplier) * float(mechanism.clip_norm)
        return scipy.stats.norm.isf(np.asarray(self.alphas), scale=scale)

    def run(
        self,
        mechanism: AbstractMechanism,
        trials: int,
        key,
        *,
        delta: float = 1e-5,
        method: str = "gdp",
        confidence: float = 0.95,
        threshold_selection: str = "split",
        multiplicity: str = "bonferroni",
        chunk_size: int | None = None,
        progress: bool = False,
    ) -> ThresholdSearchResult:
        """Audits $A_S^{h_i}$ for every threshold, with the same runs' keys for each.

        The best of K audits is a maximum over K statistics: with
        `multiplicity="bonferroni"` (default) each audit runs at confidence
        `1 - (1 - confidence) / K`, so that `best_eps` holds at `confidence` (union
        bound); `"none"` reproduces the paper's Algorithm 5, each audit at `confidence`,
        and the result records that the maximum is not covered.

        Args:
            mechanism: a `ThresholdLandscape` (its own threshold is replaced).
            trials: runs per world for each threshold.
            key: a `jax.random.key` or int seed, shared by every threshold (common random
                numbers: the thresholds are compared on the same noise draws).
            delta, method, confidence, threshold_selection: as `advsim.audits.audit`.
            multiplicity: `"bonferroni"` or `"none"` (see above).
            chunk_size: as `advsim.simulate`.
            progress: a tqdm bar over the thresholds.

        Returns:
            A `ThresholdSearchResult`.
        """
        from tqdm.auto import tqdm

        import advsim
        from advsim.audits import AssumptionRejectedWarning, audit

        trials = check_int("trials", trials, minimum=2)
        delta = check_delta("delta", delta)
        if multiplicity not in ("bonferroni", "none"):
            raise ValueError(
                f"multiplicity must be 'bonferroni' or 'none', got {multiplicity!r}"
            )
        if isinstance(key, int):
            key = jax.random.key(key)
        hs = self.thresholds(mechanism)
        each = confidence
        if multiplicity == "bonferroni":
            each = 1.0 - (1.0 - confidence) / len(hs)
        results = []
        # One warning for the search, not one per threshold (see below).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AssumptionRejectedWarning)
            for h in tqdm(hs, desc="thresholds", disable=not progress):
                scores = advsim.simulate(
                    mechanism, ThresholdAdversary(float(h)), trials, key, chunk_size=chunk_size
                )
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
            alpha=np.asarray(self.alphas),
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
    """Algorithm 5 of arXiv:2405.14457: `ThresholdSearch(alphas).run(mechanism, ...)`."""
    return ThresholdSearch(alphas).run(mechanism, trials, key, **kwargs)

"""Guarantee: what an audit's `eps_lower` certifies, and what it rests on.

Every `AuditResult` carries one `Guarantee`, so that a table, a plot or a JSON reader can
tell a rigorous bound from a number that rests on an assumption, without knowing the
method. It answers three questions:

- *statement*: what kind of claim `eps_lower` is. Every audit in `advsim.audits` states an
  (eps, delta) lower bound (`"eps_delta_lower_bound"`): with probability at least
  `confidence`, the run is not (eps, delta)-DP for any eps < `eps_lower`.
- *assumption*: what the statement needs besides the runs: `"none"`, `"gaussian_tradeoff"`
  (the run's trade-off curve is G_mu for some mu: the GDP audit's conversion from mu to
  eps) or `"heuristic_family"` (the run's privacy is that of the last-iterate heuristic's
  family with known T and q: the family audit).
- *held_out*: whether the threshold(s) were chosen on runs disjoint from those the rates
  were counted on. Choosing and counting on the same runs (the papers' practice) ignores
  the selection, and the interval can be too narrow.

`rigorous` is true only for an assumption-free, held-out bound. `certified` adds what the
same runs prove without any assumption when `eps_lower` itself needs one (the GDP audit:
"not mu-GDP for any mu < mu_lower"), or a second assumption-free statement (the trade-off
audit: the curve of composition that the rates certifiably violate).
"""

from __future__ import annotations

import dataclasses

__all__ = ["ASSUMPTIONS", "STATEMENTS", "Guarantee"]

STATEMENTS = {
    "eps_delta_lower_bound": "an (eps, delta) lower bound: the run is not (eps, delta)-DP "
    "for any eps < eps_lower",
    # A Bayesian statement is about the posterior, not about repeated runs: it is never
    # `rigorous`, and its result type (`audits.BayesianEstimate`) has no `eps_lower`.
    "eps_credible_interval": "a Bayesian credible interval for eps: the posterior puts "
    "probability `credibility` on it; not a confidence bound, no frequentist guarantee",
}
"""The kinds of claim an audit's number can make."""
ASSUMPTIONS = {
    "none": "no assumption about the mechanism",
    "gaussian_tradeoff": "the run's trade-off curve is exactly Gaussian (G_mu for some mu)",
    "heuristic_family": "the run's privacy is exactly that of the last-iterate heuristic's "
    "family Binomial(n_c, q) + N(0, T sigma^2) vs N(0, T sigma^2), with known T, q, n_c",
    "bound_family": "the run's trade-off curve is exactly one of a named bound's curves "
    "(composition, the max-over-steps heuristic) at known T, q, canary steps, indexed by "
    "the noise multiplier (the one-run f-DP audit's eps)",
    "subsampled_gaussian_tradeoff": "the run's trade-off curve is exactly that of one step "
    "of the Poisson-subsampled Gaussian at a known sampling rate q, for some mu",
    "jeffreys_prior": "independent Jeffreys Beta(1/2, 1/2) priors on the test's FPR and FNR "
    "(the credible interval is a property of that posterior)",
}
"""What a claim may rest on besides the runs."""
_SHORT = {
    "none": "",
    "gaussian_tradeoff": "assumes Gaussian",
    "heuristic_family": "assumes family",
    "bound_family": "assumes bound family",
    "subsampled_gaussian_tradeoff": "assumes subsampled Gaussian",
    "jeffreys_prior": "credible interval",
}


@dataclasses.dataclass(frozen=True)
class Guarantee:
    """What an audit's `eps_lower` certifies.

    Attributes:
        statement: a key of `STATEMENTS`.
        assumption: a key of `ASSUMPTIONS`: what `eps_lower` needs besides the runs.
        held_out: True iff every threshold behind `eps_lower` was chosen on runs disjoint
            from those its rates were counted on.
        multiplicity: how a choice among many tests was accounted for, in words (e.g.
            "one threshold chosen on the other half" or "Bonferroni over 2 thresholds").
        certified: an assumption-free statement the same runs support at the same
            confidence, when there is one beyond `eps_lower` (else None).
    """

    statement: str
    assumption: str
    held_out: bool
    multiplicity: str
    certified: str | None = None

    def __post_init__(self):
        if self.statement not in STATEMENTS:
            raise ValueError(
                f"statement must be one of {sorted(STATEMENTS)}, got {self.statement!r}"
            )
        if self.assumption not in ASSUMPTIONS:
            raise ValueError(
                f"assumption must be one of {sorted(ASSUMPTIONS)}, got {self.assumption!r}"
            )

    @property
    def rigorous(self) -> bool:
        """True iff `eps_lower` is an assumption-free bound with a held-out threshold
        (never for a credible interval, which is no confidence statement)."""
        return (
            self.statement == "eps_delta_lower_bound"
            and self.assumption == "none"
            and self.held_out
        )

    @property
    def label(self) -> str:
        """A short tag for tables and plots: "rigorous", "assumes Gaussian",
        "assumes family" (the heuristic's), "assumes bound family" (composition's or the
        max-over-steps heuristic's curves), "credible interval", "optimistic", or an
        assumption plus "optimistic"."""
        parts = [p for p in (_SHORT[self.assumption], "" if self.held_out else "optimistic") if p]
        return ", ".join(parts) or "rigorous"

    @property
    def description(self) -> str:
        """One sentence: the statement, what it rests on, how the threshold was chosen."""
        text = f"{STATEMENTS[self.statement]}; assumes {ASSUMPTIONS[self.assumption]}"
        text += (
            "; threshold chosen on held-out runs"
            if self.held_out
            else "; threshold chosen on the runs it is counted on (optimistic)"
        )
        text += f" ({self.multiplicity})"
        if self.certified:
            text += f". Assumption-free: {self.certified}"
        return text

    def to_dict(self) -> dict:
        """The fields plus `rigorous`, `label` and `description`, JSON-ready."""
        return {
            **dataclasses.asdict(self),
            "rigorous": self.rigorous,
            "label": self.label,
            "description": self.description,
        }

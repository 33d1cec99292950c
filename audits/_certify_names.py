"""The names of the bounds a violation certificate tests, the search it runs over each
bound's family, and what it states in words (its sentence, its reference's label)."""

from __future__ import annotations

#: How `eps_equivalent` is named wherever it is printed: an index of the violated curve on
#: the bound's epsilon scale, never an epsilon of the release.
_EPS_NAMES = {
    "heuristic": "heuristic curve index eps_equiv",
    "heuristic_max_over_steps": "max-over-steps heuristic curve index eps_equiv",
    "composition": "composition curve index eps_equiv",
    "gdp": "GDP curve index eps_equiv",
}
_CURVE_NAMES = {
    "heuristic": "the last-iterate heuristic's curve",
    "heuristic_max_over_steps": "the max-over-steps heuristic's curve (convex minorant of "
    "min_t f_t)",
    "composition": "composition's curve",
    "gdp": "the mu-GDP curve G_mu",
}
#: The search covers indices within this factor of the reference (sigma or mu), both ways.
_SEARCH_FACTOR = 2.0**12
#: Where the "gdp" search starts without accounting or reference.
_SEARCH_START_MU = 1.0


def _statement(bound, certified, star, at_limit, reference, ref_label, eps, delta, c, m) -> str:
    """One sentence saying exactly what is certified (see `ViolationCertificate`)."""
    how = (
        f"With confidence {c:g} (Clopper-Pearson bounds on the held-out rates of {m} "
        f"threshold test{'s' if m > 1 else ''})"
    )
    curve = _CURVE_NAMES[bound]
    eps_txt = ""
    if eps is not None and certified:
        eps_txt = (
            f" ({_EPS_NAMES[bound]} = {eps:.4g} at delta = {delta:g}: an index of that curve, "
            "not an epsilon of the release)"
        )
    if bound == "gdp":
        start = _SEARCH_START_MU if reference is None else reference
        if star is None:
            return (
                f"{how}, no G_mu with mu >= {start / _SEARCH_FACTOR:.3g} is certifiably "
                "violated: nothing is certified."
            )
        edge = " (the edge of the search; larger mu may be violated too)" if at_limit else ""
        if reference is None:
            ref = ""
        elif certified:
            ref = f"; this includes {ref_label} mu = {reference:.4g}"
        else:
            ref = f"; {ref_label} mu = {reference:.4g} is not certifiably violated"
        return (
            f"{how}, the release's trade-off curve lies below G_mu at mu* = {star:.4g}"
            f"{edge}{eps_txt}, hence the release is not mu-GDP for any mu <= {star:.4g}"
            f"{ref}."
        )
    if star is None:
        return (
            f"{how}, {curve} is not certifiably violated at any noise multiplier up to "
            f"{reference * _SEARCH_FACTOR:.3g} ({ref_label} is {reference:.4g}): nothing "
            "is certified."
        )
    edge = " (the edge of the search; smaller ones may be violated too)" if at_limit else ""
    if certified:
        own = f", including {ref_label} {reference:.4g}"
        if ref_label.startswith("the run's"):
            own += ": the release is a counterexample to this bound"
    else:
        own = f"; not at {ref_label} {reference:.4g}"
    return (
        f"{how}, the release's trade-off curve lies below {curve} at noise multiplier "
        f"sigma* = {star:.4g}{edge}{eps_txt} and at every larger noise multiplier{own}. "
        "That is: the release is not (eps', delta(eps'))-DP for some eps' >= 0, with that "
        "curve's delta(eps'); it is not a lower bound on the release's own epsilon at a "
        "given delta."
    )


def _reference_label(bound: str, user_reference: bool) -> str:
    """How the statement names the reference index: given, or the run's own."""
    if bound == "gdp":
        return "the given" if user_reference else "the run's full-batch"
    return "the given noise multiplier" if user_reference else "the run's own noise multiplier"

r"""What a scalar field construction certifies about its losses (`ProcessFacts`).

Read off each `ScalarField` term by term (every bound is valid for the whole field, not
only where it was sampled):

- slopes: $g' \in [\underline{s}, \overline{s}]$ with $\underline{s} = b + \sum_k
  \min(c_k, 0) + \sum_j \min(d_j, 0)/w_j$ ($-\infty$ with a negative jump) and
  $\overline{s}$ likewise ($+\infty$ with a positive jump): convexity ($\underline{s} \ge
  0$), strong convexity ($\underline{s} > 0$), smoothness ($\max(|\underline s|,
  |\overline s|)$);
- $|g|$ on the domain: the end values when $g$ is nondecreasing, else the sum of each
  term's largest magnitude there (inf on the real line for a non-zero slope or knot);
- Holder constants of exponent $\beta$: $\min(M D^{1-\beta},\ M^\beta (2S)^{1-\beta})$ for
  the field's Lipschitz part, with smoothness $M$ and $|g| \le S$ on a domain of diameter
  $D$ ($|g(x) - g(y)| \le \min(M|x - y|, 2S)$), plus $|h|\,2^{1-\gamma} D^{\gamma-\beta}$
  for each root term $h\,\mathrm{sign}(m - \rho)|m - \rho|^\gamma$ (inf with a jump).
"""

from __future__ import annotations

import math

import numpy as np

from advsim.bounds._assumptions import ProcessFacts, run_facts
from advsim.mechanisms.fields import ScalarField


def smoothness(field) -> float:
    lo, hi = field.slope_bounds()
    return max(abs(lo), abs(hi))


def sup_abs(field, radius: float) -> float:
    """A bound on |g| over [-radius, radius] (radius inf: the real line)."""
    if math.isfinite(radius):
        return field.sup_abs(-radius, radius)
    if float(field.slope) != 0.0 or np.any(field.knot_slopes) or np.any(field.root_heights):
        return math.inf
    return float(
        abs(float(field.offset))
        + np.sum(np.abs(field.bump_heights))
        + np.sum(np.abs(field.jump_heights))
    )


def _without_roots(field):
    return ScalarField(
        float(field.offset), float(field.slope), knots=field.knots,
        knot_slopes=field.knot_slopes, bump_centres=field.bump_centres,
        bump_heights=field.bump_heights, bump_widths=field.bump_widths, jumps=field.jumps,
        jump_heights=field.jump_heights,
    )  # fmt: skip


def holder_constant(field, beta: float, radius: float) -> float:
    r"""A Holder constant of exponent `beta` of g on [-radius, radius] (see the module):
    the Lipschitz part's, plus each root term's $|h|\,2^{1-\gamma} D^{\gamma - \beta}$
    ($\gamma \ge \beta$; inf for $\gamma < \beta$, or $\gamma > \beta$ on the line)."""
    if np.any(field.jump_heights):
        return math.inf
    diameter = 2.0 * radius
    smooth = _without_roots(field)
    m = smoothness(smooth)
    total = 0.0
    if m > 0.0:
        if beta >= 1.0:
            total = m
        else:
            total = m**beta * (2.0 * sup_abs(smooth, radius)) ** (1.0 - beta)
            if math.isfinite(diameter):
                total = min(total, m * diameter ** (1.0 - beta))
    for h, gamma in zip(field.root_heights, field.root_exponents, strict=True):
        if h == 0.0:
            continue
        if gamma < beta or (gamma > beta and not math.isfinite(diameter)):
            return math.inf
        total += abs(h) * 2.0 ** (1.0 - gamma) * diameter ** (gamma - beta)
    return float(total)


def field_facts(mech) -> ProcessFacts:
    """The `ProcessFacts` of a `ScalarFieldConstruction` or
    `ProjectedScalarFieldConstruction` (see the module for how each is certified)."""
    radius = float(getattr(mech, "radius", math.inf))
    canary, reg = mech.canary, mech.regularizer
    groups = [g for g, n in zip(mech.groups, np.asarray(mech.counts), strict=True) if n > 0]
    counts = [int(n) for n in np.asarray(mech.counts) if n > 0]
    examples = [canary, *groups]
    slopes = [f.slope_bounds() for f in examples]
    reg_lo, reg_hi = reg.slope_bounds()
    # The objective in both worlds: without the canary, and with its loss added.
    out_lo = reg_lo + sum(n * g.slope_bounds()[0] for g, n in zip(groups, counts, strict=True))
    out_hi = reg_hi + sum(n * g.slope_bounds()[1] for g, n in zip(groups, counts, strict=True))
    obj_lo = min(out_lo, out_lo + slopes[0][0])
    obj_hi = max(out_hi, out_hi + slopes[0][1])
    fields = [*examples, reg]
    linear = all(f.is_constant() for f in fields)
    convex = all(f.slope_bounds()[0] >= 0.0 for f in fields)
    reg_zero = bool(reg.is_constant() and float(reg.offset) == 0.0)

    def holder(beta: float) -> float:
        return max(holder_constant(f, beta, radius) for f in examples)

    return run_facts(
        mech,
        num_examples=1 + int(np.sum(mech.counts)),
        radius=radius,
        init_in_domain=True,  # checked when built
        dimension=1,
        linear=linear,
        convex=convex,
        strong_convexity=float(obj_lo),
        objective_smoothness=float(max(abs(obj_lo), abs(obj_hi))),
        example_strong_convexity=float(min(lo for lo, _ in slopes)),
        smoothness=float(max(max(abs(lo), abs(hi)) for lo, hi in slopes)),
        regularizer_smoothness=float(max(abs(reg_lo), abs(reg_hi))),
        regularizer_lipschitz=sup_abs(reg, radius),
        regularizer_zero=reg_zero,
        lipschitz=float(max(sup_abs(f, radius) for f in examples)),
        holder=holder,
        source=f"{type(mech).__name__}'s fields, term by term",
    )

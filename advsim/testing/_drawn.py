r"""Scalar constructions drawn to meet a stated set of assumptions (`constructions`).

The fields are *built* to have each property, never filtered for it:

- `Linear`: every field constant, no projection;
- `Convex`: every term of every field nondecreasing (a convex loss);
- `StronglyConvex(of="objective")`: an affine regularizer of slope $\alpha > m$ on top;
  `StronglyConvex(of="examples")`: slope $\alpha$ added to every example's field;
- `Smooth`: no jumps; `HolderGradients(beta)`: no jumps and, unless a smoothness is asked
  for too, Holder root terms h sign(m - rho)|m - rho|^gamma (continuous, not Lipschitz)
  with gamma in [beta, 1] on a bounded domain and gamma = beta on the line (where the
  Lipschitz part is kept bounded);
- `LipschitzWithinClip`: each example's field rescaled so that $|g| \le G \le C$ on the
  domain (on the real line only bounded terms: offsets and tanh bumps);
- `BoundedDomain`: projected onto $[-R, R]$, the start inside;
- `FullBatch` / `PoissonBatches` / `CyclicBatches`: fixed batching with $q = 1$ / Poisson
  sampling of every example, the canary too / the canary once per epoch of k steps;
- `StepSizeAtMost`: every field rescaled so that the step-size limit holds;
- `RegularizerAsExample`: the regularizer's gradient within C on the domain.

Each draw's `facts()` meets every assumption by construction; `check_bound` asserts it
again, and the tests check the properties on a fine grid, independently of the facts.
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from advsim import bounds
from advsim._schedule import CanarySchedule
from advsim.bounds import Assumption
from advsim.testing._exact import _STEPS, _choice, _logs, _uniform, scalar_fields
from advsim.testing._fields import (
    ProjectedScalarFieldConstruction,
    ScalarField,
    ScalarFieldConstruction,
)
from advsim.testing._strategies import _field, _log_uniform

__all__ = ["constructions"]

_KNOWN = (
    bounds.BoundedDomain,
    bounds.ConstantStepSize,
    bounds.Convex,
    bounds.CyclicBatches,
    bounds.FullBatch,
    bounds.HolderGradients,
    bounds.Linear,
    bounds.LipschitzWithinClip,
    bounds.PoissonBatches,
    bounds.RegularizerAsExample,
    bounds.Smooth,
    bounds.StepSizeAtMost,
    bounds.StronglyConvex,
)


def _find(assumptions, kind):
    return [a for a in assumptions if isinstance(a, kind)]


def constructions(
    assumptions=(),
    *,
    steps=None,
    noise_multiplier=(0.5, 4.0),
    learning_rate=(0.1, 1.0),
    sampling_prob=(0.05, 1.0),
    radius=(0.5, 20.0),
    groups=(0, 2),
    knots: int = 1,
    bumps: int = 1,
    jumps: int = 1,
) -> st.SearchStrategy:
    """1-D DP-SGD constructions whose `facts()` meet every assumption in `assumptions`.

    Args:
        assumptions: `advsim.bounds.Assumption` values (a bound's `assumptions`).
        steps: T (default one of 1, 2, 5, 10), a pair, a strategy or a value.
        noise_multiplier, learning_rate, sampling_prob: ranges (log-uniform) or values;
            the clip norm is 1 (every bound here is invariant to it).
        radius: R of a projected run, in units of the step's noise sd lr * sigma * C.
        groups: data groups (1-3 examples each).
        knots, bumps, jumps: terms per field (unused terms weigh 0; the shape is fixed,
            so draws share the exact engine's compilations).

    Returns:
        A strategy of `ScalarFieldConstruction` / `ProjectedScalarFieldConstruction`.

    Raises:
        ValueError: for an assumption this strategy cannot build, or a set that no 1-D
            construction meets (e.g. strongly convex examples, Lipschitz on the line).
    """
    assumptions = tuple(assumptions)
    for a in assumptions:
        if not isinstance(a, Assumption):
            raise TypeError(f"assumptions must be Assumption values, got {a!r}")
        if not isinstance(a, _KNOWN):
            raise ValueError(
                f"constructions cannot build {type(a).__name__} (it builds "
                f"{', '.join(k.__name__ for k in _KNOWN)})"
            )
    linear = bool(_find(assumptions, bounds.Linear))
    bounded = bool(_find(assumptions, bounds.BoundedDomain))
    if linear and bounded:
        raise ValueError("Linear (no projection) and BoundedDomain cannot both hold")
    batch_kinds = [
        k
        for k in (bounds.FullBatch, bounds.PoissonBatches, bounds.CyclicBatches)
        if _find(assumptions, k)
    ]
    if len(batch_kinds) > 1:
        raise ValueError(f"batching: {[k.__name__ for k in batch_kinds]} cannot all hold")
    strong = _find(assumptions, bounds.StronglyConvex)
    convex = bool(_find(assumptions, bounds.Convex) or strong)
    strong_examples = [a for a in strong if a.of == "examples"]
    strong_objective = [a for a in strong if a.of == "objective"]
    smooth = bool(_find(assumptions, bounds.Smooth) or _find(assumptions, bounds.HolderGradients))
    # A beta < 1 Holder constant on the line needs bounded terms (min(M h, 2S) <= M^b
    # (2S)^(1-b) h^b); on a bounded domain every Lipschitz field is Holder.
    holder_bounded = any(a.beta < 1.0 for a in _find(assumptions, bounds.HolderGradients))
    lipschitz = bool(_find(assumptions, bounds.LipschitzWithinClip))
    reg_within = bool(_find(assumptions, bounds.RegularizerAsExample))
    limits = _find(assumptions, bounds.StepSizeAtMost)
    # Genuinely Holder fields (root terms, not Lipschitz) where nothing asks for a finite
    # smoothness: exponents in [beta, 1] on a bounded domain, beta itself on the line.
    betas = sorted({a.beta for a in _find(assumptions, bounds.HolderGradients)})
    root_terms = (
        1
        if betas and betas[-1] < 1.0 and not _find(assumptions, bounds.Smooth) and not limits
        and not (lipschitz and not bounded) and (bounded or len(betas) == 1)
        else 0
    )  # fmt: skip
    if strong_examples and lipschitz and not bounded:
        raise ValueError(
            "strongly convex examples have unbounded gradients on the real line: "
            "LipschitzWithinClip needs BoundedDomain with StronglyConvex(of='examples')"
        )
    if strong and linear:
        raise ValueError("Linear and StronglyConvex cannot both hold")
    if strong_objective and reg_within and not bounded:
        raise ValueError(
            "a strongly convex regularizer has unbounded gradients on the real line: "
            "RegularizerAsExample needs BoundedDomain with StronglyConvex(of='objective')"
        )

    steps_s = _field(
        steps,
        st.sampled_from(_STEPS),
        lambda *, min_value=1, max_value=10: st.integers(min_value, max_value),
    )
    sigma_s = _field(noise_multiplier, _log_uniform(0.5, 4.0), _logs(0.5, 4.0))
    lr_s = _field(learning_rate, _log_uniform(0.1, 1.0), _logs(0.1, 1.0))
    q_s = _field(sampling_prob, _log_uniform(0.05, 1.0), _logs(0.05, 1.0))
    r_s = _field(radius, _log_uniform(0.5, 20.0), _logs(0.5, 20.0))
    g_s = _field(
        groups,
        st.integers(0, 2),
        lambda *, min_value=0, max_value=2: st.integers(min_value, max_value),
    )
    projected_s = (
        st.just(True) if bounded else st.just(False) if linear else _choice(None, (False, True))
    )
    c = 1.0

    @st.composite
    def draw_one(draw):
        t, sigma, lr = draw(steps_s), draw(sigma_s), draw(lr_s)
        projected = draw(projected_s)
        noise_sd = lr * sigma * c
        radius = draw(r_s) * noise_sd if projected else math.inf
        if strong_objective and reg_within:
            # A regularizer of slope > m with |r'| <= C on [-R, R] needs R < C / m.
            m_min = max(a.minimum for a in strong_objective)
            if m_min > 0:
                radius = min(radius, c / (2.0 * m_min))
        n_groups = 0 if bounds.CyclicBatches in batch_kinds else draw(g_s)
        counts = [draw(st.integers(1, 3)) for _ in range(n_groups)]
        with_reg = not linear and draw(st.booleans()) or bool(strong_objective)
        n = 1 + sum(counts)
        # Batching.
        if bounds.FullBatch in batch_kinds:
            batching, q, schedule = "fixed", 1.0, CanarySchedule.every_step(sampled=False)
        elif bounds.PoissonBatches in batch_kinds:
            batching, q, schedule = "poisson", draw(q_s), CanarySchedule.every_step()
        elif bounds.CyclicBatches in batch_kinds:
            period = draw(st.integers(1, 3))
            batching, q = "fixed", 1.0
            schedule = CanarySchedule.every(period, sampled=False)
        else:
            batching = draw(st.sampled_from(("fixed", "poisson")))
            q = 1.0 if batching == "fixed" else draw(q_s)
            schedule = CanarySchedule.every_step(sampled=batching == "poisson")
        init = (radius if projected else noise_sd) * draw(_uniform(-1.0, 1.0)) * (1.0 - 1e-6)
        spread = radius if projected else noise_sd * (2.0 + 2.0 * math.sqrt(t))
        # The budget of the per-example smoothness M, from every step-size limit.
        n_reg = n + (1 if with_reg else 0)
        m_budget = math.inf
        for lim in limits:
            per = lim.factor / lr
            m_budget = min(m_budget, per / (n_reg if lim.of == "examples" else n_reg))
        alpha_ex = 0.0
        if strong_examples:
            # Above the minimum, within half the smoothness budget and, with a Lipschitz
            # limit, |alpha m| <= C/8 on the domain.
            m_min = max(a.minimum for a in strong_examples)
            top = min(m_budget, 1.0 / lr) / 2.0
            if lipschitz:
                top = min(top, c / (8.0 * radius))
            if not top > m_min:
                raise ValueError(
                    f"StronglyConvex(minimum={m_min:g}) leaves no room within the other "
                    f"assumptions (largest slope {top:.3g} at learning rate {lr:.3g})"
                )
            alpha_ex = m_min + (top - m_min) * draw(_uniform(0.05, 1.0))

        def example_field(is_canary: bool):
            if linear or (is_canary and draw(st.booleans())):
                value = (
                    -c * draw(st.sampled_from((1.0, 0.5)))
                    if not linear
                    else c * draw(st.one_of(st.sampled_from((-1.0, 1.0)), _uniform(-2.0, 2.0)))
                )
                if lipschitz:
                    room = c - (alpha_ex * radius if alpha_ex else 0.0)
                    value = math.copysign(min(abs(value), room), value)
                field = ScalarField.constant(value).padded(
                    knots=knots, bumps=bumps, jumps=jumps, roots=root_terms
                )
                return _with_slope(field, alpha_ex) if alpha_ex else field
            raw = draw(
                scalar_fields(
                    scale=c, centre=init, spread=spread, knots=knots, bumps=bumps,
                    jumps=0 if smooth else jumps, monotone=convex,
                    jump_margin=0.5 * noise_sd, roots=root_terms,
                    root_exponents=(betas[-1], 1.0 if projected else betas[-1])
                    if root_terms else (0.5, 1.0),
                )
            )  # fmt: skip
            if smooth:
                raw = raw.padded(knots=knots, bumps=bumps, jumps=jumps, roots=root_terms)
            if (lipschitz or holder_bounded) and not projected:  # bounded terms on the line
                raw = _bounded_part(raw)
            # Scaled to the budgets left after the strong convexity's slope alpha_ex
            # (|alpha m| <= alpha R on the domain, alpha to the smoothness), which is
            # added afterwards, so that scaling never weakens it.
            factor = 1.0
            if lipschitz:
                target = c * draw(_uniform(0.25, 1.0)) - (alpha_ex * radius if alpha_ex else 0.0)
                sup = _sup(raw, radius)
                factor = min(factor, target / sup if sup > 0 else 1.0)
            if math.isfinite(m_budget):
                m = _smooth(raw)
                room = m_budget - alpha_ex
                factor = min(factor, room / m if m > 0 else 1.0)
            if factor < 1.0:
                raw = raw.scaled(max(factor, 0.0) * (1.0 - 1e-9))
            return _with_slope(raw, alpha_ex) if alpha_ex else raw

        canary = example_field(True)
        fields = [example_field(False) for _ in range(n_groups)]
        if with_reg:
            reg = _regularizer(draw, strong_objective, lr, c, radius, init, m_budget,
                               convex, reg_within, n_reg, lipschitz)  # fmt: skip
        else:
            reg = ScalarField()
        kwargs = dict(
            canary=canary, groups=fields, counts=counts, regularizer=reg, init=init,
            clip_norm=c, learning_rate=lr, batching=batching, canary_schedule=schedule,
        )  # fmt: skip
        if projected:
            return ProjectedScalarFieldConstruction(t, q, sigma, radius=radius, **kwargs)
        return ScalarFieldConstruction(t, q, sigma, **kwargs)

    return draw_one()


def _with_slope(field: ScalarField, alpha: float) -> ScalarField:
    return ScalarField(
        float(field.offset), float(field.slope) + alpha, knots=field.knots,
        knot_slopes=field.knot_slopes, bump_centres=field.bump_centres,
        bump_heights=field.bump_heights, bump_widths=field.bump_widths, roots=field.roots,
        root_heights=field.root_heights, root_exponents=field.root_exponents,
        jumps=field.jumps, jump_heights=field.jump_heights,
    )  # fmt: skip


def _bounded_part(field: ScalarField) -> ScalarField:
    """The field without its slope and knots (its Lipschitz part bounded on the real
    line; root terms are kept)."""
    return ScalarField(
        float(field.offset), 0.0, knots=field.knots, knot_slopes=0.0 * field.knot_slopes,
        bump_centres=field.bump_centres, bump_heights=field.bump_heights,
        bump_widths=field.bump_widths, roots=field.roots, root_heights=field.root_heights,
        root_exponents=field.root_exponents, jumps=field.jumps,
        jump_heights=field.jump_heights,
    )  # fmt: skip


def _sup(field, radius):
    from advsim.testing._facts import sup_abs

    return sup_abs(field, radius)


def _smooth(field):
    from advsim.testing._facts import smoothness

    return smoothness(field)


def _regularizer(draw, strong_objective, lr, c, radius, init, m_budget, convex, within, n_reg,
                 lipschitz) -> ScalarField:  # fmt: skip
    """An affine regularizer alpha (m - centre) + offset: of slope > m for a strongly convex
    objective, >= 0 when convex, within the smoothness budget, |r'| <= C on the domain
    when it counts as an example."""
    m_min = max((a.minimum for a in strong_objective), default=0.0)
    top = min(m_budget, 1.0 / lr)
    if strong_objective:
        alpha = m_min + (top - m_min) * draw(_uniform(0.05, 1.0))
        if not alpha > m_min:
            alpha = m_min + 1e-3 * max(top, 1.0)
    elif convex:
        alpha = top * draw(_uniform(0.0, 1.0))
    else:
        alpha = draw(_uniform(-0.2, 1.0)) * top
    centre = init if not math.isfinite(radius) else radius * draw(_uniform(-1.0, 1.0))
    offset = 0.0
    if within:
        # |alpha (m - centre)| <= C on [-R, R] (R finite here: checked up front).
        room = c / (abs(alpha) * (radius + abs(centre))) if alpha else math.inf
        if room < 1.0:
            if strong_objective and alpha * room <= m_min:
                centre, room = 0.0, c / (abs(alpha) * radius)
            alpha = alpha * min(1.0, room) * (1.0 - 1e-9)
    return ScalarField(offset - alpha * centre, alpha)

r"""Random scalar constructions with a ground truth, for property tests (`advsim.testing`).

`advsim.exact.last_iterate_epsilon` computes the exact $\varepsilon(\delta)$ of the last
model of any scalar DP-SGD construction (`advsim.AbstractScalarLaw`). With it, a bound
or an audit can be tested against the truth on *random* constructions, not only on the
few with a closed form. This module supplies, over the fields and constructions of
`advsim.testing._fields` (`ScalarField`, `ScalarFieldConstruction`,
`ProjectedScalarFieldConstruction`):

- strategies that draw constructions meeting a bound's assumptions:
  `linear_constructions` (constant fields: Theorem 1 of arXiv:2410.06186, the
  last-iterate heuristic), `convex_constructions` (projected full-batch DP-GD on convex,
  Lipschitz, smooth losses: the shifted-interpolation bound of arXiv:2403.00278) and
  `scalar_constructions` (any field: composition, and audits), with `scalar_fields` and
  `construction_batches`;
- `assert_exact_below`: the exact epsilon of a batch of constructions never exceeds a
  bound, with the engine's own error estimate in the tolerance;
- `ExactLikelihoodScore`: the adversary that scores a release by the exact law's
  log-likelihood ratio (the Neyman-Pearson test), so that an audit of simulated runs can
  come close to the truth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypedDict, Unpack

from hypothesis import strategies as st

from advsim._schedule import CanarySchedule
from advsim._validation import (
    check_finite,
    check_int,
    check_keywords,
    check_nonnegative,
    check_positive,
)
from advsim.testing._exact_checks import (  # noqa: F401 (re-exported)
    ExactLikelihoodScore,
    _identity,
    assert_exact_below,
)
from advsim.testing._fields import (
    ProjectedScalarFieldConstruction,
    ScalarField,
    ScalarFieldConstruction,
)
from advsim.testing._strategies import _field, _log_uniform

__all__ = [
    "ExactLikelihoodScore",
    "RunRanges",
    "assert_exact_below",
    "construction_batches",
    "convex_constructions",
    "linear_constructions",
    "scalar_constructions",
    "scalar_fields",
]


# ----------------------------------------------------------------------------------------
# Strategies

_STEPS = (1, 2, 5, 10)


def _uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats on a grid of 2^16 + 1 points of [lo, hi], both ends included: no subnormal
    or nearly-zero oddities (hypothesis's floats favour them); hypothesis's integers lean
    towards 0, here the midpoint, which is also where they shrink."""
    lo, hi = float(lo), float(hi)
    half = 1 << 15
    return st.integers(-half, half).map(lambda k: lo + (hi - lo) * ((k + half) / (2 * half)))


def _logs(lo: float, hi: float):
    return lambda *, min_value=lo, max_value=hi: _log_uniform(min_value, max_value)


def _ints(lo: int, hi: int):
    return lambda *, min_value=lo, max_value=hi: st.integers(min_value, max_value)


def _choice(value, options: tuple) -> st.SearchStrategy:
    if value is None:
        return st.sampled_from(options)
    if isinstance(value, st.SearchStrategy):
        return value
    return st.just(value)


@st.composite
def _general_field(
    draw,
    *,
    scale: float,
    centre: float,
    spread: float,
    knots: int,
    bumps: int,
    jumps: int,
    monotone: bool,
    jump_margin: float,
    roots: int = 0,
    root_exponents: tuple[float, float] = (0.5, 1.0),
) -> ScalarField:
    """Any field of the family, of fixed shape (unused terms get weight 0), values of the
    order of `scale`, features within `spread` of `centre`, jumps at least `jump_margin`
    from `centre`."""
    signs = st.just(1.0) if monotone else st.sampled_from((-1.0, 1.0))

    def weight():
        # Each term on or off; when on, of weight 1/4 to 1 (signed), so that it shows.
        return draw(signs) * draw(_uniform(0.25, 1.0)) if draw(st.booleans()) else 0.0

    def position():
        return centre + spread * draw(_uniform(-1.0, 1.0))

    # |offset| in [scale / 2, 3 scale / 2] (its midpoint, where draws lean, is `scale`).
    offset = scale * draw(st.sampled_from((-1.0, 1.0))) * draw(_uniform(0.5, 1.5))
    slope = scale / spread * weight()
    ks = [position() for _ in range(knots)]
    cs = [2.0 * scale / spread * weight() for _ in range(knots)]
    es = [position() for _ in range(bumps)]
    ds = [scale * weight() for _ in range(bumps)]
    ws = [spread * draw(_log_uniform(0.05, 1.0)) for _ in range(bumps)]
    zs = [position() for _ in range(jumps)]
    zs = [
        z if abs(z - centre) >= jump_margin else centre + math.copysign(jump_margin, z - centre)
        for z in zs
    ]
    ss = [scale * weight() for _ in range(jumps)]
    # Root terms h sign(m - rho)|m - rho|^gamma of size ~scale at `spread` (drawn only
    # when asked for, so that the other strategies' draws are unchanged).
    gs = [draw(_uniform(*root_exponents)) for _ in range(roots)]
    rs = [position() for _ in range(roots)]
    hs = [scale * weight() / spread**g for g in gs]
    return ScalarField(
        offset,
        slope,
        knots=ks,
        knot_slopes=cs,
        bump_centres=es,
        bump_heights=ds,
        bump_widths=ws,
        roots=rs,
        root_heights=hs,
        root_exponents=gs,
        jumps=zs,
        jump_heights=ss,
    )


def scalar_fields(
    *,
    scale: float = 1.0,
    centre: float = 0.0,
    spread: float = 1.0,
    knots: int = 2,
    bumps: int = 1,
    jumps: int = 1,
    monotone: bool = False,
    jump_margin: float = 0.0,
    roots: int = 0,
    root_exponents: tuple[float, float] = (0.5, 1.0),
) -> st.SearchStrategy[ScalarField]:
    """`ScalarField`s of one shape: `knots` knots, `bumps` tanh bumps, `jumps` jumps (each
    term switched on or off at random, so constants, affine, piecewise-linear, bumpy and
    discontinuous fields all come up), values of the order of `scale`, knots, bump centres
    and jumps within `spread` of `centre`. `monotone=True` draws nondecreasing terms
    only (convex losses). Jumps lie at least `jump_margin` from `centre`. Fields of one
    shape share the exact engine's compilations. `roots` Holder root terms
    h sign(m - rho) |m - rho|^gamma (exponent drawn in `root_exponents`, within (0, 1])
    give continuous fields that are not Lipschitz.
    """
    scale = check_positive("scale", scale)
    spread = check_positive("spread", spread)
    centre = check_finite("centre", centre)
    sizes = {
        n: check_int(n, v, minimum=0)
        for n, v in (("knots", knots), ("bumps", bumps), ("jumps", jumps), ("roots", roots))
    }
    lo, hi = (float(v) for v in root_exponents)
    if not 0.0 < lo <= hi <= 1.0:
        raise ValueError(
            f"root_exponents must be (lo, hi) with 0 < lo <= hi <= 1, got {root_exponents!r}"
        )
    return _general_field(
        scale=scale,
        centre=centre,
        spread=spread,
        monotone=bool(monotone),
        jump_margin=check_nonnegative("jump_margin", jump_margin),
        root_exponents=(lo, hi),
        **sizes,
    )


class RunRanges(TypedDict, total=False):
    """The run's keywords that `linear_constructions` and `scalar_constructions` share.

    Each is, as in `dpsgd_params`, None (the default strategy), a pair `(lo, hi)`, a
    strategy, or a fixed value.

    Keys:
        steps: T (default one of 1, 2, 5, 10: T is static in the exact engine, each
            distinct T compiles once).
        sampling_prob: q (default log-uniform in [0.05, 1]).
        noise_multiplier: sigma (default log-uniform in [0.5, 4]).
        clip_norm: C (default 1).
        learning_rate: eta (default 1).
        groups: the number of data groups (default 0 to 2).
    """

    steps: int | tuple[int, int] | st.SearchStrategy[int] | None
    sampling_prob: float | tuple[float, float] | st.SearchStrategy[float] | None
    noise_multiplier: float | tuple[float, float] | st.SearchStrategy[float] | None
    clip_norm: float | tuple[float, float] | st.SearchStrategy[float] | None
    learning_rate: float | tuple[float, float] | st.SearchStrategy[float] | None
    groups: int | tuple[int, int] | st.SearchStrategy[int] | None


#: `RunRanges`' defaults (`None` is each key's default strategy in `_run_specs`).
_RUN_DEFAULTS = {
    "steps": None,
    "sampling_prob": (0.05, 1.0),
    "noise_multiplier": (0.5, 4.0),
    "clip_norm": 1.0,
    "learning_rate": 1.0,
    "groups": (0, 2),
}


def _run_specs(caller: str, run: dict) -> tuple:
    """`(T, q, sigma, C, lr, number of data groups)` strategies from a `RunRanges`
    (`_field`, over `_RUN_DEFAULTS`); an unknown key is a TypeError naming `caller`
    (`check_keywords`)."""
    check_keywords(caller, run, RunRanges)
    v = _RUN_DEFAULTS | run
    return (
        _field(v["steps"], st.sampled_from(_STEPS), _ints(1, 10)),
        _field(v["sampling_prob"], _log_uniform(0.05, 1.0), _logs(0.05, 1.0)),
        _field(v["noise_multiplier"], _log_uniform(0.5, 4.0), _logs(0.5, 4.0)),
        _field(v["clip_norm"], st.just(1.0), _logs(0.1, 10.0)),
        _field(v["learning_rate"], st.just(1.0), _logs(0.1, 10.0)),
        _field(v["groups"], st.integers(0, 2), _ints(0, 2)),
    )


def linear_constructions(
    *,
    period=1,
    batching=None,
    tight=None,
    **run: Unpack[RunRanges],
) -> st.SearchStrategy[ScalarFieldConstruction]:
    """Linear losses: every field constant (`ScalarFieldConstruction.is_linear`), the family
    of Theorem 1 of arXiv:2410.06186, whose exact epsilon is at most the last-iterate
    heuristic of its accounting, and equal to it when `heuristic_is_tight()`.

    The canary's gradient is drawn in [-2C, 2C] (more than half of the draws at norm >= C:
    the tight case when the data are deterministic), each data group's (1-4 examples) in
    [-2C, 2C],
    the regularizer's in [-C, C], m_0 in [-1, 1]. The run's keywords (`steps`,
    `sampling_prob`, `noise_multiplier`, `clip_norm`, `learning_rate`, `groups`) are a
    `RunRanges`; `period` follows `dpsgd_params` (default 1), `batching` is "poisson",
    "fixed" or None (either), `tight` True (only the heuristic's tight case: canary of
    norm C, zero data gradients and regularizer), False or None (either, half and half).
    """
    steps_s, q_s, sigma_s, c_s, lr_s, g_s = _run_specs("linear_constructions", run)
    period_s = _field(period, st.just(1), _ints(1, 3))
    batching_s = _choice(batching, ("poisson", "fixed"))

    @st.composite
    def draw_one(draw):
        t, q, sigma, c, lr = (draw(s) for s in (steps_s, q_s, sigma_s, c_s, lr_s))
        is_tight = draw(st.booleans()) if tight is None else bool(tight)
        n = draw(g_s)
        counts = [draw(st.integers(1, 4)) for _ in range(n)]
        if is_tight:  # the same shapes (zero data gradients), so it batches with the rest
            canary = c * draw(st.sampled_from((-2.0, -1.0, 1.0, 2.0)))
            fields, reg = [0.0] * n, 0.0
        else:
            canary = c * draw(st.one_of(st.sampled_from((-1.0, 1.0)), _uniform(-2.0, 2.0)))
            fields = [c * draw(_uniform(-2.0, 2.0)) for _ in range(n)]
            reg = c * draw(_uniform(-1.0, 1.0))
        return ScalarFieldConstruction(
            t,
            q,
            sigma,
            canary=ScalarField.constant(canary),
            groups=[ScalarField.constant(v) for v in fields],
            counts=counts,
            regularizer=ScalarField.constant(reg),
            init=draw(_uniform(-1.0, 1.0)),
            clip_norm=c,
            learning_rate=lr,
            batching=draw(batching_s),
            canary_schedule=CanarySchedule.every(draw(period_s)),
        )

    return draw_one()


def convex_constructions(
    *,
    steps=None,
    noise_multiplier=(0.5, 4.0),
    clip_norm=1.0,
    learning_rate=(0.1, 1.0),
    radius=(0.5, 20.0),
    groups=(0, 2),
    knots: int = 1,
    bumps: int = 1,
    regularizer: bool | None = None,
) -> st.SearchStrategy[ProjectedScalarFieldConstruction]:
    """Projected full-batch DP-GD on convex, Lipschitz, smooth losses over [-R, R]: every
    assumption of the shifted-interpolation bound (Bok, Su and Altschuler,
    arXiv:2403.00278; `ProjectedScalarFieldConstruction.convexity()` holds for every draw),
    so the exact epsilon is at most `mech.shifted_interpolation_bound(delta).epsilon`.

    Fixed batching, the canary in every step; the canary's field is, in half of the draws,
    the constant -C or -C/2 (the linear canary: the bound is then composition for T below
    its plateau, and nearly tight when R is large), else a nondecreasing field with `knots`
    knots and
    `bumps` tanh bumps; each data group (1-3 examples) likewise; a convex regularizer
    (nondecreasing affine, counted as one more example) in half of the draws
    (`regularizer`: True, False, None = either). Every field is rescaled so that
    |g| <= L <= C on [-R, R] (L drawn in [C/4, C]) and lr * n * M <= 2.

    `radius` is in units of the step's noise sd lr * sigma * C (drawn log-uniformly);
    `learning_rate` is lr.
    """
    steps_s = _field(steps, st.sampled_from(_STEPS), _ints(1, 10))
    sigma_s = _field(noise_multiplier, _log_uniform(0.5, 4.0), _logs(0.5, 4.0))
    c_s = _field(clip_norm, st.just(1.0), _logs(0.1, 10.0))
    lr_s = _field(learning_rate, _log_uniform(0.1, 1.0), _logs(0.1, 1.0))
    r_s = _field(radius, _log_uniform(0.5, 20.0), _logs(0.5, 20.0))
    g_s = _field(groups, st.integers(0, 2), _ints(0, 2))
    reg_s = st.booleans() if regularizer is None else st.just(bool(regularizer))

    @st.composite
    def draw_one(draw):
        t, sigma, c, lr = (draw(s) for s in (steps_s, sigma_s, c_s, lr_s))
        radius = draw(r_s) * lr * sigma * c
        n_groups = draw(g_s)
        counts = [draw(st.integers(1, 3)) for _ in range(n_groups)]
        with_reg = draw(reg_s)
        n = 1 + sum(counts) + int(with_reg)
        m_budget = 2.0 / (lr * n)  # lr * n * M <= 2

        def convex_field():
            raw = draw(
                scalar_fields(
                    scale=1.0,
                    centre=0.0,
                    spread=radius,
                    knots=knots,
                    bumps=bumps,
                    jumps=0,
                    monotone=True,
                )
            )
            lip = c * draw(_uniform(0.25, 1.0))
            sup, smooth = raw.sup_abs(-radius, radius), raw.lipschitz()
            factor = min(
                lip / sup if sup > 0 else 1.0, m_budget / smooth if smooth > 0 else math.inf
            )
            return raw.scaled(factor * (1.0 - 1e-9))

        if draw(st.booleans()):
            canary = ScalarField.constant(-c * draw(st.sampled_from((1.0, 0.5))))
            canary = canary.padded(knots=knots, bumps=bumps, jumps=0)
        else:
            canary = convex_field()
        fields = [convex_field() for _ in range(n_groups)]
        if with_reg:
            alpha = m_budget * draw(_uniform(0.0, 1.0))
            lip = c * draw(_uniform(0.25, 1.0))
            alpha = min(alpha, lip / (2.0 * radius))
            centre = radius * draw(_uniform(-1.0, 1.0))
            reg = ScalarField(-alpha * centre, alpha)
        else:
            reg = ScalarField()
        init = radius * draw(_uniform(-1.0, 1.0)) * (1.0 - 1e-6)  # in [-R, R] in float32
        return ProjectedScalarFieldConstruction(
            t,
            1.0,
            sigma,
            radius=radius,
            canary=canary,
            groups=fields,
            counts=counts,
            regularizer=reg,
            init=init,
            clip_norm=c,
            learning_rate=lr,
            batching="fixed",
            canary_schedule=CanarySchedule.every_step(sampled=False),
        )

    return draw_one()


def _draw_schedule(draw, schedule, steps: int) -> CanarySchedule:
    """`schedule` itself, a draw from it (a strategy), or (None) every step (twice as
    likely), every other step, only the first or only the last."""
    if isinstance(schedule, CanarySchedule):
        return schedule
    if isinstance(schedule, st.SearchStrategy):
        return draw(schedule)
    return draw(
        st.sampled_from(
            (
                CanarySchedule.every_step(),
                CanarySchedule.every_step(),
                CanarySchedule.every(2),
                CanarySchedule.only(1),
                CanarySchedule.only(steps),
            )
        )
    )


def scalar_constructions(
    *,
    knots: int = 2,
    bumps: int = 1,
    jumps: int = 1,
    batching=None,
    projected=None,
    schedule=None,
    **run: Unpack[RunRanges],
) -> st.SearchStrategy[ScalarFieldConstruction | ProjectedScalarFieldConstruction]:
    """Any construction of the family: every field (canary, 0-2 data groups of 1-4
    examples, the unclipped regularizer) a random `ScalarField` with `knots`, `bumps` and
    `jumps` terms (non-monotone, discontinuous: no assumption beyond DP-SGD's), Poisson or
    fixed batching, projected onto [-R, R] or not, the canary at every step, every k-th or
    at one step. The exact epsilon is then at most composition (`composition_epsilon` of
    `mech.accounting()`: releasing every iterate), for every draw.

    The canary's and the groups' fields take values up to ~1.5 C (clipping acts at times),
    their features lie within a few noise sds of the model's reach, the jumps at least
    half a noise sd from m_0 (`advsim.exact` spreads the initial point mass over its grid
    cell, so a jump closer than a cell to m_0 would be misread); the regularizer is
    affine with lr * slope in [-0.2, 1.5] (expanding to oscillating) plus, at times, a
    bump. The run's keywords are a `RunRanges`; `projected` and `batching` True/False /
    "poisson"/"fixed" or None (either); `schedule` a `CanarySchedule`, a strategy of them,
    or None (every step in two draws of five, else every(2), only(1) or only(T)).
    """
    steps_s, q_s, sigma_s, c_s, lr_s, g_s = _run_specs("scalar_constructions", run)
    batching_s = _choice(batching, ("poisson", "fixed"))
    projected_s = _choice(projected, (False, True))

    @st.composite
    def draw_one(draw):
        t, q, sigma, c, lr = (draw(s) for s in (steps_s, q_s, sigma_s, c_s, lr_s))
        init = lr * c * draw(_uniform(-1.0, 1.0))
        spread = lr * c * (2.0 + 2.0 * math.sqrt(t) * sigma)

        def field(scale):
            return draw(
                scalar_fields(
                    scale=scale,
                    centre=init,
                    spread=spread,
                    knots=knots,
                    bumps=bumps,
                    jumps=jumps,
                    jump_margin=0.5 * lr * sigma * c,
                )
            )

        canary = field(c)
        n_groups = draw(g_s)
        fields = [field(c) for _ in range(n_groups)]
        counts = [draw(st.integers(1, 4)) for _ in range(n_groups)]
        alpha = draw(_uniform(-0.2, 1.5)) / lr
        reg = ScalarField(
            c * draw(_uniform(-0.5, 0.5)) - alpha * init,
            alpha,
            bump_centres=[init],
            bump_heights=[c * draw(_uniform(-0.5, 0.5))],
            bump_widths=[spread],
        )
        sched = _draw_schedule(draw, schedule, t)
        kwargs = dict(
            canary=canary,
            groups=fields,
            counts=counts,
            regularizer=reg,
            init=init,
            clip_norm=c,
            learning_rate=lr,
            batching=draw(batching_s),
            canary_schedule=sched,
        )
        if draw(projected_s):
            radius = abs(init) + spread * draw(_uniform(0.1, 1.0))
            return ProjectedScalarFieldConstruction(t, q, sigma, radius=radius, **kwargs)
        return ScalarFieldConstruction(t, q, sigma, **kwargs)

    return draw_one()


def construction_batches(
    make: Callable[..., st.SearchStrategy], *, size: int = 4, skip_simplest: bool = True, **static
) -> st.SearchStrategy[list]:
    """Lists of `size` constructions that share their static fields, for one vmapped
    `advsim.exact.last_iterate_epsilons` call (one compilation per grid for the batch).

    Each keyword of `static` is drawn once per batch (a strategy) or fixed (any other
    value) and passed, fixed, to `make` (e.g. `linear_constructions`) for every member;
    the members' traced values (fields, q, sigma, counts, m_0, ...) are drawn apart, and
    no two members are the same construction (`describe()`).

    Hypothesis tries its simplest draw first (every choice minimal): here a batch of one
    construction repeated with tiny variations. Each batch costs an exact propagation (a
    compilation, seconds), so by default (`skip_simplest`) that draw is rejected before
    the test runs, and the examples a property runs are all random draws.
    Fix whatever is static in the engine: `steps`, `groups`, `batching`, `projected`,
    `schedule` or `period` (a batch may differ only in traced values).

    Example:
        >>> from hypothesis import strategies as st
        >>> batches = construction_batches(
        ...     linear_constructions, size=3, steps=st.sampled_from((1, 4)), groups=1,
        ...     batching="fixed")
    """
    size = check_int("size", size, minimum=1)
    fixed = {k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in static.items()}
    batches = st.fixed_dictionaries(fixed).flatmap(
        lambda kw: st.lists(make(**kw), min_size=size, max_size=size, unique_by=_identity)
    )
    if not skip_simplest:
        return batches
    # A leading choice that is 0 only in (essentially) the simplest draw.
    salted = st.tuples(st.integers(0, 1 << 16), batches).filter(lambda pair: pair[0] != 0)
    return salted.map(lambda pair: pair[1])


# ----------------------------------------------------------------------------------------
# Checks against the exact engine

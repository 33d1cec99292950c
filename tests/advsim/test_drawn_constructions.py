r"""`advsim.testing.constructions`: every draw has the properties its assumptions name,
checked directly on the drawn fields, on a fine grid, independently of `facts()`.

Where each expected property comes from (the definitions in
`advsim/bounds/_assumptions.py`, for the update
$m_t = \Pi_K(m_{t-1} - \eta(\sum_i \mathrm{clip}_C(g_i(m_{t-1})) + r'(m_{t-1}) + \xi_t))$;
"examples" are the canary and every group with a non-zero count, each field g(m) being
the gradient of an example's loss, the regularizer's field r'(m) is not an example;
"the objective" has gradient $G = \sum_j n_j g_j + r'$, in both worlds: G and
G + g_canary):

- `Linear` ("every loss linear (constant gradients), no projection"): every field,
  the regularizer too, constant on the grid; the run not projected.
- `Convex` ("every example's loss and the regularizer convex"): every field
  nondecreasing on the grid (a convex loss of one variable has a nondecreasing gradient).
- `StronglyConvex(of="objective", minimum)` ("$\nabla^2 F \succeq m > $ minimum, in both
  worlds"): every difference quotient of G and of G + g_canary is > minimum; and the
  certified `facts().strong_convexity` does not exceed the smallest observed quotient.
- `StronglyConvex(of="examples", minimum)`: every difference quotient of every example's
  field is > minimum.
- `Smooth` ("every example's loss and the regularizer M-smooth, M finite"): every
  difference quotient of an example's field within `facts().smoothness`, of the
  regularizer within `facts().regularizer_smoothness`, both finite; and no jump: on the
  uniform grid of spacing h, max |g(x + h) - g(x)| <= M h (up to rounding).
- `HolderGradients(beta)` ("every example's gradient beta-Holder on the domain, with a
  finite constant"): |g(x) - g(y)| <= H |x - y|^beta, H = `facts().holder_constant(beta)`
  finite, on seeded random pairs and on close pairs of the domain.
- `LipschitzWithinClip` ("every example's gradient of norm <= G <= C on the domain"):
  |g| <= C on the grid (and at +-1e6 on the real line).
- `RegularizerAsExample` ("a non-zero regularizer has gradient norm <= C on the domain"):
  |r'| <= C on the grid (and at +-1e6 on the real line), unless r' is 0 there.
- `BoundedDomain` ("projected onto a ball of radius R < inf, the start inside"):
  projected, R finite, |m_0| <= R.
- `FullBatch` ("every example, the canary too, in every step"): fixed batching (or
  q = 1), the canary in every step, unsampled (its accounting's q = 1).
- `PoissonBatches` ("every example, the canary too, sampled with rate q each step"):
  Poisson batching, the canary in every step, sampled with the run's q.
- `CyclicBatches` ("the canary at one fixed position of every epoch, unsampled"): its
  steps equally spaced, the first within the first epoch, unsampled.
- `ConstantStepSize` ("one learning rate at every step"): no schedule.
- `StepSizeAtMost(f, of="examples")` ("lr x n x max_i M_i <= f, a non-zero regularizer
  one more example"): lr x n x (largest observed |difference quotient| of the examples'
  fields, and the regularizer's if it is not zero) <= f.
  `StepSizeAtMost(f, of="objective")` ("lr x M_F <= f"): lr x (largest observed
  |difference quotient| of G and of G + g_canary) <= f.

The grid: [-R, R] for a projected run; for one on the real line, m_0 +- 50 noise sds
(the fields' features lie within about 8 sds of m_0) plus the points +-1e6. 20001 points.
Rounding: a field's values carry an error of a few ulps of the size of its terms; every
comparison allows that (`_ROUND`), nothing more.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings

from advsim import bounds
from advsim.bounds import (
    Assumption,
    LastIterateHeuristic,
    ShiftedInterpolation,
    StronglyConvexGDP,
)
from advsim.testing import SETTINGS, constructions
from advsim.testing._fields import ProjectedScalarFieldConstruction

_POINTS = 20001
_NOISE_SDS = 50.0
_FAR = 1e6
_ROUND = 64 * np.finfo(np.float64).eps  # relative rounding allowance of a field's value
_REL = 1e-9  # relative slack on a certified constant


# ----------------------------------------------------------------------------------------
# The grid and the fields


@dataclasses.dataclass
class _Grid:
    fine: np.ndarray  # uniform, spacing h
    h: float
    points: np.ndarray  # fine, plus +-1e6 on the real line (sorted)
    projected: bool


def _grid(mech) -> _Grid:
    if isinstance(mech, ProjectedScalarFieldConstruction):
        r = float(mech.radius)
        fine = np.linspace(-r, r, _POINTS)
        return _Grid(fine, float(fine[1] - fine[0]), fine, True)
    sd = float(mech.learning_rate) * float(mech.noise_multiplier) * float(mech.clip_norm)
    m0 = float(mech.init)
    fine = np.linspace(m0 - _NOISE_SDS * sd, m0 + _NOISE_SDS * sd, _POINTS)
    assert -_FAR < fine[0] and fine[-1] < _FAR
    return _Grid(fine, float(fine[1] - fine[0]), np.concatenate([[-_FAR], fine, [_FAR]]), False)


def _size(field, x) -> np.ndarray:
    """The size of the terms of g(x): its values' rounding error is a few ulps of it."""
    x = np.asarray(x, np.float64)[..., None]
    return (
        abs(float(field.offset))
        + abs(float(field.slope)) * np.abs(x[..., 0])
        + np.sum(np.abs(field.knot_slopes) * np.maximum(x - field.knots, 0.0), -1)
        + np.sum(np.abs(field.bump_heights))
        + np.sum(np.abs(field.jump_heights))
        + 1e-300
    )


@dataclasses.dataclass
class _Sampled:
    """A field (or a sum of fields) on the grid: values, term sizes, difference quotients
    with their rounding allowance."""

    v: np.ndarray
    size: np.ndarray
    x: np.ndarray

    @property
    def dq(self) -> np.ndarray:
        return np.diff(self.v) / np.diff(self.x)

    @property
    def dq_tol(self) -> np.ndarray:
        return _ROUND * (self.size[1:] + self.size[:-1]) / np.diff(self.x)

    @property
    def tol(self) -> np.ndarray:
        return _ROUND * self.size

    def __add__(self, other):
        return _Sampled(self.v + other.v, self.size + other.size, self.x)

    def __rmul__(self, n):
        return _Sampled(n * self.v, abs(n) * self.size, self.x)


def _sample(field, x) -> _Sampled:
    return _Sampled(field.values(x), _size(field, x), x)


def _examples(mech) -> list:
    """The canary's field and every group's with a non-zero count."""
    groups = [g for g, n in zip(mech.groups, np.asarray(mech.counts), strict=True) if n > 0]
    return [mech.canary, *groups]


def _objective(mech, x) -> tuple[_Sampled, _Sampled]:
    """G = sum_j n_j g_j + r' (without the canary) and G + g_canary (with it)."""
    out = _sample(mech.regularizer, x)
    for g, n in zip(mech.groups, np.asarray(mech.counts), strict=True):
        if n > 0:
            out = out + int(n) * _sample(g, x)
    return out, out + _sample(mech.canary, x)


def _regularizer_zero(mech, x) -> bool:
    return bool(np.all(mech.regularizer.values(x) == 0.0))


def _who(i: int) -> str:
    return "the canary" if i == 0 else f"group field {i}"


# ----------------------------------------------------------------------------------------
# One check per assumption (its definition: see the module docstring)


def _check_linear(a, mech, grid):
    assert not isinstance(mech, ProjectedScalarFieldConstruction), "Linear: projected"
    assert not math.isfinite(float(getattr(mech, "radius", math.inf)))
    for name, f in [*((_who(i), f) for i, f in enumerate(_examples(mech))),
                    ("the regularizer", mech.regularizer)]:  # fmt: skip
        v = f.values(grid.points)
        assert np.all(v == v[0]), f"Linear: {name} is not constant: {f.describe()}"


def _check_convex(a, mech, grid):
    for name, f in [*((_who(i), f) for i, f in enumerate(_examples(mech))),
                    ("the regularizer", mech.regularizer)]:  # fmt: skip
        s = _sample(f, grid.points)
        drops = np.diff(s.v) + s.dq_tol * np.diff(s.x)
        assert np.min(drops) >= 0.0, (
            f"Convex: {name} decreases by {-np.min(np.diff(s.v)):.3g}: {f.describe()}"
        )


def _check_strongly_convex(a, mech, grid):
    if a.of == "objective":
        observed = math.inf
        for world, s in zip(("without", "with"), _objective(mech, grid.points), strict=True):
            lo = float(np.min(s.dq + s.dq_tol))
            assert lo > a.minimum, (
                f"StronglyConvex(objective): G {world} the canary has a difference "
                f"quotient {float(np.min(s.dq)):.6g}, not > {a.minimum:g}"
            )
            observed = min(observed, lo)
        certified = mech.facts().strong_convexity
        assert certified <= observed, (
            f"facts().strong_convexity = {certified:.6g} exceeds the observed smallest "
            f"difference quotient {observed:.6g}"
        )
    else:
        for i, f in enumerate(_examples(mech)):
            s = _sample(f, grid.points)
            assert float(np.min(s.dq + s.dq_tol)) > a.minimum, (
                f"StronglyConvex(examples): {_who(i)} has a difference quotient "
                f"{float(np.min(s.dq)):.6g}, not > {a.minimum:g}: {f.describe()}"
            )


def _within_smoothness(name, f, m, grid):
    assert math.isfinite(m), f"Smooth: {name}'s smoothness is not finite"
    s = _sample(f, grid.points)
    top = float(np.max(np.abs(s.dq) - s.dq_tol))
    assert top <= m * (1.0 + _REL), (
        f"Smooth: {name} has a difference quotient {top:.6g} > M = {m:.6g}: {f.describe()}"
    )
    # No jump: on the uniform grid max |g(x + h) - g(x)| <= M h (a jump would not shrink).
    fine = _sample(f, grid.fine)
    step = float(np.max(np.abs(np.diff(fine.v)) - fine.tol[1:] - fine.tol[:-1]))
    assert step <= m * grid.h * (1.0 + _REL) + 1e-12, (
        f"Smooth: {name} moves by {step:.6g} over h = {grid.h:.3g} (M h = "
        f"{m * grid.h:.3g}): a jump? {f.describe()}"
    )


def _check_smooth(a, mech, grid):
    facts = mech.facts()
    for i, f in enumerate(_examples(mech)):
        _within_smoothness(_who(i), f, facts.smoothness, grid)
    _within_smoothness("the regularizer", mech.regularizer, facts.regularizer_smoothness, grid)


def _check_holder(a, mech, grid):
    big = float(mech.facts().holder_constant(a.beta))
    assert math.isfinite(big), f"HolderGradients({a.beta:g}): no finite constant certified"
    for i, f in enumerate(_examples(mech)):
        _holder_pairs(_who(i), f, a.beta, big, grid)


def _holder_pairs(name, f, beta, big, grid):
    lo, hi = float(grid.fine[0]), float(grid.fine[-1])
    rng = np.random.default_rng(20240611)
    x = rng.uniform(lo, hi, 2000)
    y = rng.uniform(lo, hi, 2000)
    # Close pairs: gaps log-uniform from 1e-9 to 1e-2 of the domain.
    cx = rng.uniform(lo, hi, 2000)
    cy = np.clip(cx + (hi - lo) * 10.0 ** rng.uniform(-9.0, -2.0, 2000), lo, hi)
    x, y = np.concatenate([x, cx]), np.concatenate([y, cy])
    if not grid.projected:  # wide pairs on the real line
        x = np.concatenate([x, [-_FAR, -_FAR, lo, hi]])
        y = np.concatenate([y, [_FAR, lo, _FAR, _FAR]])
    gap = np.abs(f.values(x) - f.values(y))
    allowed = big * np.abs(x - y) ** beta + _ROUND * (_size(f, x) + _size(f, y))
    worst = int(np.argmax(gap - allowed))
    assert np.all(gap <= allowed), (
        f"HolderGradients({beta:g}): {name} moves by {gap[worst]:.6g} between "
        f"{x[worst]:.6g} and {y[worst]:.6g}, > H |x - y|^beta = "
        f"{big * abs(x[worst] - y[worst]) ** beta:.6g}: {f.describe()}"
    )


def _check_lipschitz(a, mech, grid):
    c = float(mech.clip_norm)
    for i, f in enumerate(_examples(mech)):
        s = _sample(f, grid.points)
        worst = float(np.max(np.abs(s.v) - s.tol))
        assert worst <= c * (1.0 + 1e-12), (
            f"LipschitzWithinClip: |{_who(i)}| reaches {worst:.6g} > C = {c:g}: {f.describe()}"
        )


def _check_regularizer_as_example(a, mech, grid):
    if _regularizer_zero(mech, grid.points):
        return
    c = float(mech.clip_norm)
    s = _sample(mech.regularizer, grid.points)
    worst = float(np.max(np.abs(s.v) - s.tol))
    assert worst <= c * (1.0 + 1e-12), (
        f"RegularizerAsExample: |r'| reaches {worst:.6g} > C = {c:g}: {mech.regularizer.describe()}"
    )


def _check_bounded_domain(a, mech, grid):
    assert isinstance(mech, ProjectedScalarFieldConstruction), "BoundedDomain: not projected"
    r = float(mech.radius)
    assert math.isfinite(r) and r > 0.0
    assert abs(float(mech.init)) <= r, f"BoundedDomain: |m0| = {abs(float(mech.init))} > R = {r}"


def _check_full_batch(a, mech, grid):
    acc = mech.accounting()
    assert mech.batching == "fixed" or float(mech.sampling_prob) == 1.0
    assert acc.canary_steps == tuple(range(1, mech.steps + 1))
    assert acc.sampling_prob == 1.0


def _check_poisson(a, mech, grid):
    acc = mech.accounting()
    assert mech.batching == "poisson"
    assert acc.canary_steps == tuple(range(1, mech.steps + 1))
    assert acc.sampling_prob == float(mech.sampling_prob), "the canary is not sampled at q"


def _check_cyclic(a, mech, grid):
    acc = mech.accounting()
    steps = acc.canary_steps
    gaps = {b - a_ for a_, b in zip(steps, steps[1:], strict=False)}
    assert len(gaps) <= 1, f"CyclicBatches: the canary's steps {steps} are not equally spaced"
    epoch = gaps.pop() if gaps else mech.steps
    assert 1 <= steps[0] <= epoch, f"CyclicBatches: first step {steps[0]}, epoch {epoch}"
    assert acc.sampling_prob == 1.0, "CyclicBatches: the canary is sampled"


def _check_constant_step(a, mech, grid):
    assert mech.accounting().step_sizes is None


def _check_step_size(a, mech, grid):
    lr = float(mech.learning_rate)
    if a.of == "examples":
        fields = _examples(mech)
        n = 1 + int(np.sum(mech.counts))
        if not _regularizer_zero(mech, grid.points):
            fields, n = [*fields, mech.regularizer], n + 1
        samples = [_sample(f, grid.points) for f in fields]
    else:
        n, samples = 1, list(_objective(mech, grid.points))
    m = max(float(np.max(np.abs(s.dq) - s.dq_tol)) for s in samples)
    assert lr * n * m <= a.factor * (1.0 + _REL), (
        f"StepSizeAtMost({a.factor:g}, of={a.of!r}): lr x n x M = {lr:.6g} x {n} x {m:.6g} "
        f"= {lr * n * m:.6g} > {a.factor:g}"
    )


_CHECKS = {
    bounds.Linear: _check_linear,
    bounds.Convex: _check_convex,
    bounds.StronglyConvex: _check_strongly_convex,
    bounds.Smooth: _check_smooth,
    bounds.HolderGradients: _check_holder,
    bounds.LipschitzWithinClip: _check_lipschitz,
    bounds.RegularizerAsExample: _check_regularizer_as_example,
    bounds.BoundedDomain: _check_bounded_domain,
    bounds.FullBatch: _check_full_batch,
    bounds.PoissonBatches: _check_poisson,
    bounds.CyclicBatches: _check_cyclic,
    bounds.ConstantStepSize: _check_constant_step,
    bounds.StepSizeAtMost: _check_step_size,
}


# ----------------------------------------------------------------------------------------
# The sets


_MIXED = (
    bounds.StronglyConvex(of="examples"),
    bounds.Smooth(),
    bounds.LipschitzWithinClip(),
    bounds.BoundedDomain(),
    bounds.PoissonBatches(),
    bounds.StepSizeAtMost(1.0),
)

_SETS = [
    pytest.param(LastIterateHeuristic().assumptions, id="LastIterateHeuristic"),
    pytest.param(ShiftedInterpolation().assumptions, id="ShiftedInterpolation"),
    pytest.param(StronglyConvexGDP().assumptions, id="StronglyConvexGDP"),
    pytest.param(_MIXED, id="mixed"),
    pytest.param(
        (bounds.Linear(), bounds.ConstantStepSize(), bounds.PoissonBatches()), id="linear-poisson"
    ),
    pytest.param((bounds.Convex(),), id="convex"),
    pytest.param((bounds.StronglyConvex(of="objective", minimum=0.1),), id="sc-objective"),
    pytest.param(
        (
            bounds.StronglyConvex(of="objective", minimum=0.1),
            bounds.RegularizerAsExample(),
            bounds.BoundedDomain(),
        ),
        id="sc-objective-reg-bounded",
    ),
    pytest.param((bounds.StronglyConvex(of="examples", minimum=0.1),), id="sc-examples"),
    pytest.param((bounds.Smooth(),), id="smooth"),
    pytest.param(
        (bounds.Smooth(), bounds.StepSizeAtMost(1.0, of="objective")), id="smooth-step-objective"
    ),
    pytest.param((bounds.HolderGradients(0.5), bounds.BoundedDomain()), id="holder-0.5-bounded"),
    pytest.param(
        (bounds.HolderGradients(1.0), bounds.BoundedDomain(), bounds.Convex()),
        id="holder-1-bounded",
    ),
    pytest.param((bounds.HolderGradients(0.5),), id="holder-0.5-line"),
    pytest.param((bounds.LipschitzWithinClip(),), id="lipschitz-line"),
    pytest.param(
        (bounds.LipschitzWithinClip(), bounds.BoundedDomain(), bounds.Convex()),
        id="lipschitz-bounded",
    ),
    pytest.param((bounds.RegularizerAsExample(),), id="regularizer-as-example"),
    pytest.param((bounds.RegularizerAsExample(), bounds.BoundedDomain()), id="regularizer-bounded"),
    pytest.param((bounds.FullBatch(), bounds.StepSizeAtMost(0.5)), id="full-batch-step"),
    pytest.param((bounds.CyclicBatches(), bounds.Convex()), id="cyclic"),
    pytest.param(
        (bounds.PoissonBatches(), bounds.StepSizeAtMost(2.0, of="objective")), id="poisson-step"
    ),
]


@pytest.mark.parametrize("assumptions", _SETS)
def test_every_draw_has_the_properties_it_assumes(assumptions):
    @settings(SETTINGS, max_examples=15)
    @given(constructions(assumptions))
    def check(mech):
        grid = _grid(mech)
        for a in assumptions:
            try:
                _CHECKS[type(a)](a, mech, grid)
            except AssertionError as err:
                raise AssertionError(f"{err}\n{a.describe()}\n{mech.describe()}") from None

    check()


def test_every_buildable_assumption_has_a_check():
    from advsim.testing._drawn import _KNOWN

    assert set(_KNOWN) == set(_CHECKS)


# ----------------------------------------------------------------------------------------
# Sets no construction meets, and assumptions it cannot build


@pytest.mark.parametrize(
    ("assumptions", "match"),
    [
        pytest.param(
            (bounds.Linear(), bounds.BoundedDomain()), r"Linear.*BoundedDomain", id="linear-bounded"
        ),
        pytest.param(
            (bounds.FullBatch(), bounds.PoissonBatches()),
            r"FullBatch.*PoissonBatches",
            id="full-poisson",
        ),
        pytest.param(
            (bounds.StronglyConvex(of="examples"), bounds.LipschitzWithinClip()),
            r"LipschitzWithinClip needs BoundedDomain",
            id="sc-examples-lipschitz-line",
        ),
    ],
)
def test_contradictory_sets_raise(assumptions, match):
    with pytest.raises(ValueError, match=match):
        constructions(assumptions)


@settings(SETTINGS, max_examples=3)
@given(
    constructions(
        (bounds.StronglyConvex(of="examples"), bounds.LipschitzWithinClip(), bounds.BoundedDomain())
    )
)
def test_the_same_set_with_a_bounded_domain_builds(mech):
    assert isinstance(mech, ProjectedScalarFieldConstruction)


@dataclasses.dataclass(frozen=True)
class _Unknown(Assumption):
    def describe(self) -> str:
        return "an assumption constructions does not know"

    def failure(self, facts):
        return None


def test_an_unknown_assumption_raises():
    with pytest.raises(ValueError, match="cannot build _Unknown"):
        constructions((bounds.Convex(), _Unknown()))


# ----------------------------------------------------------------------------------------
# The checks are not vacuous: each catches a hand-built construction that violates it


def _run(canary, *, projected=False, **kw):
    from advsim.testing import ScalarField, ScalarFieldConstruction

    kw.setdefault("batching", "fixed")
    if kw["batching"] == "fixed":
        kw.setdefault("canary_schedule", "every_step")
    t = kw.pop("steps", 3)
    q = kw.pop("q", 1.0)
    canary = ScalarField(**canary) if isinstance(canary, dict) else canary
    if projected:
        return ProjectedScalarFieldConstruction(t, q, 1.0, radius=10.0, canary=canary, **kw)
    return ScalarFieldConstruction(t, q, 1.0, canary=canary, **kw)


def _negative_controls():
    from advsim._schedule import CanarySchedule
    from advsim.testing import ScalarField

    up = {"offset": -0.5, "slope": 0.05}
    return [
        pytest.param(bounds.Linear(), _run(up), id="Linear"),
        pytest.param(bounds.Convex(), _run({"offset": 0.5, "slope": -0.01}), id="Convex"),
        pytest.param(
            bounds.StronglyConvex(minimum=0.1),
            _run(up, regularizer=ScalarField(0.0, 0.05)),
            id="StronglyConvex-objective",
        ),
        pytest.param(bounds.StronglyConvex(of="examples", minimum=0.1), _run(up), id="SC-examples"),
        pytest.param(
            bounds.Smooth(),
            _run({"offset": -0.5, "jumps": [0.3], "jump_heights": [0.2]}),
            id="Smooth",
        ),
        pytest.param(
            bounds.HolderGradients(0.5),
            _run({"offset": -0.5, "jumps": [0.3], "jump_heights": [0.2]}, projected=True),
            id="HolderGradients",
        ),
        pytest.param(
            bounds.LipschitzWithinClip(), _run({"offset": -0.5, "slope": 1e-6}), id="Lipschitz-line"
        ),
        pytest.param(
            bounds.LipschitzWithinClip(),
            _run({"offset": -0.5, "slope": 0.1}, projected=True),
            id="Lipschitz-bounded",
        ),
        pytest.param(
            bounds.RegularizerAsExample(),
            _run(up, projected=True, regularizer=ScalarField(0.0, 0.2)),
            id="RegularizerAsExample",
        ),
        pytest.param(bounds.BoundedDomain(), _run(up), id="BoundedDomain"),
        pytest.param(bounds.FullBatch(), _run(up, batching="poisson", q=0.5), id="FullBatch"),
        pytest.param(bounds.PoissonBatches(), _run(up), id="PoissonBatches"),
        pytest.param(
            bounds.CyclicBatches(),
            _run(up, steps=10, canary_schedule=CanarySchedule.every(2, first=3, sampled=False)),
            id="CyclicBatches",
        ),
        pytest.param(
            bounds.StepSizeAtMost(1.0),
            _run({"offset": -0.5, "slope": 0.6}, groups=[ScalarField(0.0, 0.1)]),
            id="StepSize",
        ),
        pytest.param(
            bounds.StepSizeAtMost(1.0, of="objective"),
            _run(up, regularizer=ScalarField(0.0, 1.0)),
            id="StepSize-objective",
        ),
    ]


@pytest.mark.parametrize(("assumption", "mech"), _negative_controls())
def test_each_check_catches_a_violation(assumption, mech):
    with pytest.raises(AssertionError):
        _CHECKS[type(assumption)](assumption, mech, _grid(mech))


def test_the_no_jump_and_holder_checks_do_not_read_the_facts():
    from advsim.testing import ScalarField

    mech = _run(ScalarField(-0.5), projected=True)
    grid = _grid(mech)
    jump = ScalarField(-0.5, 0.01, jumps=[0.3], jump_heights=[0.2])
    with pytest.raises(AssertionError, match="Smooth: a field"):
        _within_smoothness("a field", jump, 0.01, grid)
    _within_smoothness("a field", ScalarField(-0.5, 0.01), 0.01, grid)
    with pytest.raises(AssertionError, match="Holder"):
        _holder_pairs("a field", ScalarField(-0.5, 0.01), 0.5, 1e-3, grid)
    _holder_pairs("a field", ScalarField(-0.5, 0.01), 0.5, 0.01 * 20.0**0.5, grid)

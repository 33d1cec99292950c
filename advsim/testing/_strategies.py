"""Hypothesis strategies for DP-SGD parameters, mixtures and mechanisms (`advsim.testing`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from hypothesis import settings as _settings
from hypothesis import strategies as st

from advsim._accounting import Accounting
from advsim._schedule import CanarySchedule
from advsim._validation import (
    check_delta,
    check_in_interval,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)
from advsim.bounds import binomial_mixture
from advsim.mechanisms.linear import LinearProcess

__all__ = [
    "PROFILE",
    "SETTINGS",
    "DrawnDPSGDParams",
    "Mixture",
    "alphas",
    "batch_sizes",
    "clip_norms",
    "deltas",
    "dpsgd_params",
    "epsilons",
    "linear_mechanisms",
    "mixtures",
    "noise_multipliers",
    "periods",
    "sampling_probs",
    "steps",
]

PROFILE = "advsim"
"""Name of the registered hypothesis profile (`settings.load_profile(PROFILE)` loads it).
"""
_settings.register_profile(PROFILE, derandomize=True, deadline=None, database=None, print_blob=True)
SETTINGS = _settings.get_profile(PROFILE)
"""The profile as a settings object, to use as a parent: `@settings(SETTINGS,
max_examples=30)`.
"""

# ----------------------------------------------------------------------------------------
# Strategies for single parameters


def _range(name, lo, hi, check):
    lo, hi = check(f"min_{name}", lo), check(f"max_{name}", hi)
    if lo > hi:
        raise ValueError(f"min_{name} must be <= max_{name}, got {lo!r} > {hi!r}")
    return lo, hi


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats spread evenly in log10 between lo > 0 and hi, both ends included."""
    if lo == hi:
        return st.just(lo)
    a, b = math.log10(lo), math.log10(hi)
    inner = st.floats(a, b).map(lambda x: min(hi, max(lo, 10.0**x)))
    return st.one_of(st.sampled_from((lo, hi)), inner)


def steps(*, min_value: int = 1, max_value: int = 1000) -> st.SearchStrategy[int]:
    """T, the number of DP-SGD steps: integers in [min_value, max_value] (>= 1)."""
    lo, hi = _range("steps", min_value, max_value, lambda n, v: check_int(n, v, minimum=1))
    return st.integers(lo, hi)


def sampling_probs(*, min_value: float = 1e-4, max_value: float = 1.0) -> st.SearchStrategy[float]:
    """q, the Poisson sampling rate: log-uniform in [min_value, max_value] within (0, 1];
    both ends (so q = 1, no subsampling, when max_value = 1) come up often."""
    return _log_uniform(*_range("sampling_prob", min_value, max_value, check_probability))


def noise_multipliers(
    *, min_value: float = 0.3, max_value: float = 10.0
) -> st.SearchStrategy[float]:
    """sigma, the noise multiplier: log-uniform in [min_value, max_value] (> 0)."""
    return _log_uniform(*_range("noise_multiplier", min_value, max_value, check_positive))


def deltas(*, min_value: float = 1e-12, max_value: float = 1e-2) -> st.SearchStrategy[float]:
    """delta: log-uniform in [min_value, max_value] within (0, 1)."""
    return _log_uniform(*_range("delta", min_value, max_value, check_delta))


def epsilons(*, min_value: float = 0.0, max_value: float = 10.0) -> st.SearchStrategy[float]:
    """eps: uniform floats in [min_value, max_value] (>= 0, finite)."""
    return st.floats(*_range("eps", min_value, max_value, check_nonnegative))


def clip_norms(*, min_value: float = 0.1, max_value: float = 10.0) -> st.SearchStrategy[float]:
    """C, the clipping norm: log-uniform in [min_value, max_value] (> 0)."""
    return _log_uniform(*_range("clip_norm", min_value, max_value, check_positive))


def batch_sizes(*, min_value: int = 1, max_value: int = 1024) -> st.SearchStrategy[int]:
    """B, the batch size of fixed-batch constructions: integers in [min_value, max_value]."""
    lo, hi = _range("batch_size", min_value, max_value, lambda n, v: check_int(n, v, minimum=1))
    return st.integers(lo, hi)


def alphas(*, min_value: float = 0.0, max_value: float = 1.0) -> st.SearchStrategy[float]:
    """alpha, the quadratic regularizer's weight r(m) = alpha m^2 / 2 (with learning rate
    1, Section 4.2 of arXiv:2410.06186): floats in [min_value, max_value] within [0, 1]."""

    def check(name, v):
        return check_in_interval(name, v, 0.0, 1.0, low_closed=True, high_closed=True)

    return st.floats(*_range("alpha", min_value, max_value, check))


def periods(*, min_value: int = 1, max_value: int = 10) -> st.SearchStrategy[int]:
    """k: the canary can be sampled at steps 1, 1 + k, 1 + 2k, ... (1 = every step)."""
    lo, hi = _range("period", min_value, max_value, lambda n, v: check_int(n, v, minimum=1))
    return st.integers(lo, hi)


# The keywords of `dpsgd_params` shadow these names inside it.
_FIELD_STRATEGIES = {
    "steps": steps,
    "sampling_prob": sampling_probs,
    "noise_multiplier": noise_multipliers,
    "delta": deltas,
    "clip_norm": clip_norms,
    "batch_size": batch_sizes,
    "alpha": alphas,
    "period": periods,
}

# ----------------------------------------------------------------------------------------
# DP-SGD parameter records


@dataclasses.dataclass(frozen=True)
class DrawnDPSGDParams:
    """One valid set of DP-SGD parameters, as drawn by `dpsgd_params`.

    Attributes:
        steps: T >= 1.
        sampling_prob: q in (0, 1].
        noise_multiplier: sigma > 0.
        delta: in (0, 1).
        clip_norm: C > 0.
        batch_size: B >= 1 (for fixed-batch constructions; independent of q).
        alpha: quadratic regularizer weight in [0, 1].
        period: the canary can be sampled at steps 1, 1 + period, ... up to T.
    """

    steps: int
    sampling_prob: float
    noise_multiplier: float
    delta: float
    clip_norm: float = 1.0
    batch_size: int = 1
    alpha: float = 0.0
    period: int = 1

    def __post_init__(self):
        check_int("steps", self.steps, minimum=1)
        check_probability("sampling_prob", self.sampling_prob)
        check_positive("noise_multiplier", self.noise_multiplier)
        check_delta("delta", self.delta)
        check_positive("clip_norm", self.clip_norm)
        check_int("batch_size", self.batch_size, minimum=1)
        check_in_interval("alpha", self.alpha, 0.0, 1.0, low_closed=True, high_closed=True)
        check_int("period", self.period, minimum=1)

    @property
    def num_canary_steps(self) -> int:
        """n = len(range(1, T + 1, period)): the steps that can sample the canary."""
        return len(range(1, self.steps + 1, self.period))

    @property
    def bound_args(self) -> tuple:
        """`(delta, T, q, sigma)`: the positional arguments of every `*_epsilon` bound."""
        return (self.delta, self.steps, self.sampling_prob, self.noise_multiplier)

    @property
    def bound_kwargs(self) -> dict:
        """`{"canary_steps": n}`: the keyword arguments of the bounds."""
        return {"canary_steps": self.num_canary_steps}

    def accounting(self) -> Accounting:
        """The `advsim.Accounting` record of a run with these parameters."""
        return Accounting(
            self.steps,
            self.sampling_prob,
            self.noise_multiplier,
            canary_steps=tuple(range(1, self.steps + 1, self.period)),
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _field(value, default: st.SearchStrategy, make: Callable) -> st.SearchStrategy:
    """None -> default; a strategy -> itself; (lo, hi) -> make(lo, hi); else just(value)."""
    if value is None:
        return default
    if isinstance(value, st.SearchStrategy):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return make(min_value=value[0], max_value=value[1])
    return st.just(value)


def dpsgd_params(
    *,
    steps=None,
    sampling_prob=None,
    noise_multiplier=None,
    delta=None,
    clip_norm=None,
    batch_size=None,
    alpha=None,
    period=None,
) -> st.SearchStrategy[DrawnDPSGDParams]:
    """Valid DP-SGD parameters as a frozen `DrawnDPSGDParams` record.

    Every keyword narrows one field: `None` keeps the default strategy (the function of the
    same name, e.g. `noise_multipliers()`), a pair `(lo, hi)` bounds it, a strategy replaces
    it, any other value fixes it. `period` defaults to 1 (canary in every step); pass
    `period=(1, 5)` to vary it. Bad bounds raise `ValueError` here, not while drawing.

    Example:
        >>> from advsim.testing import dpsgd_params
        >>> strategy = dpsgd_params(steps=(1, 100), sampling_prob=1.0, period=(1, 3))
    """
    given = {
        "steps": steps,
        "sampling_prob": sampling_prob,
        "noise_multiplier": noise_multiplier,
        "delta": delta,
        "clip_norm": clip_norm,
        "batch_size": batch_size,
        "alpha": alpha,
        "period": period,
    }
    fields = {}
    for name, value in given.items():
        make = _FIELD_STRATEGIES[name]
        default = st.just(1) if name == "period" else make()
        fields[name] = _field(value, default, make)
    return st.builds(DrawnDPSGDParams, **fields)


# ----------------------------------------------------------------------------------------
# Mixtures


@dataclasses.dataclass(frozen=True)
class Mixture:
    r"""The pair $P = \mathcal{N}(X, s^2)$, $Q = \mathcal{N}(0, s^2)$ with $X$ on `support`.

    `mixture_epsilon(delta, *m.args)` etc. evaluate the bounds of `advsim.bounds`.
    """

    support: tuple[float, ...]
    probs: tuple[float, ...]
    scale: float

    @property
    def args(self) -> tuple:
        """`(support, probs, scale)` as the `mixture_*` functions take them."""
        return (np.asarray(self.support), np.asarray(self.probs), self.scale)

    @classmethod
    def from_params(cls, params: DrawnDPSGDParams) -> Mixture:
        """The heuristic's pair (Theorem 1 of arXiv:2410.06186): Binomial(n, q) atoms over
        noise sqrt(T) sigma, with n the number of canary steps."""
        support, probs = binomial_mixture(params.num_canary_steps, params.sampling_prob)
        scale = math.sqrt(params.steps) * params.noise_multiplier
        return cls(tuple(support.tolist()), tuple(probs.tolist()), scale)


def mixtures(
    *,
    atoms: tuple[int, int] = (1, 4),
    support: tuple[float, float] = (1e-2, 5.0),
    scale: tuple[float, float] = (0.2, 5.0),
    zero_atom: bool | None = None,
    min_weight: float = 1e-4,
) -> st.SearchStrategy[Mixture]:
    """Gaussian location mixtures with at least one positive atom.

    Args:
        atoms: (min, max) number of positive atoms (not necessarily distinct).
        support: (min, max) of the positive atoms, > 0; drawn log-uniformly.
        scale: (min, max) of the noise standard deviation s; drawn log-uniformly.
        zero_atom: add an atom at 0 (True), never (False), or either (None).
        min_weight: smallest unnormalised weight (weights are log-uniform in
            [min_weight, 1], then normalised), so probabilities down to ~min_weight / atoms.
    """
    n_lo, n_hi = _range("atoms", atoms[0], atoms[1], lambda n, v: check_int(n, v, minimum=1))
    xs = st.lists(
        _log_uniform(*_range("support", *support, check_positive)), min_size=n_lo, max_size=n_hi
    )
    scales = _log_uniform(*_range("scale", *scale, check_positive))
    weight = _log_uniform(
        check_in_interval("min_weight", min_weight, 0.0, 1.0, high_closed=True), 1.0
    )
    zero = st.booleans() if zero_atom is None else st.just(bool(zero_atom))

    @st.composite
    def draw_mixture(draw):
        x = draw(xs)
        if draw(zero):
            x = [0.0, *x]
        w = np.array(draw(st.lists(weight, min_size=len(x), max_size=len(x))))
        probs = w / math.fsum(w.tolist())
        return Mixture(tuple(x), tuple(probs.tolist()), draw(scales))

    return draw_mixture()


# ----------------------------------------------------------------------------------------
# Mechanisms


_MECHANISM_STEPS = (1, 2, 5, 10)


def linear_mechanisms(
    *,
    steps=None,
    sampling_prob=(0.05, 1.0),
    noise_multiplier=(0.5, 4.0),
    clip_norm=1.0,
    period=1,
    batching="poisson",
):
    """Built `advsim.mechanisms.LinearProcess` instances (1-D, no other data): the
    heuristic's tight case, whose exact eps is `heuristic_epsilon` of its accounting.

    Keywords follow `dpsgd_params` (None, (lo, hi), a strategy or a fixed value); `batching`
    is "poisson", "fixed" or a strategy. T is static in the compiled simulation (each
    distinct T, period or batching compiles once, a few seconds), so by default T is one of
    1, 2, 5, 10.
    """
    params = dpsgd_params(
        steps=st.sampled_from(_MECHANISM_STEPS) if steps is None else steps,
        sampling_prob=sampling_prob,
        noise_multiplier=noise_multiplier,
        delta=0.5,
        clip_norm=clip_norm,
        batch_size=1,
        alpha=0.0,
        period=period,
    )
    batchings = batching if isinstance(batching, st.SearchStrategy) else st.just(batching)

    def build(p: DrawnDPSGDParams, how: str) -> LinearProcess:
        return LinearProcess(
            p.steps,
            p.sampling_prob,
            p.noise_multiplier,
            clip_norm=p.clip_norm,
            canary_schedule=CanarySchedule.every(p.period),
            batching=how,
        )

    return st.builds(build, params, batchings)

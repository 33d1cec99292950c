"""A bound checked against the exact epsilon of the last model (`assert_exact_below`), and the
Neyman-Pearson adversary that scores with the exact likelihood ratio."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from advsim._adversary import AbstractAdversary
from advsim._mechanism import AbstractMechanism
from advsim._validation import (
    check_delta,
    check_nonnegative,
)
from advsim.exact import ExactEpsilon, last_iterate_epsilons

__all__ = ["ExactLikelihoodScore", "assert_exact_below"]


def _identity(mech) -> str:
    return mech.describe()


def assert_exact_below(
    mechanisms: Sequence[AbstractMechanism],
    upper: Callable[[AbstractMechanism], float] | Sequence[float],
    *,
    delta: float,
    rtol: float = 1e-3,
    error_factor: float = 2.0,
    label: str = "bound",
    equal: bool | Sequence[bool] = False,
    cells_per_sd: float = 8.0,
    refinements: int = 2,
    **exact_kwargs,
) -> list[ExactEpsilon]:
    """Asserts that the exact epsilon of each mechanism never exceeds an upper bound.

    Computes `advsim.exact.last_iterate_epsilons(mechanisms, delta, ...)` (one vmapped
    call, so the mechanisms must share their static fields) and asserts, for each,
    `exact.epsilon <= bound * (1 + rtol) + error_factor * exact.error`: the engine's
    value within its refinement error estimate (`ExactEpsilon.error`, an estimate, hence
    the factor) and a relative tolerance for the last digits of both. Where `equal` is
    True (a tight case) it also asserts `exact.epsilon >= bound * (1 - rtol) -
    error_factor * exact.error`. A result the engine flags unresolved (`resolved` False:
    an epsilon beyond `advsim.exact.resolution_limit(delta)`, set by masses at the float64
    rounding floor) is not compared; the caller can count them in the returned results.

    Args:
        mechanisms: `advsim.AbstractScalarLaw` mechanisms sharing static fields.
        upper: `mech -> bound`, or the bounds in order.
        delta: delta in (0, 1).
        rtol, error_factor: the tolerance (see above).
        label: what the bound is, for the report.
        equal: True (all), False, or one flag per mechanism: where the bound is exact.
        cells_per_sd, refinements, **exact_kwargs: passed to `last_iterate_epsilons`
            (coarse by default, for fast properties; the engine's accuracy is then
            ~1e-3 relative on smooth cases). With `refinements=1` there is no error
            estimate and `rtol` alone is the tolerance.

    Returns:
        The `ExactEpsilon` results.

    Raises:
        AssertionError: naming the mechanism, both values, the error estimate and the
            tolerance.
    """
    mechs = list(mechanisms)
    delta = check_delta("delta", delta)
    rtol = check_nonnegative("rtol", rtol)
    error_factor = check_nonnegative("error_factor", error_factor)
    flags = [bool(equal)] * len(mechs) if isinstance(equal, bool) else [bool(e) for e in equal]
    if len(flags) != len(mechs):
        raise ValueError(f"equal has {len(flags)} flags for {len(mechs)} mechanisms")
    bounds = [float(upper(m)) for m in mechs] if callable(upper) else [float(b) for b in upper]
    if len(bounds) != len(mechs):
        raise ValueError(f"upper has {len(bounds)} values for {len(mechs)} mechanisms")
    results = last_iterate_epsilons(
        mechs, delta, cells_per_sd=cells_per_sd, refinements=refinements, **exact_kwargs
    )
    for i, (mech, res, bound, eq) in enumerate(zip(mechs, results, bounds, flags, strict=True)):
        if not res.resolved:
            continue  # beyond the float64 grid's resolution: no value to compare
        # refinements=1 gives no estimate (nan): rtol alone then.
        error = res.error if math.isfinite(res.error) else 0.0
        slack = bound * rtol + error_factor * error
        above = not res.epsilon <= bound + slack  # also True for NaN
        below = eq and not res.epsilon >= bound - slack
        if above or below:
            what = "exceeds" if above else "is below the tight"
            describe = getattr(mech, "describe", lambda m=mech: repr(m))
            raise AssertionError(
                f"exact epsilon {what} the {label} (mechanism {i} of {len(mechs)})\n"
                f"  exact: {res.epsilon!r} (error estimate {res.error:.3g}; grids "
                f"{[round(e, 6) for e in res.epsilons]}, lost mass {res.lost_mass})\n"
                f"  {label}: {bound!r}{' (tight: equality expected)' if eq else ''}\n"
                f"  excess: {res.epsilon - bound!r} (allowed {slack:.3g} = rtol {rtol:g} x "
                f"bound + {error_factor:g} x error)\n"
                f"  delta: {delta!r}\n  {describe()}"
            )
    return results


class ExactLikelihoodScore(AbstractAdversary):
    r"""Scores a scalar release by $\log p_{in}(m) / p_{out}(m)$ of the exact laws.

    Built from an `advsim.exact.ExactEpsilon` (`from_exact`): the log-ratio of the two
    worlds' masses at the finest grid's nodes, interpolated linearly in between; a
    projected run's release at an end of its interval scores the ratio of the atoms'
    masses there. Thresholding it is the Neyman-Pearson test of the two laws (up to the
    grid), so an (eps, delta) audit of simulated runs scored by it can reach the exact
    epsilon (both orders of the pair: the audit tests the score's upper and lower sets).
    The score is a fixed function of the release, so audits stay valid whatever the
    grid's accuracy.

    Attributes:
        grid: the nodes (float32).
        log_ratio: the log-ratio at each node, clipped to [-`CLIP`, `CLIP`].
        ends: the interval's ends (projected) or (-inf, inf).
        end_log_ratio: the atoms' log-ratios (projected) or zeros.
    """

    grid: np.ndarray
    log_ratio: np.ndarray
    ends: np.ndarray
    end_log_ratio: np.ndarray

    #: The log-ratios are clipped to [-CLIP, CLIP] (cells where one world has no mass).
    CLIP = 60.0

    @classmethod
    def from_exact(cls, exact: ExactEpsilon) -> ExactLikelihoodScore:
        """The score of the laws in `exact` (its finest grid)."""
        nodes = exact.nodes
        p, q = np.asarray(exact.mass_in, np.float64), np.asarray(exact.mass_out, np.float64)
        tiny = 1e-300

        def log_ratio(a, b):
            return np.clip(np.log(a + tiny) - np.log(b + tiny), -cls.CLIP, cls.CLIP)

        grid = np.asarray(exact.grid[:nodes], np.float64)
        ratio = log_ratio(p[:nodes], q[:nodes])
        if exact.atoms:
            ends = np.asarray(exact.grid[nodes:], np.float64)
            end_ratio = log_ratio(p[nodes:], q[nodes:])
        else:
            ends, end_ratio = np.array([-np.inf, np.inf]), np.zeros(2)
        return cls(grid, ratio, ends, end_ratio)

    def __init__(self, grid, log_ratio, ends=(-np.inf, np.inf), end_log_ratio=(0.0, 0.0)):
        self.grid = np.asarray(grid, np.float32)
        self.log_ratio = np.asarray(log_ratio, np.float32)
        self.ends = np.asarray(ends, np.float32)
        self.end_log_ratio = np.asarray(end_log_ratio, np.float32)

    def score(self, mechanism: AbstractMechanism, release) -> Float[Array, ""]:
        m = (release if release.ndim == 1 else release[-1])[0]
        grid = jnp.asarray(self.grid, m.dtype)
        inner = jnp.interp(m, grid, jnp.asarray(self.log_ratio, m.dtype))
        ends = jnp.asarray(self.ends, m.dtype)
        end_ratio = jnp.asarray(self.end_log_ratio, m.dtype)
        return jnp.where(m <= ends[0], end_ratio[0], jnp.where(m >= ends[1], end_ratio[1], inner))

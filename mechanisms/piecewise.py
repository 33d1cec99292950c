r"""Piecewise-linear scalar constructions: one mechanism class whose parameters are data.

The 1-D counterexamples of the hidden-state papers are all DP-SGD runs on a scalar model
whose gradients are functions of the model value (and the step): the linear loss of the
heuristic's tight case, the zeroing and quadratic regularizers of Section 4 of
arXiv:2410.06186, the threshold landscape of Eq. (3) of arXiv:2405.14457. This module
states them in one family, an `AbstractFieldConstruction` of `PiecewiseField`s
(`advsim.mechanisms.fields`), so that a construction is a small file (`save` / `load`)
that a search can optimise (`advsim.search`) and a sweep can name by class path:

- every field is a `PiecewiseField`, piecewise linear in the model value with K knots
  and a jump allowed at each knot, optionally one row of values per step;
- the canary's field and each data group's field are clipped to $[-C, C]$ by the engine
  (as every per-example gradient is), the regularizer's field is applied unclipped;
- the batch structure is the usual one: groups of identical examples (`counts`), all
  present at fixed batching or each Poisson-sampled at rate q, and a canary schedule;
- the step sizes are one learning rate or one per step (the landscape takes a first step
  of size 1, then steps of size 1/B).

The constructions are `advsim.AbstractScalarLaw` mechanisms: `advsim.exact` gives their
exact epsilon, and `advsim.simulate` runs them like any other mechanism.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from advsim import CanarySchedule, DPSGDParams
from advsim.bounds import run_facts
from advsim.mechanisms.fields import AbstractFieldConstruction, PiecewiseField
from advsim.validation import check_int, check_positive

__all__ = ["FILE_FORMAT", "PiecewiseConstruction"]

FILE_FORMAT = "advsim.piecewise/1"
"""The `format` entry of a saved construction (`PiecewiseConstruction.save`)."""
SEARCHED_FIELDS = ("canary", "groups", "regularizer")
"""The fields of a `PiecewiseConstruction` a search may vary (`search_parameters`)."""


class PiecewiseConstruction(AbstractFieldConstruction):
    r"""A scalar DP-SGD construction whose fields are `PiecewiseField`s (module docstring).

    The family holds the papers' 1-D constructions: `linear_loss` (the heuristic's tight
    case), `zeroing_regularizer` and `quadratic_regularizer` (Section 4 of
    arXiv:2410.06186), `threshold_landscape` (Eq. (3) of arXiv:2405.14457); each gives the
    same exact epsilon as the mechanism that states it by hand. `save` writes a construction
    to a small JSON file and `load` reads it back, optionally with other T, q or sigma: a
    sweep config names `"advsim.mechanisms:PiecewiseConstruction.load"` with `path`.

    Args:
        steps: T >= 1.
        sampling_prob: q in (0, 1] (the data groups' and the canary's rate at Poisson
            batching).
        noise_multiplier: sigma > 0.
        canary: the canary's gradient field (clipped to [-C, C] by the engine).
        groups: the data groups' fields, one per group (each clipped).
        counts: identical examples per group (default 1 each).
        regularizer: the regularizer's gradient field, never clipped (default 0).
        init: m_0 (default 0).
        step_sizes: one learning rate per step, shape (T,) (default: `learning_rate` at
            every step).
        clip_norm: C > 0.
        learning_rate: eta > 0, every step's (when `step_sizes` is not given).
        canary_schedule: a `CanarySchedule` or its string form (default: every step,
            sampled).
        batching: "poisson" (default) or "fixed".

    Raises:
        ValueError, TypeError: a value out of range or of the wrong shape, naming it.

    Example:
        >>> from advsim.exact import last_iterate_epsilon
        >>> from advsim.bounds import heuristic_epsilon
        >>> mech = PiecewiseConstruction.linear_loss(steps=10, sampling_prob=0.1,
        ...                                          noise_multiplier=1.0)
        >>> exact = last_iterate_epsilon(mech, 1e-5)
        >>> abs(exact.epsilon / heuristic_epsilon(1e-5, 10, 0.1, 1.0) - 1) < 1e-3
        True
    """

    params: DPSGDParams
    init: np.ndarray
    canary: PiecewiseField
    groups: tuple[PiecewiseField, ...]
    counts: np.ndarray
    regularizer: PiecewiseField
    step_sizes: np.ndarray

    def __init__(
        self,
        steps: int,
        sampling_prob: float,
        noise_multiplier: float,
        *,
        canary: PiecewiseField | Mapping,
        groups: Sequence[PiecewiseField | Mapping] = (),
        counts: Sequence[int] | None = None,
        regularizer: PiecewiseField | Mapping | None = None,
        init: float = 0.0,
        step_sizes: Sequence[float] | None = None,
        clip_norm: float = 1.0,
        learning_rate: float | None = None,
        canary_schedule: CanarySchedule | str | None = None,
        batching: Literal["poisson", "fixed"] = "poisson",
    ):
        steps = check_int("steps", steps, minimum=1)
        if step_sizes is not None and learning_rate is not None:
            raise ValueError(
                "give learning_rate (every step) or step_sizes (one per step), not both"
            )
        if step_sizes is not None:
            sizes = np.asarray(step_sizes, np.float64).reshape(-1)
            if sizes.shape != (steps,) or not np.all(np.isfinite(sizes) & (sizes > 0)):
                raise ValueError(
                    f"step_sizes must be {steps} finite values > 0 (one per step), got "
                    f"{np.asarray(step_sizes).tolist()!r}"
                )
            learning_rate = float(sizes[0])
        self.params = DPSGDParams(
            steps, sampling_prob, noise_multiplier, clip_norm=clip_norm,
            learning_rate=1.0 if learning_rate is None else learning_rate,
            canary_schedule=canary_schedule, batching=batching,
        )  # fmt: skip
        self.step_sizes = (
            np.asarray(self.params.learning_rate, np.float64).reshape(1)
            if step_sizes is None
            else sizes
        )
        self._set_fields(
            init=init, canary=canary, groups=groups, counts=counts, regularizer=regularizer
        )

    def as_field(self, name: str, value) -> PiecewiseField:
        """`value` as a field of this T-step run: a `PiecewiseField` with 1 or T rows, or
        its dict (`PiecewiseField.to_dict`); None: the zero field."""
        steps = self.steps
        if value is None:
            return PiecewiseField.constant(0.0)
        if isinstance(value, Mapping):
            return PiecewiseField.from_dict(value, steps=steps)
        if isinstance(value, PiecewiseField):
            if value.rows not in (1, steps):
                raise ValueError(
                    f"{name} has {value.rows} rows of values: 1 (every step) or steps = {steps}"
                )
            return value
        raise TypeError(f"{name} must be a PiecewiseField or its dict, got {type(value).__name__}")

    @classmethod
    def contract_examples(cls) -> dict[str, PiecewiseConstruction]:
        """Small instances, by name, for the contract suite (`advsim.testing.check_mechanism`)."""
        field = PiecewiseField([-1.0, 0.0, 1.0], [0.5, -1.0, 2.0], [0.0, 0.5, 0.0])
        return {
            "landscape": cls.threshold_landscape(5, 2.0, 4),
            "poisson-groups": cls(
                4,
                0.2,
                1.5,
                canary=field,
                groups=[field, PiecewiseField.constant(0.3)],
                counts=[3, 2],
                regularizer=PiecewiseField.linear(0.5, radius=4.0),
            ),  # fmt: skip
        }

    # The mechanism ------------------------------------------------------------------

    def step_size(self, t: Int[Array, ""]):
        """eta_t: `step_sizes[t - 1]`, or the one learning rate."""
        sizes = jnp.asarray(self.step_sizes)
        return sizes[jnp.clip(jnp.asarray(t, jnp.int32) - 1, 0, sizes.shape[0] - 1)]

    def facts(self):
        """What this run certifies for `advsim.bounds` (`ProcessFacts`), over every step's
        row of every field: the slopes (convexity, curvature, smoothness), the largest
        |g| (bounded: each field is constant beyond its knots), Holder constants of the
        bounded Lipschitz fields, no projection. Its objective is never strongly convex
        on the whole line (the fields are flat beyond their knots)."""
        live = [g for g, n in zip(self.groups, self.counts, strict=True) if n > 0]
        counts = [int(n) for n in self.counts if n > 0]
        examples = [self.canary, *live]
        slopes = [f.slope_bounds() for f in examples]
        reg_lo, reg_hi = self.regularizer.slope_bounds()
        out_lo = reg_lo + sum(n * g.slope_bounds()[0] for g, n in zip(live, counts, strict=True))
        out_hi = reg_hi + sum(n * g.slope_bounds()[1] for g, n in zip(live, counts, strict=True))
        fields = [*examples, self.regularizer]
        smooth = max(max(abs(lo), abs(hi)) for lo, hi in slopes)
        sup = max(f.sup_abs() for f in examples)

        def holder(beta: float) -> float:
            if not np.isfinite(smooth):
                return np.inf
            return float(smooth if beta >= 1.0 else smooth**beta * (2.0 * sup) ** (1.0 - beta))

        return run_facts(
            self, num_examples=1 + int(np.sum(self.counts)), dimension=1,
            linear=all(f.slope_bounds() == (0.0, 0.0) for f in fields),
            convex=all(f.slope_bounds()[0] >= 0.0 for f in fields),
            strong_convexity=float(min(out_lo, out_lo + slopes[0][0])),
            objective_smoothness=float(max(abs(out_lo), abs(out_hi + max(slopes[0][1], 0.0)))),
            example_strong_convexity=float(min(lo for lo, _ in slopes)),
            smoothness=float(smooth), regularizer_smoothness=float(max(abs(reg_lo), abs(reg_hi))),
            regularizer_lipschitz=self.regularizer.sup_abs(),
            regularizer_zero=self.regularizer.sup_abs() == 0.0, lipschitz=sup, holder=holder,
            source="PiecewiseConstruction: its fields' rows, knot by knot",
        )  # fmt: skip

    # The search's protocol ------------------------------------------------------------

    def _named_fields(self, fields: Sequence[str]) -> list[PiecewiseField]:
        out = []
        for name in fields:
            if name not in SEARCHED_FIELDS:
                raise ValueError(
                    f"fields names {name!r}; the searched fields are {SEARCHED_FIELDS}"
                )
            out += list(self.groups) if name == "groups" else [getattr(self, name)]
        return out

    def search_parameters(self, fields: Sequence[str] = SEARCHED_FIELDS) -> tuple:
        """The arrays a search varies (the protocol of `advsim.search`): for each field
        named in `fields` ("canary", "groups": every group's, "regularizer"), in that
        order, its `values`, then its `jumps` where it has them."""
        out = []
        for f in self._named_fields(fields):
            out += [f.values] if f.jumps is None else [f.values, f.jumps]
        return tuple(out)

    def search_box(
        self, fields: Sequence[str] = SEARCHED_FIELDS, *, regularizer_bound: float = 4.0
    ) -> tuple[tuple[float, float], ...]:
        """The (lo, hi) of each of `search_parameters(fields)`: the canary's and the groups'
        values in [-C, C] and jumps in [-2C, 2C] (the engine clips their fields to C), the
        regularizer's values in [-R, R] and jumps in [-2R, 2R], with R = `regularizer_bound`
        in the model's units per step (default 4, the search config's)."""
        r = check_positive("regularizer_bound", regularizer_bound)
        c = float(self.clip_norm)
        out = []
        for name in fields:
            scale = r if name == "regularizer" else c
            for f in self._named_fields([name]):
                out.append((-scale, scale))
                if f.jumps is not None:
                    out.append((-2.0 * scale, 2.0 * scale))
        return tuple(out)

    # The papers' constructions -----------------------------------------------------

    @classmethod
    def linear_loss(cls, steps: int, sampling_prob: float, noise_multiplier: float, **options):
        """The canary's linear loss $-Cm$ alone (`advsim.mechanisms.LinearProcess` at d = 1,
        no data): the last-iterate heuristic's tight case (Theorem 1 of arXiv:2410.06186)."""
        c = float(options.get("clip_norm", 1.0))
        return cls(steps, sampling_prob, noise_multiplier, canary=PiecewiseField.constant(-c),
                   **options)  # fmt: skip

    @classmethod
    def zeroing_regularizer(
        cls, steps: int, sampling_prob: float, noise_multiplier: float, *, radius=None, **options
    ):
        r"""`advsim.mechanisms.ZeroingRegularizer`: the linear loss plus $r(m) = m^2 / (2\eta)$
        (Section 4.1 of arXiv:2410.06186), its field $m / \eta$ exact on
        $[-\text{radius}, \text{radius}]$ (default: 40 noise sds plus two moves, where the
        model stays but for a mass below 1e-300)."""
        c = float(options.get("clip_norm", 1.0))
        eta = float(options.get("learning_rate", 1.0))
        if radius is None:
            radius = eta * c * (40.0 * float(noise_multiplier) + 2.0)
        return cls(
            steps, sampling_prob, noise_multiplier, canary=PiecewiseField.constant(-c),
            regularizer=PiecewiseField.linear(1.0 / eta, radius=radius), **options,
        )  # fmt: skip

    @classmethod
    def quadratic_regularizer(
        cls, steps: int, sampling_prob: float, noise_multiplier: float, *, alpha: float,
        radius: float, **options,
    ):  # fmt: skip
        r"""`advsim.mechanisms.QuadraticRegularizer`: the linear loss plus $r(m) = \alpha
        m^2 / 2$ (Section 4.2 of arXiv:2410.06186), exact on $[-\text{radius},
        \text{radius}]$ (no default: the model's spread grows with T)."""
        c = float(options.get("clip_norm", 1.0))
        return cls(
            steps, sampling_prob, noise_multiplier, canary=PiecewiseField.constant(-c),
            regularizer=PiecewiseField.linear(alpha, radius=radius), **options,
        )  # fmt: skip

    @classmethod
    def threshold_landscape(
        cls, steps: int, noise_multiplier: float, batch_size: int, *, threshold=None,
        clip_norm: float = 1.0,
    ):  # fmt: skip
        r"""`advsim.mechanisms.ThresholdLandscape` (reinforcing orientation): a canary of
        gradient $-C$ at step 1 only (unsampled), then B identical examples whose gradient
        is $+C$ up to the threshold h and $-C$ above it, with step sizes 1, then 1/B (Eq. (3)
        of arXiv:2405.14457)."""
        b = check_int("batch_size", batch_size, minimum=1, maximum=2**31 - 1)
        h = clip_norm / 2.0 if threshold is None else float(threshold)
        rows = np.full((steps, 1), clip_norm)
        rows[0] = 0.0  # step 1 is the canary's alone
        jumps = np.full((steps, 1), -2.0 * clip_norm)
        jumps[0] = 0.0
        return cls(
            steps, 1.0, noise_multiplier, canary=PiecewiseField.constant(-clip_norm),
            groups=[PiecewiseField([h], rows, jumps, steps=steps)], counts=[b],
            step_sizes=[1.0] + [1.0 / b] * (steps - 1), clip_norm=clip_norm,
            canary_schedule=CanarySchedule.only(1, sampled=False), batching="fixed",
        )  # fmt: skip

    # Files ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The construction as JSON-ready data (`save`)."""
        schedule = self.canary_schedule
        return {
            "format": FILE_FORMAT,
            "steps": self.steps,
            "sampling_prob": float(self.sampling_prob),
            "noise_multiplier": float(self.noise_multiplier),
            "clip_norm": float(self.clip_norm),
            "step_sizes": self.step_sizes.tolist(),
            "init": float(self.init),
            "batching": self.batching,
            "canary_schedule": dict(
                period=schedule.period,
                first=schedule.first,
                last=schedule.last,
                sampled=schedule.sampled,
            ),  # fmt: skip
            "canary": self.canary.to_dict(),
            "groups": [g.to_dict() for g in self.groups],
            "counts": self.counts.tolist(),
            "regularizer": self.regularizer.to_dict(),
        }

    def save(self, path: str | os.PathLike, *, metadata: Mapping[str, Any] | None = None) -> Path:
        """Writes the construction to a JSON file (atomically: a temporary file renamed),
        with optional `metadata` (how it was found) beside it. Returns the path."""
        path = Path(path)
        data = self.to_dict()
        if metadata:
            data["metadata"] = dict(metadata)
        text = json.dumps(data, indent=1, allow_nan=False) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **overrides) -> PiecewiseConstruction:
        """The construction `to_dict` wrote; `overrides` replace steps, sampling_prob,
        noise_multiplier or clip_norm (a field with one row per step needs its T)."""
        if data.get("format") != FILE_FORMAT:
            raise ValueError(f"not a {FILE_FORMAT} construction: format {data.get('format')!r}")
        allowed = {"steps", "sampling_prob", "noise_multiplier", "clip_norm"}
        bad = sorted(set(overrides) - allowed)
        if bad:
            raise ValueError(f"a loaded construction can override {sorted(allowed)}, not {bad}")
        args = {k: data[k] for k in allowed} | overrides
        steps = check_int("steps", args["steps"], minimum=1)
        sizes = np.asarray(data["step_sizes"], np.float64)
        if sizes.size not in (1, steps):
            raise ValueError(
                f"steps = {steps}: this construction has one step size per step for "
                f"T = {sizes.size}; load it with that T"
            )
        sched = data["canary_schedule"]
        return cls(
            steps, args["sampling_prob"], args["noise_multiplier"],
            canary=data["canary"], groups=data["groups"], counts=data["counts"],
            regularizer=data["regularizer"], init=data["init"],
            step_sizes=None if sizes.size == 1 else sizes,
            learning_rate=float(sizes[0]) if sizes.size == 1 else None,
            clip_norm=args["clip_norm"], batching=data["batching"],
            canary_schedule=CanarySchedule(sched["period"], sched["first"], sched["last"],
                                           sched["sampled"]),
        )  # fmt: skip

    @classmethod
    def load(cls, path: str | os.PathLike, **overrides) -> PiecewiseConstruction:
        """The construction saved at `path` (`save`), with optional overrides of steps,
        sampling_prob, noise_multiplier, clip_norm (`from_dict`)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read a construction from path {str(path)!r}: {err}") from None
        return cls.from_dict(data, **overrides)

"""The searched family at one cell: the common knots, the starts embedded in it, the box,
and the map from a parameter vector to a `PiecewiseConstruction` (through its
`search_parameters` and `search_box`, the protocol any searched class follows)."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim._schedule import CanarySchedule
from advsim.exact._plan import layout
from advsim.mechanisms import PiecewiseConstruction, PiecewiseField
from advsim.search._config import SearchConfig

__all__ = ["Family", "box_vectors", "build_family"]


def _cell_options(cfg: SearchConfig) -> dict:
    """The keyword arguments every member shares (the batch structure, the steps)."""
    schedule = CanarySchedule.parse(cfg.canary_schedule, sampled=cfg.canary_sampled)
    opts = dict(clip_norm=cfg.clip_norm, canary_schedule=schedule, batching=cfg.batching)
    if cfg.step_sizes == "landscape":
        b = cfg.counts[0]
        opts["step_sizes"] = [1.0] + [1.0 / b] * (cfg.steps - 1)
    else:
        opts["learning_rate"] = cfg.learning_rate
    return opts


def paper_start(cfg: SearchConfig, name: str) -> PiecewiseConstruction:
    """A paper's construction at the cell, by start name (`START_KINDS`)."""
    kind, _, arg = name.partition(":")
    q, sigma, t = cfg.sampling_prob, cfg.noise_multiplier, cfg.steps
    opts = _cell_options(cfg)
    groups = [PiecewiseField.constant(0.0) for _ in cfg.counts]
    if kind == "landscape":
        if cfg.step_sizes != "landscape" or cfg.batching != "fixed" or len(cfg.counts) != 1:
            raise ValueError(
                "start 'landscape' needs the landscape's cell: batching = 'fixed', one group "
                "counts = [B], step_sizes = 'landscape'"
            )
        mech = PiecewiseConstruction.threshold_landscape(t, sigma, cfg.counts[0],
                                                         clip_norm=cfg.clip_norm)  # fmt: skip
        schedule = CanarySchedule.parse(cfg.canary_schedule, sampled=cfg.canary_sampled)
        if mech.canary_schedule != schedule:
            raise ValueError(
                f"start 'landscape' puts the canary at step 1 only, unsampled; the config's "
                f"canary_schedule is {cfg.canary_schedule!r}"
            )
        return mech
    eta = float(np.max(opts.get("step_sizes", [cfg.learning_rate])))
    c = cfg.clip_norm
    canary = PiecewiseField.constant(-c)
    radius = 1e6 * c * eta  # beyond every grid: linear on the whole support
    if kind == "linear":
        reg = None
    elif kind == "zeroing":
        reg = PiecewiseField.linear(1.0 / eta, radius=radius)
    else:  # quadratic:ALPHA
        reg = PiecewiseField.linear(float(arg), radius=radius)
    return PiecewiseConstruction(
        t, q, sigma, canary=canary, groups=groups, counts=list(cfg.counts), regularizer=reg,
        **opts,
    )  # fmt: skip


def _embed(field: PiecewiseField, knots: np.ndarray, rows: int, jumps: bool):
    """`field` on `knots` (its left limits, and its jumps where a knot is one of its own):
    exact wherever the field's kinks are knots or lie beyond the span."""
    if field.rows > rows:
        raise ValueError("a start's field has one row per step but the family has one row")
    with jax.enable_x64(True):
        m = jnp.asarray(knots, jnp.float64)
        values = np.stack([np.asarray(field(m, jnp.int32(r + 1))) for r in range(rows)])
    steps = np.zeros_like(values)
    if field.jumps is not None:
        own = np.asarray(field.jumps)
        for k, x in enumerate(field.knots):
            hit = np.flatnonzero(np.isclose(knots, x, rtol=0.0, atol=1e-12))
            if hit.size:
                for r in range(rows):
                    steps[r, hit[0]] += own[min(r, field.rows - 1), k]
    if np.any(steps) and not jumps:
        raise ValueError("a start jumps but the family has jumps = false")
    return PiecewiseField(knots, values, steps if jumps else None)


@dataclasses.dataclass
class Family:
    """The searched family at one cell.

    Attributes:
        config: the search's config.
        knots: the common knots of every field.
        template: a member (its static structure is every member's).
        lower, upper: the box of every searched leaf (flat vectors).
        starts: name -> parameter vector of each start.
    """

    config: SearchConfig
    knots: np.ndarray
    template: PiecewiseConstruction
    lower: np.ndarray
    upper: np.ndarray
    starts: dict[str, np.ndarray]

    def _leaves(self, mech):
        """The searched arrays of `mech`, in a fixed order (its `search_parameters`)."""
        return list(mech.search_parameters(self.config.search))

    def vector(self, mech) -> np.ndarray:
        """The parameter vector of a member."""
        return np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in self._leaves(mech)])

    def member(self, theta) -> PiecewiseConstruction:
        """The member with parameters `theta` (jittable: theta may be traced)."""
        leaves = self._leaves(self.template)
        parts, at = [], 0
        for leaf in leaves:
            size = int(np.size(leaf))
            parts.append(jnp.reshape(theta[at : at + size], np.shape(leaf)))
            at += size
        return eqx.tree_at(self._leaves, self.template, parts)

    def clip(self, theta):
        """`theta` projected onto the box."""
        return jnp.clip(theta, self.lower, self.upper)

    def random(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` members drawn in the box: values uniform, each jump non-zero with
        probability 2 / K (then uniform in its range)."""
        u = rng.uniform(self.lower, self.upper, size=(size, self.lower.size))
        jump = self._jump_mask()
        keep = rng.random((size, self.lower.size)) < 2.0 / max(self.knots.size, 2)
        return np.where(jump & ~keep, 0.0, u)

    def _jump_mask(self) -> np.ndarray:
        mask = []
        for name in self.config.search:
            fields = self.template.groups if name == "groups" else (getattr(self.template, name),)
            for f in fields:
                mask.append(np.zeros(f.values.size, bool))
                if f.jumps is not None:
                    mask.append(np.ones(f.jumps.size, bool))
        return np.concatenate(mask)


def box_vectors(template, params, box) -> tuple[np.ndarray, np.ndarray]:
    """The flat lower and upper bounds of the arrays `params` from their `box`, one
    (lo, hi) per array (scalars or arrays broadcastable to its shape).

    Raises:
        ValueError: a box of the wrong length, or not finite with lo < hi.
    """
    name = type(template).__name__
    params, box = [np.asarray(p, np.float64) for p in params], list(box)
    if len(box) != len(params):
        raise ValueError(
            f"{name}.search_box() gives {len(box)} (lo, hi) pairs for {len(params)} "
            "search_parameters()"
        )
    lower, upper = [np.zeros(0)], [np.zeros(0)]
    for i, (p, (lo, hi)) in enumerate(zip(params, box, strict=True)):
        lo = np.broadcast_to(np.asarray(lo, np.float64), p.shape).reshape(-1)
        hi = np.broadcast_to(np.asarray(hi, np.float64), p.shape).reshape(-1)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
            raise ValueError(f"{name}.search_box()[{i}] must be finite with lo < hi")
        lower.append(lo)
        upper.append(hi)
    return np.concatenate(lower), np.concatenate(upper)


def _span(cfg: SearchConfig, starts: list[PiecewiseConstruction]) -> tuple[float, float]:
    if cfg.span is not None:
        return cfg.span
    lays = [layout(m, cfg.cells_per_sd) for m in starts]
    return min(lay.lo for lay in lays), max(lay.hi for lay in lays)


def build_family(cfg: SearchConfig) -> Family:
    """The family at `cfg`'s cell with every start embedded (the papers' constructions
    are members: the same fields on the span); for a construction class of your own
    (`cfg.construction`), the arrays it names (`advsim.search.build_parameter_family`)."""
    if cfg.construction is not None:
        from advsim.search._parameters import build_parameter_family

        return build_parameter_family(cfg)
    papers = {name: paper_start(cfg, name) for name in cfg.starts}
    base = next(iter(papers.values()), None) or paper_start(cfg, "linear")
    lo, hi = _span(cfg, list(papers.values()) or [base])
    knots = np.linspace(lo, hi, cfg.knots)
    extra = [np.asarray(f.knots) for m in papers.values()
             for f in (m.canary, *m.groups, m.regularizer) if f.jumps is not None]  # fmt: skip
    knots = np.unique(np.concatenate([knots, *extra])) if extra else knots
    t = cfg.steps

    def rows(name):
        return t if name in cfg.per_step else 1

    def embed(mech):
        jumps = {n: cfg.jumps and n in cfg.search for n in ("canary", "groups", "regularizer")}
        return PiecewiseConstruction(
            t, cfg.sampling_prob, cfg.noise_multiplier,
            canary=_embed(mech.canary, knots, rows("canary"), jumps["canary"]),
            groups=[_embed(g, knots, rows("groups"), jumps["groups"]) for g in mech.groups],
            counts=list(cfg.counts),
            regularizer=_embed(mech.regularizer, knots, rows("regularizer"),
                               jumps["regularizer"]),
            init=float(mech.init), **_cell_options(cfg),
        )  # fmt: skip

    template = embed(base)
    box = template.search_box(cfg.search, regularizer_bound=cfg.regularizer_bound)
    lower, upper = box_vectors(template, template.search_parameters(cfg.search), box)
    family = Family(cfg, knots, template, lower, upper, {})
    bound, r = upper, cfg.regularizer_bound
    for name, mech in papers.items():
        theta = family.vector(embed(mech))
        if np.any(np.abs(theta) > bound * (1 + 1e-12)):
            worst = float(np.max(np.abs(theta) / np.maximum(bound, 1e-300)))
            raise ValueError(
                f"start {name!r} leaves the box: a value {worst:.3g} times its bound (raise "
                f"regularizer_bound to at least {worst * r:.6g}, or narrow the span)"
            )
        family.starts[name] = theta
    return family

r"""A tightness atlas: exact / bound for each bound over a grid of T and its key parameter.

Every bound here is an `advsim.bounds.AbstractBound` value that declares its assumptions;
each cell is a 1-D DP-SGD construction (`advsim.testing.ScalarFieldConstruction`, or its
projected form) inside them, and the cell's number is

$$\text{tightness} = \frac{\varepsilon_{\text{exact}}(\delta)}{\varepsilon_{\text{bound}}(\delta)}
  \in (0, 1],$$

the exact epsilon of the last model (`advsim.exact.last_iterate_epsilon`, its error a
refinement estimate, propagated as `ratio_error = exact_error / bound`) over the bound's
value (`bound.epsilon(mech, delta)`, which refuses, naming the assumption, a construction
outside its assumptions). 1 is tight; every bound is an upper bound, so a ratio above 1
(beyond its error) would be a bug. The panels (model $m \in \mathbb R$, clip norm $C$,
learning rate $\eta$, noise $\mathcal N(0, \sigma^2C^2)$ added to the summed gradient):

- `StronglyConvexGDP` (Bok, Su and Altschuler, arXiv:2403.00278; full batch, strongly
  convex objective): y = the contraction $\eta a$ of the regularizer $a m^2/2$. With the
  linear canary $-C$ the last model is Gaussian in both worlds and the bound is its exact
  GDP value (tight; `advsim.bounds._strongly_convex`'s derivation); with the convex canary
  $g(m) = -\tfrac C2(1 - \tanh(m/w))$ (gradient in $(-C, 0)$, nondecreasing) the bound
  takes the same $G = C$ (and a larger smoothness, so a larger $c$) while the canary moves
  the model less ($C/2$ at $m_0 = 0$): loose.
- `ShiftedInterpolation` (arXiv:2403.00278; projected full-batch, convex, smooth): y = the
  radius $R$ of the interval $[-R, R]$ in noise standard deviations $\eta\sigma C$, the
  linear canary $-C$. Tight while the projection never acts (large $R$, small $T$); once
  the canary's drift $\eta C$ per step has crossed the interval, the exact epsilon stops
  growing, the bound later and higher (full figure, $R = 0.5$ sds: 0.99 against 6.57).
- `LastIterateHeuristic` (Theorem 1 of arXiv:2410.06186; linear losses): y = the Poisson
  sampling rate $q$, the linear canary $-C$ and no other data (tight: the theorem's
  worst case), plus a row where `data_examples` copies of the canary's loss are sampled
  too (their Binomial count is noise in both worlds: loose).
- `Composition` (every iterate released, PLD accounting): the same constructions. Equal to
  the heuristic at $T = 1$ (one step releases the last iterate) and at $q = 1$ (both
  $\sqrt T/\sigma$-GDP), loose in between.

A cell whose exact epsilon exceeds what a float64 grid resolves
(`advsim.exact.resolution_limit`, 20.7 at $\delta = 10^{-5}$) is computed again with
log-masses (`advsim.exact.ExactEpsilon.log_space`; about 30 s a cell at T = 100); one the
engine still does not resolve (`exact_resolved` false: epsilon above 2048) has no ratio
(nan) and is drawn hatched grey ('n/r'). The figure file's noise multipliers keep all but
one full-batch cell below the grid's limit (its comments say why sigma differs by panel).
"""

from __future__ import annotations

import math
import time

import numpy as np

import advsim
from advsim._plot_style import styled_pyplot, tex_number
from advsim.bounds import (
    Composition,
    LangevinRDP,
    LastIterateHeuristic,
    ShiftedInterpolation,
    StronglyConvexGDP,
)
from advsim.exact import last_iterate_epsilon, resolution_limit
from advsim.plotting import save_figure
from advsim.testing import (
    ProjectedScalarFieldConstruction,
    ScalarField,
    ScalarFieldConstruction,
)

__all__ = ["atlas_blocks", "compute_tightness_atlas", "plot_tightness_atlas"]

#: The panels, in drawing order: (panel key, the bound).
PANELS = (
    ("strongly_convex_linear", StronglyConvexGDP()),
    ("strongly_convex_tanh", StronglyConvexGDP()),
    ("shifted_interpolation", ShiftedInterpolation()),
    ("langevin", LangevinRDP()),
    ("heuristic", LastIterateHeuristic()),
    ("composition", Composition()),
)


def _full_batch() -> dict:
    """Every example, the canary too, in every step (the full-batch bounds' setting)."""
    return dict(batching="fixed", canary_schedule=advsim.CanarySchedule.every_step(sampled=False))


def _tanh_canary(clip: float, width: float) -> ScalarField:
    r"""$g(m) = -\frac C2 + \frac C2\tanh(m/w)$: nondecreasing (a convex loss), in $(-C, 0)$."""
    return ScalarField(
        -0.5 * clip, bump_centres=[0.0], bump_heights=[0.5 * clip], bump_widths=[width]
    )


def atlas_blocks(p: dict) -> list[dict]:
    """The figure's row blocks: each one construction family (`build(T, y)`), its bounds
    (panel keys), its y values and how the table names them. The cells of one block share
    their fields' shape, hence the exact engine's compiled propagation."""
    clip = float(p.get("clip_norm", 1.0))
    canary = ScalarField.constant(-clip)
    width = float(p.get("sc_tanh_width", 0.0))
    sc_sigma, sc_lr = float(p["sc_sigma"]), float(p["sc_learning_rate"])
    si_sigma, si_lr = float(p["si_sigma"]), float(p["si_learning_rate"])
    ps_sigma = float(p["poisson_sigma"])
    blocks = []

    def sc(canary_field):
        def build(steps, contraction):
            return ScalarFieldConstruction(
                steps, 1.0, sc_sigma, canary=canary_field,
                regularizer=ScalarField(0.0, float(contraction) / sc_lr),
                clip_norm=clip, learning_rate=sc_lr, **_full_batch(),
            )  # fmt: skip

        return build

    sc_common = dict(
        parameter="contraction lr*a", values=list(p["sc_contractions"]), sigma=sc_sigma,
        learning_rate=sc_lr, batching="fixed",
    )  # fmt: skip
    blocks.append(dict(
        sc_common, block="sc_linear", panels=["strongly_convex_linear", "langevin"],
        construction="canary g = -C (linear), regularizer a m^2/2, full batch",
        # A zero-height bump: the tanh canary's shape, so both share one compilation.
        build=sc(canary.padded(knots=0, bumps=1, jumps=0) if width > 0 else canary),
    ))  # fmt: skip
    if width > 0:
        blocks.append(dict(
            sc_common, block="sc_tanh", panels=["strongly_convex_tanh"],
            construction=(f"canary g = -C/2 (1 - tanh(m / {width:g})) (convex, not linear), "
                          "regularizer a m^2/2, full batch"),
            build=sc(_tanh_canary(clip, width)),
        ))  # fmt: skip

    def si(steps, radius_sds):
        radius = float(radius_sds) * si_lr * si_sigma * clip
        return ProjectedScalarFieldConstruction(
            steps, 1.0, si_sigma, radius=radius, canary=canary,
            clip_norm=clip, learning_rate=si_lr, **_full_batch(),
        )  # fmt: skip

    blocks.append(dict(
        block="si_linear", panels=["shifted_interpolation"],
        construction="canary g = -C (linear), projected onto [-R, R], full batch",
        parameter="radius R / (lr sigma C)", values=list(p["si_radii"]), sigma=si_sigma,
        learning_rate=si_lr, batching="fixed", build=si,
    ))  # fmt: skip

    def poisson(groups, counts):
        def build(steps, q):
            return ScalarFieldConstruction(
                steps, float(q), ps_sigma, canary=canary, groups=groups, counts=counts,
                clip_norm=clip, learning_rate=1.0, batching="poisson",
            )  # fmt: skip

        return build

    ps_common = dict(
        panels=["heuristic", "composition"], parameter="sampling rate q", sigma=ps_sigma,
        learning_rate=1.0, batching="poisson",
    )  # fmt: skip
    blocks.append(dict(
        ps_common, block="poisson_no_data", values=list(p["poisson_rates"]),
        construction="canary g = -C (linear), no other data, Poisson sampling",
        build=poisson([], []),
    ))  # fmt: skip
    n = int(p.get("data_examples", 0))
    if n > 0:
        blocks.append(dict(
            ps_common, block="poisson_data", values=[float(p["data_rate"])], data_examples=n,
            construction=(f"canary g = -C (linear) and {n} data examples of gradient -C "
                          "(copies of it), Poisson sampling"),
            build=poisson([canary], [n]),
        ))  # fmt: skip
    return blocks


def compute_tightness_atlas(fig, rows):
    """One row per (panel, construction, T, y): the exact epsilon, the bound, their ratio
    with its error; and a summary row per panel block (min / max ratio)."""
    del rows  # no sweeps: exact laws and closed-form bounds only
    p = fig.params
    delta = float(p["delta"])
    steps = [int(t) for t in p["steps"]]
    bounds = dict(PANELS)
    cells = []
    for blk in atlas_blocks(p):
        for t in steps:
            for y in blk["values"]:
                mech = blk["build"](t, y)
                # The bounds first: a construction outside a bound's assumptions raises
                # here (AssumptionError, naming the assumption), before any exact work.
                values = {key: float(bounds[key].epsilon(mech, delta)) for key in blk["panels"]}
                # One call per cell: the cells of a block share its compiled propagation
                # across T and y (a batched call compiles anew per batch size: slower).
                start = time.perf_counter()
                ex = last_iterate_epsilon(
                    mech, delta, cells_per_sd=float(p["cells_per_sd"]),
                    refinements=int(p["refinements"]), progress=False,
                )  # fmt: skip
                seconds = time.perf_counter() - start
                acc = mech.accounting()
                for key, b in values.items():
                    bound = bounds[key]
                    ok = bool(ex.resolved) and math.isfinite(ex.epsilon) and b > 0
                    cells.append(dict(
                        panel=key, bound=bound.name, block=blk["block"],
                        construction=blk["construction"],
                        assumption_set="; ".join(a.describe() for a in bound.assumptions)
                        or "none",
                        bound_reference=bound.reference, steps=t,
                        parameter=blk["parameter"], parameter_value=float(y),
                        sigma=float(acc.noise_multiplier), q=float(acc.sampling_prob),
                        learning_rate=float(mech.learning_rate),
                        clip_norm=float(mech.clip_norm), batching=blk["batching"],
                        radius=float(getattr(mech, "radius", math.inf)),
                        data_examples=int(blk.get("data_examples", 0)), delta=delta,
                        exact_epsilon=float(ex.epsilon), exact_error=float(ex.error),
                        exact_error_kind=ex.error_kind,
                        exact_resolved=bool(ex.resolved), bound_epsilon=b,
                        ratio=float(ex.epsilon) / b if ok else math.nan,
                        ratio_error=float(ex.error) / b if ok else math.nan,
                        exact_s=seconds,
                    ))  # fmt: skip
    return {"tightness_atlas": cells, "tightness_atlas_summary": _summary(cells, delta)}


def _summary(cells, delta):
    """Per panel block: the smallest and largest resolved ratio and where they are."""
    out = []
    keys = list(dict.fromkeys((c["panel"], c["block"]) for c in cells))
    for panel, block in keys:
        rs = [c for c in cells if c["panel"] == panel and c["block"] == block]
        ok = [c for c in rs if math.isfinite(c["ratio"])]

        def at(c):
            return f"T={c['steps']}, {c['parameter']}={c['parameter_value']:g}"

        lo = min(ok, key=lambda c: c["ratio"]) if ok else None
        hi = max(ok, key=lambda c: c["ratio"]) if ok else None
        out.append(dict(
            panel=panel, bound=rs[0]["bound"], block=block, sigma=rs[0]["sigma"],
            delta=delta, cells=len(rs), resolved=len(ok),
            ratio_min=lo["ratio"] if lo else math.nan, ratio_min_at=at(lo) if lo else "",
            ratio_max=hi["ratio"] if hi else math.nan, ratio_max_at=at(hi) if hi else "",
            ratio_error_max=max((c["ratio_error"] for c in ok), default=math.nan),
        ))  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------
# The picture

_TITLES = {
    "strongly_convex_linear": ("StronglyConvexGDP", "canary $-C$ (linear): tight"),
    "strongly_convex_tanh": ("StronglyConvexGDP", r"canary $-\frac{C}{2}(1-\tanh(m/w))$, convex"),
    "shifted_interpolation": ("ShiftedInterpolation", r"canary $-C$, projected onto $[-R, R]$"),
    "langevin": ("LangevinRDP", "canary $-C$ (linear), fixed start"),
    "heuristic": ("LastIterateHeuristic", "canary $-C$, Poisson sampling"),
    "composition": ("Composition", "canary $-C$, Poisson sampling"),
}
#: Where each panel goes (two columns; None: the note).
LAYOUT = (
    ("strongly_convex_linear", "strongly_convex_tanh"),
    ("shifted_interpolation", "langevin"),
    ("heuristic", "composition"),
)
_NOTE = (
    "How to read it. Each cell is one 1-D construction\n"
    "inside the bound's assumptions (bound.epsilon\n"
    "refuses any other, naming the assumption): its\n"
    "exact last-model epsilon (advsim.exact) over the\n"
    "bound's. Every bound is an upper bound: each ratio\n"
    "is at most 1, up to the exact value's refinement\n"
    "error (ratio_error in the table).\n"
    "Above the white line: '+n data', n copies of the\n"
    "canary's gradient -C sampled with it (noise in\n"
    "both worlds the heuristic does not count).\n"
    "Hatched 'n/r': the exact epsilon is beyond what a\n"
    "float64 grid resolves; no ratio."
)
_YLABELS = {
    "contraction lr*a": r"contraction $\eta a$",
    "radius R / (lr sigma C)": r"radius $R$ / $\eta\sigma C$",
    "sampling rate q": "sampling rate $q$",
}


def _grid(cells, panel):
    """(T values, row labels, ratio matrix, resolved mask) of one panel, rows bottom-up."""
    rs = [c for c in cells if c["panel"] == panel]
    ts = sorted({int(c["steps"]) for c in rs})
    rows = list(dict.fromkeys((c["block"], float(c["parameter_value"])) for c in rs))
    ratio = np.full((len(rows), len(ts)), np.nan)
    resolved = np.zeros((len(rows), len(ts)), bool)
    for c in rs:
        i, j = rows.index((c["block"], float(c["parameter_value"]))), ts.index(int(c["steps"]))
        ratio[i, j] = float(c["ratio"])
        resolved[i, j] = str(c["exact_resolved"]).lower() == "true"
    labels = []
    for block, y in rows:
        if block == "poisson_data":
            n = next(int(c["data_examples"]) for c in rs if c["block"] == block)
            labels.append(f"{y:g}, +{n} data")
        else:
            labels.append(f"{y:g}")
    return ts, rows, labels, ratio, resolved


def _draw_panel(ax, cells, panel, cmap, p):
    from matplotlib.patches import Rectangle

    ts, rows, labels, ratio, resolved = _grid(cells, panel)
    image = ax.imshow(
        np.ma.masked_invalid(ratio), cmap=cmap, vmin=0.0, vmax=1.0, origin="lower",
        aspect="auto",
    )  # fmt: skip
    for i in range(len(rows)):
        for j in range(len(ts)):
            v = ratio[i, j]
            if np.isfinite(v):
                text, color = f"{v:.2f}", ("white" if v < 0.55 else "black")
            else:
                text, color = ("n/r" if not resolved[i, j] else "-"), "0.25"
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.85",
                                       hatch="///", edgecolor="0.6", lw=0))  # fmt: skip
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5, color=color)
    blocks = [b for b, _ in rows]
    for i in range(1, len(rows)):
        if blocks[i] != blocks[i - 1]:
            ax.axhline(i - 0.5, color="white", lw=2.0)
    ax.set_xticks(range(len(ts)), [str(t) for t in ts])
    ax.set_yticks(range(len(rows)), labels)
    ax.tick_params(length=0, labelsize=7)
    ax.set_xlabel(r"steps $T$ (last model released)", fontsize=8)
    rs = [c for c in cells if c["panel"] == panel]
    ax.set_ylabel(_YLABELS.get(rs[0]["parameter"], rs[0]["parameter"]), fontsize=8)
    name, what = _TITLES[panel]
    sigma, lr = float(rs[0]["sigma"]), float(rs[0]["learning_rate"])
    setting = (
        f"full batch, $\\sigma$ = {sigma:g}, $\\eta$ = {lr:g}"
        if rs[0]["batching"] == "fixed"
        else f"$\\sigma$ = {sigma:g}"
    )
    if panel == "strongly_convex_tanh":
        what = what + f", $w$ = {float(p['sc_tanh_width']):g}"
    ax.set_title(
        f"{name}: {what}\n{setting}, $\\delta = {tex_number(float(rs[0]['delta']))}$",
        fontsize=8,
    )
    for side in ax.spines.values():
        side.set_visible(False)
    return image


def plot_tightness_atlas(fig, rows, tables):
    """One heat map per bound: exact / bound over T (x) and the bound's key parameter (y),
    the value in each cell, one colour scale [0, 1] for all."""
    del rows
    cells = tables["tightness_atlas"]
    p = fig.params
    plt = styled_pyplot()
    present = {k for k, _ in PANELS if any(c["panel"] == k for c in cells)}
    pairs = [[k if k in present else None for k in pair] for pair in LAYOUT]
    pairs = [pair for pair in pairs if any(pair)]
    n_rows = {k: len({(c["block"], c["parameter_value"]) for c in cells if c["panel"] == k})
              for k in present}  # fmt: skip
    # Two columns; each row of panels as tall as its taller panel's rows of cells.
    heights = [max(n_rows[k] for k in pair if k) + 2.6 for pair in pairs]
    figure = plt.figure(figsize=(9.4, 0.3 * sum(heights) + 0.6))
    grid = figure.add_gridspec(len(pairs), 2, height_ratios=heights)
    cmap = plt.get_cmap("viridis")
    axes, image, noted = [], None, False
    for r, pair in enumerate(pairs):
        for col, key in enumerate(pair):
            ax = figure.add_subplot(grid[r, col])
            if key is None:  # an empty slot: the first says how to read the grid
                ax.axis("off")
                if not noted:
                    ax.text(0.0, 0.5, _NOTE, ha="left", va="center", fontsize=7,
                            transform=ax.transAxes)  # fmt: skip
                    noted = True
                continue
            image = _draw_panel(ax, cells, key, cmap, p)
            axes.append(ax)
    delta = float(cells[0]["delta"])
    bar = figure.colorbar(image, ax=axes, shrink=0.6, pad=0.02, aspect=30)
    bar.set_label("exact / bound  (1 = tight)", fontsize=9)
    figure.suptitle(
        "Tightness atlas: the exact $\\varepsilon$ of 1-D constructions meeting each bound's "
        f"assumptions, over the bound ($\\delta = {tex_number(delta)}$)\n"
        f"clip norm $C$ = {float(cells[0]['clip_norm']):g}, start $m_0 = 0$; hatched 'n/r': "
        f"exact $\\varepsilon$ above the float64 grid's resolution limit "
        f"({resolution_limit(delta):.1f}), no ratio",
        fontsize=9,
    )
    return save_figure(figure, fig.out / "tightness_atlas")

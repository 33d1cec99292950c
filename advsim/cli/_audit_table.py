"""`advsim audit`'s printed output: the table of rows (one per T), the notes on its
columns and markers, and where the time went."""

from __future__ import annotations

__all__ = ["format_notes", "format_row", "shows_exact", "table_head", "time_report"]


def _eps(value, mark: str = "") -> str:
    return "n/a" if value is None else f"{value:.3f}{mark}"


def _err(value) -> str:
    return "n/a" if value is None else f"{value:.1e}"


def table_head(exact: bool) -> str:
    """The table's header; with `exact`, the exact epsilon and its estimated error."""
    cols = f"{'exact':>10} {'est. err':>8} " if exact else ""
    return (
        f"{'T':>6} {'sigma':>8} {'eps_lower':>10} {'eps_point':>10} {cols}{'heuristic':>10} "
        f"{'composition':>12}  guarantee of eps_lower"
    )


def format_row(r, exact: bool = False) -> str:
    above = bool(r.get("eps_point_above_composition"))
    guarantee = r.get("guarantee", "")
    if r.get("assumption_rejected"):
        guarantee += ", assumption REJECTED"
    cols = f"{_eps(r.get('exact_epsilon')):>10} {_err(r.get('exact_error')):>8} " if exact else ""
    low = _eps(r["eps_lower"], "*" if r.get("eps_lower_above_exact") is True else "")
    return (
        f"{r['steps']:>6d} {r['noise_multiplier']:>8.4f} {low:>10} "
        f"{_eps(r['eps_point'], '!' if above else ''):>10} {cols}{r['heuristic']:>10.3f} "
        f"{r['composition']:>12.3f}  {guarantee}"
    )


def shows_exact(config) -> bool:
    """Whether the table has the exact columns: the config computes them and its mechanism
    has the capability (`advsim.exact.check_scalar_law`; the same class in every row)."""
    from advsim.exact import check_scalar_law
    from advsim.sweep._config import build_mechanism

    if not config.exact:
        return False
    try:
        check_scalar_law(build_mechanism(config, config.cells()[0].params, noise_multiplier=1.0))
    except (TypeError, ValueError):
        return False
    return True


def format_notes(rows, exact: bool = False) -> list[str]:
    """What the table's columns and markers mean (only those that occur).

    `exact`, `est. err`: the exact epsilon of the last model and the refinement estimate
    of its numerical error (not a bound); `*` after eps_lower: the lower bound lies above
    the exact epsilon plus its error (allowed at the audit's confidence c, in up to 1 - c
    of seeds); `!` after eps_point: the estimate lies above the composition bound,
    outside the possible range for DP-SGD (too few runs for the rates it needs); `n/a`:
    no number (the reason is in results.json); `REJECTED` in the guarantee column: the
    audit's assumption failed its held-out check, so its eps_lower is not credible.
    """
    from advsim._labels import above_exact_note

    lines = []
    if exact:
        lines.append(
            "exact: the exact eps(delta) of the last model (advsim.exact: its law in both "
            "worlds propagated on grids); est. err: its numerical error as a refinement "
            "estimate (the change between the two finest grids), not a bound"
        )
    above = [r for r in rows if r.get("eps_lower_above_exact") is True]
    if above:
        lines.append(f"* eps_lower lies {above_exact_note(above[0].get('confidence'))}")
    if any(r.get("eps_point_above_composition") for r in rows):
        lines.append(
            "! eps_point lies above the composition bound: an estimate outside the possible "
            "range (too few runs for the rates it reads)"
        )
    if any(r.get("eps_lower") is None or r.get("eps_point") is None for r in rows) or (
        exact and any(r.get("exact_epsilon") is None for r in rows)
    ):
        lines.append(
            "n/a: no number; results.json says why (eps_lower_note, eps_point_note"
            + (", exact_note)" if exact else ")")
        )
    skipped = [r for r in rows if (r.get("exact_note") or "").startswith("skipped: predicted")]
    for r in skipped:
        lines.append(f"exact at T = {r.get('steps')}: {r['exact_note']}")
    if any(r.get("assumption_rejected") for r in rows):
        lines.append(
            "REJECTED: the audit's assumption failed its check on the held-out runs; "
            "use --method eps_delta or tradeoff for an assumption-free bound"
        )
    if any(r.get("guarantee") != "rigorous" for r in rows):
        lines.append(
            "eps_lower is an (eps, delta) lower bound at the stated confidence under the "
            "assumption named in the guarantee column ('rigorous' = none, held-out threshold)"
        )
    return lines


def time_report(rows, plotting: float, total: float) -> str:
    """Where the time went, as the cells measured it (`advsim.sweep.TIME_COLUMNS`: the
    calibration, then `run_audit`'s parts, the exact column with its compilation, computed
    beside the rest from the second T on), and the plot; rows: those computed now."""
    from advsim.sweep import TIME_COLUMNS

    names = ("calibration", "compilation", "simulation", "audit", "bounds", "exact")
    parts = [
        (name, sum(float(r.get(col) or 0.0) for r in rows))
        for name, col in zip(names, TIME_COLUMNS, strict=True)
    ]
    parts.append(("plot", plotting))
    other = max(total - sum(t for _, t in parts), 0.0)
    optional = ("calibration", "exact")  # shown only when they took time
    text = ", ".join(f"{name} {t:.1f} s" for name, t in parts if name not in optional or t)
    beside = sum(t for _, t in parts) - total
    note = " (the exact column ran beside the rest: the parts add up to more)"
    return f"time: {total:.1f} s in all: {text}, other {other:.1f} s{note if beside > 0.5 else ''}"

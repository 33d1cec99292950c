"""The labels beside every epsilon a table holds: what each number is and what it rests on.

Every epsilon-valued column of a table the toolkit writes (a sweep's or an audit's
`results.csv`/`.json`, a figure's tables) has its label in a column beside it:

- an audit's epsilon (a name containing `eps_lower`, `eps_point`, `eps_held_out`,
  `eps_gdp`, `eps_family` or `eps_delta_lower`): its guarantee (`guarantee`, or one named
  after the column: `h_star_guarantee`, `guarantee_t25`, `eps_gdp_guarantee`); where the
  guarantee starts with "assumes", the verdict of the assumption's check
  (`assumption_rejected` or named alike); a point estimate (`eps_point`, `eps_held_out`,
  `*_point*`) a label of its own (`<column>_guarantee`, or `eps_point_guarantee` shared by
  the `eps_point_*` columns) saying it is an estimate (`POINT_LABEL`: not a bound), and,
  beside a composition column, the flag of an estimate above composition
  (`<column>_above_composition`);
- an `eps_lower` beside the exact epsilon of the same row (`exact`, `exact_epsilon`,
  `exact_eps`, or `exact<suffix>` for `eps_lower<suffix>`): the flag `<column>_above_exact`
  and its note `<column>_above_exact_note` (a lower bound at confidence c lies above the
  exact epsilon in up to 1 - c of seeds: allowed, and counted by the calibration tables);
- an exact epsilon (a name containing `exact` that holds a value, e.g. `exact`,
  `exact_epsilon`, `exact_t25`, `search_exact_epsilon`, or named `truth`): its numerical
  error and the kind of that error (`exact_error` and `exact_error_kind` for
  `exact`/`exact_epsilon`, else `<column>_error` and `<column>_error_kind`), as the exact
  engine states them (`advsim.exact.ExactEpsilon.error` and `.error_kind`);
- a bound (`heuristic`, `heuristic_max`, `composition`, `full_batch`,
  `shifted_interpolation`, with or without an `eps_` prefix and a suffix): what it
  assumes (`<column>_assumes`, or `<bound>_assumes`), the bound's own kind, assumptions
  and reference (`advsim.bounds.LastIterateHeuristic` and the others: `bound_label`);
- any other epsilon (a name `eps`, or containing `eps_`, `_eps` or `epsilon`, that none of
  the above reads, e.g. a target epsilon, the largest `eps_lower` a sample size allows, and
  a coarser grid's epsilon, `exact_h`, `exact_h2`): what it is, in `<column>_kind` (a
  diagnostic is called one there).

A column whose rows hold only flags or words (bools, strings that spell no number) is no
epsilon, whatever its name: the names above are read only where a value may be a number.

`add_labels` inserts the labels that follow from a column's name and its row (point
estimates, bounds, the flag above the exact epsilon) beside their columns; `label_problems`
states what a table still lacks (an exact epsilon's error and kind come from the
computation that made it, never from the name).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np

__all__ = [
    "POINT_LABEL",
    "add_labels",
    "above_exact_note",
    "bound_label",
    "label_problems",
]

POINT_LABEL = "point estimate, not a bound"
"""The label of a point estimate (`eps_point`): the plug-in epsilon of the counted rates,
with no confidence statement; it can lie above the exact epsilon and above composition."""

_ESTIMATE = re.compile(
    r"^(?P<pre>.*?)(?P<kind>eps_(?:lower|point|held_out|gdp|family|delta_lower))(?P<post>.*)$"
)
_BOUND = re.compile(
    r"^(?P<pre>.*?)(?:eps_)?"
    r"(?P<bound>heuristic_max|heuristic|composition|full_batch|shifted_interpolation|bound)"
    r"(?P<post>.*)$"
)
_EXACT = re.compile(r"^(?P<pre>.*?)exact(?P<post>.*)$")
_TRUTH = re.compile(r"^(?P<pre>)truth(?P<post>(?:_.*)?)$")
#: Any other epsilon-valued name (`eps`, `eps_cap`, `heuristic_eps`, `..._epsilon`), and a
#: coarser grid's epsilon beside an exact value (`exact_h`, `exact_h2`, `exact_h4`).
_OTHER = re.compile(r"(?:^|_)eps(?:_|$)|epsilon|exact_h\d*$")
#: Columns that qualify a number rather than hold one.
_LABEL_SUFFIXES = (
    "_note", "_above_composition", "_above_exact", "_guarantee", "_assumption_rejected",
    "_assumes", "_error", "_error_kind", "_kind", "_reference", "_violated", "_violated_mean",
    "_s", "_set",
)  # fmt: skip
#: Columns named after an exact computation that hold no epsilon (diagnostics, a ratio).
_EXACT_NOT_EPSILON = re.compile(
    r"exact(_ratio|_share|_resolved|_order|_nodes|_lost_mass|_h\d*|_gdp_argmax|_discretization)$"
)
_BOUND_CLASSES = {
    "heuristic": "LastIterateHeuristic",
    "heuristic_max": "HeuristicMaxOverSteps",
    "composition": "Composition",
    "full_batch": "FullBatchGDP",
    "shifted_interpolation": "ShiftedInterpolation",
}


def bound_label(bound: str) -> str:
    """What a bound column's value is and assumes, from the bound's own `kind`,
    `assumptions` and `reference` (`advsim.bounds.AbstractBound`).

    Args:
        bound: "heuristic", "heuristic_max", "composition", "full_batch" or
            "shifted_interpolation".

    Example:
        >>> bound_label("heuristic")[:58]
        'upper bound if linear losses (every gradient constant), no'
    """
    if bound not in _BOUND_CLASSES:
        raise ValueError(f"bound must be one of {sorted(_BOUND_CLASSES)}, got {bound!r}")
    import advsim.bounds as bounds

    cls = getattr(bounds, _BOUND_CLASSES[bound])
    conditions = "; ".join(a.describe() for a in cls.assumptions)
    head = f"{cls.kind} if {conditions}" if conditions else f"{cls.kind} for any losses"
    return f"{head} ({cls.reference})"


def above_exact_note(confidence=None) -> str:
    """The note beside an `eps_lower` above the exact epsilon: allowed at the audit's
    confidence c (a valid lower bound exceeds the truth with probability at most 1 - c)."""
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        c = math.nan
    at = f"{c:.4g} confidence" if 0 < c < 1 else "the audit's confidence c"
    share = f"{1 - c:.3g} of seeds" if 0 < c < 1 else "1 - c of seeds"
    return f"above the exact epsilon: allowed for a lower bound at {at} (up to {share})"


def _estimate(column: str):
    m = _ESTIMATE.match(column)
    return None if m is None or column.endswith(_LABEL_SUFFIXES) else m


def _is_point(m) -> bool:
    return m["kind"] in ("eps_point", "eps_held_out") or "point" in m["post"]


def _named_after(column: str, what: str) -> list[str]:
    """The names a `what` column ("guarantee", "assumption_rejected") of an audit's
    epsilon may have: `what` itself, or named after the column; a point estimate's
    guarantee only its own (`<column>_guarantee`, `eps_point_guarantee`)."""
    m = _ESTIMATE.match(column)
    pre, kind, post = m["pre"], m["kind"], m["post"]
    if what == "guarantee" and _is_point(m):
        shared = [f"{pre}{kind}_{what}"] if kind in ("eps_point", "eps_held_out") else []
        return list(dict.fromkeys([f"{column}_{what}", *shared]))
    names = [what, f"{pre}{what}{post}", f"{column}_{what}", f"{pre}{kind}_{what}"]
    if what == "assumption_rejected":  # eps_gdp -> gdp_assumption_rejected
        names.append(f"{kind.removeprefix('eps_')}_{what}")
    return list(dict.fromkeys(names))


def _bound(column: str):
    if column.endswith(_LABEL_SUFFIXES) or _ESTIMATE.match(column) or "exact" in column:
        return None
    m = _BOUND.match(column)
    if m is None or column == "bound" or m["pre"].startswith("mu_"):
        return None  # `bound` names the bound of the row; mu is no epsilon
    return m


def _bound_labels(column: str, m) -> list[str]:
    bound = m["bound"]
    if bound == "bound":
        return [f"{column}_assumes", "bound_assumes", "assumption_set"]
    return list(dict.fromkeys([f"{column}_assumes", f"{bound}_assumes", f"eps_{bound}_assumes"]))


def _exact(column: str):
    if column.endswith(_LABEL_SUFFIXES) or _EXACT_NOT_EPSILON.search(column):
        return None
    return _EXACT.match(column) or _TRUTH.match(column)


def _other(column: str) -> bool:
    """Whether `column` holds an epsilon that no other rule reads (module docstring)."""
    return not (
        column.endswith(_LABEL_SUFFIXES) or _estimate(column) or _bound(column)
        or _exact(column) or not _OTHER.search(column)
    )  # fmt: skip


def _exact_error_names(column: str, m) -> list[str]:
    base = column.removesuffix("_epsilon").removesuffix("_eps")
    names = [f"{base}_error", f"{column}_error"] + ([f"{m['pre']}error"] if m["pre"] else [])
    return list(dict.fromkeys(names))


def _exact_partner(column: str, present: set) -> str | None:
    """The exact epsilon an `eps_lower` column is compared with in its row, if any."""
    m = _estimate(column)
    if m is None or m["kind"] != "eps_lower":
        return None
    pre, post = m["pre"], m["post"]
    names = [f"{pre}exact{post}", f"{pre}exact_eps{post}", f"{pre}exact_epsilon{post}"]
    if pre:  # h_star_eps_lower -> exact_eps_h_star
        names.append(f"exact_eps_{pre.rstrip('_')}{post}")
    if not post:
        names += ["exact_epsilon", "exact_eps", "exact"]
    return next((n for n in names if n in present), None)


def label_problems(
    columns: Sequence[str], rows: Sequence[Mapping] = (), *, exact: bool = True
) -> list[str]:
    """What a table with these columns (and rows, when given) lacks to label its epsilons.

    Args:
        columns: the table's column names.
        rows: its rows; with them, a guarantee label that starts with "assumes" requires
            the verdict column too, a point estimate's label must call it an estimate, and
            a column whose values are all flags or words (bools, strings that are no
            number; None and "" aside) holds no epsilon, whatever its name (without rows,
            only the column names are checked).
        exact: check that every exact epsilon has its error and kind beside it (False:
            a table that declares why its exact columns have none, `exact_error_missing`).

    Returns:
        One sentence per missing label (empty when the table is labelled; the rule is in
        the module docstring of `advsim.figures`).

    Example:
        >>> label_problems(["steps", "eps_lower", "guarantee"])
        []
        >>> label_problems(["steps", "h_star_eps_lower"])[0][:50]
        'h_star_eps_lower has no guarantee label beside it '
    """
    present, problems = set(columns), []
    composition = bool(present & {"composition", "eps_composition"})
    for column in columns:
        if _holds_no_number(column, rows):
            continue
        if (m := _estimate(column)) is not None:
            problems += _estimate_problems(column, m, present, rows, composition)
        elif (b := _bound(column)) is not None:
            names = _bound_labels(column, b)
            if not present & set(names):
                problems.append(
                    f"{column} is a bound with no label of what it assumes beside it (a "
                    f"column named one of {', '.join(names)})"
                )
        elif (e := _exact(column)) is not None:
            if not exact:
                continue
            errors = _exact_error_names(column, e)
            found = [n for n in errors if n in present]
            kinds = [f"{n}_kind" for n in errors]
            if not found:
                problems.append(
                    f"{column} is an exact epsilon with no error beside it (a column named "
                    f"one of {', '.join(errors)})"
                )
            if not present & set(kinds):
                problems.append(
                    f"{column} is an exact epsilon with no kind of its error beside it (a "
                    f"column named one of {', '.join(kinds)})"
                )
        elif _other(column) and f"{column}_kind" not in present:
            problems.append(
                f"{column} is an epsilon with no label of what it is beside it (a column "
                f"named {column}_kind)"
            )
    return problems


def _holds_no_number(column: str, rows: Sequence[Mapping]) -> bool:
    """Whether the rows give `column` values and none is a number: flags (`True`, "False")
    and words hold no epsilon (a CSV's strings are read as the numbers they spell)."""
    values = [v for r in rows if (v := r.get(column)) is not None and v != ""]
    return bool(values) and all(_flag_or_word(v) for v in values)


def _flag_or_word(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    if not isinstance(value, str):
        return False  # a number, or an array or list that may hold epsilons
    try:
        float(value)
    except ValueError:
        return True  # a word, "True" and "False" (a CSV's flags) among them
    return False  # "1.5", "nan", "inf": a number a CSV spells


def _estimate_problems(column, m, present, rows, composition) -> list[str]:
    problems = []
    names = _named_after(column, "guarantee")
    found = [n for n in names if n in present]
    point = _is_point(m)
    if not found:
        what = "point-estimate label" if point else "guarantee label"
        problems.append(
            f"{column} has no {what} beside it (a column named one of {', '.join(names)})"
        )
    elif point and any("estimate" not in str(r.get(found[0], "estimate")) for r in rows):
        problems.append(f"{column} is a point estimate but its label {found[0]} does not say so")
    elif any(str(r.get(found[0], "")).startswith("assumes") for r in rows):
        verdicts = _named_after(column, "assumption_rejected")
        if not present & set(verdicts):
            problems.append(
                f"{column} rests on an assumption ({found[0]}) but has no verdict of "
                f"its check beside it (a column named one of {', '.join(verdicts)})"
            )
    if point and composition and f"{column}_above_composition" not in present:
        problems.append(
            f"{column} is a point estimate in a table with a composition column but "
            f"has no {column}_above_composition flag beside it"
        )
    partner = _exact_partner(column, present)
    if partner and f"{column}_above_exact" not in present:
        problems.append(
            f"{column} is beside the exact epsilon {partner} but has no {column}_above_exact "
            "flag beside it"
        )
    return problems


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def add_labels(columns: Sequence[str], rows: Sequence[MutableMapping] = ()) -> list[str]:
    """The columns with the labels that follow from the names and the rows placed right
    after their columns; each row gets their values (a row's own value is kept).

    A column whose values are all flags or words is left as it is (`label_problems`).
    Inserted where missing: a point estimate's `<column>_guarantee` (`POINT_LABEL`), a
    bound's `<column>_assumes` (`bound_label`), and for an `eps_lower` beside the exact
    epsilon, `<column>_above_exact` (True where `eps_lower` exceeds the exact epsilon plus
    its stated error; None where either is missing) and `<column>_above_exact_note`
    (`above_exact_note` at the row's `confidence`, where the flag is True).

    Example:
        >>> rows = [{"eps_point": 1.2, "heuristic": 2.0}]
        >>> add_labels(["eps_point", "heuristic"], rows)
        ['eps_point', 'eps_point_guarantee', 'heuristic', 'heuristic_assumes']
        >>> rows[0]["eps_point_guarantee"]
        'point estimate, not a bound'
    """
    out: list[str] = []
    present, placed = set(columns), set()

    def insert(name: str, value_of) -> None:
        if name in out:
            out.remove(name)
        out.append(name)
        present.add(name)
        placed.add(name)
        for r in rows:
            if name not in r or r[name] is None:
                r[name] = value_of(r)

    for column in columns:
        if column in placed:
            continue
        if column not in out:
            out.append(column)
        if _holds_no_number(column, rows):
            continue  # flags and words hold no epsilon (`label_problems`)
        m, b = _estimate(column), _bound(column)
        if m is not None and _is_point(m):
            names = _named_after(column, "guarantee")
            own = [n for n in names if n in present]
            insert(own[0] if own else names[0], lambda r: POINT_LABEL)
        elif m is not None and (partner := _exact_partner(column, present)) is not None:
            flag = f"{column}_above_exact"
            error = next((n for n in _exact_error_names(partner, _EXACT.match(partner))
                          if n in present), None)  # fmt: skip

            def above(r, partner=partner, error=error, column=column):
                low, exact = _number(r.get(column)), _number(r.get(partner))
                if math.isnan(low) or math.isnan(exact):
                    return None
                err = _number(r.get(error)) if error else 0.0
                return bool(low > exact + (err if math.isfinite(err) else 0.0))

            insert(flag, above)
            insert(f"{flag}_note", lambda r, flag=flag: (
                above_exact_note(r.get("confidence")) if r.get(flag) is True else None))
        elif b is not None and b["bound"] != "bound":
            names = _bound_labels(column, b)
            own = [n for n in names if n in present]
            label = bound_label(b["bound"])
            insert(own[0] if own else names[0], lambda r, label=label: label)
    return out

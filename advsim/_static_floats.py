"""Float fields that jit treats as static, so that each value compiles its own program.

`eqx.filter_jit` traces the array leaves of its arguments and keys its cache on everything
else: a mechanism field holding a plain Python float (a leaf that is not an array, or a
field declared `eqx.field(static=True)`) is part of the compiled program's key, and every
new value of it compiles the simulation again. `as_traced_float` stores such a value as
a 0-d float64 array, which is traced. This module finds the float fields that are not,
for `advsim.testing.check_mechanism` and for a sweep (`RecompileWarning`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence

import equinox as eqx
import jax

from advsim._mechanism import AbstractMechanism
from advsim._simulate import engine_programs

__all__ = [
    "RecompileWarning",
    "StaticFloat",
    "recompile_advice",
    "recompiling_floats",
    "static_float_fields",
]

#: Nesting depth beyond which `static_float_fields` stops looking.
_MAX_DEPTH = 32


class RecompileWarning(UserWarning):
    """A mechanism holds a float field that jit treats as static (a plain Python float):
    every value of it compiles the simulation program again (seconds per sweep cell).
    `advsim.validation.as_traced_float` stores the field traced. Issued by a sweep whose
    cells differ in such a field, and by `advsim.testing.check_mechanism`."""


@dataclasses.dataclass(frozen=True)
class StaticFloat:
    """A float field of a mechanism that changes the compiled program.

    Attributes:
        path: where the field is, from the mechanism (`"alpha"`, `"inner.radius"`,
            `"radii[1]"`).
        value: its value.
        readers: the methods the engine calls whose traced program changes with the value
            (`"ClassName.method"`); empty for a field no method reads, which still keys
            the compiled program.
    """

    path: str
    value: float
    readers: tuple[str, ...] = ()


def _float_fields(mechanism) -> list[tuple[str, tuple, float]]:
    """`(path, steps, value)` of every plain Python float `mechanism` holds; `steps`:
    `("attr", name)` / `("item", index or key)` from the mechanism to the float."""
    found = []

    def walk(obj, path: str, steps: tuple, depth: int) -> None:
        if eqx.is_array(obj) or isinstance(obj, type) or depth > _MAX_DEPTH:
            return  # arrays (np.float64 too, a float subclass) are traced
        if isinstance(obj, float):
            found.append((path.lstrip("."), steps, obj))
        elif dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                child = getattr(obj, f.name, None)
                walk(child, f"{path}.{f.name}", (*steps, ("attr", f.name)), depth + 1)
        elif isinstance(obj, tuple | list):
            for i, child in enumerate(obj):
                walk(child, f"{path}[{i}]", (*steps, ("item", i)), depth + 1)
        elif isinstance(obj, Mapping):
            for k, child in obj.items():
                walk(child, f"{path}[{k!r}]", (*steps, ("item", k)), depth + 1)

    walk(mechanism, "", (), 0)
    return found


def static_float_fields(mechanism) -> dict[str, float]:
    """`{path: value}` of every plain Python float held by `mechanism`'s fields (nested
    modules and dataclasses, tuples, lists and dicts included; `eqx.field(static=True)`
    fields included), in field order (paths such as `"alpha"`, `"inner.radius"`,
    `"radii[1]"`). A numpy or JAX array, 0-d included, is traced and is not listed."""
    return {path: value for path, _, value in _float_fields(mechanism)}


def _with_value(obj, steps: Sequence[tuple[str, object]], value):
    """`obj` with the part at `steps` replaced by `value`; everything else shared. Frozen
    modules are copied and set directly (no `__init__` runs, nothing re-validated)."""
    if not steps:
        return value
    (kind, key), rest = steps[0], steps[1:]
    if kind == "attr":
        new = copy.copy(obj)
        object.__setattr__(new, key, _with_value(getattr(obj, key), rest, value))
        return new
    if isinstance(obj, tuple | list):
        items = list(obj)
        items[key] = _with_value(obj[key], rest, value)
        return type(obj)(items) if not hasattr(obj, "_fields") else type(obj)(*items)
    new = dict(obj)
    new[key] = _with_value(obj[key], rest, value)
    return type(obj)(new) if type(obj) is not dict else new


def _other_value(x: float) -> float:
    """A second value for `x`: 1.37 x + 0.1, or 0.5 where that equals x (or is not finite)."""
    y = 1.37 * x + 0.1
    return y if math.isfinite(y) and y != x else (0.5 if x != 0.5 else 1.5)


def _jit_key(mechanism) -> tuple:
    """What `eqx.filter_jit` keys its cache on for `mechanism`: the structure of its
    non-array part, static fields included, and the value of each non-array leaf."""
    leaves, treedef = jax.tree.flatten(eqx.partition(mechanism, eqx.is_array)[1])
    return treedef, tuple((type(x), repr(x)) for x in leaves)


def recompiling_floats(mechanism: AbstractMechanism, adversary=None) -> tuple[StaticFloat, ...]:
    """The float fields of `mechanism` whose value changes its compiled program.

    Each plain Python float field (`static_float_fields`) is set to a second value
    (1.37 x + 0.1) and the mechanism compared with the original as the engine compiles
    it: the traced program of every method the engine calls (and of `adversary.score`,
    when given) and the key of `eqx.filter_jit`. A field is listed when either changes;
    `readers` names the methods whose program does.
    """
    fields = _float_fields(mechanism)
    if not fields:
        return ()
    here = engine_programs(mechanism, adversary)
    key = _jit_key(mechanism)
    out = []
    for path, steps, value in fields:
        other = _with_value(mechanism, steps, _other_value(value))
        there = engine_programs(other, adversary, like=mechanism)
        readers = tuple(k for k, text in here.items() if text is not None and text != there[k])
        if readers or _jit_key(other) != key:
            out.append(StaticFloat(path, value, readers))
    return tuple(out)


def recompile_advice(cls_name: str, paths: Sequence[str], notes: Mapping[str, str]) -> str:
    """The message naming a class's static float fields (`notes`: what to say of each, by
    path) and the fix, `as_traced_float`, with a one-line example on the first field."""
    name = paths[0].rsplit(".", 1)[-1].split("[", 1)[0]
    fields = "; ".join(f"`{p}` ({notes[p]})" if notes.get(p) else f"`{p}`" for p in paths)
    return (
        f"{cls_name} holds plain Python floats, which jit treats as static, in {fields}: "
        "every new value compiles again (seconds per sweep cell: the simulation, and the "
        "exact epsilon of a scalar law). Store each traced in __init__, e.g. "
        f'self.{name} = as_traced_float("{name}", {name}, check_finite) (from '
        "advsim.validation; check_positive, check_probability, ... for a narrower range)"
    )

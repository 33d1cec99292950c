"""The engine's checks of a mechanism and an adversary before anything compiles: float64
where the class needs it, and the shape of every method's output (traced, no FLOPs), once
per structure."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim._adversary import AbstractAdversary
from advsim._dpsgd import (
    gathers_sampled_examples,
    run_mechanism,
)
from advsim._mechanism import AbstractMechanism, AbstractProjected

__all__ = ["check_shapes"]


def _check_x64(mechanism: AbstractMechanism) -> None:
    if type(mechanism).requires_x64 and not jax.config.jax_enable_x64:
        raise RuntimeError(
            f"{type(mechanism).__name__} needs float64: enable it with "
            "jax.config.update('jax_enable_x64', True) before building the mechanism"
        )


def _shape_text(value) -> str:
    """`shape (2,)`, or what was returned in place of an array."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"shape {tuple(value.shape)}"
    if isinstance(value, int | float | bool | np.generic):
        return "shape ()"
    return f"a {type(value).__name__}, not an array"


def _expect_shape(value, expected: tuple, where: str, meaning: str) -> None:
    """Raises the ValueError naming `where` when `value` is not an array of shape `expected`."""
    found = _shape_text(value)
    if found != f"shape {expected}":
        raise ValueError(f"{where} returned {found}; expected shape {expected} ({meaning})")


def _traced(obj, method: str, *args):
    """The shape and dtype of `obj.method(*args)`, traced (`eqx.filter_eval_shape`: no
    compilation, no FLOPs); an error raised inside the method is tagged with its name."""
    try:
        return eqx.filter_eval_shape(lambda o, *a: getattr(o, method)(*a), obj, *args)
    except Exception as err:
        err.add_note(f"raised while tracing {type(obj).__name__}.{method}")
        raise


def _check_model_shapes(mechanism: AbstractMechanism):
    """Checks every method the engine's step calls; returns the model's shape and dtype."""
    name = type(mechanism).__name__
    model = _traced(mechanism, "init_model")
    if not hasattr(model, "shape") or len(model.shape) != 1 or model.shape[0] < 1:
        raise ValueError(
            f"{name}.init_model returned {_shape_text(model)}; expected shape (d,) (the "
            "model as a vector of d >= 1 coordinates)"
        )
    if not jnp.issubdtype(model.dtype, jnp.floating):
        raise ValueError(f"{name}.init_model returned dtype {model.dtype}; expected a float dtype")
    counts = _traced(mechanism, "data_counts")
    if not hasattr(counts, "shape") or len(counts.shape) != 1:
        raise ValueError(
            f"{name}.data_counts returned {_shape_text(counts)}; expected shape (g,) "
            "(one count per group of examples)"
        )
    d, t = model.shape, jax.ShapeDtypeStruct((), jnp.int32)
    same = "the model's shape"
    # (method, arguments, expected shape, what the shape means)
    calls = [
        ("canary_gradient", (model, t), d, same),
        ("data_gradients", (model, t), (counts.shape[0], *d), "a model-shaped row per group"),
        ("regularizer_gradient", (model, t), d, same),
        ("step_size", (t,), (), "a scalar"),
    ]
    if gathers_sampled_examples(mechanism):
        size = mechanism.max_batch_size
        index = jax.ShapeDtypeStruct((size,), jnp.int32)
        calls.append(
            ("example_gradients", (model, index, t), (size, *d), "a model-shaped row per index")
        )
    if isinstance(mechanism, AbstractProjected):
        calls.append(("project", (model,), d, same))
    for method, args, expected, meaning in calls:
        _expect_shape(_traced(mechanism, method, *args), expected, f"{name}.{method}", meaning)
    return model


def _check_shapes_once(mechanism, adversary, release: str) -> None:
    model = _check_model_shapes(mechanism)
    expected = model.shape if release == "last" else (mechanism.steps + 1, *model.shape)
    out = eqx.filter_eval_shape(
        lambda m, k: run_mechanism(m, True, key=k, release=release),
        mechanism,
        jax.random.key(0),
    )
    where = f"run_mechanism({type(mechanism).__name__}, release={release!r})"
    _expect_shape(out, expected, where, "the release: m_T, or m_0, ..., m_T for 'all'")
    if adversary is not None:
        score = _traced(adversary, "score", mechanism, out)
        _expect_shape(score, (), f"{type(adversary).__name__}.score", "one scalar score per run")


#: Structures whose shapes `check_shapes` has already checked (see `_structure`), at most
#: `_MAX_CHECKED` of them (then it starts again).
_CHECKED: set = set()
_MAX_CHECKED = 4096


def _structure(*objs) -> tuple | None:
    """What the shapes depend on: the pytree structure (static fields included), the shape
    and dtype of every array leaf and the value of every other leaf; None when unhashable."""
    leaves, treedef = jax.tree.flatten(objs)
    parts = tuple(
        (tuple(x.shape), str(x.dtype)) if eqx.is_array(x) else (type(x), x) for x in leaves
    )
    key = (treedef, parts, bool(jax.config.jax_enable_x64))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def check_shapes(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary | None = None,
    release: str = "last",
) -> None:
    """Checks, before any run, the shapes the engine assumes of a (crafted) mechanism and
    of an adversary's score.

    Every method is traced with `eqx.filter_eval_shape` (no compilation, no FLOPs):
    `init_model()` is a float vector of shape (d,); `canary_gradient(m, t)` and
    `regularizer_gradient(m, t)` have shape (d,); `data_counts()` has shape (g,) and
    `data_gradients(m, t)` shape (g, d) (for an `AbstractPerExampleData` mechanism whose
    engine gathers the sampled examples, `example_gradients` too); `step_size(t)` is a
    scalar; `project(m)` (an `AbstractProjected` mechanism) has shape (d,); the release is
    (d,) or, for `release="all"`, (T + 1, d); `adversary.score(mechanism, release)` is
    one scalar, shape (). A structure that passed (the same classes, static fields and
    array shapes) is not traced again.

    Args:
        mechanism: the mechanism the engine runs (after the adversary's `craft`).
        adversary: scores the release; None checks the mechanism alone.
        release: "last" or "all", as in `simulate`.

    Raises:
        ValueError: naming the method, the shape it returned and the shape expected.

    Example:
        >>> import jax.numpy as jnp
        >>> from advsim import AbstractAdversary
        >>> from advsim.mechanisms import LinearProcess
        >>> class Both(AbstractAdversary):
        ...     def score(self, mechanism, release):
        ...         return jnp.stack([release[0], -release[0]])
        >>> check_shapes(LinearProcess(10, 0.1, 1.0), Both())
        Traceback (most recent call last):
        ...
        ValueError: Both.score returned shape (2,); expected shape () (one scalar score per run)
    """
    key = _structure(mechanism, adversary, release)
    if key is not None and key in _CHECKED:
        return
    _check_shapes_once(mechanism, adversary, release)
    if key is not None:
        if len(_CHECKED) >= _MAX_CHECKED:
            _CHECKED.clear()
        _CHECKED.add(key)


#: `_dims` of the mechanisms seen last (by identity, each kept alive while it is here).
_DIMS: dict[int, tuple] = {}


def _dims(mechanism: AbstractMechanism) -> tuple[int, int]:
    """(d, g): the model's size and the number of data groups, traced once per mechanism
    (`simulate` asks for them several times while laying out its chunks)."""
    hit = _DIMS.get(id(mechanism))
    if hit is not None and hit[0] is mechanism:
        return hit[1], hit[2]
    d = int(np.prod(jax.eval_shape(mechanism.init_model).shape))
    g = int(jax.eval_shape(mechanism.data_counts).shape[0])
    if len(_DIMS) >= 64:
        _DIMS.clear()
    _DIMS[id(mechanism)] = (mechanism, d, g)
    return d, g

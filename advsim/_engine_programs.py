"""The programs the engine traces: every method it calls, traced without compiling, so
that two mechanisms (another T, another float value) can be compared program by program;
which methods read T, and whether one compiled program serves every T."""

from __future__ import annotations

import copy

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from advsim._adversary import AbstractAdversary
from advsim._dpsgd import (
    any_steps_draws,
    dpsgd_update,
    gathers_sampled_examples,
)
from advsim._engine_checks import _MAX_CHECKED, _dims, _structure
from advsim._mechanism import AbstractMechanism, AbstractPerExampleData, AbstractProjected
from advsim._streams import range_supported

#: The `steps` the one program for every T sees in place of a run's T (`_placeholder`):
#: any valid T would do, since `any_steps_supported` holds only where the program does not
#: depend on it.
STEPS_PLACEHOLDER = 1_000_003

__all__ = ["STEPS_PLACEHOLDER", "any_steps_supported", "engine_programs", "steps_readers"]


def _placeholder(mechanism: AbstractMechanism) -> AbstractMechanism:
    """`mechanism` with `STEPS_PLACEHOLDER` for its (static) steps: every T of a mechanism
    then has one pytree structure, and one compiled program."""
    params = copy.copy(mechanism.params)
    object.__setattr__(params, "steps", STEPS_PLACEHOLDER)
    return eqx.tree_at(lambda m: m.params, mechanism, params)


def _probe(mechanism, adversary, model, t, present, counts, noise):
    """Everything a run's program asks of the mechanism and the adversary but T itself."""
    m0 = mechanism.init_model()
    m1 = dpsgd_update(mechanism, model, t, present, counts, noise)
    score = None if adversary is None else adversary.score(mechanism, m1)
    return m0, m1, score, mechanism.canary_schedule.mask(t), mechanism.data_counts()


def _probe_args(mechanism) -> tuple:
    """Shapes of the probe's traced arguments: m, t, the canary's presence, counts, noise."""
    d, _ = _dims(mechanism)
    model = jax.eval_shape(mechanism.init_model)
    counts = jax.eval_shape(mechanism.data_counts)
    if isinstance(mechanism, AbstractPerExampleData) and mechanism.batching == "poisson":
        counts = jax.ShapeDtypeStruct(counts.shape, jnp.int32)
    return (
        model,
        jax.ShapeDtypeStruct((), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_),
        counts,
        jax.ShapeDtypeStruct((d,), model.dtype),
    )


def _jaxpr_text(fn, *args) -> tuple | None:
    """`fn(*args)`'s jaxpr as text with its constants (arrays and ShapeDtypeStructs traced,
    the rest static); None when it cannot be traced."""
    try:
        jaxpr, _, static = eqx.filter_make_jaxpr(fn)(*args)
    except Exception:  # noqa: BLE001 (a method that cannot run at the placeholder's T)
        return None
    consts = tuple(
        (np.asarray(c).tobytes(), str(np.asarray(c).dtype), np.shape(c)) for c in jaxpr.consts
    )
    return str(jaxpr.jaxpr), consts, repr(static)


def engine_programs(
    mechanism: AbstractMechanism,
    adversary: AbstractAdversary | None = None,
    like: AbstractMechanism | None = None,
) -> dict[str, tuple | None]:
    """The traced program (`_jaxpr_text`: the jaxpr with its constants; None where it
    cannot be traced) of every method the engine calls, by name (`"ClassName.method"`,
    the adversary's `score` included when one is given), at the argument shapes of `like`
    (default: `mechanism` itself). Two mechanisms whose programs are equal here run the
    same computation; comparing them names the methods that read what differs between
    them (`steps_readers`: T; `advsim.testing.check_mechanism`: a float field)."""
    model, t, _, _, _ = _probe_args(mechanism if like is None else like)
    calls = {
        "init_model": (lambda m: m.init_model(),),
        "canary_gradient": (lambda m, x, s: m.canary_gradient(x, s), model, t),
        "data_gradients": (lambda m, x, s: m.data_gradients(x, s), model, t),
        "data_counts": (lambda m: m.data_counts(),),
        "regularizer_gradient": (lambda m, x, s: m.regularizer_gradient(x, s), model, t),
        "step_size": (lambda m, s: m.step_size(s), t),
        "canary_schedule.mask": (lambda m, s: m.canary_schedule.mask(s), t),
    }
    if gathers_sampled_examples(mechanism):
        index = jax.ShapeDtypeStruct((mechanism.max_batch_size,), jnp.int32)
        calls["example_gradients"] = (lambda m, x, i, s: m.example_gradients(x, i, s), model,
                                      index, t)  # fmt: skip
    if isinstance(mechanism, AbstractProjected):
        calls["project"] = (lambda m, x: m.project(x), model)
    name = type(mechanism).__name__
    out = {f"{name}.{k}": _jaxpr_text(fn, mechanism, *args) for k, (fn, *args) in calls.items()}
    if adversary is not None:

        def score(m, a, x):
            return a.score(m, x)

        out[f"{type(adversary).__name__}.score"] = _jaxpr_text(score, mechanism, adversary, model)
    return out


def steps_readers(
    mechanism: AbstractMechanism, adversary: AbstractAdversary | None = None
) -> tuple[str, ...]:
    """The methods the engine calls whose traced program reads `mechanism.steps` (T as a
    shape, a constant or a Python branch), by name (`"ClassName.method"`); empty where
    one program serves every T (`any_steps_supported`).

    Each method is traced (no compilation) at the mechanism's T and at
    `STEPS_PLACEHOLDER`, and named when the two programs differ.
    """
    here = engine_programs(mechanism, adversary)
    there = engine_programs(_placeholder(mechanism), adversary, like=mechanism)
    return tuple(k for k, text in here.items() if text is None or text != there[k])


#: `any_steps_supported`'s answers by structure (`_structure`), at most `_MAX_CHECKED`.
_ANY_STEPS: dict = {}
#: The probe's program at `STEPS_PLACEHOLDER`, by structure: the same for every T of a
#: mechanism, so a sweep over T traces it once.
_PLACEHOLDER_PROBES: dict = {}


def _placeholder_probe(mechanism, adversary, args) -> tuple | None:
    placeholder = _placeholder(mechanism)
    key = _structure(placeholder, adversary, args)
    if key is not None and key in _PLACEHOLDER_PROBES:
        return _PLACEHOLDER_PROBES[key]
    text = _jaxpr_text(_probe, placeholder, adversary, *args)
    if key is not None:
        if len(_PLACEHOLDER_PROBES) >= _MAX_CHECKED:
            _PLACEHOLDER_PROBES.clear()
        _PLACEHOLDER_PROBES[key] = text
    return text


def any_steps_supported(
    mechanism: AbstractMechanism, adversary: AbstractAdversary | None, release: str = "last"
) -> bool:
    """Whether `simulate` runs `mechanism` (scored by `adversary`) in the one compiled
    program that serves every T (`advsim._dpsgd.run_any_steps`, T a traced value), rather
    than in a program compiled for its T.

    It does where the release is the last model, its randomness can be drawn range by
    range (`any_steps_draws`: no Poisson-sampled groups; the default threefry generator)
    and nothing the program computes reads T: the traced program of every method the
    engine calls (`init_model`, `canary_gradient`, `data_gradients`, `data_counts`,
    `regularizer_gradient`, `step_size`, `project`, the canary schedule's mask) and of the
    adversary's `score` is the same, constants included, for the mechanism's T and for
    `STEPS_PLACEHOLDER`. So the one program is used only where it computes exactly what
    the T-specific program would. A mechanism whose methods read `mechanism.steps` (as a
    shape, a constant or a Python branch) still runs, compiled once per T;
    `advsim.testing.check_mechanism` says so.
    """
    if release != "last":
        return False
    key = _structure(mechanism, adversary, "any_steps")
    if key is not None and key in _ANY_STEPS:
        return _ANY_STEPS[key]
    answer = any_steps_draws(mechanism) and range_supported(
        jax.eval_shape(mechanism.init_model).dtype
    )
    if answer:
        args = _probe_args(mechanism)
        here = _jaxpr_text(_probe, mechanism, adversary, *args)
        answer = here is not None and here == _placeholder_probe(mechanism, adversary, args)
    if key is not None:
        if len(_ANY_STEPS) >= _MAX_CHECKED:
            _ANY_STEPS.clear()
        _ANY_STEPS[key] = answer
    return answer

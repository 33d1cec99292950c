"""Class paths: how a sweep config's `name` becomes the mechanism or adversary it runs.

A config names a class by path, `"module:Class"` (any importable module, the user's own
included), or a classmethod of it that returns an instance, `"module:Class.factory"`
(e.g. `"advsim.mechanisms:LinearProcess.with_data"`). The path is resolved with importlib;
only subclasses of `advsim.AbstractMechanism` (for `[mechanism]`) or
`advsim.AbstractAdversary` (for `[adversary]`) are accepted. The config's keys are passed
to the constructor, which is the one place that validates them.

The built-ins also have short aliases (`"linear"`, `"landscape"`, `"projection"`, ...): a
path and, for some, default keyword arguments the config may override. A string
`canary_schedule` (with an optional `canary_sampled`, default true) becomes a
`CanarySchedule` through `CanarySchedule.parse`, for any class.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any

from advsim._adversary import AbstractAdversary
from advsim._mechanism import AbstractMechanism
from advsim._schedule import CanarySchedule
from advsim._validation import import_class_path

__all__ = [
    "ADVERSARY_ALIASES",
    "MECHANISM_ALIASES",
    "Alias",
    "Plugin",
    "register_adversary",
    "register_mechanism",
    "resolve",
]


@dataclasses.dataclass(frozen=True)
class Alias:
    """A short name for a class path, with keyword defaults a config may override.

    Attributes:
        path: `"module:Class"` or `"module:Class.factory"`.
        defaults: keyword arguments passed unless the config gives them.
    """

    path: str
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)


MECHANISM_ALIASES: dict[str, Alias] = {
    "linear": Alias("advsim.mechanisms:LinearProcess"),
    "linear-data": Alias(
        "advsim.mechanisms:LinearProcess.with_data", {"dim": 10, "num_examples": 100}
    ),
    "landscape": Alias("advsim.mechanisms:ThresholdLandscape", {"batch_size": 1}),
    "gradient-canary": Alias("advsim.mechanisms:GradientCanary", {"canary_sampled": False}),
}
"""The built-in mechanisms' short names."""
ADVERSARY_ALIASES: dict[str, Alias] = {
    "projection": Alias("advsim.adversaries:ProjectionScore"),
    "llr": Alias("advsim.adversaries:LikelihoodRatioScore"),
    "landscape-threshold": Alias("advsim.adversaries:ThresholdAdversary"),
    "biased-coordinate": Alias("advsim.adversaries:BiasedCoordinate"),
    "biased-coordinate-random": Alias("advsim.adversaries:BiasedCoordinate.random"),
    "random-direction": Alias("advsim.adversaries:RandomDirection"),
    "simulated-biased-dimension": Alias("advsim.adversaries:SimulatedBiasedDimension"),
}
"""The built-in adversaries' short names."""
# Names registered at run time (register_mechanism / register_adversary): a class, a
# classmethod, or a function returning an instance (checked when called).
_REGISTERED: dict[str, dict[str, Callable[..., Any]]] = {"mechanism": {}, "adversary": {}}
_KINDS = {
    "mechanism": (AbstractMechanism, MECHANISM_ALIASES),
    "adversary": (AbstractAdversary, ADVERSARY_ALIASES),
}


def _register(kind: str, name: str, build: Callable[..., Any], replace: bool) -> None:
    if not replace and (name in _REGISTERED[kind] or name in _KINDS[kind][1]):
        raise ValueError(f"{kind} {name!r} is already registered")
    if not callable(build):
        raise TypeError(f"build must be a class or callable, got {build!r}")
    _REGISTERED[kind][name] = build


def register_mechanism(name: str, build: Callable[..., Any], *, replace: bool = False) -> None:
    """Makes `build` available to sweep configs as `[mechanism] name = "<name>"`.

    Prefer a class path (`name = "my_module:MyMechanism"`), which needs no registration and
    works in every process (a Ray worker imports it). A registered name lives in this
    process only; Ray workers receive the callable itself.

    Args:
        name: the config name.
        build: an `advsim.AbstractMechanism` subclass, or a callable returning one; its
            keyword parameters are the config's mechanism parameters.
        replace: allow replacing an existing name.
    """
    _register("mechanism", name, build, replace)


def register_adversary(name: str, build: Callable[..., Any], *, replace: bool = False) -> None:
    """Makes `build` available to sweep configs as `[adversary] name = "<name>"`."""
    _register("adversary", name, build, replace)


def names(kind: str) -> list[str]:
    """The short names a config may use for `kind` ("mechanism" or "adversary")."""
    return sorted({*_KINDS[kind][1], *_REGISTERED[kind]})


@dataclasses.dataclass(frozen=True)
class Plugin:
    """A config's mechanism or adversary, resolved: what to call, and how.

    Attributes:
        name: as the config wrote it (an alias, a registered name or a class path).
        factory: the class, a classmethod of it, or a registered callable.
        base: the abstract base its result must subclass.
        defaults: an alias's keyword defaults.
        params: the keyword names it takes (with a classmethod's `**kwargs`, those of the
            class's constructor too).
        required: the parameters without a default (and not in `defaults`).
        any_key: whether it takes any keyword (a `**kwargs` not traced to a constructor).
    """

    name: str
    factory: Callable[..., Any]
    base: type
    defaults: Mapping[str, Any]
    params: tuple[str, ...]
    required: tuple[str, ...]
    any_key: bool

    def build(self, **kwargs):
        """Calls the factory with the alias defaults, then `kwargs` (a string
        `canary_schedule` / `canary_sampled` become a `CanarySchedule`).

        Raises:
            TypeError, ValueError: the constructor's own errors, or a result that is not a
                `base` instance.
        """
        kwargs = _schedule({**self.defaults, **kwargs})
        made = self.factory(**kwargs)
        if not isinstance(made, self.base):
            raise TypeError(
                f"{self.name!r} returned {type(made).__name__}, not an instance of "
                f"advsim.{self.base.__name__}"
            )
        return made


def _schedule(kwargs: dict) -> dict:
    """A string `canary_schedule` (and `canary_sampled`) as a `CanarySchedule`."""
    if isinstance(kwargs.get("canary_schedule"), str) or "canary_sampled" in kwargs:
        text = kwargs.pop("canary_schedule", "every_step")
        sampled = kwargs.pop("canary_sampled", True)
        kwargs["canary_schedule"] = (
            CanarySchedule.parse(text, sampled=sampled) if isinstance(text, str) else text
        )
    return kwargs


def _typed_keys(param: inspect.Parameter, factory) -> list[str] | None:
    """The keys of `**kwargs: Unpack[SomeTypedDict]` (PEP 692), or None for plain **kwargs."""
    annotation = param.annotation
    if isinstance(annotation, str):  # postponed (`from __future__ import annotations`)
        module = sys.modules.get(getattr(factory, "__module__", None) or "")
        try:
            annotation = eval(annotation, vars(module)) if module is not None else None  # noqa: S307
        except Exception:  # an annotation that does not resolve at run time: plain **kwargs
            return None
    if typing.get_origin(annotation) is typing.Unpack:
        (typed,) = typing.get_args(annotation)
        if typing.is_typeddict(typed):
            return list(typed.__annotations__)
    return None


def _signature(factory) -> tuple[list[str], list[str], bool]:
    """(keyword names, required names, takes any keyword) of a callable.

    Typed `**kwargs` (`**dpsgd: Unpack[DPSGDOptions]`) count as their keys, not as "any key".
    """
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature: accept any key, let the call decide
        return [], [], True
    params = list(signature.parameters.values())
    named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    names = [p.name for p in named]
    any_key = False
    for p in params:
        if p.kind == p.VAR_KEYWORD:
            keys = _typed_keys(p, factory)
            if keys is None:
                any_key = True
            else:
                names += [k for k in keys if k not in names]
    required = [p.name for p in named if p.default is p.empty]
    return names, required, any_key


def resolve(kind: str, name: str, where: str | None = None) -> Plugin:
    """The mechanism or adversary a config names.

    Args:
        kind: "mechanism" or "adversary".
        name: a short alias, a registered name, or a class path `"module:Class"` /
            `"module:Class.classmethod"`.
        where: the config key, for messages (default `"<kind>.name"`).

    Raises:
        ValueError: an unknown name, a path that does not import, or an object that is not
            a subclass of the abstract base (naming the path, what it resolved to and what
            is required).
    """
    base, aliases = _KINDS[kind]
    where = where or f"{kind}.name"
    known = isinstance(name, str) and (name in aliases or name in _REGISTERED[kind])
    if not known and not (isinstance(name, str) and ":" in name):
        raise ValueError(
            f"{where} must be one of {names(kind)} or a class path 'module:Class' (e.g. "
            f"'{next(iter(aliases.values())).path}'), got {name!r}"
        )
    alias = None if name in _REGISTERED[kind] else aliases.get(name)
    if name in _REGISTERED[kind]:
        factory = _REGISTERED[kind][name]
    else:
        factory = import_class_path(alias.path if alias is not None else name, where)
    owner = factory.__self__ if inspect.ismethod(factory) else factory
    registered = name in _REGISTERED[kind] and not isinstance(owner, type)
    if not registered and not (isinstance(owner, type) and issubclass(owner, base)):
        what = "a classmethod of " if owner is not factory else ""
        raise ValueError(
            f"{where} {name!r} resolved to {what}{owner!r}, which is not a subclass of "
            f"advsim.{base.__name__}; name a subclass (module:Class) or a classmethod of one "
            "(module:Class.factory)"
        )
    if factory is owner and inspect.isabstract(owner):
        raise ValueError(f"{where} {name!r} resolved to {owner!r}, an abstract class")
    params, required, any_key = _signature(factory)
    if any_key and factory is not owner and isinstance(owner, type):
        # A classmethod's **kwargs go to the constructor: its keywords are the valid ones.
        init_params, _, any_key = _signature(owner)
        params += [p for p in init_params if p not in params]
    defaults = dict(alias.defaults) if alias is not None else {}
    if "canary_schedule" in params or any_key:
        params.append("canary_sampled")
    return Plugin(
        name=name,
        factory=factory,
        base=base,
        defaults=defaults,
        params=tuple(params),
        required=tuple(p for p in required if p not in defaults),
        any_key=any_key,
    )

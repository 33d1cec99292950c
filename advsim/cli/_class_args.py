"""`--mechanism-arg NAME=VALUE` and `--adversary-arg NAME=VALUE`: a class's own constructor
arguments from the command line, each VALUE read as a TOML value (a sweep config's
syntax), else as a string."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping

from advsim.cli._common import UsageError

__all__ = ["class_args"]


def _value(text: str):
    """`text` as a TOML value (`0.5`, `3`, `true`, `"a b"`, `[1, 2]`, `1e5`), else the
    string itself (`gaussian`)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def class_args(flag: str, given: Iterable[str] | None, flags: Mapping[str, str]) -> dict:
    """`{NAME: VALUE}` of the repeated `flag NAME=VALUE` options.

    The class validates them itself when the command builds it (with the config's checks
    of a sweep's `[mechanism]` or `[adversary]` table: an unknown name is refused there,
    naming the arguments the class takes). Refused here: a malformed option, a name given
    twice, and a name that the command sets with a flag of its own (`flags`: constructor
    name -> that flag).

    Raises:
        UsageError: naming `flag`, the option and the fix.
    """
    out: dict = {}
    for item in given or ():
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(
                f"{flag} {item!r}: expected NAME=VALUE, NAME a constructor argument "
                "(e.g. strength=0.5)"
            )
        if name in out:
            raise UsageError(f"{flag} {name} is given twice ({out[name]!r} and {text!r})")
        if name in flags:
            raise UsageError(f"{flag} {name}=...: the command sets {name} with {flags[name]}")
        out[name] = _value(text)
    return out

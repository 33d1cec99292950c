"""How a plug-in package exports the names of its public modules (`export_modules`)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

__all__ = ["export_modules"]


def export_modules(namespace: dict[str, Any]) -> list[str]:
    """Exports the names of every public module of a package from the package itself.

    Imports each module of the package's folder whose name does not start with "_" (in
    `pkgutil.iter_modules` order) and binds every name of its `__all__` in `namespace`, so
    that a new module is exported without an edit of the package's `__init__`.
    `advsim.mechanisms` and `advsim.adversaries` are built this way: their `__init__` is
    `__all__ = export_modules(globals())`.

    Args:
        namespace: the package's `globals()` (its `__name__` and `__path__` are read).

    Returns:
        The exported names, module by module: the package's `__all__`.

    Example:
        >>> import advsim.adversaries
        >>> namespace = {"__name__": "advsim.adversaries", "__path__": advsim.adversaries.__path__}
        >>> names = export_modules(namespace)
        >>> names == advsim.adversaries.__all__
        True
        >>> namespace["CanaryLoss"] is advsim.adversaries.CanaryLoss
        True
    """
    names: list[str] = []
    for info in pkgutil.iter_modules(namespace["__path__"]):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{namespace['__name__']}.{info.name}")
            namespace.update({name: getattr(module, name) for name in module.__all__})
            names += module.__all__
    return names

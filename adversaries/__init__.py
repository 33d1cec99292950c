"""Adversaries: one file per family (projection / likelihood-ratio scores, canaries, ...).

The package exports every name of every public module's `__all__` (the modules are found
by listing this folder), so a new module's adversary is `advsim.adversaries.<Name>`
without an edit here.
"""

import importlib as _importlib
import pkgutil as _pkgutil

__all__: list[str] = []
for _info in _pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        _module = _importlib.import_module(f"{__name__}.{_info.name}")
        globals().update({name: getattr(_module, name) for name in _module.__all__})
        __all__ += _module.__all__
del _info, _module

"""Mechanisms: one file per construction; a new counterexample is a new file here.

The package exports every name of every public module's `__all__` (the modules are found
by listing this folder), so a new module's mechanism is `advsim.mechanisms.<Name>` without
an edit here. The real models are split by role: `datasets` (the bundled data),
`networks` (the equinox models on a flat vector), `real_models` (the two mechanisms) and
`accuracy` (the test accuracy reported beside an audit).
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

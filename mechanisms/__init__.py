"""Mechanisms: one file per construction; a new counterexample is a new file here.

The package exports every name of every public module's `__all__` (the modules are found
by listing this folder: `advsim.export_modules`), so a new module's mechanism is
`advsim.mechanisms.<Name>` without an edit here. The real models are split by role:
`datasets` (the bundled data), `networks` (the equinox models on a flat vector),
`real_models` (the two mechanisms) and `accuracy` (the test accuracy reported beside an
audit).
"""

from advsim import export_modules as _export_modules

__all__: list[str] = _export_modules(globals())

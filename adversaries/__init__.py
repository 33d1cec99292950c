"""Adversaries: one file per family (projection / likelihood-ratio scores, canaries, ...).

The package exports every name of every public module's `__all__` (the modules are found
by listing this folder: `advsim.export_modules`), so a new module's adversary is
`advsim.adversaries.<Name>` without an edit here.
"""

from advsim import export_modules as _export_modules

__all__: list[str] = _export_modules(globals())

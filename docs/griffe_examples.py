"""A griffe extension (mkdocs.yml loads it) for the reference pages.

- The Google style of this repository titles a doctest section `Example:`; griffe's parser
  knows `Examples:` (rendered as code) and would render `Example:` as an admonition of
  Markdown text, in which `>>>` is a nested quote and `[1, 3]` a link. What griffe parses
  is the plural title; the docstrings are left as they are.
- Code spans that name a public object (`AuditResult`, `heuristic_epsilon`,
  `advsim.Accounting`) become links to its entry, as on the other pages (docs/hooks.py
  decides which names link).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", flags=re.M)


def _hooks():
    path = Path(__file__).with_name("hooks.py")
    spec = importlib.util.spec_from_file_location("advsim_docs_hooks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HOOKS = _hooks()


class ExampleSections(griffe.Extension):
    """Read `Example:` as `Examples:`; link code spans that name public objects."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = _HOOKS.link_names(value, _HOOKS.public_names())

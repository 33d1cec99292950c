"""A griffe extension (mkdocs.yml loads it): the docstrings' `Example:` sections are doctests.

The Google style of this repository titles a doctest section `Example:`; griffe's parser
knows `Examples:` (rendered as code) and would render `Example:` as an admonition of
Markdown text, in which `>>>` is a nested quote and `[1, 3]` a link. The docstrings are
left as they are; what griffe parses is the plural title.
"""

from __future__ import annotations

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", flags=re.M)


class ExampleSections(griffe.Extension):
    """Read every `Example:` section title as `Examples:`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)

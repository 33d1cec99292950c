"""MkDocs hooks of the advsim documentation site (mkdocs.yml names this file).

- The repository keeps `advsim.mechanisms`, `advsim.audits` and `advsim.adversaries` in
  the top-level folders `mechanisms/`, `audits/` and `adversaries/` (pyproject's
  `package-dir`). griffe, which reads the sources for mkdocstrings, finds packages by
  folder (and resolves symbolic links), so `on_config` copies the sources into the
  installed layout under `build/docs-src/advsim/` (a few hundred kB, a fraction of a second).
- `advsim.mechanisms` and `advsim.adversaries` build `__all__` at import time from the
  `__all__` of their public modules; griffe reads sources without running them, so the
  copy of each such `__init__.py` states those exports as imports and a literal `__all__`.
- Strict mode fails on warnings; `on_config` logs one for every public name (every entry
  of `__all__` of a public module) whose reference entry would have no docstring.
- MathJax is served by the site itself (offline reading, and the browser test on a machine
  without internet): `on_post_build` copies it from the `django-static-mathjax` package of
  the `docs` extra (MathJax 3.2.2, no dependencies).
"""

from __future__ import annotations

import ast
import functools
import importlib
import logging
import re
import shutil
import types
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIR = ROOT / "build" / "docs-src"

# The public modules whose every `__all__` entry has a reference entry (docs/api/).
PUBLIC_MODULES = (
    "advsim",
    "advsim.validation",
    "advsim.bounds",
    "advsim.exact",
    "advsim.audits",
    "advsim.mechanisms",
    "advsim.adversaries",
    "advsim.testing",
    "advsim.sweep",
    "advsim.one_run",
    "advsim.plotting",
    "advsim.figures",
    "advsim.experiment",
)

# Folders installed under another name (pyproject.toml, [tool.setuptools] package-dir).
RELOCATED = {"mechanisms": "mechanisms", "audits": "audits", "adversaries": "adversaries"}

# Packages whose `__init__` computes `__all__` from their modules' (`stated_exports`).
COMPUTED_EXPORTS = ("advsim.mechanisms", "advsim.adversaries")

# Public constants without a docstring that the check lets through (griffe reads a
# constant's docstring from the string literal under its assignment): none today. Any
# public name without a docstring fails the build.
UNDOCUMENTED_CONSTANTS: frozenset[str] = frozenset()

log = logging.getLogger("mkdocs.hooks.advsim")


def assemble_sources(target: Path = SOURCE_DIR) -> Path:
    """Copy the repository's folders into the installed package layout under `target`."""
    package = target / "advsim"
    if package.exists():
        shutil.rmtree(target)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "advsim", package, ignore=ignore)
    for name, folder in RELOCATED.items():
        shutil.copytree(ROOT / folder, package / name, ignore=ignore)
    for name in COMPUTED_EXPORTS:
        init = target.joinpath(*name.split("."), "__init__.py")
        init.write_text(stated_exports(name, init.read_text()))
    return target


def stated_exports(package_name: str, source: str) -> str:
    """The package's `__init__` source as griffe can read it: its docstring, then one
    import per name of the `__all__` it computes at import time, then that list."""
    package = importlib.import_module(package_name)
    owners = {
        name: module.__name__
        for module in vars(package).values()
        if isinstance(module, types.ModuleType)
        and module.__name__.startswith(f"{package_name}.")
        and not module.__name__.rpartition(".")[2].startswith("_")
        for name in getattr(module, "__all__", ())
    }
    docstring = ast.get_source_segment(source, ast.parse(source).body[0])
    imports = [f"from {owners[name]} import {name}" for name in package.__all__]
    return "\n".join([docstring, "", *imports, "", f"__all__ = {package.__all__!r}", ""])


def missing_docstrings(source_dir: Path = SOURCE_DIR) -> list[str]:
    """Public names (entries of `__all__`) whose reference entry would have no docstring.

    Each name is looked up as griffe (and so mkdocstrings) sees it: a re-exported name is
    followed to its definition; a constant needs a docstring under its assignment.
    """
    import griffe

    loader = griffe.GriffeLoader(search_paths=[str(source_dir)])
    package = loader.load("advsim", try_relative_path=False)
    loader.resolve_aliases(implicit=True, external=False)
    missing = []
    for module_name in PUBLIC_MODULES:
        node = package
        for part in module_name.split(".")[1:]:
            node = node[part]
        if not (node.docstring and node.docstring.value.strip()):
            missing.append(module_name)
        # `__all__` as the sources state it (griffe's exports), not as an installed copy does.
        for name in node.exports or ():
            name = name if isinstance(name, str) else name.name
            try:
                obj = node[name]
                if obj.is_alias:
                    obj = obj.final_target
            except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                missing.append(f"{module_name}.{name} (not found by griffe)")
                continue
            full = f"{module_name}.{name}"
            if not (obj.docstring and obj.docstring.value.strip()):
                if not (obj.is_attribute and full in UNDOCUMENTED_CONSTANTS):
                    missing.append(full)
    return missing


_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", flags=re.S | re.M)
_CODE_SPAN = re.compile(r"(?<![`\[])`([A-Za-z_][\w.]*)(\(\))?`(?![`\]])")


@functools.cache
def public_names() -> dict[str, str]:
    """Names a code span may use for a public object -> its reference identifier.

    Full paths (`advsim.bounds.heuristic_epsilon`) always. A short name only when one
    public module defines it and it cannot be mistaken for a parameter's name: a class or
    constant (`AuditResult`), a name with an underscore (`heuristic_epsilon`), or a name of
    the top-level `advsim` (`simulate`); `steps` (a strategy of `advsim.testing`, and
    everywhere a parameter) stays plain unless written `advsim.testing.steps`.
    """
    full, owners = {}, {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        full[module_name] = module_name
        for name in getattr(module, "__all__", ()):
            full[f"{module_name}.{name}"] = f"{module_name}.{name}"
            owners.setdefault(name, []).append(module_name)
    short = {
        name: f"{modules[0]}.{name}"
        for name, modules in owners.items()
        if len(modules) == 1 and (not name.islower() or "_" in name or modules[0] == "advsim")
    }
    return {**short, **full}


def link_names(markdown: str, names: dict[str, str]) -> str:
    """Turn `Name` and `Name()` code spans outside code blocks into reference links."""

    def link(match: re.Match) -> str:
        target = names.get(match.group(1))
        return f"[{match.group(0)}][{target}]" if target else match.group(0)

    pieces, last = [], 0
    for fence in _FENCE.finditer(markdown):
        pieces.append(_CODE_SPAN.sub(link, markdown[last : fence.start()]))
        pieces.append(fence.group(0))
        last = fence.end()
    pieces.append(_CODE_SPAN.sub(link, markdown[last:]))
    return "".join(pieces)


def on_page_markdown(markdown, page, **kwargs):
    # The guide and tutorial pages name functions in code spans: link them to the
    # reference (the reference pages link their own names through mkdocstrings).
    if page.file.src_uri.startswith("api/"):
        return markdown
    return link_names(markdown, public_names())


# Before mkdocstrings' own on_config, which creates its Python handler: the handler globs
# its `paths`, and on a fresh clone build/docs-src must exist by then.
@event_priority(100)
def on_config(config, **kwargs):
    assemble_sources()
    for name in missing_docstrings():
        log.warning("public name without a docstring: %s", name)
    return config


def on_post_build(config, **kwargs):
    import mathjax  # the django-static-mathjax package: MathJax 3.2.2's files

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / "tex-svg.js"
    target = Path(config["site_dir"]) / "javascripts" / "mathjax" / "tex-svg.js"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)

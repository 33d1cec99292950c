"""The documentation's sources: every public name documented, the README's commands kept.

The site itself is built by `mkdocs build --strict` (CI, `.ci/run`), which runs the same
docstring check (docs/hooks.py) and executes the tutorials; test_site.py opens the result.
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hooks():
    # docs/hooks.py is an mkdocs hook module: it imports mkdocs (the docs extra). Without it
    # these tests skip; CI runs them again after installing the extra (.ci/run).
    pytest.importorskip("mkdocs", reason="mkdocs comes with the docs extra")
    spec = importlib.util.spec_from_file_location("advsim_docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_docstring(tmp_path):
    pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    hooks = _hooks()
    source = hooks.assemble_sources(tmp_path / "src")
    # The check must see the packages that live outside advsim/ (pyproject's package-dir).
    for relocated in ("mechanisms", "audits", "adversaries"):
        assert (source / "advsim" / relocated / "__init__.py").exists()
    assert hooks.missing_docstrings(source) == []


def test_docstring_check_finds_a_missing_docstring(tmp_path):
    # The check can fail: strip the docstring of one public function in a copy.
    pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    hooks = _hooks()
    source = hooks.assemble_sources(tmp_path / "src")
    path = source / "advsim" / "_layout.py"
    text = path.read_text()
    start = text.index("def block_size(")
    doc_start = text.index('"""', start)
    doc_end = text.index('"""', doc_start + 3) + 3
    path.write_text(text[:doc_start] + "pass" + text[doc_end:])
    assert hooks.missing_docstrings(source) == ["advsim.block_size"]


def test_links_to_the_reference_skip_code_blocks():
    hooks = _hooks()
    names = {"simulate": "advsim.simulate", "audit": "advsim.audits.audit"}
    text = "Call `simulate` then `audit()`, not `other`.\n```python\nx = `simulate`\n```\n"
    assert hooks.link_names(text, names) == (
        "Call [`simulate`][advsim.simulate] then [`audit()`][advsim.audits.audit], not "
        "`other`.\n```python\nx = `simulate`\n```\n"
    )


def test_readme_keeps_the_quick_start_and_points_to_the_docs():
    readme = (ROOT / "README.md").read_text()
    # CI and a hook read the test command from the README's quick start: verbatim.
    quick = re.search(r"## Quick start\n.*?```bash\n(.*?)```", readme, flags=re.S).group(1)
    assert quick.splitlines() == [
        "pip install . && advsim audit",
        'pip install -e ".[test]" && pytest -n auto',
    ]
    assert 'pip install -e ".[docs]" && mkdocs build' in readme
    # About two screens.
    assert len(readme.splitlines()) <= 120


def test_every_docs_page_is_in_the_navigation():
    # mkdocs warns (and --strict fails) on pages outside the nav; this names them sooner.
    config = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(p for p in pages if f": {p}\n" not in config)
    assert missing == []

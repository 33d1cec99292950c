"""The command line starts without the heavy libraries, and keeps compiled programs.

- `import advsim` and building the `advsim` parser (every `advsim COMMAND --help`) import
  neither jax, equinox nor the accountant (dp_accounting): checked on `sys.modules` of a
  fresh interpreter, not by timing.
- The registries' names the parser shows without them (`advsim.cli._names`) equal their
  sources: the audit registry, the threshold selections, the sweep's aliases and keys,
  the built-in audit config.
- `import advsim` resolves each public name lazily from the module the static imports of
  `advsim/__init__.py` name.
- The persistent compilation cache: its folder, its opt-out, an unusable folder, and a
  compiled program written there.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import advsim
from advsim.audits import AUDIT_METHODS, AUDITS, SIDES, THRESHOLD_SELECTIONS
from advsim.cli import _names
from advsim.cli._common import _CACHE_MIN_COMPILE_SECS, _enable_compile_cache, compile_cache_dir
from advsim.sweep import MECHANISM_ALIASES, builtin_config
from advsim.sweep._config import AUDIT_OPTION_KEYS, STRATEGY_KEYS

HEAVY = ("jax", "jaxlib", "equinox", "dp_accounting", "scipy", "matplotlib")
COMMANDS = ("audit", "bound", "sweep", "plot", "figure", "search")  # at least these


def _python(code: str, env: dict | None = None) -> str:
    """Runs `code` in a fresh interpreter; returns its stdout (fails on a non-zero exit)."""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_building_the_parser_imports_no_heavy_library():
    """Every command the parser has (read off it), and `advsim --help` itself."""
    code = f"""
import contextlib, io, json, sys
import advsim
loaded = {{"import advsim": [m for m in {HEAVY!r} if m in sys.modules]}}
from advsim.cli import build_parser, main
parser = build_parser()
loaded["build_parser()"] = [m for m in {HEAVY!r} if m in sys.modules]
commands = next(a for a in parser._actions if a.dest == "command").choices
for argv in ([], *([c] for c in commands)):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main([*argv, "--help"]) == 0
    assert "usage: advsim" in out.getvalue()
    loaded[" ".join(["advsim", *argv, "--help"])] = [m for m in {HEAVY!r} if m in sys.modules]
print(json.dumps(loaded))
"""
    loaded = json.loads(_python(code))
    assert {f"advsim {c} --help" for c in COMMANDS} <= set(loaded)
    assert loaded == {step: [] for step in loaded}


def test_the_parser_s_names_are_the_registries():
    assert _names.AUDIT_METHODS == AUDIT_METHODS
    assert _names.AUDIT_ASSUMPTIONS == {name: AUDITS[name].assumption for name in AUDIT_METHODS}
    assert list(_names.THRESHOLD_SELECTIONS.items()) == list(THRESHOLD_SELECTIONS.items())
    assert list(_names.STRATEGY_KEYS.items()) == list(STRATEGY_KEYS.items())
    assert _names.SIDES == SIDES
    assert list(_names.AUDIT_OPTION_KEYS.items()) == list(AUDIT_OPTION_KEYS.items())
    assert _names.MECHANISM_ALIASES == tuple(MECHANISM_ALIASES)
    assert _names.builtin_config("audit") == builtin_config("audit")
    with pytest.raises(ValueError, match="no built-in sweep config named 'nope'"):
        _names.builtin_config("nope")


def _static_imports() -> dict[str, str]:
    """`name -> module` of the imports in `advsim/__init__.py` (its `if TYPE_CHECKING:`)."""
    tree = ast.parse(Path(advsim.__file__).read_text())
    return {
        alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module.startswith("advsim.")
        for alias in node.names
    }


def test_advsim_resolves_its_public_names_lazily():
    static = _static_imports()
    assert static == advsim._SOURCES and set(static) == set(advsim.__all__)
    for name, module in static.items():
        assert getattr(advsim, name) is getattr(sys.modules[module], name)
    # A public subpackage is reached from a plain `import advsim` (`advsim.bounds.f(...)`).
    assert advsim.__getattr__("bounds") is sys.modules["advsim.bounds"]
    assert {"simulate", "bounds", "exact"} <= set(dir(advsim))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        advsim.nope  # noqa: B018


# ------------------------------------------------------------------------ compilation cache


def test_the_cache_folder_follows_the_environment(tmp_path):
    home = {"HOME": str(tmp_path / "home")}
    assert compile_cache_dir(home) == tmp_path / "home" / ".cache" / "advsim" / "jax"
    assert compile_cache_dir({**home, "XDG_CACHE_HOME": str(tmp_path / "xdg")}) == (
        tmp_path / "xdg" / "advsim" / "jax"
    )
    given = {**home, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "given")}
    assert compile_cache_dir(given) == tmp_path / "given"
    assert (tmp_path / "given").is_dir()
    assert compile_cache_dir({**given, "ADVSIM_NO_COMPILE_CACHE": "0"}) == tmp_path / "given"
    for value in ("1", "yes"):
        assert compile_cache_dir({**given, "ADVSIM_NO_COMPILE_CACHE": value}) is None
    # A folder that cannot be created (a file is in the way): no cache, no error.
    (tmp_path / "file").write_text("")
    assert compile_cache_dir({"XDG_CACHE_HOME": str(tmp_path / "file")}) is None


def test_the_cache_settings_given_to_jax(tmp_path, monkeypatch):
    """The folder, and advsim's minimum compile time unless the environment gives one."""
    import jax

    calls = []
    monkeypatch.setattr(jax.config, "update", lambda name, value: calls.append((name, value)))
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    folder = tmp_path / "advsim" / "jax"
    assert _enable_compile_cache(env) == folder
    assert calls == [
        ("jax_compilation_cache_dir", str(folder)),
        ("jax_persistent_cache_min_compile_time_secs", _CACHE_MIN_COMPILE_SECS),
    ]
    calls.clear()
    assert _enable_compile_cache({**env, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "2"})
    assert calls == [("jax_compilation_cache_dir", str(folder))]
    calls.clear()
    assert _enable_compile_cache({**env, "ADVSIM_NO_COMPILE_CACHE": "1"}) is None
    assert calls == []


def test_a_command_keeps_its_compiled_programs(tmp_path):
    """`main` turns the cache on before the command runs (a jitted function stands for the
    command here), and the compiled program (milliseconds to compile) lands in the
    folder."""
    code = """
import sys
import advsim.cli

def command(args):
    import jax
    import jax.numpy as jnp
    jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.arange(3.0)).block_until_ready()
    print(jax.config.jax_compilation_cache_dir)
    print(jax.config.jax_persistent_cache_min_compile_time_secs)
    return 0

build = advsim.cli.build_parser
def build_parser():
    parser = build()
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.choices["plot"].set_defaults(func=command)
    return parser
advsim.cli.build_parser = build_parser
sys.exit(advsim.cli.main(["plot", "some-folder"]))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "ADVSIM_"))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    folder = tmp_path / "xdg" / "advsim" / "jax"
    assert _python(code, env).split() == [str(folder), str(float(_CACHE_MIN_COMPILE_SECS))]
    assert any(folder.iterdir()), "the compiled program is in the cache"

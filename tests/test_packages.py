"""Every package ``__init__`` has one of the three shapes ``frame/lazy.py`` describes.

* docstring only;
* a facade: docstring, ``TYPE_CHECKING`` imports, ``__all__`` and ``lazy_exports(__name__, {...})`` —
  ``__all__``, the table and the ``TYPE_CHECKING`` names are the same set, and importing the facade
  loads no third-party library;
* a registry package: docstring, imports from its own submodules (which fill its table), ``__all__``.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent for p in (ROOT / "frame").rglob("__init__.py"))
# Not yet in one of the shapes, with the reason.
EXCEPTIONS = {
    "frame": "the root package holds __version__ (read by setup.cfg and the PNG metadata)",
}
HEAVY = ("numpy", "PIL", "onnx", "sklearn", "matplotlib", "flask", "requests", "apscheduler", "yaml", "feedparser")


def _name(folder: Path) -> str:
    return ".".join(folder.relative_to(ROOT).parts)


def _body(folder: Path) -> list[ast.stmt] | None:
    """The statements after the docstring (``from __future__`` left out); None without a docstring."""
    body = ast.parse((folder / "__init__.py").read_text(encoding="utf-8")).body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return None
    return [s for s in body[1:] if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]


def _all(stmt: ast.stmt) -> set[str] | None:
    if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["__all__"]:
        return set(ast.literal_eval(stmt.value))
    return None


def facade_table(body: list[ast.stmt]) -> dict[str, str] | None:
    """The ``lazy_exports`` table of a facade body, or None when the body is not a facade."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                and getattr(stmt.value.func, "id", None) == "lazy_exports":
            return ast.literal_eval(stmt.value.args[1])
    return None


def shape(folder: Path) -> str:
    body = _body(folder)
    if body is None:
        return "other"
    if not body:
        return "docstring"
    if facade_table(body) is not None:
        return "facade"
    package = _name(folder)
    imports = [s for s in body if isinstance(s, ast.ImportFrom)]
    if imports and all(s.module == package or s.module.startswith(package + ".") for s in imports) and \
            all(isinstance(s, ast.ImportFrom) or _all(s) is not None for s in body):
        return "registry"
    return "other"


@pytest.mark.parametrize("folder", PACKAGES, ids=_name)
def test_every_package_init_has_one_of_the_three_shapes(folder: Path) -> None:
    if _name(folder) in EXCEPTIONS:
        pytest.skip(EXCEPTIONS[_name(folder)])
    assert shape(folder) in ("docstring", "facade", "registry"), \
        f"{_name(folder)}/__init__.py is none of: docstring only, lazy_exports facade, registry package"


FACADES = [f for f in PACKAGES if _name(f) not in EXCEPTIONS and shape(f) == "facade"]


@pytest.mark.parametrize("folder", FACADES, ids=_name)
def test_a_facade_offers_the_same_names_three_ways_and_each_exists(folder: Path) -> None:
    body = _body(folder)
    table = facade_table(body)
    (exported,) = [names for s in body if (names := _all(s)) is not None]
    (guard,) = [s for s in body if isinstance(s, ast.If) and getattr(s.test, "id", None) == "TYPE_CHECKING"]
    typed = {alias.asname or alias.name: node.module for node in guard.body for alias in node.names}
    assert exported == set(table) == set(typed)
    assert typed == table  # each name imported for type checkers from the module the table names
    package = importlib.import_module(_name(folder))
    for name, module in table.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name)
    assert set(table) <= set(dir(package))


def test_importing_a_facade_loads_no_third_party_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"heavy = {HEAVY!r}\n"
        "found = {}\n"
        f"for name in {[_name(f) for f in FACADES]!r}:\n"
        "    importlib.import_module(name)\n"
        "    found[name] = sorted(m for m in heavy if m in sys.modules and m not in sum(found.values(), []))\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    found = json.loads(out)
    assert set(found) == {_name(f) for f in FACADES} and len(found) >= 8
    assert {name: mods for name, mods in found.items() if mods} == {}

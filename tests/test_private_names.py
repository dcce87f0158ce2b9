"""No module of ``frame`` reaches into another's private names (issue 30, item 5): a leading underscore
says "only this module relies on it", so ``from frame.x import _name`` or ``x._name`` (``x`` bound by a
frame import) in another module is an undeclared dependency. A helper two modules share gets a public
name (or moves to where both can import it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str, module: str) -> list[str]:
    """``line: text`` for each use, in ``source`` (module ``module``), of another frame module's private
    name: imported by name, or read as an attribute of a name a frame import bound."""
    tree = ast.parse(source)
    found, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "frame" and not node.level:
            for alias in node.names:
                if _private(alias.name) and node.module != module:
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "frame"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_imports_or_reads_another_modules_private_names() -> None:
    found = [f"{path.relative_to(ROOT)}:{use}" for path in sorted((ROOT / "frame").rglob("*.py"))
             for use in private_uses(path.read_text(encoding="utf-8"), _module(path))]
    assert found == [], "private names used across modules:\n" + "\n".join(found)


def test_the_scan_sees_both_forms_and_leaves_own_and_dunder_names_alone() -> None:
    source = ("from frame.engine.ops.elementwise import _as_array, as_array\n"
              "from frame.engine.ops import elementwise\nimport frame.worker.process as process\n"
              "from frame.x import __version__\nfrom frame.me import _mine\nimport os\n"
              "elementwise._can_reuse(1)\nprocess._die_with_parent(0)\nos._exit(0)\nself._x = 1\n")
    assert private_uses(source, "frame.me") == [
        "1: from frame.engine.ops.elementwise import _as_array",
        "7: elementwise._can_reuse", "8: process._die_with_parent"]

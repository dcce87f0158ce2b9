"""No settings are typed ``Any`` where the daemon, the worker, the web and the commands take them
(issue 15): a parameter or field named ``config``, ``*_config``, ``settings``, ``section`` or
``schedule`` names its schema class (``Config``, ``ModelConfig``, ``ScheduleConfig`` ...), so a reader
sees which keys exist and a type checker catches a wrong section.

engine, diffusion, display and taste stay config-free (their settings records are their own); the
three ``section: Any`` / ``config: Any`` there (``DisplaySettings.from_section``,
``TasteSettings.from_config``, ``load_configured_pipeline``) are outside this guard's packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import frame

PACKAGES = ("daemon", "worker", "web", "cli", "remote", "serve", "estimate", "config", "buttons", "net")
NAMES = {"config", "settings", "section", "schedule"}


def _settings_name(name: str) -> bool:
    return name in NAMES or name.endswith("_config") or name.startswith("config_")


def _is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return text in ("Any", "typing.Any", "'Any'")


def _untyped(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                if _settings_name(arg.arg) and _is_any(arg.annotation):
                    found.append(f"{path}:{arg.lineno} {node.name}({arg.arg}: Any)")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name | ast.Attribute):
            name = node.target.id if isinstance(node.target, ast.Name) else node.target.attr
            if _settings_name(name) and _is_any(node.annotation):
                found.append(f"{path}:{node.lineno} {name}: Any")
    return found


def test_no_settings_are_typed_any():
    root = Path(frame.__file__).parent
    files = [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))]
    assert len(files) > 50
    found = [line for path in files for line in _untyped(path)]
    assert not found, "settings typed Any:\n" + "\n".join(found)


def test_the_guard_sees_an_untyped_config(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from typing import Any\n\ndef f(config: Any, *, feeds_config: Any = None): ...\n\n"
                      "class C:\n    settings: Any\n")
    assert len(_untyped(sample)) == 3

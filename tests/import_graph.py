"""Every import of every ``frame`` module, read with ``ast``: the graph the layer rules are checked on.

Why apart from ``tests/test_layers.py``: that file states the rules (the parts and their levels, the
daemon process's limits, the listed lazy imports, the owner actions); this one only reads the code —
top-level imports, those inside functions and under ``TYPE_CHECKING``, and
``importlib.import_module("frame...")`` with a literal name — so ``tests/test_daemon_imports.py``
follows the same graph without importing the rules' test module.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "frame"


def module_name(path: Path) -> str:
    """``frame/a/b.py`` -> ``frame.a.b``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    path: Path
    line: int
    where: str  # "top", "function" or "typing"

    def describe(self, part_of: Callable[[str], str | None]) -> str:
        """``path:line source (part) -> target (part)``, with where the import stands."""
        where = {"top": "", "function": " [in a function]", "typing": " [TYPE_CHECKING]"}[self.where]
        return (f"{self.path.relative_to(ROOT)}:{self.line} {self.source} ({part_of(self.source)}) -> "
                f"{self.target} ({part_of(self.target)}){where}")


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = source.split(".") if is_package else source.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        package = ".".join(base + ([node.module] if node.module else []))
    else:
        package = node.module or ""
    return [f"{package}.{alias.name}" if f"{package}.{alias.name}" in MODULES else package for alias in node.names]


def _literal_import_module(node: ast.AST) -> bool:
    """``importlib.import_module("frame.x")`` with a literal name (f-strings cannot be checked)."""
    return (isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "import_module")
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def imports_of(module: str) -> list[Import]:
    """Every import in ``module`` of a frame module, wherever it is written."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            where = "typing" if typing_only else "function" if in_function else "top"
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                targets = _resolve(module, is_package, child)
            elif _literal_import_module(child):
                targets = [child.args[0].value]
            for target in targets:
                if target == "frame" or target.startswith("frame."):
                    found.append(Import(module, target, path, child.lineno, where))
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), in_function, True)
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), in_function, typing_only)
                continue
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                  typing_only)

    visit(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return list(dict.fromkeys(found))  # ``from x import a, b`` of two names is one import of x


@functools.cache
def all_imports() -> tuple[Import, ...]:
    return tuple(imp for module in MODULES for imp in imports_of(module))


def function_level_imports() -> list[tuple[str, str, Path, int]]:
    """(module, imported module, path, line) of every import inside a function body, any package."""
    found = []
    for module, path in MODULES.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found += [(module, alias.name, path, inner.lineno) for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom):
                    found += [(module, target, path, inner.lineno)
                              for target in dict.fromkeys(_resolve(module, is_package, inner))]
    return sorted(set(found), key=lambda row: (str(row[2]), row[3], row[1]))


def runtime_graph() -> dict[str, set[str]]:
    """Module -> modules its import statements execute (top-level and function-level, not
    ``TYPE_CHECKING``); importing ``a.b.c`` also runs the packages ``a`` and ``a.b``."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for imp in all_imports():
        if imp.where == "typing":
            continue
        target = imp.target if imp.target in MODULES else imp.target.rpartition(".")[0]
        pieces = target.split(".")
        for end in range(1, len(pieces) + 1):
            module = ".".join(pieces[:end])
            if module in MODULES and module != imp.source and not imp.source.startswith(module + "."):
                graph[imp.source].add(module)
    return graph


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of modules (Tarjan), each sorted; a function-level import closes a
    cycle as much as a top-level one does."""
    graph, index, low, stack, on_stack, cycles = runtime_graph(), {}, {}, [], set(), []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(cycles)

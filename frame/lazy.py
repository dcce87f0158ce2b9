"""``lazy_exports``: the one way a package offers names from its submodules without importing them.

A package ``__init__`` is one of three shapes (``tests/test_packages.py`` checks them):

* **docstring only** — the package is a folder of modules, imported by their full names;
* **a facade** — a docstring, a ``TYPE_CHECKING`` import of the offered names (for readers and type
  checkers), ``__all__``, and ``__getattr__, __dir__ = lazy_exports(__name__, {name: module})``. A name
  is imported on first use, so ``import frame.engine`` costs nothing until ``frame.engine.load_model``
  is read (the CLI's ``--help`` and the daemon import facades without numpy or onnx);
* **a registry package** — it imports its member modules so that their decorators fill a table
  (ops, passes, providers, samplers, drivers).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, offering ``name`` from module ``table[name]``.

    A name is imported once and then stored in the package's namespace, so later reads are plain
    attribute lookups. An unknown name raises ``AttributeError`` as a module without it would.
    """
    names = dict(table)

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(names[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__

"""The ``frame`` command: ``main`` parses the command line (``frame.cli.program``) and each module here
registers one group of subcommands. Command modules stay import-light: ``frame --help`` and ``frame
run`` (the daemon process) import every one of them, so a handler imports what it runs inside itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.cli.program import main

__all__ = ["main"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "main": "frame.cli.program",
})

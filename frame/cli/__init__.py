"""The ``frame`` command: ``main`` parses the command line (``frame.cli.program``) and each module here
registers one group of subcommands. Command modules stay import-light: ``frame --help`` and ``frame
run`` (the daemon process) import every one of them, so a handler imports what it runs inside itself."""

from frame.cli.program import main

__all__ = ["main"]

"""The ``frame`` command: one subcommand per job.

Each part of the project registers its own subcommands from ``frame/<part>/commands.py`` (kept
import-light: heavy imports happen inside the handlers). Exit codes: 0 success, 1 runtime failure,
2 bad usage or bad configuration, 130 interrupted (Ctrl-C), 141 the reader of a pipe went away
(``| head``). Errors are one clear line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
from collections.abc import Sequence

from frame import __version__
from frame.errors import FrameError, Interrupted, UsageError

COMMAND_MODULES = (
    "frame.cli.demo",
    "frame.cli.config",
    "frame.cli.engine",
    "frame.cli.render",
    "frame.cli.display",
    "frame.cli.daemon",
    "frame.cli.convert",
    "frame.cli.serve_render",
    "frame.cli.serve_model",
    "frame.cli.estimate",
)

log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so main() owns exit codes and formatting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


CONFIG_HELP = ("configuration file (default: $FRAME_CONFIG, else /etc/frame/config.yaml if present, else "
               "built-in defaults)")
DEBUG_HELP = "debug logging and full tracebacks"


def _add_global_options(parser: argparse.ArgumentParser, config: object = None, debug: object = False) -> None:
    parser.add_argument("--config", metavar="FILE", default=config, help=CONFIG_HELP)
    parser.add_argument("--debug", action="store_true", default=debug, help=DEBUG_HELP)


def _accept_global_options_everywhere(parser: argparse.ArgumentParser) -> None:
    """``frame status --config FILE`` works like ``frame --config FILE status``: every subcommand (and
    sub-subcommand) takes ``--config`` and ``--debug`` too. Their default is SUPPRESS, so a value given
    before the subcommand is not overwritten by the subcommand's unset one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _add_global_options(sub, argparse.SUPPRESS, argparse.SUPPRESS)
                _accept_global_options_everywhere(sub)


def _describe_every_command(parser: argparse.ArgumentParser) -> None:
    """``frame COMMAND --help`` starts with what the command does: a command registered without its
    own ``description`` gets its one-line help as one (``run``, ``status`` and others once had none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                sub = action.choices[choice.dest]
                if not sub.description and choice.help:
                    sub.description = choice.help[0].upper() + choice.help[1:] + "."
                _describe_every_command(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="frame",
        description="A set-and-forget generative e-paper frame. Run 'frame demo' to see a whole night.",
    )
    parser.add_argument("--version", action="version", version=f"frame {__version__}")
    _add_global_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    _describe_every_command(parser)
    _accept_global_options_everywhere(parser)
    return parser


def _configure_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s" if debug else "%(message)s",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        _configure_logging(args.debug)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe (| head) shows up here, not in the interpreter's exit
        return 0 if code is None else int(code)
    except Interrupted as exc:
        print(f"frame: interrupted: {exc}", file=sys.stderr)
        return exc.exit_code
    except FrameError as exc:
        if debug:
            traceback.print_exc()
        print(f"frame: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("frame: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into a clear exit 1
        if debug:
            traceback.print_exc()
        print(f"frame: error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1


def _reader_went_away() -> int:
    """``frame engine info model.onnx | head``: the reader closed the pipe, which is not an error.
    Quiet like the Unix tools (no traceback, no message); stdout now points at /dev/null so the
    interpreter's final flush cannot complain again. 141 = 128 + SIGPIPE, the status a shell shows."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    raise SystemExit(main())

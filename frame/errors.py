"""Errors that the CLI turns into one clear line on stderr and an exit code.

Library code raises these (or subclasses) for problems the owner can fix; anything else is a bug and
exits 1 with the exception text (full traceback with ``--debug``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence


class FrameError(Exception):
    """A problem the owner can act on; ``exit_code`` 1 = runtime failure, 2 = bad usage or config."""

    exit_code = 1


class UsageError(FrameError):
    """The command line asked for something impossible (bad arguments, unknown names)."""

    exit_code = 2


class ConfigError(FrameError):
    """The configuration is invalid; ``problems`` holds every ``section.key: message`` line."""

    exit_code = 2

    def __init__(self, problems: list[str], source: str = "configuration") -> None:
        self.problems = list(problems)
        self.source = source
        count = len(self.problems)
        header = f"{source}: {count} problem{'s' if count != 1 else ''}"
        super().__init__(header + "".join(f"\n  {p}" for p in self.problems))


class Interrupted(FrameError):
    """The owner pressed Ctrl-C; the message says what was kept and how to continue."""

    exit_code = 130


def closest(value: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name most like ``value`` (``difflib``'s ratio of at least ``cutoff``), or None.

    The one did-you-mean lookup: the config checker, the sampler, dither and panel tables all use it,
    each with the cutoff that keeps its suggestions as they were.
    """
    close = difflib.get_close_matches(value, list(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def unknown_choice(kind: str, value: str, known: Sequence[str], *, cutoff: float = 0.6,
                   aliases: Mapping[str, str] | None = None, lookup: str | None = None) -> UsageError:
    """``unknown {kind} 'x' (did you mean 'y'?); choose one of: a, b`` for a name not in ``known``.

    ``aliases`` (other spellings → name) are searched too and suggested as the name they stand for;
    ``lookup`` is the spelling to search with when it differs from the one shown (a normalised key).
    """
    aliases = aliases or {}
    match = closest(value if lookup is None else lookup, [*known, *aliases], cutoff)
    hint = f" (did you mean {aliases.get(match, match)!r}?)" if match else ""
    return UsageError(f"unknown {kind} {value!r}{hint}; choose one of: {', '.join(known)}")

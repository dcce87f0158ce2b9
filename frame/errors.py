"""Errors that the CLI turns into one clear line on stderr and an exit code.

Library code raises these (or subclasses) for problems the owner can fix; anything else is a bug and
exits 1 with the exception text (full traceback with ``--debug``).
"""


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

"""Errors of the worker's steps.

A step that fails raises ``StepFailed(step)`` chaining the cause (``raise StepFailed("generate") from
exc``) — other code's exceptions are never tagged. Whether a restart can help is the cause's type:
a ``FrameError`` (a missing part, a bad model) is permanent, anything else (MemoryError, I/O) may be
transient and the supervisor retries the job.
"""

from __future__ import annotations

from frame.errors import FrameError


class StepUnavailable(FrameError):
    """A step's implementation is missing or failed permanently (restarting cannot help); it names its
    own step, which wins over the step it was raised in (a text encoder missing while choosing is the
    "generate" step's part)."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step = step


class StepFailed(Exception):
    """Step ``step`` of a worker job failed; ``__cause__`` is why."""

    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.step = step

    @property
    def cause(self) -> BaseException:
        return self.__cause__ if self.__cause__ is not None else self

    @property
    def permanent(self) -> bool:
        """True when restarting cannot help: the cause is a FrameError."""
        return isinstance(self.__cause__, FrameError)

    def message(self) -> str:
        """The owner-facing text: a FrameError's own sentence, else ``Type: text``."""
        cause = self.cause
        return str(cause) if self.permanent else f"{type(cause).__name__}: {cause}"


def step_failed(step: str, exc: Exception) -> StepFailed:
    """``exc`` (not itself a StepFailed) raised inside ``step``, as the StepFailed to raise ``from exc``:
    a ``StepUnavailable`` keeps the step it names; anything else is this step's failure."""
    return StepFailed(exc.step if isinstance(exc, StepUnavailable) else step)

"""Errors of the worker's steps."""

from __future__ import annotations

from frame.errors import FrameError


class StepUnavailable(FrameError):
    """A step's implementation is missing or failed permanently (restarting cannot help)."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step = step

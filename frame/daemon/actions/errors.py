"""What an owner action raises when it cannot be done, for each side to answer in its own way.

``NotFound`` is a 404 on both sides; ``NotRunning`` is the API's 503 and the page's flashed "the
daemon is not running"; ``BadValue`` (a value only the store can judge, such as a queue position) is
a 400. The queue's own ``QueueError`` (``frame.daemon.queue``), ``deletion.PictureInUse`` and
``contract.Busy`` pass through unchanged: their messages are already the owner's answer.
"""

from __future__ import annotations


class NotFound(KeyError):
    """The picture or waiting prompt the owner names is not there (any more). A ``KeyError``, as the
    store's own, so callers that caught the store's keep working; ``str()`` is the message itself."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class NotRunning(RuntimeError):
    """The action needs the running daemon (show, render now, restart) and this app has none."""


class BadValue(ValueError):
    """A value the store refused; ``field`` names it for the page, ``str()`` is the store's message."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def no_picture(picture_id: int) -> NotFound:
    return NotFound(f"no picture with id {picture_id}")


def no_prompt(prompt_id: int) -> NotFound:
    return NotFound(f"no queued prompt with id {prompt_id} (already painted or removed?)")

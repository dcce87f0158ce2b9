"""Errors the engine raises for problems an owner can act on (bad model, bad input, bad weights)."""

from __future__ import annotations

from frame.errors import FrameError, UsageError


class EngineError(FrameError):
    """Base class of every engine error."""


class UnsupportedModelError(EngineError):
    """The graph uses ops, opsets or attributes no kernel here can run; ``problems`` lists them all."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:20]
        more = len(self.problems) - len(shown)
        text = f"model cannot run: {len(self.problems)} unsupported node(s)\n  " + "\n  ".join(shown)
        if more:
            text += f"\n  ... and {more} more (see `frame engine info`)"
        super().__init__(text)


class ModelFormatError(EngineError):
    """The .onnx file is not a well-formed model (bad protobuf, missing graph, bad external data)."""


class InputError(EngineError):
    """A feed passed to ``Model.run`` is missing, unexpected, or has the wrong dtype or shape: bad input
    from whoever called, so the CLI exits 2 (``frame engine run`` with the wrong ``--input``)."""

    exit_code = 2


class WeightDataError(EngineError):
    """A weight's bytes are missing, truncated or of the wrong length; the message names the tensor."""


class WeightFetchError(EngineError):
    """Weights could not be fetched (HTTP failures after retries, server without Range support)."""


class ServerUnreachable(WeightFetchError):
    """The model server did not answer (connection problems, 5xx, timeouts) for as long as the retries
    allowed: the one failure a copy in the weight cache may stand in for."""


class NodeError(EngineError):
    """A kernel failed on this model's data; the message names the node, op and input shapes."""


class SourceTruncated(Exception):
    """A byte source ends before the requested range does (the caller names the tensor or structure).

    Not an EngineError on purpose: callers turn it into the error that names what was being read,
    and no ``except FrameError`` should catch it on the way."""


class FileFormatError(UsageError):
    """A file frame reads (a safetensors header, a torch checkpoint's pickle or tensors) is malformed
    or out of bounds. The message names the file and the field; ``path`` and ``field`` say them too,
    for callers that report a bad file and carry on (an embedding's word stays a word)."""

    def __init__(self, message: str, path: str = "", field: str = "") -> None:
        super().__init__(message)
        self.path, self.field = path, field

"""A ``.ckpt`` (torch.save's zip) as a ``Checkpoint``, through frame's torch reader
(``frame.engine.io.torch_pickle``: the pickle interpreted without calling anything it names, every
tensor's bounds checked before a byte is read).

A training checkpoint nests the weights: ``{"state_dict": {...}, "global_step": ..., "optimizer":
...}``; the keys under ``state_dict.`` are the checkpoint's own names, and only those are offered.
A file of plain weights (no ``state_dict``) offers all of them. Training bookkeeping objects become
inert values (``inert=True``), never calls. A tensor is read whole (a zip member cannot be read at an
offset without reading what is before it) and kept until the next one is asked for, so reading one
in row blocks costs one read.
"""

from __future__ import annotations

import numpy as np

from frame.convert.checkpoint.components import FLOAT_DTYPES, TensorInfo
from frame.engine.io.sources import ByteSource
from frame.engine.io.torch_pickle import TorchTensor, open_torch
from frame.errors import UsageError

STATE_DICT = "state_dict."


class TorchCheckpoint:
    """A torch zip file's weights, by their checkpoint names: a local file, or ``source`` (a URL's
    Range requests; the checkpoint then owns and closes it)."""

    def __init__(self, path: str, source: ByteSource | None = None) -> None:
        self.location = source.location if source is not None else path
        self.source = source  # the import's resume identity reads its size and ETag
        self.file = open_torch(path, inert=True, source=source)
        found = list(self.file.tensors())
        nested = any(name.startswith(STATE_DICT) for name, _ in found)
        self.entries: dict[str, TorchTensor] = {
            (name[len(STATE_DICT):] if nested else name): tensor for name, tensor in found
            if not nested or name.startswith(STATE_DICT)}
        self.tensors = {k: TensorInfo(t.dtype, t.shape) for k, t in self.entries.items()}
        self.metadata: dict[str, str] = {}
        self.configs: dict[str, dict] = {}
        self._last: tuple[str, np.ndarray] | None = None

    def read(self, key: str) -> np.ndarray:
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        tensor = self.entries[key]
        if tensor.dtype not in FLOAT_DTYPES:
            raise UsageError(f"{self.location}: tensor {key!r} is {tensor.dtype}, not a float weight")
        self._last = None  # free the previous tensor first
        array = np.ascontiguousarray(tensor.read(), dtype=np.float32)
        self._last = (key, array)
        return array

    def read_rows(self, key: str, first: int, count: int) -> np.ndarray:
        return self.read(key)[first:first + count]

    def close(self) -> None:
        self._last = None
        self.file.close()

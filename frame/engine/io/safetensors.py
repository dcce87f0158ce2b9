"""Read safetensors files with numpy: the header at once, each tensor only when asked for.

The format (huggingface/safetensors, ``docs``): 8 bytes little-endian header length N, N bytes of
JSON ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``, then
the raw little-endian data, offsets counted from the end of the header. Reading it needs no torch
and no ``safetensors`` package; a LoRA's factors are read one module at a time, so a 150 MB LoRA
file never sits in memory whole (``frame.engine.lora``), and a checkpoint imported over HTTP is read a
tensor at a time through a ``ByteSource`` (``read_source_header``, ``frame.convert.checkpoint``).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from frame.errors import UsageError

if TYPE_CHECKING:
    from frame.engine.io.sources import ByteSource

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER = 100 << 20  # the format's own limit


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a safetensors file: its dtype name (``F16``...), shape and absolute byte range."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    stop: int

    @property
    def nbytes(self) -> int:
        return self.stop - self.start

    def read(self) -> np.ndarray:
        """The tensor as float32 (LoRA factors are computed in float32 whatever they are stored as)."""
        with open(self.path, "rb") as f:
            f.seek(self.start)
            data = f.read(self.nbytes)
        if len(data) != self.nbytes:
            raise UsageError(f"{self.path}: file is truncated (tensor data ends at byte {self.stop})")
        return self.decode(data)

    def decode(self, data: bytes | np.ndarray) -> np.ndarray:
        """This tensor's raw bytes (read by the caller, from a file or a ``ByteSource``) as float32."""
        raw = np.frombuffer(data, dtype=np.dtype(DTYPES[self.dtype]).newbyteorder("<"))
        if self.dtype == "BF16":  # bfloat16 is the top half of a float32
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(self.shape)
        return raw.astype(np.float32).reshape(self.shape)


@dataclass(frozen=True)
class SafetensorsFile:
    path: str
    tensors: dict[str, TensorEntry]
    metadata: dict[str, str]


def read_header(path: str | os.PathLike) -> SafetensorsFile:
    """The tensors a safetensors file holds (no data read); UsageError naming the file if it is not one."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            def read(offset: int, length: int) -> bytes:
                f.seek(offset)
                return f.read(length)

            return _parse(path, size, read)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it as a safetensors file ({exc})") from exc


def read_source_header(source: ByteSource) -> SafetensorsFile:
    """The same as ``read_header`` for a file behind a ``ByteSource`` (a local file or an HTTP URL read
    with Range requests): only the header's bytes are fetched. The entries' ``path`` is the source's
    location; their bytes are read with ``source.read_at(entry.start, entry.nbytes)``."""
    size = source.size()
    return _parse(source.location, size, lambda offset, length: source.read_at(offset, length).tobytes())


def _parse(path: str, size: int, read: Callable[[int, int], bytes]) -> SafetensorsFile:
    head = read(0, 8) if size >= 8 else b""
    if len(head) != 8:
        raise UsageError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    (length,) = struct.unpack("<Q", head)
    if length > min(MAX_HEADER, size - 8):
        raise UsageError(f"{path}: not a safetensors file (header length {length} does not fit the file)")
    try:
        header = json.loads(read(8, length).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it as a safetensors file ({exc})") from exc
    if not isinstance(header, dict):
        raise UsageError(f"{path}: not a safetensors file (the header is not a JSON object)")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise UsageError(f"{path}: not a safetensors file (__metadata__ is not a JSON object)")
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], tuple(int(d) for d in info["shape"]), info["data_offsets"]
            begin, end = int(begin), int(end)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path}: tensor {name!r} has a malformed header entry") from exc
        if dtype not in DTYPES:
            raise UsageError(f"{path}: tensor {name!r} has dtype {dtype}, which frame cannot read")
        if any(d < 0 for d in shape):
            raise UsageError(f"{path}: tensor {name!r} has a negative dimension in its shape {list(shape)}")
        expected = math.prod(shape) * (2 if dtype == "BF16" else np.dtype(DTYPES[dtype]).itemsize)
        if not 0 <= begin <= end or end - begin != expected or base + end > size:
            raise UsageError(f"{path}: tensor {name!r} has a byte range that does not match its shape or the file")
        tensors[name] = TensorEntry(path, dtype, shape, base + begin, base + end)
    return SafetensorsFile(path, tensors, {str(k): str(v) for k, v in metadata.items()})

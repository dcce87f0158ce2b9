"""Read safetensors files with numpy: the header at once, each tensor only when asked for.

The format (huggingface/safetensors, ``docs``): 8 bytes little-endian header length N, N bytes of
JSON ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``, then
the raw little-endian data, offsets counted from the end of the header. Reading it needs no torch
and no ``safetensors`` package; a LoRA's factors are read one module at a time, so a 150 MB LoRA
file never sits in memory whole (``frame.engine.lora``), and a checkpoint imported over HTTP is read a
tensor at a time through a ``ByteSource`` (``read_source_header``, ``frame.convert.checkpoint``).

Every file is treated as hostile (``header_checks`` holds the checks): the header's size and its
number of objects are capped and its nesting is measured on the bytes before ``json.loads`` builds
anything, then each entry is checked field by field (a dtype frame reads, a shape of non-negative
integers, two integer offsets inside the file that match the shape and overlap no other tensor,
``__metadata__`` strings only). Every failure is one ``FileFormatError`` naming the file and the field.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from frame.engine.errors import FileFormatError
from frame.engine.io.file_limits import MAX_TENSOR_BYTES
from frame.engine.io.header_checks import HeaderLimits, check_entries, check_metadata, prescan

if TYPE_CHECKING:
    from frame.engine.io.sources import ByteSource

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
LIMITS = HeaderLimits()
ITEMSIZE = {name: np.dtype(dtype).itemsize for name, dtype in DTYPES.items()}


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
        if self.nbytes // ITEMSIZE[self.dtype] * 4 > MAX_TENSOR_BYTES:
            raise FileFormatError(f"{self.path}: tensor of shape {list(self.shape)} takes more than "
                                  f"{MAX_TENSOR_BYTES >> 20} MiB as float32", path=self.path, field="shape")
        with open(self.path, "rb") as f:
            f.seek(self.start)
            data = f.read(self.nbytes)
        if len(data) != self.nbytes:
            raise FileFormatError(f"{self.path}: file is truncated (tensor data ends at byte {self.stop})",
                                  path=self.path, field="data_offsets")
        return self.decode(data)

    def decode(self, data: bytes | np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """This tensor's raw bytes (read by the caller, from a file or a ``ByteSource``; all of them, or
        whole rows of them with ``shape``) as float32."""
        raw = np.frombuffer(data, dtype=np.dtype(DTYPES[self.dtype]).newbyteorder("<"))
        shape = self.shape if shape is None else shape
        if self.dtype == "BF16":  # bfloat16 is the top half of a float32
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        return raw.astype(np.float32).reshape(shape)


@dataclass(frozen=True)
class SafetensorsFile:
    path: str
    tensors: dict[str, TensorEntry]
    metadata: dict[str, str]


def _fail(path: str, message: str, field: str) -> FileFormatError:
    return FileFormatError(f"{path}: {message}", path=path, field=field)


def read_header(path: str | os.PathLike, limits: HeaderLimits = LIMITS) -> SafetensorsFile:
    """The tensors a safetensors file holds (no data read); FileFormatError naming the file and the
    field when it is not one, or not one frame reads within ``limits``."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            def read(offset: int, length: int) -> bytes:
                f.seek(offset)
                return f.read(length)

            return _parse(path, size, read, limits)
    except OSError as exc:
        raise _fail(path, f"cannot be read ({exc.strerror or exc})", "file") from None


def read_source_header(source: ByteSource, limits: HeaderLimits = LIMITS) -> SafetensorsFile:
    """The same as ``read_header`` for a file behind a ``ByteSource`` (a local file or an HTTP URL read
    with Range requests): only the header's bytes are fetched. The entries' ``path`` is the source's
    location; their bytes are read with ``source.read_at(entry.start, entry.nbytes)``."""
    size = source.size()
    return _parse(source.location, size, lambda offset, length: source.read_at(offset, length).tobytes(), limits)


def _parse(path: str, size: int, read: Callable[[int, int], bytes], limits: HeaderLimits) -> SafetensorsFile:
    head = read(0, 8) if size >= 8 else b""
    if len(head) != 8:
        raise _fail(path, "not a safetensors file (shorter than 8 bytes)", "header length")
    (length,) = struct.unpack("<Q", head)
    if length > size - 8:
        raise _fail(path, f"not a safetensors file (header length {length} does not fit the file)", "header length")
    if length > limits.max_header_bytes:
        raise _fail(path, f"the header is {length} bytes, more than the {limits.max_header_bytes >> 20} MiB "
                    "frame reads", "header length")
    raw = read(8, length)
    if len(raw) != length:
        raise _fail(path, f"the file ends inside its {length}-byte header", "header length")
    prescan(raw, path, limits)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError, an int of 5000 digits
        raise _fail(path, f"the header is not valid JSON ({str(exc)[:120]})", "header") from None
    del raw
    if not isinstance(header, dict):
        raise _fail(path, f"not a safetensors file (the header is a JSON {type(header).__name__}, not an object)",
                    "header")
    metadata = check_metadata(header.pop("__metadata__", {}), path)
    base = 8 + length
    entries = check_entries(header, path, size - base, ITEMSIZE, limits)
    tensors = {name: TensorEntry(path, dtype, shape, base + begin, base + end)
               for name, (dtype, shape, begin, end) in entries.items()}
    return SafetensorsFile(path, tensors, metadata)

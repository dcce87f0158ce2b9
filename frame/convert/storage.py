"""Reading source tensors in row chunks, and writing converted tensors into one external-data file.

``TensorReader`` returns rows ``[first, first + count)`` of an initializer (axis 0) straight from its
byte range, so a 253 MB embedding table is converted a few MB at a time. ``ExternalData`` appends
tensors to the ``model.onnx_data`` file being written: small ones (< ``INLINE_BYTES``) go into the
.onnx file itself, because onnxruntime's shape inference needs small shape/axes tensors inline; large
ones start on a ``ALIGN``-byte boundary, so either runtime can map them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import numpy as np
import onnx

from frame.engine.errors import SourceTruncated, WeightDataError
from frame.engine.io.sources import SourcePool
from frame.engine.io.weights import WeightRef

INLINE_BYTES = 1024
ALIGN = 4096
CHUNK_BYTES = 16 << 20


class TensorReader:
    """Rows of initializers read from their files (or inline values), checked for length."""

    def __init__(self) -> None:
        self.pool = SourcePool()

    def rows(self, ref: WeightRef, first: int, count: int) -> np.ndarray:
        """Rows ``first .. first+count`` along axis 0 (the whole tensor for a scalar)."""
        if ref.value is not None:
            return ref.value if not ref.shape else ref.value[first:first + count]
        if not ref.shape:
            return ref.decode(self._read(ref, ref.offset, ref.length))
        row_bytes = ref.length // ref.shape[0] if ref.shape[0] else 0
        buf = self._read(ref, ref.offset + first * row_bytes, count * row_bytes)
        return buf.view(ref.dtype).reshape((count, *ref.shape[1:]))

    def whole(self, ref: WeightRef) -> np.ndarray:
        return self.rows(ref, 0, ref.shape[0] if ref.shape else 1)

    def chunks(self, ref: WeightRef, chunk_bytes: int | None = None) -> Iterator[np.ndarray]:
        """The tensor as consecutive row blocks of about ``chunk_bytes`` (default ``CHUNK_BYTES``;
        at least one row each)."""
        chunk_bytes = chunk_bytes or CHUNK_BYTES
        if not ref.shape or ref.shape[0] == 0:
            yield self.whole(ref)
            return
        row_bytes = max(1, math.prod(ref.shape[1:]) * ref.dtype.itemsize)
        step = max(1, chunk_bytes // row_bytes)
        for first in range(0, ref.shape[0], step):
            yield self.rows(ref, first, min(step, ref.shape[0] - first))

    def _read(self, ref: WeightRef, offset: int, length: int) -> np.ndarray:
        if ref.location is None:
            raise WeightDataError(f"weight {ref.name!r} has no stored location")
        try:
            return self.pool.get(ref.location).read_at(offset, length)
        except SourceTruncated as exc:
            raise WeightDataError(f"weight {ref.name!r}: {exc}") from exc

    def close(self) -> None:
        self.pool.close()


def tensor_header(name: str, data_type: int, dims: Iterable[int]) -> onnx.TensorProto:
    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.data_type = data_type
    tensor.dims.extend(int(d) for d in dims)
    return tensor


class ExternalData:
    """Appends tensor bytes to ``path`` (an open, new file) and points TensorProtos at them."""

    def __init__(self, file: BinaryIO, location: str) -> None:
        self.file = file
        self.location = location
        self.offset = 0

    def store(self, tensor: onnx.TensorProto, nbytes: int, chunks: Iterable[np.ndarray]) -> None:
        """Write ``chunks`` (``nbytes`` in all) as ``tensor``'s data. If the chunks raise, whatever
        was written for this tensor is cut off again and the exception propagates."""
        if nbytes < INLINE_BYTES:
            tensor.raw_data = b"".join(np.ascontiguousarray(c).tobytes() for c in chunks)
            _check_length(tensor.name, len(tensor.raw_data), nbytes)
            return
        start = -(-self.offset // ALIGN) * ALIGN
        try:
            if start > self.offset:
                self.file.write(bytes(start - self.offset))
            written = 0
            for chunk in chunks:
                view = memoryview(np.ascontiguousarray(chunk)).cast("B")
                self.file.write(view)
                written += len(view)
            _check_length(tensor.name, written, nbytes)
        except BaseException:
            self.file.seek(self.offset)
            self.file.truncate()
            raise
        self.offset = start + written
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(start)), ("length", str(written))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value

    def finish(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())


def _check_length(name: str, got: int, expected: int) -> None:
    if got != expected:
        raise WeightDataError(f"tensor {name!r}: wrote {got} bytes, expected {expected}")

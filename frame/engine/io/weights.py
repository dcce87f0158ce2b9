"""Where each initializer's bytes live, and turning those bytes into an array with strict checks.

A ``WeightRef`` is the whole description a provider needs to fetch one tensor: a byte range in some
file or URL (embedded ``raw_data`` found by the scanner, or ONNX external data), its dtype and shape.
Small tensors stored inline in the proto (``float_data``, ``int64_data``, ...) carry their value.
Every size is checked at load time against dims × itemsize, and again on every read, so truncated or
corrupt weight data is an error naming the tensor, never silently wrong numbers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from frame.engine.errors import ModelFormatError, WeightDataError
from frame.engine.io.protobuf_index import ByteRange
from frame.engine.io.sources import is_url, sibling


@dataclass(eq=False)
class WeightRef:
    """One initializer: ``location`` + ``offset``/``length`` bytes, or an inline ``value``."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    location: str | None = None
    offset: int = 0
    length: int = 0
    value: np.ndarray | None = field(default=None, repr=False)
    index: int = -1  # position in the order the engine fetches weights (set by the plan)
    keep_float16: bool = False  # hand over as stored: every op using it widens it itself (weight_decoding)

    @property
    def nbytes(self) -> int:
        return self.length if self.value is None else int(self.value.nbytes)

    def decode(self, buf: np.ndarray) -> np.ndarray:
        """``buf`` (uint8, exactly ``length`` bytes) as this tensor; WeightDataError otherwise.

        The array is always aligned for its dtype: a view when ``buf`` already is, else a copy. Weights
        embedded in an .onnx file lie at any byte offset, and numpy multiplies a misaligned float32
        array in its own loop instead of BLAS, which sums in another order: the same weight read as
        a view of a streamed run and as a fresh buffer from the weight cache gave UNet outputs 1e-6
        apart and renders 1 level apart in a few pixels. Only small weights need the copy (a big one
        is read into a buffer of its own, ``ReadingProvider._fetch``)."""
        if buf.size != self.length:
            raise WeightDataError(
                f"weight {self.name!r}: got {buf.size} bytes from {self.location}, expected {self.length}")
        array = buf.view(self.dtype).reshape(self.shape)
        return array if array.flags.aligned else array.copy()


def numpy_dtype(data_type: int, what: str) -> np.dtype:
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type))
    except (KeyError, TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind in "OUSV" or data_type == onnx.TensorProto.BFLOAT16:
        name = onnx.TensorProto.DataType.Name(data_type) if data_type in onnx.TensorProto.DataType.values() \
            else str(data_type)
        raise ModelFormatError(f"{what} has data type {name}, which the engine does not support")
    return dtype


def collect_weights(graph: onnx.GraphProto, model_location: str,
                    embedded: dict[str, ByteRange]) -> dict[str, WeightRef]:
    """A WeightRef for every initializer of ``graph`` (whose raw_data the scanner removed)."""
    if len(graph.sparse_initializer):
        raise ModelFormatError("sparse initializers are not supported")
    refs: dict[str, WeightRef] = {}
    for tensor in graph.initializer:
        dtype = numpy_dtype(tensor.data_type, f"initializer {tensor.name!r}")
        shape = tuple(int(d) for d in tensor.dims)
        expected = math.prod(shape) * dtype.itemsize
        ref = WeightRef(tensor.name, dtype, shape)
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            _external(ref, tensor, model_location, expected)
        elif tensor.name in embedded:
            where = embedded[tensor.name]
            ref.location, ref.offset, ref.length = model_location, where.offset, where.length
        else:
            ref.value = numpy_helper.to_array(tensor).astype(dtype, copy=False).reshape(shape)
            ref.length = int(ref.value.nbytes)
        if ref.length != expected:
            raise WeightDataError(
                f"weight {tensor.name!r}: {ref.length} bytes of data for shape {shape} {dtype} "
                f"(needs {expected})")
        refs[tensor.name] = ref
    _check_local_sizes(refs.values())
    return refs


def _external(ref: WeightRef, tensor: onnx.TensorProto, model_location: str, expected: int) -> None:
    info = {entry.key: entry.value for entry in tensor.external_data}
    if "location" not in info:
        raise ModelFormatError(f"weight {tensor.name!r}: external data without a location")
    ref.location = sibling(model_location, info["location"])
    try:
        ref.offset = int(info.get("offset", 0))
        ref.length = int(info.get("length", expected))
    except ValueError as exc:
        raise ModelFormatError(f"weight {tensor.name!r}: bad external data offset/length") from exc


def _check_local_sizes(refs) -> None:
    """Fail at load, naming the tensor, when a local weights file is shorter than the model declares."""
    sizes: dict[str, int] = {}
    for ref in refs:
        if ref.location is None or is_url(ref.location):
            continue
        if ref.location not in sizes:
            try:
                sizes[ref.location] = os.path.getsize(ref.location)
            except OSError as exc:
                raise WeightDataError(f"weight {ref.name!r}: cannot read {ref.location}: {exc.strerror}") from exc
        if ref.offset + ref.length > sizes[ref.location]:
            raise WeightDataError(
                f"weight {ref.name!r}: {ref.location} has {sizes[ref.location]} bytes but the tensor needs "
                f"bytes {ref.offset}..{ref.offset + ref.length} (truncated weights file?)")

"""What precision a model folder's weights are stored in, read by the daemon without onnx or numpy.

The settings page lists the models on the frame with their precision (fp32, fp16, uint8). The daemon
imports neither onnx nor numpy (it stays at ~45 MiB for months), so this walks the protobuf
wire format of ``unet/model.onnx`` by hand, as ``frame.engine.io.protobuf_index`` does in the worker
(which the daemon may not import): ModelProto.graph → GraphProto.initializer → TensorProto.dims and
.data_type. Everything else, the nodes and every tensor's ``raw_data``, is skipped with a seek, so a
UNet with its weights embedded (3.4 GB) costs a few kilobytes of reads, and nothing is allocated in
proportion to the file. Every file is hostile: a length past the end, a varint past ten bytes or more
than ``MAX_FIELDS`` fields gives ``None`` ("unknown"), never an exception or a large allocation.

Wire format: each field is ``key = (field_number << 3) | wire_type`` as a varint, then a varint
(type 0), 8 bytes (type 1), a varint length + payload (type 2) or 4 bytes (type 5).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import BinaryIO

MODEL_GRAPH = 7        # ModelProto.graph
GRAPH_INITIALIZER = 5  # GraphProto.initializer
TENSOR_DIMS = 1        # TensorProto.dims (int64, packed or not)
TENSOR_TYPE = 2        # TensorProto.data_type
MAX_FIELDS = 2_000_000  # a real SDXL UNet has ~40 000 nodes and ~2 600 initializers
MAX_TENSOR_HEADER = 4096  # dims and data_type come first: onnx writes fields in number order
# TensorProto.DataType codes of weights, as the page names them (int8: frame model convert --symmetric).
NAMES = {1: "fp32", 10: "fp16", 16: "bf16", 2: "uint8", 3: "int8", 11: "fp64"}


class _Bad(Exception):
    """The file is not what it claims; the caller answers "unknown"."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):
        if pos >= len(data):
            raise _Bad("varint past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise _Bad("varint longer than 10 bytes")


def _read_varint(file: BinaryIO) -> int | None:
    value = shift = 0
    for _ in range(10):
        byte = file.read(1)
        if not byte:
            if shift:
                raise _Bad("varint past the end")
            return None
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
    raise _Bad("varint longer than 10 bytes")


class _Walk:
    """Fields of one message between ``file``'s position and ``end``, counted against MAX_FIELDS."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        self.file, self.size, self.fields = file, size, 0

    def fields_of(self, end: int):
        """(field number, wire type, payload start, payload length or None) until ``end``; the caller
        either reads a length-delimited payload or leaves it: the walk seeks past it either way."""
        while self.file.tell() < end:
            self.fields += 1
            if self.fields > MAX_FIELDS:
                raise _Bad("too many fields")
            key = _read_varint(self.file)
            if key is None:
                raise _Bad("message cut short")
            number, wire = key >> 3, key & 7
            if wire == 0:
                _read_varint(self.file)
                continue
            if wire in (1, 5):
                self.file.seek(8 if wire == 1 else 4, os.SEEK_CUR)
                continue
            if wire != 2:
                raise _Bad(f"wire type {wire}")
            length = _read_varint(self.file)
            start = self.file.tell()
            if length is None or start + length > min(end, self.size):
                raise _Bad("a length past the end of its message")
            yield number, start, length
            self.file.seek(start + length)


def _tensor(header: bytes) -> tuple[int | None, int]:
    """(data_type, element count) from the first bytes of a TensorProto."""
    pos, dims, dtype = 0, [], None
    while pos < len(header):
        try:
            key, pos = _varint(header, pos)
            number, wire = key >> 3, key & 7
            if number == TENSOR_DIMS and wire == 0:
                value, pos = _varint(header, pos)
                dims.append(value)
            elif number == TENSOR_DIMS and wire == 2:
                length, pos = _varint(header, pos)
                stop = pos + length
                while pos < min(stop, len(header)):
                    value, pos = _varint(header, pos)
                    dims.append(value)
            elif number == TENSOR_TYPE and wire == 0:
                dtype, pos = _varint(header, pos)
            else:
                break  # name, raw_data, external data...: past the fields this needs
        except _Bad:
            break  # the header was cut at MAX_TENSOR_HEADER: what was read is enough
    count = math.prod(dims) if dims and all(0 <= d < 1 << 40 for d in dims) else 0
    return dtype, count


def stored_precision(model_onnx: Path) -> str | None:
    """The precision most of the graph's weights are stored in ("fp32", "fp16", "uint8"...), counted
    in elements (a uint8 graph keeps fp32 scales and biases); None when the file cannot tell."""
    counts: dict[int, int] = {}
    try:
        with open(model_onnx, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            walk = _Walk(file, size)
            for start, length in _initializers(walk, size):
                file.seek(start)
                dtype, count = _tensor(file.read(min(length, MAX_TENSOR_HEADER)))
                if dtype is not None:
                    counts[dtype] = counts.get(dtype, 0) + count
    except (OSError, _Bad):
        return None
    if not counts:
        return None
    dtype = max(counts, key=lambda code: counts[code])
    return NAMES.get(dtype, f"type {dtype}")


def _initializers(walk: _Walk, size: int) -> list[tuple[int, int]]:
    """(start, length) of each TensorProto among the main graph's initializers."""
    for number, start, length in walk.fields_of(size):
        if number == MODEL_GRAPH:
            return [(at, n) for inner, at, n in walk.fields_of(start + length) if inner == GRAPH_INITIALIZER]
    return []

"""A local .onnx file's graph inputs (names and shapes) read from the protobuf wire format, with
neither numpy nor onnx imported and nothing held but the inputs.

Why (the Pi twin): the settings checks (``frame.worker.model_rules``) need one fact from
the UNet's graph, whether its latent size is fixed (the ``sample`` input's shape). Reading it
through ``onnx`` imported numpy, onnx and Pillow and parsed every node: the check child peaked at
61 MiB (x86; 114 MiB under qemu-user), and it may run while the render worker holds its most. This
reader seeks past the nodes and initializers (ModelProto.graph = 7; GraphProto.input = 11) and
decodes only the ``ValueInfoProto`` records, so the check child stays at its interpreter's size.

Shapes are tuples of ints (fixed axes) and strings (named axes) or None (neither).
"""

from __future__ import annotations

import os
from typing import BinaryIO

from frame.engine.errors import ModelFormatError

MODEL_GRAPH = 7             # ModelProto.graph
GRAPH_INPUT = 11            # GraphProto.input (ValueInfoProto)
VALUE_NAME, VALUE_TYPE = 1, 2                  # ValueInfoProto.name, .type (TypeProto)
TYPE_TENSOR = 1                                # TypeProto.tensor_type
TENSOR_SHAPE = 2                               # TypeProto.Tensor.shape (TensorShapeProto)
SHAPE_DIM = 1                                  # TensorShapeProto.dim
DIM_VALUE, DIM_PARAM = 1, 2                    # Dimension.dim_value, .dim_param
MAX_INPUT_BYTES = 1 << 20   # one ValueInfoProto; a larger one is not an input description

Shape = tuple[int | str | None, ...]


def _varint(read: BinaryIO, path: str) -> int:
    value = shift = 0
    while True:
        byte = read.read(1)
        if not byte:
            raise ModelFormatError(f"{path}: the file ends inside a protobuf varint (truncated?)")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7
        if shift > 63:
            raise ModelFormatError(f"{path}: a protobuf varint longer than 10 bytes (not an ONNX file)")


def _skip(read: BinaryIO, wire: int, path: str) -> None:
    if wire == 0:
        _varint(read, path)
    elif wire == 1:
        read.seek(8, os.SEEK_CUR)
    elif wire == 2:
        read.seek(_varint(read, path), os.SEEK_CUR)
    elif wire == 5:
        read.seek(4, os.SEEK_CUR)
    else:
        raise ModelFormatError(f"{path}: protobuf wire type {wire} (not an ONNX file)")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, varint value or payload) of one small message held in memory."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _buffer_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _buffer_varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _buffer_varint(data, pos)
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ModelFormatError(f"protobuf wire type {wire} in a graph input (not an ONNX file)")
    return out


def _buffer_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ModelFormatError("a graph input ends inside a protobuf varint (not an ONNX file)")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _shape(value_info: bytes) -> tuple[str, Shape | None]:
    name, shape = "", None
    for number, value in _fields(value_info):
        if number == VALUE_NAME and isinstance(value, bytes):
            name = value.decode("utf-8", "replace")
        elif number == VALUE_TYPE and isinstance(value, bytes):
            for t_number, tensor in _fields(value):
                if t_number == TYPE_TENSOR and isinstance(tensor, bytes):
                    dims: list[int | str | None] | None = None
                    for s_number, shape_bytes in _fields(tensor):
                        if s_number == TENSOR_SHAPE and isinstance(shape_bytes, bytes):
                            dims = [_dim(dim) for d_number, dim in _fields(shape_bytes)
                                    if d_number == SHAPE_DIM and isinstance(dim, bytes)]
                    shape = tuple(dims) if dims is not None else None
    return name, shape


def _dim(data: bytes) -> int | str | None:
    for number, value in _fields(data):
        if number == DIM_VALUE and isinstance(value, int):
            return value - (1 << 64) if value >= 1 << 63 else value  # int64: -1 is ten 0xFF.. bytes
        if number == DIM_PARAM and isinstance(value, bytes):
            return value.decode("utf-8", "replace")
    return None


def read_graph_inputs(path: str | os.PathLike) -> dict[str, Shape | None]:
    """The main graph's inputs of the .onnx file at ``path``, in order: name -> shape (None: no shape
    recorded). Initializers listed as inputs (old exports) are included as the file lists them.
    ModelFormatError for a file that is not an ONNX model."""
    text = str(path)
    inputs: dict[str, Shape | None] = {}
    with open(path, "rb") as read:
        size = os.fstat(read.fileno()).st_size
        graph_end = None
        while read.tell() < size:
            key = _varint(read, text)
            if key >> 3 == MODEL_GRAPH and key & 7 == 2:
                length = _varint(read, text)
                graph_end = read.tell() + length
                break
            _skip(read, key & 7, text)
        if graph_end is None or graph_end > size:
            raise ModelFormatError(f"{text}: no complete ONNX graph in the file (truncated or not an ONNX model)")
        while read.tell() < graph_end:
            key = _varint(read, text)
            if key >> 3 == GRAPH_INPUT and key & 7 == 2:
                length = _varint(read, text)
                if length > MAX_INPUT_BYTES:
                    raise ModelFormatError(f"{text}: a graph input of {length} bytes (not an ONNX model)")
                name, shape = _shape(read.read(length))
                inputs[name] = shape
            else:
                _skip(read, key & 7, text)
    return inputs

"""Read an .onnx file's structure without its embedded weights, by scanning the protobuf wire format.

``onnx.load`` parses every initializer's ``raw_data`` into memory: 500 MB for a text encoder with
embedded weights. Instead this scanner walks ModelProto → GraphProto → TensorProto by hand, copies
every field except ``TensorProto.raw_data`` of graph initializers, and records where those bytes lie
in the file (offset, length). The small remainder parses with ``onnx`` as usual; the weights are read
on demand from the recorded ranges, locally or with HTTP Range requests (same code, any ByteSource).

Wire format: each field is ``key = (field_number << 3) | wire_type`` as a varint, then a varint
(type 0), 8 bytes (type 1), a varint length + payload (type 2) or 4 bytes (type 5).
"""

from __future__ import annotations

from dataclasses import dataclass

from frame.engine.errors import ModelFormatError
from frame.engine.sources import ByteSource, SourceTruncated

MODEL_GRAPH = 7          # ModelProto.graph
GRAPH_INITIALIZER = 5    # GraphProto.initializer
TENSOR_NAME = 8          # TensorProto.name
TENSOR_RAW_DATA = 9      # TensorProto.raw_data


@dataclass(frozen=True)
class ByteRange:
    offset: int
    length: int


@dataclass
class ScannedModel:
    """The model's bytes minus embedded initializer data, and where that data lies in the file."""

    structure: bytes
    embedded: dict[str, ByteRange]


class _Cursor:
    """Sequential reads over a ByteSource through a window, so skipping weights costs no I/O."""

    def __init__(self, source: ByteSource, chunk: int) -> None:
        self.source = source
        self.end = source.size()
        self.chunk = chunk
        self.pos = 0
        self._buf = b""
        self._buf_start = 0

    def read(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise ModelFormatError(f"{self.source.location}: truncated protobuf at byte {self.pos}")
        rel = self.pos - self._buf_start
        if rel < 0 or rel + n > len(self._buf):
            size = min(max(n, self.chunk), self.end - self.pos)
            try:
                self._buf = self.source.read_at(self.pos, size).tobytes()
            except SourceTruncated as exc:
                raise ModelFormatError(str(exc)) from exc
            self._buf_start, rel = self.pos, 0
        self.pos += n
        return self._buf[rel:rel + n]

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self.read(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ModelFormatError(f"{self.source.location}: malformed varint at byte {self.pos}")

    def field(self) -> tuple[int, int, int]:
        """(field number, wire type, key start position)."""
        start = self.pos
        key = self.varint()
        return key >> 3, key & 7, start

    def skip_value(self, wire: int) -> None:
        if wire == 0:
            self.varint()
        elif wire == 1:
            self.pos += 8
        elif wire == 2:
            length = self.varint()
            self.pos += length
        elif wire == 5:
            self.pos += 4
        else:
            raise ModelFormatError(f"{self.source.location}: unsupported wire type {wire} at byte {self.pos}")
        if self.pos > self.end:
            raise ModelFormatError(f"{self.source.location}: truncated protobuf")

    def copy_field(self, start: int, wire: int) -> bytes:
        """The whole field (key and value) that began at ``start``; the cursor is after its key."""
        self.skip_value(wire)
        end = self.pos
        self.pos = start
        return self.read(end - start)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return encode_varint(field << 3 | 2) + encode_varint(len(payload)) + payload


def scan_model(source: ByteSource, chunk: int = 1 << 20) -> ScannedModel:
    """Scan ``source`` (a serialized ModelProto); see the module docstring."""
    cursor = _Cursor(source, chunk)
    parts: list[bytes] = []
    embedded: dict[str, ByteRange] = {}
    while cursor.pos < cursor.end:
        number, wire, start = cursor.field()
        if number == MODEL_GRAPH and wire == 2:
            end = cursor.varint()
            end += cursor.pos
            parts.append(_length_delimited(MODEL_GRAPH, _scan_graph(cursor, end, embedded)))
        else:
            parts.append(cursor.copy_field(start, wire))
    return ScannedModel(b"".join(parts), embedded)


def _scan_graph(cursor: _Cursor, end: int, embedded: dict[str, ByteRange]) -> bytes:
    parts: list[bytes] = []
    while cursor.pos < end:
        number, wire, start = cursor.field()
        if number == GRAPH_INITIALIZER and wire == 2:
            tensor_end = cursor.varint()
            tensor_end += cursor.pos
            parts.append(_length_delimited(GRAPH_INITIALIZER, _scan_tensor(cursor, tensor_end, embedded)))
        else:
            parts.append(cursor.copy_field(start, wire))
    if cursor.pos != end:
        raise ModelFormatError(f"{cursor.source.location}: graph field overruns its length")
    return b"".join(parts)


def _scan_tensor(cursor: _Cursor, end: int, embedded: dict[str, ByteRange]) -> bytes:
    parts: list[bytes] = []
    raw: ByteRange | None = None
    name = None
    while cursor.pos < end:
        number, wire, start = cursor.field()
        if number == TENSOR_RAW_DATA and wire == 2:
            length = cursor.varint()
            raw = ByteRange(cursor.pos, length)
            cursor.pos += length
            continue
        field_bytes = cursor.copy_field(start, wire)
        if number == TENSOR_NAME and wire == 2:
            name = _decode_name(field_bytes)
        parts.append(field_bytes)
    if cursor.pos != end:
        raise ModelFormatError(f"{cursor.source.location}: initializer overruns its length")
    if raw is not None:
        if not name:
            raise ModelFormatError(f"{cursor.source.location}: an initializer with data has no name")
        if raw.offset + raw.length > cursor.end:
            raise ModelFormatError(f"{cursor.source.location}: data of initializer {name!r} is truncated")
        embedded[name] = raw
    return b"".join(parts)


def _decode_name(field_bytes: bytes) -> str:
    """The string payload of a length-delimited field given with its key."""
    pos = 1  # TENSOR_NAME's key (0x42) is one byte
    length = shift = 0
    while True:
        byte = field_bytes[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return field_bytes[pos:pos + length].decode("utf-8")

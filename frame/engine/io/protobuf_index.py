"""Read an .onnx file's structure without its embedded weights, by scanning the protobuf wire format.

``onnx.load`` parses every initializer's ``raw_data`` into memory: 500 MB for a text encoder with
embedded weights. Instead this scanner walks ModelProto → GraphProto → TensorProto by hand, copies
every field except ``TensorProto.raw_data`` of graph initializers, and records where those bytes lie
in the file (offset, length). The small remainder parses with ``onnx`` as usual; the weights are read
on demand from the recorded ranges, locally or with HTTP Range requests (same code, any ByteSource).

Subgraphs (the bodies of If, Loop and Scan, stored in node attributes) have initializers too, which
are streamed like any other weight: the scanner descends GraphProto → NodeProto → AttributeProto →
GraphProto and numbers the graphs in pre-order (the main graph is 0, then each graph attribute as
it is met, its own subgraphs before the next attribute). ``frame.engine.subgraphs`` walks the parsed
model in the same order, so graph ``k``'s initializers find their byte ranges in ``embedded[k]``
whatever their names (two branches may well both call a constant ``const_0``).

Wire format: each field is ``key = (field_number << 3) | wire_type`` as a varint, then a varint
(type 0), 8 bytes (type 1), a varint length + payload (type 2) or 4 bytes (type 5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from frame.engine.errors import ModelFormatError, SourceTruncated
from frame.engine.io.sources import ByteSource

MODEL_GRAPH = 7          # ModelProto.graph
GRAPH_NODE = 1           # GraphProto.node
GRAPH_INITIALIZER = 5    # GraphProto.initializer
NODE_ATTRIBUTE = 5       # NodeProto.attribute
ATTRIBUTE_GRAPH = 6      # AttributeProto.g
ATTRIBUTE_GRAPHS = 11    # AttributeProto.graphs
ATTRIBUTE_TYPE = 20      # AttributeProto.type
GRAPH_TYPES = (5, 10)    # AttributeProto.AttributeType GRAPH, GRAPHS
TENSOR_NAME = 8          # TensorProto.name
TENSOR_RAW_DATA = 9      # TensorProto.raw_data

# A node can hold a subgraph only if one of its attributes says ``type: GRAPH`` (5) or ``GRAPHS``
# (10): field 20 as a varint is the key bytes A0 01 followed by the value. Nodes without these bytes
# are copied whole, which keeps scanning a 5000-node UNet as fast as before. (A writer that omits
# the type field leaves its subgraph weights inline: still correct, loaded with the structure.)
_GRAPH_TYPE_MARKERS = (b"\xa0\x01\x05", b"\xa0\x01\x0a")


@dataclass(frozen=True)
class ByteRange:
    offset: int
    length: int


@dataclass
class ScannedModel:
    """The model's bytes minus embedded initializer data, and where that data lies in the file.

    ``embedded`` is the main graph's initializers by name; ``subgraph_embedded[k]`` those of the
    k-th subgraph in pre-order (see the module docstring).
    """

    structure: bytes
    embedded: dict[str, ByteRange]
    subgraph_embedded: dict[int, dict[str, ByteRange]] = field(default_factory=dict)


class _Graphs:
    """Numbers graphs in pre-order and collects each one's initializer byte ranges."""

    def __init__(self) -> None:
        self.ranges: list[dict[str, ByteRange]] = []

    def open(self) -> dict[str, ByteRange]:
        self.ranges.append({})
        return self.ranges[-1]


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

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes ``start .. end`` of the source; the cursor ends at ``end``."""
        self.pos = start
        return self.read(end - start)

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
    """Scan ``source`` (a serialized ModelProto); see the module docstring. A file whose bytes are not
    an ONNX protobuf (a text file, an image, a truncated download) is one ModelFormatError saying so."""
    try:
        return _scan(source, chunk)
    except ModelFormatError as exc:
        detail = str(exc).removeprefix(f"{source.location}: ")
        raise ModelFormatError(f"{source.location} is not a valid ONNX model file ({detail})") from None


def _scan(source: ByteSource, chunk: int) -> ScannedModel:
    cursor = _Cursor(source, chunk)
    parts: list[bytes] = []
    graphs = _Graphs()
    while cursor.pos < cursor.end:
        number, wire, start = cursor.field()
        if number == MODEL_GRAPH and wire == 2:
            end = cursor.varint()
            end += cursor.pos
            parts.append(_length_delimited(MODEL_GRAPH, _scan_graph(cursor, end, graphs)))
        else:
            parts.append(cursor.copy_field(start, wire))
    main = graphs.ranges[0] if graphs.ranges else {}
    subgraphs = {k: ranges for k, ranges in enumerate(graphs.ranges) if k and ranges}
    return ScannedModel(b"".join(parts), main, subgraphs)


def _field_end(cursor: _Cursor) -> int:
    """The end of the length-delimited value whose key the cursor just read."""
    length = cursor.varint()
    return cursor.pos + length


def _scan_graph(cursor: _Cursor, end: int, graphs: _Graphs) -> bytes:
    embedded = graphs.open()
    parts: list[bytes] = []
    while cursor.pos < end:
        number, wire, start = cursor.field()
        if number == GRAPH_INITIALIZER and wire == 2:
            tensor_end = _field_end(cursor)
            parts.append(_length_delimited(GRAPH_INITIALIZER, _scan_tensor(cursor, tensor_end, embedded)))
        elif number == GRAPH_NODE and wire == 2:
            whole = cursor.copy_field(start, wire)
            if any(marker in whole for marker in _GRAPH_TYPE_MARKERS):
                cursor.pos = start
                cursor.field()
                node_end = _field_end(cursor)
                whole = _length_delimited(GRAPH_NODE, _scan_node(cursor, node_end, graphs))
            parts.append(whole)
        else:
            parts.append(cursor.copy_field(start, wire))
    if cursor.pos != end:
        raise ModelFormatError(f"{cursor.source.location}: graph field overruns its length")
    return b"".join(parts)


def _scan_node(cursor: _Cursor, end: int, graphs: _Graphs) -> bytes:
    """A NodeProto whose graph attributes are scanned like the main graph."""
    return _scan_fields(cursor, end, (NODE_ATTRIBUTE,), lambda at, until: _scan_attribute(at, until, graphs), "node")


def _scan_fields(cursor: _Cursor, end: int, numbers: tuple[int, ...], scan: Callable[[_Cursor, int], bytes],
                 what: str) -> bytes:
    """The message from the cursor to ``end`` with each length-delimited field in ``numbers`` rewritten
    by ``scan(cursor, field_end)`` and every other field copied as it is."""
    parts: list[bytes] = []
    while cursor.pos < end:
        number, wire, start = cursor.field()
        if number in numbers and wire == 2:
            field_end = _field_end(cursor)
            parts.append(_length_delimited(number, scan(cursor, field_end)))
        else:
            parts.append(cursor.copy_field(start, wire))
    if cursor.pos != end:
        raise ModelFormatError(f"{cursor.source.location}: {what} field overruns its length")
    return b"".join(parts)


def _attribute_type(cursor: _Cursor, end: int) -> int:
    """AttributeProto.type (field 20) of the attribute from the cursor to ``end``; 0 when absent."""
    start, kind = cursor.pos, 0
    while cursor.pos < end:
        number, wire, _ = cursor.field()
        if number == ATTRIBUTE_TYPE and wire == 0:
            kind = cursor.varint()
        else:
            cursor.skip_value(wire)
    cursor.pos = start
    return kind


def _scan_attribute(cursor: _Cursor, end: int, graphs: _Graphs) -> bytes:
    """An AttributeProto; its graphs are scanned only if its type says GRAPH(S), the same rule by
    which ``frame.engine.subgraphs`` numbers graphs on the parsed model."""
    start = cursor.pos
    if _attribute_type(cursor, end) not in GRAPH_TYPES:
        return cursor.read_range(start, end)
    return _scan_fields(cursor, end, (ATTRIBUTE_GRAPH, ATTRIBUTE_GRAPHS),
                        lambda at, until: _scan_graph(at, until, graphs), "attribute")


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

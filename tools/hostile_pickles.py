"""Byte-level writers for hostile torch files: pickles opcode by opcode and zips entry by entry.

``pickle.dumps`` cannot write what an attacker writes (a negative stride beside a real
``_rebuild_tensor_v2`` call, a memo-shared tuple of 2^64 leaves, a zip entry whose deflate stream
unpacks to 2 GB), so ``tools/build_hostile_fixtures.py`` builds them with these. No torch needed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Raw:
    """Opcode bytes written as they are."""

    data: bytes


@dataclass(frozen=True)
class Global:
    module: str
    name: str


@dataclass(frozen=True)
class Call:
    func: Global
    args: tuple


@dataclass(frozen=True)
class Tensor:
    """``_rebuild_tensor_v2`` over storage ``key`` (``numel`` elements of ``kind``), with whatever
    offset, size and stride the attack needs."""

    key: str
    numel: int
    size: tuple
    stride: tuple
    offset: int = 0
    kind: str = "FloatStorage"


def _int(value: int) -> bytes:
    if 0 <= value < 256:
        return b"K" + bytes([value])
    if 0 <= value < 65536:
        return b"M" + struct.pack("<H", value)
    if -(2 ** 31) <= value < 2 ** 31:
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return (b"\x8a" + bytes([len(raw)]) if len(raw) < 256 else b"\x8b" + struct.pack("<i", len(raw))) + raw


def emit(value: Any) -> bytes:
    """The opcodes that push ``value`` (protocol 2, as ``torch.save`` writes)."""
    if isinstance(value, Raw):
        return value.data
    if value is None:
        return b"N"
    if isinstance(value, bool):
        return b"\x88" if value else b"\x89"
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        return b"G" + struct.pack(">d", value)
    if isinstance(value, str):
        raw = value.encode()
        return b"X" + struct.pack("<I", len(raw)) + raw
    if isinstance(value, tuple):
        return b"(" + b"".join(map(emit, value)) + b"t"
    if isinstance(value, list):
        return b"]" + (b"(" + b"".join(map(emit, value)) + b"e" if value else b"")
    if isinstance(value, dict):
        items = b"".join(emit(k) + emit(v) for k, v in value.items())
        return b"}" + (b"(" + items + b"u" if value else b"")
    if isinstance(value, Global):
        return b"c" + value.module.encode() + b"\n" + value.name.encode() + b"\n"
    if isinstance(value, Call):
        return emit(value.func) + emit(value.args) + b"R"
    if isinstance(value, Tensor):
        pid = b"(" + emit("storage") + emit(Global("torch", value.kind)) + emit(value.key) + emit("cpu") + \
            emit(value.numel) + b"tQ"
        hooks = emit(Call(Global("collections", "OrderedDict"), ()))
        args = b"(" + pid + emit(value.offset) + emit(tuple(value.size)) + emit(tuple(value.stride)) + \
            b"\x89" + hooks + b"t"
        return emit(Global("torch._utils", "_rebuild_tensor_v2")) + args + b"R"
    raise TypeError(f"cannot emit {type(value).__name__}")


def dumps(value: Any) -> bytes:
    return b"\x80\x02" + emit(value) + b"."


def laughs(levels: int) -> Raw:
    """A tuple of 2^levels leaves in ~6 bytes a level: each level is the one below it twice, by memo."""
    out = bytearray(b"\x8c\x02ha" + b"r" + struct.pack("<I", 0) + b"0")
    for level in range(1, levels + 1):
        get = b"j" + struct.pack("<I", level - 1)
        out += get + get + b"\x86" + b"r" + struct.pack("<I", level) + b"0"
    return Raw(bytes(out + b"j" + struct.pack("<I", levels)))


def nested_tuple(depth: int) -> Raw:
    """(((...()...),),): ``depth`` levels, two bytes each."""
    return Raw(b")" + b"\x85" * depth)


@dataclass(frozen=True)
class Entry:
    """A zip entry: ``data`` stored as is, or ``deflated`` (raw deflate bytes) that unpack to
    ``size`` bytes with CRC ``crc``."""

    name: str
    data: bytes = b""
    deflated: bytes | None = None
    size: int = 0
    crc: int = 0


def zip_bytes(entries: Iterable[Entry]) -> bytes:
    """A plain zip (no zip64) of ``entries``, written field by field."""
    body, directory, count = bytearray(), bytearray(), 0
    for entry in entries:
        name = entry.name.encode()
        if entry.deflated is None:
            method, payload, size, crc = 0, entry.data, len(entry.data), zlib.crc32(entry.data)
        else:
            method, payload, size, crc = 8, entry.deflated, entry.size, entry.crc
        fields = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0x21, crc, len(payload), size, len(name), 0)
        tail = struct.pack("<HHHII", 0, 0, 0, 0, len(body))  # comment, disk, attributes, header offset
        directory += b"PK\x01\x02" + struct.pack("<H", 20) + fields + tail + name
        body += b"PK\x03\x04" + fields + name + payload
        count += 1
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(directory), len(body), 0)
    return bytes(body + directory + end)


def repeated_deflate(chunk: bytes, times: int) -> tuple[bytes, int, int]:
    """(raw deflate bytes, unpacked size, CRC) of ``chunk`` repeated ``times``: the chunk is
    compressed once and its full-flushed blocks repeated, so a 2 GB bomb costs seconds to write."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(times):
        crc = zlib.crc32(chunk, crc)
    return block * times + packer.flush(), len(chunk) * times, crc


def torch_zip(root: Any, storages: dict[str, bytes], pickle: bytes | None = None, prefix: str = "archive",
              extra: Iterable[Entry] = ()) -> bytes:
    """A ``torch.save`` zip of ``root`` (or of the ``pickle`` bytes given) with its storages."""
    entries = [Entry(f"{prefix}/data.pkl", dumps(root) if pickle is None else pickle),
               Entry(f"{prefix}/byteorder", b"little")]
    entries += [Entry(f"{prefix}/data/{key}", data) for key, data in storages.items()]
    entries += [*extra, Entry(f"{prefix}/version", b"3\n")]
    return zip_bytes(entries)

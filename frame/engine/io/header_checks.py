"""The checks of a safetensors header, kept apart from the reader (``safetensors.py``) so each one
can be read against the attack it answers.

``prescan`` looks at the header's bytes before ``json.loads`` does: with the strings blanked out,
the brackets that are left must nest no deeper than a header's three levels (object, entry, shape)
and the objects must be few enough. Without it a 42 MB header of 600,000 entries took 530 MiB and
18 s to parse (the Pi worker has 440 MiB) and a deeply nested one ended in a RecursionError.
``check_entries`` and ``check_metadata`` check the parsed header field by field, so a malformed
entry is a ``FileFormatError`` naming the file, the tensor and the field, never a TypeError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from frame.engine.errors import FileFormatError
from frame.engine.io.pickle_vm import short

MAX_DEPTH = 3  # {name: {"shape": [...]}}
_QUOTE, _COMMA, _OPENERS, _CLOSERS = 34, 44, (123, 91), (125, 93)  # " , { [ } ]


@dataclass(frozen=True)
class HeaderLimits:
    """A LoRA of every SDXL layer at rank 128 has ~9,000 entries and a header of ~1.5 MB; a full SDXL
    checkpoint ~2,500 entries. These caps hold a header's parse under ~120 MiB (measured by
    tests/engine/test_hostile_files.py)."""

    max_header_bytes: int = 8 << 20
    max_entries: int = 50_000
    max_metadata: int = 10_000  # __metadata__ keys (kohya writes ~60)
    max_name_chars: int = 1024
    max_dims: int = 8


def _fail(path: str, message: str, field: str) -> FileFormatError:
    return FileFormatError(f"{path}: {message}", path=path, field=field)


def prescan(raw: bytes, path: str, limits: HeaderLimits) -> None:
    """Refuse a header nested deeper than ``MAX_DEPTH`` or holding more objects or values than
    ``limits`` allow, from its bytes. Escaped backslashes and quotes are blanked first (``bytes.
    replace``), then numpy marks what lies inside strings (a running XOR of the quotes): a few
    passes over the bytes, a few bytes of memory per header byte, whatever the header holds (a
    regular expression kept state per escape: 320 MiB for one string of 2.5 million)."""
    plain = np.frombuffer(raw.replace(b"\\\\", b"__").replace(b'\\"', b"__"), dtype=np.uint8)
    outside = ~np.logical_xor.accumulate(plain == _QUOTE)
    objects = int(np.count_nonzero(outside & (plain == _OPENERS[0])))
    if objects > limits.max_entries + 2:
        raise _fail(path, f"the header holds {objects} objects (at most {limits.max_entries} tensors)", "header")
    values = int(np.count_nonzero(outside & (plain == _COMMA)))
    if values > (limits.max_dims + 4) * objects + limits.max_metadata:
        raise _fail(path, f"the header holds {values} values, more than {objects} tensors need", "header")
    opens = outside & ((plain == _OPENERS[0]) | (plain == _OPENERS[1]))
    closes = outside & ((plain == _CLOSERS[0]) | (plain == _CLOSERS[1]))
    depth = np.cumsum(opens.astype(np.int8) - closes.astype(np.int8), dtype=np.int32)
    if depth.size and (int(depth.max()) > MAX_DEPTH or int(depth.min()) < 0 or int(depth[-1]) != 0):
        raise _fail(path, f"the header's brackets nest deeper than {MAX_DEPTH} levels or do not match", "header")
    lists = int(np.count_nonzero(opens))
    if lists > 3 * objects + 16:
        raise _fail(path, f"the header holds {lists} lists and objects, more than {objects} tensors need", "header")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_metadata(metadata: Any, path: str) -> dict[str, str]:
    """``__metadata__``: an object of strings (the format's own rule: safetensors writes nothing else)."""
    if not isinstance(metadata, dict):
        raise _fail(path, f"__metadata__ is a JSON {type(metadata).__name__}, not an object of strings",
                    "__metadata__")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise _fail(path, f"__metadata__[{short(key)}] is a JSON {type(value).__name__}, not a string",
                        f"__metadata__.{key[:60]}")
    return metadata


def _shape(name: str, shape: Any, path: str, limits: HeaderLimits) -> tuple[int, ...]:
    if not isinstance(shape, list) or len(shape) > limits.max_dims or not all(
            _is_int(d) and d >= 0 for d in shape):
        raise _fail(path, f"tensor {short(name)}: shape {short(shape)} is not a list of at most {limits.max_dims} "
                    "non-negative integers", f"{name[:60]}.shape")
    return tuple(shape)


def check_entries(header: dict[str, Any], path: str, body: int, itemsize: dict[str, int],
                  limits: HeaderLimits) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
    """name → (dtype, shape, begin, end) with offsets counted from the end of the header, each
    checked: ``body`` is the number of data bytes after the header."""
    if len(header) > limits.max_entries:
        raise _fail(path, f"the header lists {len(header)} tensors (at most {limits.max_entries})", "header")
    entries = {}
    for name, info in header.items():
        where = f"tensor {short(name)}"
        if len(name) > limits.max_name_chars:
            raise _fail(path, f"{where}: the name is {len(name)} characters (at most {limits.max_name_chars})",
                        "header")
        if not isinstance(info, dict):
            raise _fail(path, f"{where}: its entry is a JSON {type(info).__name__}, not an object", name[:60])
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
        if missing:
            raise _fail(path, f"{where}: its entry has no {', '.join(missing)}", f"{name[:60]}.{missing[0]}")
        dtype = info["dtype"]
        if not isinstance(dtype, str):
            raise _fail(path, f"{where}: dtype {short(dtype)} is not a string", f"{name[:60]}.dtype")
        if dtype not in itemsize:
            raise _fail(path, f"{where} has dtype {dtype[:20]}, which frame cannot read (it reads "
                        f"{', '.join(itemsize)})", f"{name[:60]}.dtype")
        shape = _shape(name, info["shape"], path, limits)
        offsets = info["data_offsets"]
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))):
            raise _fail(path, f"{where}: data_offsets {short(offsets)} is not two integers",
                        f"{name[:60]}.data_offsets")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise _fail(path, f"{where}: data_offsets [{begin}, {end}] are negative or reversed",
                        f"{name[:60]}.data_offsets")
        if end > body:
            raise _fail(path, f"{where}: data_offsets [{begin}, {end}] reach past the file's {body} data bytes "
                        "(a truncated file?)", f"{name[:60]}.data_offsets")
        expected = itemsize[dtype] if 0 not in shape else 0
        for dim in shape:  # stops at the first product past the data: no giant integer is formed
            if expected > body:
                break
            expected *= dim
        if expected != end - begin:
            needs = expected if expected <= body else "more"
            raise _fail(path, f"{where}: shape {list(shape)} of {dtype} needs {needs} bytes, data_offsets give "
                        f"{end - begin}", f"{name[:60]}.data_offsets")
        entries[name] = (dtype, shape, begin, end)
    _check_overlap(entries, path)
    return entries


def _check_overlap(entries: dict[str, tuple[str, tuple[int, ...], int, int]], path: str) -> None:
    spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items() if end > begin)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise _fail(path, f"tensors {short(first)} and {short(second)} share bytes", f"{second[:60]}.data_offsets")

"""JSON from someone else (a render server's answer, an owner's workflow file) parsed within limits.

``json.loads`` builds whatever the text describes: 50,000 nested brackets raise ``RecursionError``
(out of ``frame config check``), and 60 MB of ``[{},{},...]`` become millions of
Python objects (a ComfyUI answer took the Pi worker to 359 MiB). ``loads`` first scans the bytes, at
C speed and without building anything: strings are blanked by one regular expression, the values
are counted from the brackets and commas left, and the nesting depth is followed over the brackets
alone; only a text within ``max_depth`` and ``max_values`` is then parsed. The caller caps the size
before that (the bytes are already in memory when this runs).
"""

from __future__ import annotations

import json
import re
from typing import Any

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: C speed on long strings
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENING = frozenset(b"[{")


class JsonLimitError(ValueError):
    """The text is nested too deep or holds too many values to be parsed here."""


def scan(data: bytes | bytearray, max_depth: int, max_values: int) -> None:
    """Raise ``JsonLimitError`` when ``data`` (JSON text) nests deeper than ``max_depth`` or holds
    more than ``max_values`` values; malformed text is left to the parser."""
    bare = _STRING.sub(b'""', data)
    brackets = bare.translate(None, _NOT_BRACKETS)
    values = len(brackets) // 2 + bare.count(b",") + 1  # roughly: every container, and one per comma
    if values > max_values:
        raise JsonLimitError(f"it holds more than {max_values:,} values")
    depth = deepest = 0
    for byte in brackets:
        if byte in _OPENING:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    raise JsonLimitError(f"it is nested more than {max_depth} levels deep")
        else:
            depth -= 1


def loads(data: bytes | bytearray | str, max_depth: int = 64, max_values: int = 100_000) -> Any:
    """``json.loads(data)`` once ``scan`` finds it within the limits; ``JsonLimitError`` (a ValueError,
    as ``json.JSONDecodeError`` is) otherwise."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    scan(raw, max_depth, max_values)
    return json.loads(raw)

"""Does a ``.safetensors`` file look like a LoRA? A cheap check of its header, without numpy, for the
phone page's list of LoRAs (any ``*.safetensors`` was listed, garbage included).

Why only a look: the list is built in the daemon on every queue page, so it must stay small and
fast. The whole test of a file (every header entry, NaN and inf values) is ``frame.engine.lora``'s,
run when a prompt naming it is queued (the check child) and at night. Here: the 8-byte length fits
the file, the header is a JSON object, and a key names a LoRA factor (kohya ``lora_down``/``lora_up``,
PEFT ``lora_A``/``lora_B``, diffusers' older spellings) with a dtype, shape and offsets. At most
``SCAN_BYTES`` of the header are read: one of up to ``PARSE_BYTES`` is parsed, a longer one (kohya's
training metadata can be large) is searched for a factor key in that much. Answers are kept per
file while its size and time stay.
"""

from __future__ import annotations

import json
import os
import struct

# the factor suffixes of frame.engine.lora.files._SUFFIXES (tests/engine/test_lora_listing.py ties them)
FACTOR_SUFFIXES = (".lora_down.weight", ".lora_up.weight", ".lora_A.weight", ".lora_B.weight",
                   ".lora.down.weight", ".lora.up.weight", ".lora_linear_layer.down.weight",
                   ".lora_linear_layer.up.weight")
PARSE_BYTES = 1 << 20
SCAN_BYTES = 4 << 20
MAX_HEADER = 100 << 20  # the safetensors format's own limit
KEEP = 512
_kept: dict[str, tuple[int, int, bool]] = {}


def _factor_entry(name: object, entry: object) -> bool:
    return (isinstance(name, str) and name.endswith(FACTOR_SUFFIXES) and isinstance(entry, dict)
            and isinstance(entry.get("dtype"), str) and isinstance(entry.get("shape"), list)
            and isinstance(entry.get("data_offsets"), list))


def _looks(path: str, size: int) -> bool:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            return False
        (length,) = struct.unpack("<Q", head)
        if not 2 <= length <= min(MAX_HEADER, size - 8):
            return False
        text = f.read(min(length, SCAN_BYTES))
    if not text.lstrip().startswith(b"{"):
        return False
    if length <= PARSE_BYTES:
        try:
            header = json.loads(text)
        except (ValueError, RecursionError):
            return False
        return isinstance(header, dict) and any(_factor_entry(k, v) for k, v in header.items())
    return any(f'{suffix}"'.encode() in text for suffix in FACTOR_SUFFIXES)


def looks_like_lora(path: str | os.PathLike) -> bool:
    """True when the file's header names LoRA factors (kept while the file's size and time stay)."""
    path = os.fspath(path)
    try:
        stat = os.stat(path)
    except OSError:
        return False
    kept = _kept.get(path)
    if kept is not None and kept[:2] == (stat.st_mtime_ns, stat.st_size):
        return kept[2]
    try:
        answer = _looks(path, stat.st_size)
    except OSError:
        answer = False
    if len(_kept) >= KEEP:
        _kept.clear()
    _kept[path] = (stat.st_mtime_ns, stat.st_size, answer)
    return answer

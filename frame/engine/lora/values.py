"""Every value of a LoRA file read once, streaming, before a render or a queue trusts it.

Why: one NaN or infinity in a factor turns the layer it changes into NaN, and the picture comes out
all black; the header says nothing about it, so ``read_lora`` (headers only) cannot see it. The
factors are read ``CHUNK_BYTES`` at a time (a 150 MB LoRA never sits in memory: the Pi worker's cap),
and the check fails on the first bad value with a line naming the file and the module. A file that
ends before its tensors do is caught here too, before the render would meet it mid-way.
"""

from __future__ import annotations

import os

import numpy as np

from frame.engine.io.safetensors import DTYPES, TensorEntry
from frame.engine.lora.files import LoraFile, read_lora
from frame.errors import UsageError

CHUNK_BYTES = 4 << 20
_BF16_EXPONENT = np.uint16(0x7F80)  # all exponent bits set: inf or NaN


def _finite(chunk: bytes, dtype: str) -> bool:
    if dtype == "BF16":
        bits = np.frombuffer(chunk, dtype="<u2")
        return not bool(np.any((bits & _BF16_EXPONENT) == _BF16_EXPONENT))
    kind = np.dtype(DTYPES[dtype])
    if kind.kind != "f":
        return True  # integers are always finite
    return bool(np.isfinite(np.frombuffer(chunk, dtype=kind.newbyteorder("<"))).all())


def check_entry(entry: TensorEntry, label: str) -> None:
    """UsageError naming the file and ``label`` if a value is NaN or infinite or the data is cut short."""
    itemsize = 2 if entry.dtype == "BF16" else np.dtype(DTYPES[entry.dtype]).itemsize
    step = max(itemsize, CHUNK_BYTES - CHUNK_BYTES % itemsize)
    with open(entry.path, "rb") as f:
        f.seek(entry.start)
        left = entry.nbytes
        while left > 0:
            chunk = f.read(min(step, left))
            if not chunk or len(chunk) % itemsize:
                raise UsageError(f"{entry.path}: file is truncated ({label} ends at byte {entry.stop})")
            if not _finite(chunk, entry.dtype):
                raise UsageError(f"{entry.path}: {label} holds NaN or infinite values (it would paint a black "
                                 "picture)")
            left -= len(chunk)


def check_values(lora: LoraFile) -> None:
    """Every factor of every module finite and present (alphas are checked when the header is read)."""
    for component, modules in lora.components.items():
        for module in modules.values():
            for part, entry in (("down", module.down), ("up", module.up)):
                if entry is not None:
                    check_entry(entry, f"LoRA module {component}.{module.name}'s {part} weight")


def read_checked(path: str | os.PathLike) -> LoraFile:
    """``read_lora`` and ``check_values``: a LoRA the render can trust, or UsageError naming the file."""
    lora = read_lora(path)
    try:
        check_values(lora)
    except OSError as exc:
        raise UsageError(f"{lora.path}: cannot read it ({exc.strerror or exc})") from exc
    return lora

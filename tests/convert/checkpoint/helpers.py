"""Test helpers: safetensors files written with numpy (no torch), the committed fixtures, and
full-size checkpoints as header-only manifests."""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"
KINDS = ("sd15", "sd2v", "sdxl")
CODES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict | None = None,
                      header_edit=None) -> Path:
    """``tensors`` as a safetensors file; ``header_edit(header)`` may corrupt the header first."""
    header: dict = {"__metadata__": metadata} if metadata else {}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": CODES[np.dtype(array.dtype)], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if header_edit is not None:
        header_edit(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    return path


def read_raw(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a fixture as float32 (test-side reader, independent of frame's)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = data[8 + length + begin:8 + length + end]
        if info["dtype"] == "BF16":
            out[name] = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])
        else:
            dtype = {"F16": np.float16, "F32": np.float32, "I64": np.int64}[info["dtype"]]
            out[name] = np.frombuffer(raw, dtype).reshape(info["shape"])
    return out


def digest(array: np.ndarray) -> list:
    return [list(array.shape), hashlib.sha256(np.ascontiguousarray(array, np.float32).tobytes()).hexdigest()]


def expected(kind: str) -> dict:
    return json.loads((FIXTURES / kind / "expected.json").read_text())


def manifest(kind: str) -> dict:
    with gzip.open(FIXTURES / "manifests" / f"{kind}.json.gz") as file:
        return json.load(file)


class ManifestCheckpoint:
    """A full-size checkpoint's header without data: detection and mapping only."""

    def __init__(self, kind: str, metadata: dict | None = None, extra: dict | None = None) -> None:
        from frame.convert.checkpoint.reader import TensorInfo

        data = manifest(kind)
        self.location = f"{kind}.safetensors"
        self.tensors = {k: TensorInfo(d, tuple(s)) for k, (d, s) in data["tensors"].items()}
        self.tensors.update({k: TensorInfo("F16", tuple(s)) for k, s in (extra or {}).items()})
        self.metadata = metadata or {}
        self.configs: dict = {}
        self.real_configs = data["configs"]
        self.diffusers_shapes = {n: {k: tuple(s) for k, s in v.items()} for n, v in data["shapes"].items()}

    def read(self, key: str) -> np.ndarray:
        raise AssertionError(f"a manifest has no data ({key})")

    def close(self) -> None:
        pass

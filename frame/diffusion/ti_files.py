"""Textual-inversion embedding files as AUTOMATIC1111 reads them, without torch or safetensors.

Layouts (A1111's ``modules/textual_inversion``):

* ``.pt`` / ``.bin`` written by ``torch.save``: a dict whose ``string_to_param`` holds one tensor
  ``(vectors, dim)`` (A1111's own training output, key ``"*"``), or a dict of one tensor (diffusers'
  ``learned_embeds.bin``: ``{token: (dim,)}``);
* ``.safetensors``: one tensor (``emb_params`` for SD 1.5, any name), or ``clip_l`` and ``clip_g``
  for SDXL (768 and 1280 wide).

A torch file is a zip of a pickle and raw storages; it is read with an unpickler that builds only
plain containers and tensors (any other global in the pickle is refused), so a hostile file cannot
run code. A safetensors file is an 8-byte header length, a JSON header and raw little-endian data.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frame.config.embedding_names import SUFFIXES
from frame.errors import UsageError

SDXL_KEYS = ("clip_l", "clip_g")
MAX_VECTORS = 75  # a prompt row holds 75 tokens
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": "bf16"}
_TORCH_STORAGES = {"FloatStorage": np.float32, "HalfStorage": np.float16, "DoubleStorage": np.float64,
                   "BFloat16Storage": "bf16"}


@dataclass(frozen=True)
class EmbeddingFile:
    """One embedding: ``tables`` maps "" (one text encoder) or ``clip_l``/``clip_g`` (SDXL) to
    float32 ``(vectors, dim)`` rows."""

    name: str
    path: Path
    tables: dict[str, np.ndarray]

    @property
    def vectors(self) -> int:
        return next(iter(self.tables.values())).shape[0]


def _bf16(raw: bytes) -> np.ndarray:
    return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)


def _decode(raw: bytes, dtype: Any) -> np.ndarray:
    if dtype == "bf16":
        return _bf16(raw)
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(np.float32)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as float32 (a UsageError naming the problem otherwise)."""
    data = path.read_bytes()
    if len(data) < 8:
        raise UsageError(f"{path}: too short for a safetensors file")
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8 or length > 100 << 20:
        raise UsageError(f"{path}: not a safetensors file (header length {length})")
    try:
        header = json.loads(data[8:8 + length])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: unreadable safetensors header ({exc})") from None
    body, tensors = data[8 + length:], {}
    for key, spec in header.items():
        if key == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(spec.get("dtype")) if isinstance(spec, dict) else None
        if dtype is None:
            found = spec.get("dtype") if isinstance(spec, dict) else spec
            raise UsageError(f"{path}: tensor {key!r} has dtype {found!r}; embeddings are F32, F16 or BF16")
        start, end = spec["data_offsets"]
        shape = tuple(int(s) for s in spec["shape"])
        width = 2 if dtype in ("bf16", np.float16) else np.dtype(dtype).itemsize
        if not 0 <= start <= end <= len(body) or end - start != width * int(np.prod(shape, dtype=np.int64)):
            raise UsageError(f"{path}: tensor {key!r} does not fit the file ({start}..{end} of {len(body)} bytes)")
        tensors[key] = _decode(body[start:end], dtype).reshape(shape)
    return tensors


class _Storage:
    def __init__(self, dtype: Any, key: str) -> None:
        self.dtype, self.key = dtype, key


class _TorchUnpickler(pickle.Unpickler):
    """Unpickles ``torch.save``'s data.pkl into dicts, lists and numpy arrays; refuses other globals."""

    def __init__(self, stream: io.BytesIO, archive: zipfile.ZipFile, prefix: str, path: Path) -> None:
        super().__init__(stream)
        self.archive, self.prefix, self.path = archive, prefix, path

    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return self._rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda tensor, requires_grad, hooks: tensor
        if module == "torch" and name in _TORCH_STORAGES:
            return _TORCH_STORAGES[name]
        raise UsageError(f"{self.path}: the file holds a {module}.{name}, which an embedding does not need; "
                         "frame reads only plain tensors from .pt files")

    def persistent_load(self, pid: Any) -> _Storage:
        if not isinstance(pid, tuple) or pid[0] != "storage":
            raise UsageError(f"{self.path}: unexpected object in the torch file ({pid!r:.60})")
        storage_type, key = pid[1], str(pid[2])
        dtype = storage_type if not isinstance(storage_type, str) else _TORCH_STORAGES.get(storage_type)
        if dtype is None:
            raise UsageError(f"{self.path}: unsupported storage {storage_type!r}")
        return _Storage(dtype, key)

    def _rebuild_tensor(self, storage: _Storage, offset: int, size: tuple, stride: tuple, *rest: Any) -> np.ndarray:
        name = next((n for n in self.archive.namelist() if n == f"{self.prefix}data/{storage.key}"), None)
        if name is None:
            raise UsageError(f"{self.path}: storage {storage.key} is missing from the archive")
        flat = _decode(self.archive.read(name), storage.dtype)
        if size and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= len(flat):
            raise UsageError(f"{self.path}: a tensor reaches past its storage")
        view = np.lib.stride_tricks.as_strided(flat[offset:], shape=tuple(size),
                                               strides=tuple(s * flat.itemsize for s in stride))
        return np.array(view, dtype=np.float32)


def read_torch(path: Path) -> Any:
    """The object ``torch.save`` wrote to ``path`` (zip format), with tensors as float32 arrays."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise UsageError(f"{path}: not a torch zip file (files saved by torch before 1.6 are not read; "
                         "convert it to .safetensors)") from None
    with archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pickles) != 1:
            raise UsageError(f"{path}: not a torch file (no single data.pkl inside)")
        prefix = pickles[0][: -len("data.pkl")]
        try:
            return _TorchUnpickler(io.BytesIO(archive.read(pickles[0])), archive, prefix, path).load()
        except UsageError:
            raise
        except Exception as exc:  # a damaged pickle
            raise UsageError(f"{path}: unreadable torch file ({type(exc).__name__}: {exc})") from None


def _rows(array: Any, path: Path, what: str) -> np.ndarray:
    if not isinstance(array, np.ndarray) or array.ndim not in (1, 2) or not array.size:
        raise UsageError(f"{path}: {what} is not a (vectors, dim) tensor")
    rows = array.reshape(1, -1) if array.ndim == 1 else array
    if rows.shape[0] > MAX_VECTORS:
        raise UsageError(f"{path}: {rows.shape[0]} vectors; a prompt holds at most {MAX_VECTORS}")
    if not np.all(np.isfinite(rows)):
        raise UsageError(f"{path}: {what} holds NaN or infinite values")
    return np.ascontiguousarray(rows, dtype=np.float32)


def tables_of(data: Any, path: Path) -> dict[str, np.ndarray]:
    """The vectors of a loaded file, per text encoder, as A1111 finds them."""
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not an embedding (the file holds a {type(data).__name__})")
    if "string_to_param" in data:
        params = data["string_to_param"]
        if not isinstance(params, dict) or len(params) != 1:
            raise UsageError(f"{path}: string_to_param must hold exactly one tensor")
        return {"": _rows(next(iter(params.values())), path, "string_to_param")}
    if all(key in data for key in SDXL_KEYS):
        return {key: _rows(data[key], path, key) for key in SDXL_KEYS}
    tensors = {k: v for k, v in data.items() if isinstance(v, np.ndarray)}
    if len(tensors) == 1:
        key, value = next(iter(tensors.items()))
        return {"": _rows(value, path, key)}
    raise UsageError(f"{path}: not an embedding A1111 reads (keys: {', '.join(map(str, data)) or 'none'}; expected "
                     "string_to_param, emb_params or another single tensor, or clip_l and clip_g)")


def read_embedding(path: str | Path) -> EmbeddingFile:
    """The embedding in ``path`` (named by its file stem, as in A1111)."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(f"{path}: embeddings are {', '.join(SUFFIXES)} files")
    data = read_safetensors(path) if path.suffix.lower() == ".safetensors" else read_torch(path)
    return EmbeddingFile(path.stem, path, tables_of(data, path))

"""Textual-inversion embedding files as AUTOMATIC1111 reads them, without torch or safetensors.

Layouts (A1111's ``modules/textual_inversion``):

* ``.pt`` / ``.bin`` written by ``torch.save``: a dict whose ``string_to_param`` holds one tensor
  ``(vectors, dim)`` (A1111's own training output, key ``"*"``), or a dict of one tensor (diffusers'
  ``learned_embeds.bin``: ``{token: (dim,)}``);
* ``.safetensors``: one tensor (``emb_params`` for SD 1.5, any name), or ``clip_l`` and ``clip_g``
  for SDXL (768 and 1280 wide).

Both are read by the engine's readers for hostile files (``frame.engine.io``): a torch file's pickle
is interpreted without running anything it names and every tensor's bounds are checked against its
storage before a byte is copied (``torch_pickle``), a safetensors header is capped and checked field
by field (``safetensors``). Only the tensor that holds the vectors is read, after its shape was
checked to be an embedding's (at most 75 vectors of at most 4096), so a file that unpacks to
gigabytes costs nothing. Anything wrong is a ``UsageError`` naming the file; the caller
(``textual_inversion.Embeddings``) warns and keeps the word a word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frame.config.embedding_names import SUFFIXES
from frame.engine.io.pickle_vm import PickleLimits, short
from frame.engine.io.safetensors import TensorEntry, read_header
from frame.engine.io.torch_pickle import TorchLimits, TorchTensor, open_torch
from frame.errors import UsageError

SDXL_KEYS = ("clip_l", "clip_g")
MAX_VECTORS = 75  # a prompt row holds 75 tokens
MAX_WIDTH = 4096  # SDXL's clip_g is 1280 wide
FLOATS = ("F32", "F16", "BF16", "F64")
MAX_FILE_BYTES = 64 << 20  # embeddings are KB; a file this big is a checkpoint or LoRA put in the wrong folder
# An A1111 .pt holds one small tensor and a few names: its pickle is a few KB.
LIMITS = TorchLimits(max_pickle_bytes=4 << 20, max_tensors=1000, max_tensor_bytes=MAX_VECTORS * MAX_WIDTH * 8,
                     pickle=PickleLimits(max_objects=200_000, max_keys=10_000))


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


def read_safetensors(path: Path) -> dict[str, TensorEntry]:
    """The tensors of a safetensors file, not read yet (a UsageError naming the problem otherwise)."""
    return read_header(path).tensors


def _rows(tensor: Any, path: Path, what: str) -> np.ndarray:
    """The (vectors, dim) float32 rows of ``tensor``, its shape and dtype checked before it is read."""
    if not isinstance(tensor, (TensorEntry, TorchTensor)):
        raise UsageError(f"{path}: {what} is a {type(tensor).__name__}, not a tensor")
    shape = tensor.shape
    if len(shape) not in (1, 2) or not math.prod(shape):
        raise UsageError(f"{path}: {what} has shape {list(shape)}, not a (vectors, dim) tensor")
    vectors, width = (1, shape[0]) if len(shape) == 1 else shape
    if vectors > MAX_VECTORS:
        raise UsageError(f"{path}: {vectors} vectors; a prompt holds at most {MAX_VECTORS}")
    if width > MAX_WIDTH:
        raise UsageError(f"{path}: {what} is {width} wide; a text encoder's rows are at most {MAX_WIDTH}")
    if tensor.dtype not in FLOATS:
        raise UsageError(f"{path}: {what} has dtype {tensor.dtype}; embeddings are {', '.join(FLOATS)}")
    rows = tensor.read().astype(np.float32, copy=False).reshape(vectors, width)
    if not np.all(np.isfinite(rows)):
        raise UsageError(f"{path}: {what} holds NaN or infinite values")
    return np.ascontiguousarray(rows)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (TensorEntry, TorchTensor))


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
    tensors = {k: v for k, v in data.items() if _is_tensor(v)}
    if len(tensors) == 1:
        key, value = next(iter(tensors.items()))
        return {"": _rows(value, path, short(key))}
    keys = ", ".join(str(k)[:40] for k in list(data)[:6]) + (", ..." if len(data) > 6 else "")
    raise UsageError(f"{path}: not an embedding A1111 reads (keys: {keys or 'none'}; expected "
                     "string_to_param, emb_params or another single tensor, or clip_l and clip_g)")


def read_embedding(path: str | Path) -> EmbeddingFile:
    """The embedding in ``path`` (named by its file stem, as in A1111)."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(f"{path}: embeddings are {', '.join(SUFFIXES)} files")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UsageError(f"{path}: {size >> 20} MiB is no embedding (they are KB; at most {MAX_FILE_BYTES >> 20} MiB "
                         "is read): a checkpoint or a LoRA in an embeddings folder?")
    if path.suffix.lower() == ".safetensors":
        return EmbeddingFile(path.stem, path, tables_of(read_safetensors(path), path))
    with open_torch(path, LIMITS) as reader:  # the tensors are read while the zip is open
        return EmbeddingFile(path.stem, path, tables_of(reader.root, path))

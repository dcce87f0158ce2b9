"""Textual-inversion embeddings in prompts, as AUTOMATIC1111 has them: a word naming an embedding file
stands for that file's vectors in the text encoder's token table.

Files (A1111's ``.pt``, ``.bin``, ``.safetensors``, read by ``read_embedding``) are looked up by file
name in ``embeddings/`` folders: inside the model folder, beside it (``<model>/../embeddings``) and in
the state folder, the first found winning. As in A1111, the match is on tokens: the prompt's token ids
are searched for each name's ids, longest name first, so ``easynegative`` matches the word and not
``easy negative``; it works the same in the positive and the negative prompt and inside emphasis
brackets (the vectors take the bracket's weight).

The vectors enter the encoder without rewriting it: the matched tokens become placeholder ids (0, as
A1111 does, which keeps CLIP's pooled output at the end-of-text token) and the token-embedding
Gather's output rows at those positions are replaced while the encoder runs (``Model.run(overrides=
...)``, ``Model.token_table``). An SD 1.5 file has one table; an SDXL file has ``clip_l`` and
``clip_g``, one per encoder. A file that cannot be read or does not fit the model is named in a
warning and its word stays a word, so a bad file never costs a night.

The files are read as AUTOMATIC1111 reads them, without torch or safetensors (A1111's
``modules/textual_inversion``):

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
gigabytes costs nothing. Anything wrong is a ``UsageError`` naming the file; ``Embeddings``
warns and keeps the word a word.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from frame.config import embedding_names
from frame.config.embedding_names import SUFFIXES, model_folders  # noqa: F401  (model_folders: the pipeline reads it here)
from frame.diffusion.emphasis import parse_emphasis
from frame.engine.io.pickle_vm import PickleLimits, short
from frame.engine.io.safetensors import TensorEntry, read_header
from frame.engine.io.torch_pickle import TorchLimits, TorchTensor, open_torch
from frame.errors import UsageError

if TYPE_CHECKING:
    from frame.diffusion.tokenizer import ClipTokenizer
    from frame.engine.runnable import Runnable

SDXL_TABLES = ("clip_l", "clip_g")  # an SDXL file's table for its first and second text encoder
PLACEHOLDER_ID = 0
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
    if not _is_tensor(tensor):
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
    if all(key in data for key in SDXL_TABLES):
        return {key: _rows(data[key], path, key) for key in SDXL_TABLES}
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


@dataclass(frozen=True)
class PromptTokens:
    """A prompt's token row, its emphasis weights, whether it was cut, and where embeddings go:
    ``fixes`` are (row position, float32 (n, dim) vectors)."""

    ids: list[int]
    weights: np.ndarray
    truncated: bool
    fixes: list[tuple[int, np.ndarray]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


class Embeddings:
    """The embedding files in ``folders`` (scanned once, read when a prompt names one)."""

    def __init__(self, folders: list[Path] | None = None) -> None:
        self.folders = [Path(f) for f in folders or []]
        self._files: dict[str, Path] | None = None
        self._loaded: dict[tuple[str, int, int], EmbeddingFile | None] = {}  # by (path, size, mtime)

    def add_folder(self, folder: str | os.PathLike) -> None:
        self.folders.append(Path(folder))
        self._files = None

    def files(self) -> dict[str, Path]:
        """Name → file, the first folder's file winning over a later one of the same name (listed by
        ``embedding_names.available``, as the phone page lists them)."""
        if self._files is None:
            self._files = embedding_names.available(self.folders)
        return self._files

    def load(self, name: str, warn: Callable[[str], None]) -> EmbeddingFile | None:
        """The file ``name`` names, read once while it is unchanged; None (warned) when unreadable."""
        path = self.files()[name]
        try:
            stat = path.stat()
        except OSError as exc:
            warn(f"embedding {name!r} is ignored: {exc}")
            return None
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in self._loaded:
            try:
                self._loaded[key] = read_embedding(path)
            except (UsageError, OSError) as exc:
                warn(f"embedding {name!r} is ignored: {exc}")
                self._loaded[key] = None
            except Exception as exc:  # noqa: BLE001 - a reader tripped by a hostile file must not cost the night
                warn(f"embedding {name!r} is ignored: {path} is not an embedding frame can read "
                     f"({type(exc).__name__})")
                self._loaded[key] = None
        return self._loaded[key]

    def _lookup(self, tokenizer: ClipTokenizer) -> dict[int, list[tuple[tuple[int, ...], str]]]:
        """First token id → (ids, name) of every embedding name, longest first (A1111's ids_lookup)."""
        table: dict[int, list[tuple[tuple[int, ...], str]]] = {}
        for name in self.files():
            ids = tuple(tokenizer.encode(name))
            if ids:
                table.setdefault(ids[0], []).append((ids, name))
        for options in table.values():
            options.sort(key=lambda item: -len(item[0]))
        return table

    def tokens(self, tokenizer: ClipTokenizer, text: str, table: str, width: int | None,
               warn: Callable[[str], None]) -> PromptTokens:
        """``text``'s token row with its embeddings (see the module docstring); ``table`` is "" for a
        one-encoder model, ``clip_l``/``clip_g`` for SDXL's encoders, ``width`` the encoder's row width."""
        ids: list[int] = []
        weights: list[float] = []
        for fragment, weight in parse_emphasis(text):
            fragment_ids = tokenizer.encode(fragment)
            ids += fragment_ids
            weights += [weight] * len(fragment_ids)
        lookup = self._lookup(tokenizer) if self.files() else {}
        out_ids: list[int] = []
        out_weights: list[float] = []
        found: list[tuple[int, np.ndarray, str]] = []
        at = 0
        while at < len(ids):
            match = self._match(lookup, ids, at, table, width, warn)
            if match is None:
                out_ids.append(ids[at])
                out_weights.append(weights[at])
                at += 1
                continue
            length, name, vectors = match
            found.append((len(out_ids) + 1, vectors, name))  # + 1: the start token
            out_ids += [PLACEHOLDER_ID] * len(vectors)
            out_weights += [weights[at]] * len(vectors)
            at += length
        row, truncated = tokenizer.frame_ids(out_ids)
        row_weights = np.ones(len(row), dtype=np.float32)
        kept = out_weights[: len(row) - 2]
        row_weights[1:1 + len(kept)] = kept
        room = len(row) - 1  # the end token's position
        fixes = [(position, vectors[: room - position]) for position, vectors, _ in found if position < room]
        return PromptTokens(row, row_weights, truncated, fixes, [name for *_, name in found])

    def _match(self, lookup, ids: list[int], at: int, table: str, width: int | None,
               warn: Callable[[str], None]) -> tuple[int, str, np.ndarray] | None:
        for name_ids, name in lookup.get(ids[at], ()):
            if tuple(ids[at:at + len(name_ids)]) != name_ids:
                continue
            vectors = self.vectors(name, table, width, warn)
            if vectors is not None:
                return len(name_ids), name, vectors
        return None

    def vectors(self, name: str, table: str, width: int | None, warn: Callable[[str], None]) -> np.ndarray | None:
        """The (n, width) rows of ``name`` for one encoder, or None (warned) when the file does not fit."""
        embedding = self.load(name, warn)
        if embedding is None:
            return None
        rows = embedding.tables.get(table)
        if rows is None:
            kind = "an SDXL embedding (clip_l, clip_g)" if "" not in embedding.tables else "an SD 1.5 embedding"
            warn(f"embedding {name!r} is ignored: it is {kind}, which does not fit this model")
            return None
        if width is not None and rows.shape[1] != width:
            warn(f"embedding {name!r} is ignored: its vectors are {rows.shape[1]} wide, the text encoder's "
                 f"{width} (an embedding for another model)")
            return None
        return rows

    def cache_key(self, text: str) -> str:
        """``text`` plus the digests of the embedding files it may name, for caches of encoder outputs
        (``embedding_cache.CachedEmbed``): a changed or added file never meets an old vector."""
        lowered = text.lower()
        used = sorted(name for name in self.files() if name.lower() in lowered)
        if not used:
            return text
        return text + "\0embeddings:" + ",".join(f"{name}={_digest(self.files()[name])}" for name in used)


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _digest(path: Path) -> str:
    """The file's content digest, read 1 MiB at a time; for a file the reader refuses by its size, or
    one that cannot be read (gone since the folder was listed), its size and time stand in: the key
    still changes when the file does, and a bad file never costs the night."""
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        if stat.st_size > MAX_FILE_BYTES:
            return f"size{stat.st_size}-{stat.st_mtime_ns}"
        try:
            with open(path, "rb") as f:
                _DIGESTS[key] = hashlib.file_digest(f, "sha256").hexdigest()[:16]
        except OSError:
            return f"unreadable{stat.st_size}-{stat.st_mtime_ns}"
    return _DIGESTS[key]


def token_overrides(model: Runnable, fixes: list[tuple[int, np.ndarray]], encoder: str
                    ) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """``Model.run`` overrides that put ``fixes``' vectors into the token-embedding rows."""
    if not fixes:
        return {}
    found = model.token_table("input_ids")
    if found is None:
        raise UsageError(f"{encoder}: frame cannot find the token-embedding table in this export, so it cannot "
                         "use textual-inversion embeddings with it")
    name, _width = found

    def put(value: np.ndarray) -> np.ndarray:
        out = np.array(value, copy=True)
        rows = out.reshape(-1, out.shape[-1])
        for position, vectors in fixes:
            rows[position:position + len(vectors)] = vectors.astype(out.dtype)
        return out

    return {name: put}


def table_width(model: Runnable) -> int | None:
    found = model.token_table("input_ids")
    return None if found is None else found[1]


def usable(embeddings: Embeddings | None, model: Runnable, encoder: str, warn: Callable[[str], None]) -> Embeddings:
    """``embeddings`` when ``model`` has a token table to put vectors in; otherwise none, with a warning
    (an export frame cannot see into paints the words as words rather than failing the night)."""
    if embeddings is None or not embeddings.files():
        return Embeddings()
    if model.token_table("input_ids") is not None:
        return embeddings
    warn(f"{encoder}: frame cannot find the token-embedding table in this export; textual-inversion "
         "embeddings are ignored (their names stay words)")
    return Embeddings()

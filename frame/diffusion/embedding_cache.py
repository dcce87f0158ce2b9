"""Text embeddings kept on the card between nights, so that the taste picker embeds only new texts.

Every night the picker asks for the pooled embeddings of ~90 texts (the concept axes' ends, every
theme × style, the feed prompts, the rated prompts), and most of them are the same as last night's.
Embedding them streams the text encoder through the CPU once per four texts: SDXL's 1.4 GB OpenCLIP
encoder made that 44 of the 64 projected minutes of a Pi night. Kept here, a night embeds only the
texts it has not embedded before (tonight's new feed items, a new theme).

One file per (encoder identity, text) in ``<state_dir>/text-embeddings/``, named by the SHA-256 of
both; the identity (``frame.diffusion.encoder_identity``) changes with the encoder's weights,
precision, tokenizer and frame's version, so a changed model never meets an old vector. A file is::

    MAGIC | SHA-256 of the body (32 bytes) | body
    body = header length (4 bytes, little endian) | header (JSON: identity, text, dtype, shape) | raw data

The data are the encoder's float32 output bytes as they were computed, so a vector read back is
bit-identical to a fresh one (``tests/diffusion/test_embedding_cache.py`` renders the demo model with
a cold and a warm cache). Each file is written atomically (``frame.atomicfile``). A file whose digest,
header or size does not match is never trusted: it is logged, removed and recomputed. The folder is
capped (``DEFAULT_CAP_BYTES``): after a night's new entries, the least recently used files go first
(a file's mtime is its last use: reading an entry for a night touches it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from frame.atomicfile import make_dirs, write_bytes_atomic

log = logging.getLogger(__name__)

FOLDER_NAME = "text-embeddings"
SUFFIX = ".emb"
MAGIC = b"frame text embedding 1\n"
DIGEST_BYTES = 32
# SDXL's pooled vector is 1,280 float32 (5 kB per file with its header): 8 MB hold ~1,500 texts, five
# months of ten new feed items a night beside the themes; SD 1.5's 768 (3 kB) about 2,500.
DEFAULT_CAP_BYTES = 8 << 20
# one entry: the header (the text, at most a few kB) and one vector (5 kB for SDXL); a bigger file is
# refused before it is read
MAX_ENTRY_BYTES = 1 << 20

Embed = Callable[[list[str]], np.ndarray]


def cache_folder(state_dir: str | os.PathLike) -> Path:
    """Where the state folder keeps the embeddings (``<state_dir>/text-embeddings``)."""
    return Path(state_dir) / FOLDER_NAME


def entry_name(identity: str, text: str) -> str:
    """The file name of ``text``'s embedding by the encoder ``identity``."""
    return hashlib.sha256(f"{identity}\0{text}".encode()).hexdigest() + SUFFIX


def encode_entry(identity: str, text: str, vector: np.ndarray) -> bytes:
    """The file's bytes for one float32 vector (see the module docstring)."""
    data = np.ascontiguousarray(vector, dtype=np.float32)
    if data.ndim != 1 or not np.all(np.isfinite(data)):
        raise ValueError(f"an embedding must be a finite 1-D vector, got shape {data.shape}")
    header = json.dumps({"identity": identity, "text": text, "dtype": "<f4", "shape": list(data.shape)},
                        ensure_ascii=False).encode()
    body = struct.pack("<I", len(header)) + header + data.astype("<f4").tobytes()
    return MAGIC + hashlib.sha256(body).digest() + body


def decode_entry(raw: bytes, identity: str, text: str) -> np.ndarray:
    """The vector in ``raw``; ValueError naming what is wrong when it is not exactly the entry of
    ``text`` by ``identity``."""
    if not raw.startswith(MAGIC):
        raise ValueError("not a text embedding file")
    digest, body = raw[len(MAGIC):len(MAGIC) + DIGEST_BYTES], raw[len(MAGIC) + DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch")
    (length,) = struct.unpack("<I", body[:4])
    if length > len(body) - 4:
        raise ValueError(f"a header of {length} bytes in {len(body) - 4}")
    try:
        header = json.loads(body[4:4 + length].decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"unreadable header: {str(exc)[:80]}") from None
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    if header.get("identity") != identity or header.get("text") != text:
        raise ValueError("the entry belongs to another text or encoder")
    shape = header.get("shape")
    if header.get("dtype") != "<f4" or not isinstance(shape, list) or len(shape) != 1 or type(shape[0]) is not int:
        raise ValueError(f"unexpected dtype or shape {str(header.get('dtype'))[:20]} {str(shape)[:40]}")
    payload = body[4 + length:]
    if len(payload) != 4 * shape[0]:
        raise ValueError(f"{len(payload)} data bytes for shape {shape}")
    vector = np.frombuffer(payload, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(vector)):
        raise ValueError("the vector is not finite")
    return vector


class EmbeddingCache:
    """The embeddings of one text encoder (``identity``) in ``folder``, capped at ``cap_bytes``."""

    def __init__(self, folder: str | os.PathLike, identity: str, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.folder = Path(folder)
        self.identity = identity
        self.cap_bytes = cap_bytes

    def path(self, text: str) -> Path:
        return self.folder / entry_name(self.identity, text)

    def read(self, text: str, touch: bool = True) -> np.ndarray | None:
        """``text``'s vector, or None when there is none or it is damaged (then logged and removed,
        so the caller computes it again). ``touch`` marks it used now (the eviction order)."""
        path = self.path(text)
        try:
            with open(path, "rb") as file:
                raw = file.read(MAX_ENTRY_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:  # an unreadable card: embedded afresh, as if never kept
            log.warning("cannot read text embedding %s: %s", path, exc)
            return None
        try:
            if len(raw) > MAX_ENTRY_BYTES:
                raise ValueError(f"more than an entry's {MAX_ENTRY_BYTES} bytes")
            vector = decode_entry(raw, self.identity, text)
        except (ValueError, struct.error) as exc:
            log.warning("text embedding %s is damaged (%s): computing it again", path.name, exc)
            if touch:  # only a night that recomputes it removes it; the estimate only reads
                path.unlink(missing_ok=True)
            return None
        if touch:
            try:
                os.utime(path)
            except OSError:
                pass  # a read-only card still answers; eviction order only
        return vector

    def lookup(self, texts: Iterable[str], touch: bool = True) -> dict[str, np.ndarray]:
        """The stored vectors among ``texts`` (damaged ones left out)."""
        found = {}
        for text in dict.fromkeys(texts):
            vector = self.read(text, touch)
            if vector is not None:
                found[text] = vector
        return found

    def missing(self, texts: Iterable[str]) -> list[str]:
        """The distinct ``texts`` with no sound entry, in order; reads only (nothing touched or removed)."""
        return [text for text in dict.fromkeys(texts) if self.read(text, touch=False) is None]

    def store(self, vectors: dict[str, np.ndarray]) -> None:
        """Write each vector atomically, then evict the least recently used files above the cap."""
        make_dirs(self.folder)
        for text, vector in vectors.items():
            write_bytes_atomic(self.path(text), encode_entry(self.identity, text, vector))
        self.evict(keep=[self.path(text).name for text in vectors])

    def evict(self, keep: Sequence[str] = ()) -> int:
        """Remove the least recently used entries (of any encoder) until the folder is within the cap;
        ``keep`` (file names just written) go last. Returns the number removed."""
        entries = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(SUFFIX) and entry.is_file():
                stat = entry.stat()
                entries.append((entry.name in keep, stat.st_mtime_ns, entry.name, stat.st_size))
        total = sum(size for *_, size in entries)
        removed = 0
        for _kept, _mtime, name, size in sorted(entries):
            if total <= self.cap_bytes:
                break
            (self.folder / name).unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed


class CachedEmbed:
    """``embed(texts)`` answered from ``cache`` where it can, ``compute`` for the rest (one call, in the
    order asked), whose rows are stored. ``computed`` and ``reused`` count the night's texts,
    ``new_texts`` lists the computed ones. ``key(text)`` is what an entry is stored under (default the
    text): a text naming a textual-inversion embedding adds its file's digest
    (``textual_inversion.Embeddings.cache_key``), so a changed file is embedded again."""

    def __init__(self, cache: EmbeddingCache, compute: Embed, key: Callable[[str], str] | None = None) -> None:
        self.cache, self.compute = cache, compute
        self.key = key or (lambda text: text)
        self.computed, self.reused = 0, 0
        self.new_texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        keys = {text: self.key(text) for text in dict.fromkeys(texts)}
        stored = self.cache.lookup(keys.values())
        known = {text: stored[key] for text, key in keys.items() if key in stored}
        new = [text for text in keys if text not in known]
        if new:
            rows = np.asarray(self.compute(new))
            if rows.ndim != 2 or rows.shape[0] != len(new):
                raise ValueError(f"the text encoder returned shape {rows.shape} for {len(new)} texts")
            fresh = {text: rows[i] for i, text in enumerate(new)}
            try:
                self.cache.store({keys[text]: row for text, row in fresh.items()})
            except (OSError, ValueError) as exc:  # a full card (or a NaN the picker refuses) is not this night's end
                log.warning("could not keep %d text embeddings in %s: %s", len(fresh), self.cache.folder, exc)
            known.update(fresh)
        self.new_texts += new
        self.computed += len(new)
        self.reused += len(dict.fromkeys(texts)) - len(new)
        if not texts:
            return np.zeros((0, 0), np.float32)
        return np.stack([np.asarray(known[text], dtype=np.float32) for text in texts])

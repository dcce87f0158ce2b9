"""The identity of a text encoder's output, the key of the kept embeddings (``embedding_cache``).

A kept vector may be reused only while the encoder would compute the same bytes again, so the
identity is a SHA-256 over everything those bytes follow from:

* **the weights**, by content: every file of the encoder's folder (``model.onnx`` and its external
  data, whatever their names). A content digest, not sizes and dates: a model converted again to
  another precision (fp16 → uint8 keeps the file names, and can keep the sizes of small files) or
  copied back from a backup must not meet the old vectors, and a ``touch`` must not throw them away.
  Reading 1.4 GB to digest SDXL's second encoder costs about what one embedding pass does, so each
  file's digest is kept in ``<state_dir>/text-embeddings/digests.json`` under its path, size, mtime
  and inode, and computed again only when one of them changes (a new model, a new conversion);
* for a model read over HTTP (``frame serve-model``, where the Pi has no copy to digest) each file's
  validator instead: its ETag, else its size and Last-Modified, the same validator the engine's weight
  cache and mid-read check trust (``frame.engine.io.http.HttpSource``); a server that sends neither
  gives no identity (a size alone would be a guess);
* the tokenizer files (small, digested every time), the pad token, which output is pooled;
* frame's version: a release may change a kernel's rounding, so an upgrade embeds once afresh.

When the identity cannot be known (a file unreadable, the server unreachable), there is none and the
night embeds every text as before: the cache never decides a picture on a guess.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from frame import __version__
from frame.atomicfile import make_dirs
from frame.diffusion import embedding_cache
from frame.diffusion.model_info import SDXL
from frame.engine.io.http_settings import HttpSettings
from frame.statefile import read_json, write_json

if TYPE_CHECKING:
    from frame.diffusion.conditioning import Encoder
    from frame.diffusion.pipeline import Pipeline
    from frame.engine.onnxstream.source import OnnxStreamSource

    # a text encoder's: an ONNX file's path or URL, or an OnnxStream model (imported for the type only:
    # the OnnxStream reader imports onnx, which the render worker must not load before it paints)
    Source = str | OnnxStreamSource

log = logging.getLogger(__name__)

DIGESTS_NAME = "digests.json"
CHUNK = 8 << 20


class DigestBook:
    """Content digests of local files, kept by path and recomputed only when the file changed."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.path = Path(folder) / DIGESTS_NAME
        saved = read_json(self.path, default={})
        self.files: dict[str, list] = dict(saved.get("files", {})) if isinstance(saved, dict) else {}
        self.changed = False

    @staticmethod
    def _stamp(path: Path) -> list:
        stat = path.stat()
        return [stat.st_size, stat.st_mtime_ns, stat.st_ino]

    def digest(self, path: Path, compute: bool = True) -> str | None:
        """``path``'s SHA-256, from the book while the file's size, mtime and inode are unchanged;
        None when not known and ``compute`` is False."""
        key = str(path.resolve())
        stamp = self._stamp(path)
        known = self.files.get(key)
        if isinstance(known, list) and len(known) == 4 and known[:3] == stamp:
            return str(known[3])
        if not compute:
            return None
        sha = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(CHUNK):
                sha.update(block)
        if self._stamp(path) != stamp:
            raise OSError(f"{path} changed while it was being digested")
        self.files[key] = [*stamp, sha.hexdigest()]
        self.changed = True
        return sha.hexdigest()

    def save(self) -> None:
        """Write the book (atomically) if it changed, without the files that no longer exist."""
        if self.changed:
            self.files = {k: v for k, v in self.files.items() if os.path.exists(k)}
            make_dirs(self.path.parent)
            write_json(self.path, {"files": self.files})
            self.changed = False


def _local_weight_files(source: Source) -> list[Path]:
    """Every file that can hold the encoder's weights: its folder's files (an ONNX export's
    ``model.onnx`` and external data; an OnnxStream folder's model.txt and .bin files)."""
    path = Path(str(source))  # an OnnxStreamSource's location
    folders = [path if path.is_dir() else path.parent]
    weights = None if isinstance(source, str) else source.weights_folder
    if weights:
        folders.append(Path(weights))
    files = sorted({p for folder in folders for p in folder.iterdir() if p.is_file()})
    if not files:
        raise OSError(f"no files in {', '.join(map(str, folders))}")
    return files


def _url_validators(source: Source, http: HttpSettings | None = None) -> list[str]:
    """``model.onnx`` and each external data file with its server validator (ETag or size+date)."""
    from frame.engine.io.http import HttpSource
    from frame.engine.model import read_structure

    if not isinstance(source, str):
        raise OSError("an OnnxStream model read over HTTP has no listable weight files")
    weights = read_structure(source, http=http).weights
    refs = weights.values() if isinstance(weights, dict) else weights
    locations = sorted({source} | {ref.location for ref in refs if ref.location})
    parts = []
    for location in locations:
        remote = HttpSource(location, http)
        try:
            size = remote.size()
            if not remote.validator or remote.validator.endswith("modified="):  # size alone: a guess
                raise OSError(f"{remote.location}: the server sends no ETag or Last-Modified")
            parts.append(f"{remote.location} {size} {remote.validator}")
        finally:
            remote.close()
    return parts


def _is_url(source: Source) -> bool:
    text = str(source) if isinstance(source, str) else str(source.weights_folder or source)
    return text.startswith(("http://", "https://"))


def encoder_identity(encoder: Encoder, projected: bool, book: DigestBook, compute: bool = True,
                     http: HttpSettings | None = None) -> str | None:
    """The identity of ``encoder``'s (a ``conditioning.Encoder``) pooled output (see the module
    docstring), or None when it cannot be known. ``compute=False`` (the estimate, which only reads)
    gives None instead of digesting a file the book does not know yet. ``http``: how a URL encoder's
    files are asked for their validators (the pipeline's settings)."""
    try:
        parts = [f"frame {__version__}", f"encoder {encoder.name}", f"pooled {'projected' if projected else 'pooler'}",
                 f"pad {encoder.pad_token}"]
        for tokenizer_file in sorted(p for p in Path(encoder.tokenizer_folder).iterdir() if p.is_file()):
            parts.append(f"tokenizer {tokenizer_file.name} {hashlib.sha256(tokenizer_file.read_bytes()).hexdigest()}")
        if _is_url(encoder.source):
            parts += [f"url {line}" for line in _url_validators(encoder.source, http)]
        else:
            for path in _local_weight_files(encoder.source):
                digest = book.digest(path, compute)
                if digest is None:
                    return None
                parts.append(f"file {path.name} {digest}")
    except Exception as exc:  # noqa: BLE001 - no identity means no cache tonight, never a failed night
        log.warning("text embeddings are not kept tonight: the encoder's identity is unknown (%s)", exc)
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def text_cache_for(pipe: Pipeline, state_dir: str | os.PathLike, compute: bool = True,
                   cap_bytes: int | None = None) -> embedding_cache.EmbeddingCache | None:
    """The ``EmbeddingCache`` of ``pipe.embed_text``'s encoder (the last one; SDXL's projected pooled
    output) in ``state_dir``, or None when the encoder's identity is unknown (see ``encoder_identity``;
    ``compute=False`` never digests a weight file)."""
    folder = embedding_cache.cache_folder(state_dir)
    book = DigestBook(folder)
    identity = encoder_identity(pipe.encoders[-1], pipe.kind == SDXL, book, compute, pipe.http)
    if compute:
        try:
            book.save()
        except OSError as exc:
            log.warning("could not keep the encoder's digest in %s: %s", book.path, exc)
    if identity is None:
        return None
    cap = embedding_cache.DEFAULT_CAP_BYTES if cap_bytes is None else cap_bytes
    return embedding_cache.EmbeddingCache(folder, identity, cap)

"""Where a diffusers ONNX export lives: a local folder or an http(s) base URL.

The layout is the one ``optimum-cli export onnx`` writes (model_index.json, scheduler/, tokenizer[_2]/,
text_encoder[_2]/model.onnx, unet/model.onnx (+ external data), vae_decoder/model.onnx, and a
config.json per component). Small JSON and tokenizer files are fetched once (``small_files``: capped
in size, uncompressed, one deadline per file) and kept in a cache folder, so a frame that reads its
model over Wi-Fi only streams the big weights (through the engine) after the first night. Fetches use
the same ``HttpSettings`` as the engine (bearer token, retries until the time budget runs out, so a NAS
still waking up is waited for) and show URLs only redacted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from frame.atomicfile import write_bytes_atomic
from frame.engine.io.http_settings import HttpSettings
from frame.errors import FrameError
from frame.redact import redact_url
from frame.statefile import read_json, write_json

OWN_KEY_PREFIX = '"_frame_'  # frame's own keys in a model_index.json (frame.models.DEFAULT_STEPS_KEY)

log = logging.getLogger(__name__)

TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json")
OPTIONAL_FILES = {"tokenizer_config.json", "special_tokens_map.json", "config.json"}
MISSING_FILE = "missing.json"  # in the cache: files the server had not (answered 404 for)


class MissingFile(FrameError, FileNotFoundError):
    """A model file that is not there (local path or HTTP 404), as opposed to a failed download."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "frame" / "models"


class ModelLocation:
    """Where one model's files are: a local folder (``root``), or a URL (``base``, ending in "/") whose
    files are cached in ``cache`` (a folder per URL under ``cache_dir``). The diffusers export
    (``ModelFiles``) and the OnnxStream layout (``OnnxStreamFiles``) are both found this way."""

    def __init__(self, source: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> None:
        self.source = str(source)
        self.is_url = self.source.startswith(("http://", "https://"))
        if self.is_url:
            self.base = self.source if self.source.endswith("/") else self.source + "/"
            digest = hashlib.sha256(self.base.encode()).hexdigest()[:16]
            self.cache = Path(cache_dir or default_cache_dir()) / digest
        else:
            self.root = Path(self.source).expanduser()
            if not self.root.is_dir():
                raise FrameError(f"model folder not found: {self.root}")


class ModelFiles(ModelLocation):
    """Access to one export: ``json(rel)``, ``local_folder(rel)`` for tokenizers, ``onnx(rel)`` for the engine."""

    def __init__(self, source: str | os.PathLike, cache_dir: str | os.PathLike | None = None,
                 http: HttpSettings | None = None) -> None:
        super().__init__(source, cache_dir)
        self.http = http or HttpSettings()
        self._missing: set[str] = set()
        if not self.exists("model_index.json"):
            raise FrameError(
                f"{redact_url(self.source)} is not a diffusers ONNX export: model_index.json is missing "
                "(expected the layout written by 'optimum-cli export onnx')")

    def exists(self, relative: str) -> bool:
        if not self.is_url:
            return (self.root / relative).is_file()
        try:
            self._fetch(relative)
        except FileNotFoundError:
            return False
        return True

    def has_model(self, component: str) -> bool:
        """Whether ``component/model.onnx`` exists, without downloading it (a HEAD request for URLs)."""
        if not self.is_url:
            return (self.root / component / "model.onnx").is_file()
        import requests

        url = self.onnx(component)
        try:
            response = requests.head(url, allow_redirects=True, timeout=30)
        except requests.RequestException as exc:
            raise FrameError(f"cannot reach {url}: {exc}") from exc
        return response.status_code != 404

    def json(self, relative: str, required: bool = True) -> dict[str, Any]:
        """Parsed JSON file; ``{}`` for a missing optional file."""
        if not required and not self.exists(relative):
            return {}
        path = self._local(relative)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise FrameError(f"{self.describe(relative)}: not valid JSON ({exc})") from exc

    def local_folder(self, folder: str, names: tuple[str, ...] = TOKENIZER_FILES) -> Path:
        """A local folder holding ``names`` from ``folder`` (downloaded into the cache for URLs)."""
        for name in names:
            relative = f"{folder}/{name}"
            if name in OPTIONAL_FILES and not self.exists(relative):
                continue
            self._local(relative)
        return self.root / folder if not self.is_url else self.cache / folder

    def onnx(self, component: str) -> str:
        """Path or URL of ``component/model.onnx`` for the engine (weights are streamed, not cached)."""
        relative = f"{component}/model.onnx"
        if not self.is_url:
            path = self.root / relative
            if not path.is_file():
                raise FrameError(f"missing model file: {path}")
            return str(path)
        return urljoin(self.base, relative)

    def identity(self) -> str:
        """A string that changes when the model does: source plus the small config files and UNet size.
        Lines of frame's own keys in model_index.json (``"_frame_…"``, e.g. the demo's default steps)
        are left out: they are settings carried with the model, which reach a render's checkpoint hash
        through the settings, and adding one must not discard an interrupted night (the demo's
        ``_frame_default_steps`` made every checkpoint written before it start afresh)."""
        parts = [self.source]
        for relative in ("model_index.json", "scheduler/scheduler_config.json", "unet/config.json"):
            if self.exists(relative):
                text = self._local(relative).read_text(encoding="utf-8")
                if relative == "model_index.json":
                    text = "".join(line for line in text.splitlines(keepends=True)
                                   if not line.lstrip().startswith(OWN_KEY_PREFIX))
                parts.append(text)
        if not self.is_url:
            for name in ("model.onnx", "model.onnx_data"):
                path = self.root / "unet" / name
                if path.is_file():
                    parts.append(f"{name}:{path.stat().st_size}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def describe(self, relative: str) -> str:
        return redact_url(urljoin(self.base, relative)) if self.is_url else str(self.root / relative)

    def _local(self, relative: str) -> Path:
        if not self.is_url:
            path = self.root / relative
            if not path.is_file():
                raise MissingFile(f"missing model file: {path}")
            return path
        return self._fetch(relative)

    def _fetch(self, relative: str) -> Path:
        """Download ``relative`` into the cache once (atomically), then serve it from there."""
        target = self.cache / relative
        if target.is_file():
            return target
        if relative in self._missing:
            raise MissingFile(f"missing model file: {self.describe(relative)} (HTTP 404)")
        from frame.engine.io.http import ServerUnreachable
        from frame.engine.io.small_files import fetch_small

        url = urljoin(self.base, relative)
        if relative in self._known_missing():
            # The server said 404 before (text_encoder_2/model.onnx of an SD 1.5 model): ask once, and
            # while it is off take that answer instead of retrying for http_give_up_seconds.
            try:
                content = fetch_small(url, dataclasses.replace(self.http, retries=0), self.describe(relative))
            except ServerUnreachable as exc:
                log.info("%s: the server cannot be reached (%s); it had no such file when last asked",
                         self.describe(relative), exc)
                raise MissingFile(f"missing model file: {self.describe(relative)} (HTTP 404 when last asked)") from None
        else:
            content = fetch_small(url, self.http, self.describe(relative))
        if content is None:
            self._missing.add(relative)
            self._remember_missing(relative)
            raise MissingFile(f"missing model file: {self.describe(relative)} (HTTP 404)")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, content)  # fsynced: a power cut never leaves an empty cached file
        log.info("cached %s (%d bytes)", self.describe(relative), len(content))
        return target

    def _known_missing(self) -> list[str]:
        """Files the server answered 404 for, kept in the cache (``MISSING_FILE``)."""
        known = read_json(self.cache / MISSING_FILE, default=[])
        return known if isinstance(known, list) else []

    def _remember_missing(self, relative: str) -> None:
        known = self._known_missing()
        if relative in known:
            return
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
            write_json(self.cache / MISSING_FILE, sorted([*known, relative]))
        except OSError as exc:
            log.warning("cannot note in %s that %s is missing: %s", self.cache, relative, exc)

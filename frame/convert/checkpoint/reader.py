"""Open what ``frame model import`` is given: a single-file checkpoint or a diffusers folder, on disk or
at an http(s) URL, as one ``Checkpoint``: every tensor's name, dtype and shape up front, each tensor's
data only when asked for, as float32.

Nothing is copied first: a local file is read with ``pread`` (``LocalSource``) and a URL with Range
requests (``HttpSource``: a dropped connection is retried from the byte where the read stopped, within
``model.http_give_up_seconds``), so a 7 GB SDXL file costs the memory of its largest tensor. What kind
of file it is comes from its first bytes, not its name: safetensors starts with an 8-byte header
length and ``{``; a torch ``.ckpt`` is a zip (``PK``) or a bare pickle (``0x80``).

A diffusers folder (``model_index.json`` plus ``unet/``, ``vae/``, ``text_encoder/``...) is presented
as one checkpoint whose keys carry the component folder as a prefix (``unet/conv_in.weight``), with
each component's ``config.json`` in ``configs``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from frame.convert.checkpoint.components import FLOAT_DTYPES, TensorInfo
from frame.convert.checkpoint.torch_file import TorchCheckpoint
from frame.engine.errors import SourceTruncated, WeightFetchError
from frame.engine.io.http import HttpSource
from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.safetensors import SafetensorsFile, TensorEntry, read_source_header
from frame.engine.io.small_files import fetch_small
from frame.engine.io.sources import ByteSource, LocalSource, is_url
from frame.errors import UsageError
from frame.redact import redact_url

MAX_JSON_BYTES = 1 << 20  # a component's config.json is a few KB; model_index.json under 1 KB
COMPONENTS = ("unet", "vae", "text_encoder", "text_encoder_2")
WEIGHT_NAMES = {"unet": "diffusion_pytorch_model", "vae": "diffusion_pytorch_model",
                "text_encoder": "model", "text_encoder_2": "model"}


class Checkpoint(Protocol):
    """Tensors by name, read one at a time; ``configs`` only for a diffusers folder."""

    location: str
    tensors: Mapping[str, TensorInfo]
    metadata: Mapping[str, str]
    configs: Mapping[str, dict]

    def read(self, key: str) -> np.ndarray: ...

    def read_rows(self, key: str, first: int, count: int) -> np.ndarray: ...

    def close(self) -> None: ...


class SafetensorsCheckpoint:
    """One .safetensors file behind a ``ByteSource`` (local or HTTP)."""

    def __init__(self, source: ByteSource, header: SafetensorsFile) -> None:
        self.location = source.location
        self.source = source
        self.entries: dict[str, TensorEntry] = header.tensors
        self.tensors = {k: TensorInfo(e.dtype, e.shape) for k, e in header.tensors.items()}
        self.metadata = header.metadata
        self.configs: dict[str, dict] = {}

    def read(self, key: str) -> np.ndarray:
        """Tensor ``key`` as float32 (bf16 and fp16 widened exactly). Integer tensors are refused: no
        weight of a Stable Diffusion component is one (the ``position_ids`` buffers are skipped before)."""
        entry = self.entries[key]
        return self._read(key, entry, entry.start, entry.nbytes).reshape(entry.shape)

    def read_rows(self, key: str, first: int, count: int) -> np.ndarray:
        """Rows ``first .. first+count`` (axis 0) of tensor ``key`` as float32: the bytes of just those
        rows are read, so a 151 MB embedding is converted a few MB at a time."""
        entry = self.entries[key]
        if not entry.shape:
            return self._read(key, entry, entry.start, entry.nbytes).reshape(())
        row_bytes = entry.nbytes // entry.shape[0] if entry.shape[0] else 0
        count = max(0, min(count, entry.shape[0] - first))
        rows = self._read(key, entry, entry.start + first * row_bytes, count * row_bytes)
        return rows.reshape((count, *entry.shape[1:]))

    def _read(self, key: str, entry: TensorEntry, offset: int, length: int) -> np.ndarray:
        if entry.dtype not in FLOAT_DTYPES:
            raise UsageError(f"{self.location}: tensor {key!r} is {entry.dtype}, not a float weight")
        try:
            data = self.source.read_at(offset, length)
        except SourceTruncated as exc:
            raise UsageError(f"{self.location}: file is truncated ({exc})") from exc
        return entry.decode(data, (-1,))

    def close(self) -> None:
        self.source.close()


class FolderCheckpoint:
    """A diffusers folder's components as one checkpoint: keys ``<component>/<key>``."""

    def __init__(self, location: str, parts: dict[str, SafetensorsCheckpoint], configs: dict[str, dict],
                 index: dict) -> None:
        self.location = location
        self.parts = parts  # "unet/<shard name>" -> file
        self.configs = configs
        self.index = index
        self.metadata: dict[str, str] = {}
        self.owner: dict[str, tuple[SafetensorsCheckpoint, str]] = {}
        self.tensors: dict[str, TensorInfo] = {}
        for part_name, part in parts.items():
            component = part_name.split("/", 1)[0]
            for key, info in part.tensors.items():
                name = f"{component}/{key}"
                if name in self.tensors:
                    raise UsageError(f"{location}: tensor {key!r} of {component} is in two of its files")
                self.tensors[name] = info
                self.owner[name] = (part, key)

    def read(self, key: str) -> np.ndarray:
        part, inner = self.owner[key]
        return part.read(inner)

    def read_rows(self, key: str, first: int, count: int) -> np.ndarray:
        part, inner = self.owner[key]
        return part.read_rows(inner, first, count)

    def close(self) -> None:
        for part in self.parts.values():
            part.close()


@dataclass
class Opener:
    """Opens files and URLs with the same HTTP settings (retries, give-up time, token)."""

    http: HttpSettings = field(default_factory=HttpSettings)

    def source(self, location: str) -> ByteSource:
        if is_url(location):
            return HttpSource(location, self.http)
        try:
            return LocalSource(location)
        except Exception as exc:  # ModelFormatError: a folder, unreadable
            raise UsageError(str(exc)) from exc

    def small(self, location: str) -> bytes | None:
        """A small JSON file whole (None when missing), capped at ``MAX_JSON_BYTES``."""
        if is_url(location):
            return fetch_small(location, self.http, redact_url(location), MAX_JSON_BYTES)
        if not os.path.isfile(location):
            return None
        if os.path.getsize(location) > MAX_JSON_BYTES:
            raise UsageError(f"{location}: larger than {MAX_JSON_BYTES >> 20} MiB, not a config file")
        with open(location, "rb") as file:
            return file.read()


def open_file(location: str, opener: Opener | None = None) -> Checkpoint:
    """A single-file checkpoint; one line naming the file when it is not one frame can read."""
    opener = opener or Opener()
    source = opener.source(location)
    try:
        head = source.read_at(0, min(9, source.size())).tobytes()
        kind = sniff(head)
        if kind == "safetensors":
            return SafetensorsCheckpoint(source, read_source_header(source))
        if kind == "torch":
            if is_url(location):  # its zip directory and tensors read with Range requests, never copied
                return TorchCheckpoint(location, source)
            source.close()
            return TorchCheckpoint(location)
        raise UsageError(f"{source.location}: neither a .safetensors nor a .ckpt checkpoint "
                         f"(it starts with {head[:8]!r})")
    except BaseException:
        source.close()
        raise


def sniff(head: bytes) -> str:
    """``safetensors``, ``torch`` or ``unknown`` from a file's first 9 bytes (a safetensors header
    length may itself start with 0x80, so the JSON's ``{`` is looked at first)."""
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:4] == b"PK\x03\x04" or (head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")):
        return "torch"
    return "unknown"


def json_object(opener: Opener, location: str, what: str) -> dict | None:
    """The JSON object in the small file at ``location``; None when there is none; a UsageError naming
    ``what`` when it is not valid JSON or not an object (the checkpoint's configs and indexes)."""
    raw = opener.small(location)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{what}: not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{what}: not a JSON object")
    return value


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts]) if is_url(base) else os.path.join(base, *parts)


def _component_files(opener: Opener, root: str, component: str) -> list[str]:
    """The safetensors file(s) of one component: a single file (plain name first, then the ``fp16``
    variant) or the shards listed by its ``.safetensors.index.json``."""
    stem = WEIGHT_NAMES[component]
    for variant in ("", ".fp16"):
        index_path = _join(root, component, f"{stem}{variant}.safetensors.index.json")
        index = json_object(opener, index_path, index_path)
        if index is not None:
            weight_map = index.get("weight_map")
            if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
                raise UsageError(f"{index_path}: no weight_map of file names")
            shards = sorted(set(weight_map.values()))
            if any("/" in s or "\\" in s or s.startswith(".") for s in shards):
                raise UsageError(f"{index_path}: a shard name points outside {component}/")
            return [_join(root, component, s) for s in shards]
        single = _join(root, component, f"{stem}{variant}.safetensors")
        if _exists(opener, single):
            return [single]
    return []


def _exists(opener: Opener, location: str) -> bool:
    if not is_url(location):
        return os.path.isfile(location)
    source = opener.source(location)
    try:
        source.read_at(0, 1)
    except (WeightFetchError, SourceTruncated):
        return False
    finally:
        source.close()
    return True


def open_folder(root: str, opener: Opener | None = None) -> FolderCheckpoint:
    """A diffusers folder with safetensors weights (``model_index.json`` at its top)."""
    opener = opener or Opener()
    index = json_object(opener, _join(root, "model_index.json"), f"{root}: model_index.json")
    if index is None:
        raise UsageError(f"{root}: no model_index.json; give a diffusers folder or a single .safetensors file")
    parts: dict[str, SafetensorsCheckpoint] = {}
    configs: dict[str, dict] = {}
    try:
        for component in COMPONENTS:
            if not isinstance(index.get(component), list) or index[component][0] is None:
                continue
            files = _component_files(opener, root, component)
            if not files:
                onnx_there = _exists(opener, _join(root, component, "model.onnx"))
                raise UsageError(f"{root}: {component}/ has no .safetensors weights"
                                 + (" (it is already an ONNX export: use it as it is, or 'frame model "
                                    "convert')" if onnx_there else ""))
            config_path = _join(root, component, "config.json")
            config = json_object(opener, config_path, config_path)
            if config is None:
                raise UsageError(f"{root}: {component}/config.json is missing")
            configs[component] = config
            for location in files:
                parts[f"{component}/{os.path.basename(location)}"] = open_file(location, opener)
        scheduler_path = _join(root, "scheduler", "scheduler_config.json")
        scheduler = json_object(opener, scheduler_path, scheduler_path)
        if scheduler is not None:
            configs["scheduler"] = scheduler
    except BaseException:
        for part in parts.values():
            part.close()
        raise
    return FolderCheckpoint(root, parts, configs, index)


def open_checkpoint(location: str, opener: Opener | None = None) -> Checkpoint:
    """SRC of ``frame model import``: a folder (or a URL ending in ``/``) is a diffusers folder,
    anything else a single file."""
    opener = opener or Opener()
    if is_url(location):
        return open_folder(location, opener) if location.endswith("/") else open_file(location, opener)
    if os.path.isdir(location):
        return open_folder(location, opener)
    if not os.path.exists(location):
        raise UsageError(f"{location} does not exist")
    return open_file(location, opener)

"""Planned models kept on the card between nights, so that a night loads each model without planning it.

Loading a model reads its graph (the protobuf scanner, 16,633 nodes for SDXL's UNet), binds and checks
every node, folds constants, runs the engine's rewrites and makes the fetch/free plan
(``frame.engine.model``). The result depends only on the model file, the attention settings and
frame's own code, and the frame loads the same model every night: projected for a Pi Zero 2 W that
planning is 37 s of SDXL Turbo's UNet alone. So the plan is kept here after the first load and read
back on later ones, without the graph being parsed or rewritten.

One file per (model file, transform, attention settings, frame's code) in ``<state_dir>/model-plans/``,
named by the SHA-256 of that key. A file is::

    MAGIC | SHA-256 of the body (32 bytes) | body
    body = header length (4 bytes, little endian) | header (JSON) | pickled plan

The header holds the key and the identity (path, size, mtime, inode, ctime) of the model file and of
every file its weights are read from; frame's code identity is a digest of the engine's own source
files, so an upgrade (or any change to a kernel or a rewrite) plans afresh. An entry whose digest,
key or file identities do not match is never used: it is logged, removed and planned again. The plan
is read with an unpickler that builds only the engine's own classes and numpy arrays (``PlanUnpickler``);
kernels are stored by name and bound again on read. Each file is written atomically
(``frame.atomicfile``); the folder is capped (``DEFAULT_CAP_BYTES``), least recently used first.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
import pickle
import struct
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from frame import __version__
from frame.atomicfile import make_dirs, write_bytes_atomic
from frame.engine.ops.registry import registered_specs, resolve

log = logging.getLogger(__name__)

SUFFIX = ".plan"
MAGIC = b"frame model plan 1\n"
DIGEST_BYTES = 32
# SDXL's components plan to about 6.5 MB (its UNet 4.7 MB): 32 MB keep a few models' plans.
DEFAULT_CAP_BYTES = 32 << 20
ENGINE_ROOT = Path(__file__).resolve().parent


@dataclass
class Planned:
    """A model as ``load_model`` plans it, before a weights provider is attached (``Model``'s state)."""

    weights: dict
    inputs: list
    outputs: list
    op_counts: Counter
    lora_report: Any
    rewrites: dict
    steps: list
    deltas: dict = field(default_factory=dict)  # LoRA changes (a model with LoRAs is never kept)


@functools.cache
def code_identity() -> str:
    """A digest of frame's version, Python's and numpy's, and every source file of ``frame.engine``:
    the plan is what that code makes of a graph."""
    digest = hashlib.sha256(f"{__version__}\0{sys.version}\0{np.__version__}\0".encode())
    for path in sorted(ENGINE_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(ENGINE_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def file_identity(path: str) -> list[int]:
    """What changes when ``path`` is replaced or rewritten: size, mtime, inode and ctime (ns)."""
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns]


def transform_name(transform: Any) -> str | None:
    """A structure transform's stable name (a module function, or a ``functools.partial`` of one)."""
    if transform is None:
        return ""
    func = getattr(transform, "func", transform)
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", "")
    return None if module is None or "<" in name else f"{module}.{name}"


class PlanPickler(pickle.Pickler):
    """Registered kernels and their specs by name, the model's attention settings by reference: bound
    again on read. A fused op's spec is pickled whole: its kernel is a partial of module functions."""

    def __init__(self, file: io.BytesIO, attention: Any) -> None:
        super().__init__(file, protocol=5)
        self.attention = attention
        specs = registered_specs()
        self.specs = {id(spec): ("spec", spec.domain, spec.op_type, spec.since) for spec in specs}
        self.kernels = {id(spec.fn): ("kernel", spec.domain, spec.op_type, spec.since) for spec in specs}
        self.alive = specs  # the ids above stay theirs while this pickler lives

    def persistent_id(self, obj: Any) -> Any:
        if obj is self.attention:
            return ("attention",)
        return self.specs.get(id(obj)) or self.kernels.get(id(obj))


_NUMPY_NAMES = {("numpy", "dtype"), ("numpy", "ndarray"), ("numpy._core.numeric", "_frombuffer"),
                ("numpy.core.numeric", "_frombuffer"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
                ("numpy.core.multiarray", "scalar")}
_BUILTINS = {"set", "frozenset", "slice", "complex", "bytearray", "range"}


class PlanUnpickler(pickle.Unpickler):
    """Builds only the engine's own classes, numpy arrays and dtypes, and a few builtins."""

    def __init__(self, file: io.BytesIO, attention: Any) -> None:
        super().__init__(file)
        self.attention = attention

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _NUMPY_NAMES or (module == "numpy.dtypes" and name.endswith("DType")):
            return super().find_class(module, name)
        if module == "builtins" and name in _BUILTINS or (module, name) == ("collections", "Counter"):
            return super().find_class(module, name)
        if (module, name) == ("functools", "partial"):
            return functools.partial
        if module.startswith("frame.engine."):  # the engine's classes, kernels and fused ops' functions
            found = super().find_class(module, name)
            if isinstance(found, type) or callable(found) and getattr(found, "__module__", "") == module:
                return found
        raise pickle.UnpicklingError(f"a model plan may not contain {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if pid == ("attention",):
            return self.attention
        if isinstance(pid, tuple) and len(pid) == 4 and pid[0] in ("spec", "kernel"):
            spec = resolve(pid[2], pid[3], pid[1])
            if spec.since != pid[3]:
                raise pickle.UnpicklingError(f"kernel {pid[2]} since opset {pid[3]} is gone")
            return spec if pid[0] == "spec" else spec.fn
        raise pickle.UnpicklingError(f"unknown reference {pid!r}")


class PlanCache:
    """The planned models in ``folder`` (``<state_dir>/model-plans``), capped at ``cap_bytes``."""

    def __init__(self, folder: str | os.PathLike, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.folder = Path(folder)
        self.cap_bytes = cap_bytes

    @staticmethod
    def key(source: str, transform: Any, attention: Any) -> dict | None:
        """What a plan depends on besides the files' contents; None when it cannot be named."""
        name = transform_name(transform)
        if name is None:
            return None
        # the source as given (the plan's weight locations are written as it was), and where a relative
        # one was given from
        return {"source": source, "cwd": "" if os.path.isabs(source) else os.getcwd(), "transform": name,
                "slices": attention.slices, "budget": attention.budget_bytes, "code": code_identity()}

    def path(self, key: dict) -> Path:
        return self.folder / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + SUFFIX)

    def read(self, key: dict, attention: Any) -> Planned | None:
        """The kept plan for ``key``, or None (none kept, or a damaged or stale one: logged and
        removed, so the caller plans again and keeps the new one)."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read model plan %s: %s", path, exc)
            return None
        try:
            planned = _decode(raw, key, attention)
        except Exception as exc:  # noqa: BLE001 - anything wrong with the entry: plan again, never trust it
            log.warning("model plan %s is unusable (%s): planning %s again", path.name, exc, key["source"])
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # the eviction order: last use
        except OSError:
            pass
        return planned

    def store(self, key: dict, planned: Planned, attention: Any) -> None:
        """Keep ``planned`` for ``key`` (atomically), then evict above the cap. A plan that cannot be
        written (a full card, an object the pickler refuses) is logged, not an error."""
        try:
            data = _encode(key, planned, attention)
            make_dirs(self.folder)
            write_bytes_atomic(self.path(key), data)
            self.evict(keep=self.path(key).name)
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
            log.warning("could not keep the plan of %s in %s: %s", key["source"], self.folder, exc)

    def evict(self, keep: str = "") -> int:
        """Remove the least recently used plans until the folder is within the cap (``keep`` last)."""
        entries = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(SUFFIX) and entry.is_file():
                stat = entry.stat()
                entries.append((entry.name == keep, stat.st_mtime_ns, entry.name, stat.st_size))
        total, removed = sum(size for *_, size in entries), 0
        for _kept, _mtime, name, size in sorted(entries):
            if total <= self.cap_bytes:
                break
            (self.folder / name).unlink(missing_ok=True)
            total, removed = total - size, removed + 1
        return removed


def _files_of(key: dict, planned: Planned) -> dict[str, list[int]]:
    locations = {os.path.abspath(key["source"])} | {os.path.abspath(ref.location) for ref in planned.weights.values()
                                   if ref.value is None and ref.location is not None}
    return {path: file_identity(path) for path in sorted(locations)}


def _encode(key: dict, planned: Planned, attention: Any) -> bytes:
    if planned.deltas:
        raise TypeError("a plan with LoRA changes is not kept")
    buffer = io.BytesIO()
    PlanPickler(buffer, attention).dump(planned)
    header = json.dumps({"key": key, "files": _files_of(key, planned)}, sort_keys=True).encode()
    body = struct.pack("<I", len(header)) + header + buffer.getvalue()
    return MAGIC + hashlib.sha256(body).digest() + body


def _decode(raw: bytes, key: dict, attention: Any) -> Planned:
    if not raw.startswith(MAGIC):
        raise ValueError("not a model plan file")
    digest, body = raw[len(MAGIC):len(MAGIC) + DIGEST_BYTES], memoryview(raw)[len(MAGIC) + DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch")
    (length,) = struct.unpack("<I", body[:4])
    header = json.loads(bytes(body[4:4 + length]).decode())
    if header.get("key") != json.loads(json.dumps(key)):
        raise ValueError("the plan belongs to another model or settings")
    for path, identity in header.get("files", {}).items():
        try:
            current = file_identity(path)
        except OSError:
            current = None
        if current != identity:
            raise ValueError(f"{path} changed since it was planned")
    planned = PlanUnpickler(io.BytesIO(body[4 + length:]), attention).load()
    if not isinstance(planned, Planned):
        raise ValueError("the file holds no plan")
    return planned

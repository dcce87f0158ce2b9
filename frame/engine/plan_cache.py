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
    body = header length | header (JSON) | tree length | tree (JSON) | array bytes
    (lengths: 4 bytes, little endian)

The header holds the key and the identity (path, size, mtime, inode, ctime) of the model file and of
every file its weights are read from; frame's code identity is a digest of the engine's own source
files, so an upgrade (or any change to a kernel or a rewrite) plans afresh. An entry whose digest,
key or file identities do not match is never used: it is logged, removed and planned again.

The file is hostile input: whoever can write the folder can write a valid digest too. So it holds
data only (``frame.engine.plan_format``: no pickle, nothing in it can name a class or a function;
frame's own records are rebuilt field by field, kernels are named by their registered op and bound
from the registry, sizes are checked before anything is allocated), every weight it points at must be
one of the header's identity-checked files inside the model's folder, and anything else is refused
with a line naming the file and why, then planned again. Each file is written atomically
(``frame.atomicfile``); the folder is capped (``DEFAULT_CAP_BYTES``), least recently used first.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from frame import __version__
from frame.atomicfile import make_dirs, write_bytes_atomic
from frame.engine import plan_format
from frame.engine.planned import Planned
from frame.engine.subgraphs import Body

log = logging.getLogger(__name__)

SUFFIX = ".plan"
MAGIC = b"frame model plan 2\n"
OLD_MAGICS = (b"frame model plan 1\n",)  # pickles: refused, never read
DIGEST_BYTES = 32
# SDXL's components plan to about 6.5 MB (its UNet 4.7 MB): 32 MB keep a few models' plans.
DEFAULT_CAP_BYTES = 32 << 20
MAX_FILE_BYTES = 64 << 20  # a bigger file is refused before it is read
MAX_HEADER_BYTES = 1 << 20
ENGINE_ROOT = Path(__file__).resolve().parent


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
            raw = _read_capped(path)
            planned = _decode(raw, key, attention)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - anything wrong with the entry: plan again, never trust it
            log.warning("model plan %s is unusable (%s): planning %s again", path, exc, key["source"])
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # the eviction order: last use
        except OSError:
            pass
        return planned

    def store(self, key: dict, planned: Planned, attention: Any) -> None:
        """Keep ``planned`` for ``key`` (atomically), then evict above the cap. A plan that cannot be
        written (a full card, a value the format cannot hold) is logged, not an error."""
        try:
            data = _encode(key, planned, attention)
            if len(data) > MAX_FILE_BYTES:
                raise ValueError(f"the plan is {len(data)} bytes, more than a kept plan may be ({MAX_FILE_BYTES})")
            make_dirs(self.folder)
            write_bytes_atomic(self.path(key), data)
            self.evict(keep=self.path(key).name)
        except (OSError, TypeError, ValueError) as exc:
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


def _read_capped(path: Path) -> bytes:
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{size} bytes, more than a plan's {MAX_FILE_BYTES}")
        return file.read(MAX_FILE_BYTES + 1)


def _files_of(key: dict, planned: Planned) -> dict[str, list[int]]:
    locations = {os.path.abspath(key["source"])} | {os.path.abspath(ref.location) for ref in _refs(planned)
                                                    if ref.value is None and ref.location is not None}
    folder = os.path.dirname(os.path.abspath(key["source"]))
    for path in locations:
        if os.path.dirname(path) != folder and not path.startswith(folder + os.sep):
            raise ValueError(f"weights in {path}, outside the model's folder")
    return {path: file_identity(path) for path in sorted(locations)}


def _refs(planned: Planned) -> list:
    """Every weight the plan can read: the model's and those of the bodies inside it."""
    refs = list(planned.weights.values())
    pending = list(planned.steps)
    while pending:
        step = pending.pop()
        refs.extend(step.fetch)
        refs.extend(ref for ref in (step.gather_rows, step.weight_rows) if ref is not None)
        for value in step.node.attrs.values():
            for body in value if isinstance(value, list) else [value]:
                if isinstance(body, Body):
                    refs.extend(body.weights.values())
                    pending.extend(body.steps)
    return refs


def _encode(key: dict, planned: Planned, attention: Any) -> bytes:
    if planned.deltas:
        raise TypeError("a plan with LoRA changes is not kept")
    tree, arrays = plan_format.encode(planned, attention)
    header = json.dumps({"key": key, "files": _files_of(key, planned)}, sort_keys=True).encode()
    body = struct.pack("<I", len(header)) + header + struct.pack("<I", len(tree)) + tree + arrays
    return MAGIC + hashlib.sha256(body).digest() + body


def _decode(raw: bytes, key: dict, attention: Any) -> Planned:
    if raw.startswith(OLD_MAGICS):
        raise ValueError("an old pickled plan, which frame no longer reads")
    if not raw.startswith(MAGIC):
        raise ValueError("not a model plan file")
    digest, body = raw[len(MAGIC):len(MAGIC) + DIGEST_BYTES], memoryview(raw)[len(MAGIC) + DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch")
    header, rest = _section(body, MAX_HEADER_BYTES, "header")
    header = json.loads(bytes(header).decode())
    if type(header) is not dict or header.get("key") != json.loads(json.dumps(key)):
        raise ValueError("the plan belongs to another model or settings")
    files = header.get("files")
    if type(files) is not dict:
        raise ValueError("the header lists no files")
    for path, identity in files.items():
        try:
            current = file_identity(path)
        except OSError:
            current = None
        if current != identity:
            raise ValueError(f"{path} changed since it was planned")
    tree, arrays = _section(rest, len(rest), "tree")
    planned = plan_format.decode(bytes(tree), arrays, attention)
    if type(planned) is not Planned:
        raise ValueError("the file holds no plan")
    if planned.deltas:
        raise ValueError("the plan holds LoRA changes")
    _check_weights(planned, key, files)
    return planned


def _section(data: memoryview, cap: int, what: str) -> tuple[memoryview, memoryview]:
    if len(data) < 4:
        raise ValueError(f"the file ends before its {what}")
    (length,) = struct.unpack("<I", data[:4])
    if length > min(cap, len(data) - 4):
        raise ValueError(f"a {what} of {length} bytes in {len(data) - 4}")
    return data[4:4 + length], data[4 + length:]


def _check_weights(planned: Planned, key: dict, files: dict) -> None:
    """Every weight read from a file reads a byte range of one of the header's checked files (the model
    file or one beside it: ``_files_of``), of exactly the size its dtype and shape say."""
    folder = os.path.dirname(os.path.abspath(key["source"]))
    for ref in _refs(planned):
        if any(type(d) is not int or d < 0 for d in ref.shape) or ref.offset < 0 or ref.length < 0:
            raise ValueError(f"weight {ref.name!r} has shape {ref.shape}, offset {ref.offset}, length {ref.length}")
        if ref.value is not None:
            continue
        path = os.path.abspath(ref.location) if ref.location is not None else None
        if path not in files or not (os.path.dirname(path) == folder or path.startswith(folder + os.sep)):
            raise ValueError(f"weight {ref.name!r} is read from {ref.location}, not a file of the model")
        if ref.length != math.prod(ref.shape) * ref.dtype.itemsize or ref.offset + ref.length > files[path][0]:
            raise ValueError(f"weight {ref.name!r}: bytes {ref.offset}+{ref.length} do not fit its shape or file")

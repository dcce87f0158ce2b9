"""PyTorch files (``torch.save``'s zip format: ``.pt``, ``.bin``, ``.ckpt``) read without torch and
without running anything the file names.

A torch file is a zip: ``<archive>/data.pkl`` pickles the saved object, whose tensors refer by key
to raw little-endian storages ``<archive>/data/<key>``. The pickle is interpreted by
``frame.engine.io.pickle_vm`` with exactly these calls, all frame's own functions: ``torch._utils.
_rebuild_tensor_v2`` (and ``_rebuild_tensor``, ``_rebuild_parameter``), ``collections.OrderedDict``;
storage types are names in a table, never looked up. A tensor is a ``TorchTensor`` record: its
dtype, shape, stride and offset are checked against its storage's byte size when the pickle builds
it, before any byte is read, and its data is read only when ``read()`` is called, one tensor at a
time, so a 7 GB checkpoint streams (``TorchFile.tensors()``). Files saved by torch before 1.6 (not
a zip) are refused: converting them needs torch, which frame does not run.

Sizes are capped before they are allocated (``TorchLimits``): the pickle's unpacked size, the zip's
entry count, one tensor's elements and bytes (sized to the Pi worker's memory limit), the nesting
depth and the dict keys. Every failure is a ``FileFormatError`` naming the file and the field.
"""

from __future__ import annotations

import math
import re
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from frame.engine.errors import FileFormatError
from frame.engine.io.file_limits import MAX_TENSOR_BYTES
from frame.engine.io.pickle_vm import Global, PickleLimits, PickleVM, short
from frame.engine.io.source_file import open_source
from frame.engine.io.sources import ByteSource

# torch's storage class names → (dtype name as safetensors spells it, numpy dtype); bfloat16 is read
# as the top halves of float32s
STORAGES: dict[str, tuple[str, str]] = {
    "FloatStorage": ("F32", "<f4"), "HalfStorage": ("F16", "<f2"), "BFloat16Storage": ("BF16", "<u2"),
    "DoubleStorage": ("F64", "<f8"), "LongStorage": ("I64", "<i8"), "IntStorage": ("I32", "<i4"),
    "ShortStorage": ("I16", "<i2"), "CharStorage": ("I8", "i1"), "ByteStorage": ("U8", "u1"),
    "BoolStorage": ("BOOL", "?"),
}
MAX_DIMS = 16
_STORAGE_KEY = re.compile(r"[0-9A-Za-z_]{1,64}")


@dataclass(frozen=True)
class TorchLimits:
    """What a torch file may cost. The defaults fit one tensor in 60 % of the Pi worker's memory
    limit (an SDXL token table in float32 is 253 MB); an embedding reader passes smaller ones."""

    max_pickle_bytes: int = 16 << 20
    max_zip_entries: int = 100_000
    max_tensors: int = 100_000
    max_tensor_bytes: int = MAX_TENSOR_BYTES
    pickle: PickleLimits = field(default_factory=PickleLimits)


@dataclass(frozen=True)
class _Storage:
    entry: zipfile.ZipInfo
    key: str
    dtype: str
    numpy: str
    numel: int


@dataclass(frozen=True, eq=False)
class TorchTensor:
    """One tensor of a torch file, not read yet: ``read()`` reads exactly its bytes (bounds checked
    when it was built). ``dtype`` is spelled as safetensors does (``F32``, ``F16``, ``BF16``...)."""

    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    storage: _Storage
    file: TorchFile
    accepts_state: ClassVar[bool] = True  # a pickled BUILD (tensor attributes) is ignored

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * np.dtype(self.storage.numpy).itemsize

    @property
    def contiguous(self) -> bool:
        expected, step = [], 1
        for size in reversed(self.shape):
            expected.append(step)
            step *= size
        return all(n <= 1 or s == e for n, s, e in zip(self.shape, self.stride, reversed(expected)))

    def _span(self) -> int:
        """Elements from the first to the last one the tensor reaches (0 when it is empty)."""
        if self.numel == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride))

    def read(self) -> np.ndarray:
        """The tensor as a numpy array of its dtype (BF16 as float32), a copy that owns its memory."""
        item = np.dtype(self.storage.numpy).itemsize
        flat = np.frombuffer(self.file.read_bytes(self.storage, self.offset * item, self._span() * item),
                             dtype=self.storage.numpy)
        if self.contiguous:
            array = flat[:self.numel].reshape(self.shape)
        else:  # a view into a shared storage: the strides were checked to stay inside ``raw``
            array = np.lib.stride_tricks.as_strided(flat, self.shape, [s * item for s in self.stride]).copy()
        return _widen(self.dtype, array)

    def read_rows(self, first: int, count: int) -> np.ndarray:
        """Rows ``first`` to ``first + count`` of the first axis, reading only their bytes when the
        tensor is contiguous (a 253 MB token table is imported a block at a time)."""
        if not self.shape or not self.contiguous:
            return self.read()[first:first + count]
        first = max(0, min(first, self.shape[0]))
        count = max(0, min(count, self.shape[0] - first))
        row = math.prod(self.shape[1:])
        item = np.dtype(self.storage.numpy).itemsize
        raw = self.file.read_bytes(self.storage, (self.offset + first * row) * item, count * row * item)
        return _widen(self.dtype, np.frombuffer(raw, dtype=self.storage.numpy).reshape(count, *self.shape[1:]))


def _widen(dtype: str, array: np.ndarray) -> np.ndarray:
    if dtype == "BF16":  # bfloat16 is the top half of a float32
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TorchFile:
    """An open torch file: ``root`` is the saved object (dicts, lists, tuples, plain values, and
    ``TorchTensor`` for each tensor); ``tensors()`` lists the tensors by their key path. Use it as a
    context manager (the zip stays open for ``read()``)."""

    def __init__(self, path: str | Path, limits: TorchLimits = TorchLimits(), inert: bool = False,
                 source: ByteSource | None = None) -> None:
        self.path, self.limits, self.inert, self.source = Path(path), limits, inert, source
        self._where = source.location if source is not None else str(self.path)
        self._count = 0
        self._raw: Any = None
        self._zip_file: Any = None
        self._starts: dict[str, int] = {}
        _check_entry_count(self._open, self._where, limits.max_zip_entries)
        try:
            if source is None:
                self.archive = zipfile.ZipFile(self.path)
            else:
                self._zip_file = self._open()
                self.archive = zipfile.ZipFile(self._zip_file)
        except zipfile.BadZipFile:
            self._close_files()
            raise self._fail("not a torch zip file (files saved by torch before 1.6 are not read; "
                             "convert it to .safetensors)", "zip") from None
        except OSError as exc:
            self._close_files()
            raise self._fail(f"cannot be read ({exc.strerror or exc})", "file") from None
        except BaseException:
            self._close_files()
            raise
        try:
            self.root = self._load()
        except BaseException:
            self.close()
            raise

    def _open(self) -> Any:
        """A new binary file of the checkpoint: the local file, or the byte source (a URL) as one."""
        if self.source is not None:
            return open_source(self.source)
        return open(self.path, "rb")  # noqa: SIM115 - closed by close()

    def _fail(self, message: str, where: str) -> FileFormatError:
        return FileFormatError(f"{self._where}: {message}", path=self._where, field=where)

    def __enter__(self) -> TorchFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.archive.close()
        self._close_files()

    def _close_files(self) -> None:
        for file in (self._raw, self._zip_file):
            if file is not None:
                file.close()
        self._raw = self._zip_file = None
        if self.source is not None:
            self.source.close()

    def read_bytes(self, storage: _Storage, start: int, length: int) -> bytearray:
        """``length`` bytes of ``storage`` from byte ``start`` (inside it: checked when the tensor was
        built), into one buffer: a stored entry (what torch writes) straight from the file, a
        compressed one through zipfile, 1 MiB at a time."""
        out = bytearray(length)
        if not length:
            return out
        got = 0
        if storage.entry.compress_type == zipfile.ZIP_STORED:
            raw = self._stored(storage)
            raw.seek(self._data_start(storage) + start)
            view = memoryview(out)
            while got < length:  # a URL's file answers a large read in several pieces
                count = raw.readinto(view[got:])
                if not count:
                    break
                got += count
        else:
            with self.archive.open(storage.entry) as stream:
                stream.seek(start)
                view = memoryview(out)
                while got < length:
                    chunk = stream.read(min(1 << 20, length - got))
                    if not chunk:
                        break
                    view[got:got + len(chunk)] = chunk
                    got += len(chunk)
        if got != length:
            raise self._fail(f"storage {storage.key} is truncated", f"data/{storage.key}")
        return out

    def _stored(self, storage: _Storage) -> Any:
        if self._raw is None:
            self._raw = self._open()  # kept open with the zip, closed by close()
        return self._raw

    def _data_start(self, storage: _Storage) -> int:
        """Where a stored entry's bytes begin: after its local header, whose name and extra field
        lengths may differ from the central directory's."""
        entry = storage.entry
        if entry.filename not in self._starts:
            raw = self._stored(storage)
            raw.seek(entry.header_offset)
            local = raw.read(30)
            if len(local) != 30 or local[:4] != b"PK\x03\x04":
                raise self._fail(f"storage {storage.key} has no local zip header", f"data/{storage.key}")
            name, extra = struct.unpack("<HH", local[26:30])
            self._starts[entry.filename] = entry.header_offset + 30 + name + extra
        return self._starts[entry.filename]

    def _load(self) -> Any:
        pickles = [n for n in self.archive.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise self._fail("not a torch file (no single data.pkl inside)", "data.pkl")
        self.prefix = pickles[0][: -len("data.pkl")]
        order = self.prefix + "byteorder"
        if order in self.archive.NameToInfo and self._small(order) != b"little":
            raise self._fail("holds big-endian tensors, which frame does not read", "byteorder")
        data = self._small(pickles[0], self.limits.max_pickle_bytes)
        calls = {("torch._utils", "_rebuild_tensor_v2"): self._rebuild,
                 ("torch._utils", "_rebuild_tensor"): self._rebuild,
                 ("torch._utils", "_rebuild_parameter"): _parameter,
                 ("torch._utils", "_rebuild_parameter_with_state"): _parameter,
                 ("collections", "OrderedDict"): _ordered_dict}
        return PickleVM(data, self._where, calls, self._storage, self.limits.pickle, self.inert).load()

    def _small(self, name: str, limit: int = 64) -> bytes:
        info = self.archive.getinfo(name)
        if info.file_size > limit:
            raise self._fail(f"{name} unpacks to {info.file_size} bytes (at most {limit})", name)
        try:
            with self.archive.open(info) as stream:
                return stream.read(limit + 1)[:limit]
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise self._fail(f"{name} cannot be unpacked ({short(str(exc))})", name) from None

    def _storage(self, pid: Any) -> _Storage:
        """``('storage', StorageType, key, location, numel)``: the storage's entry, checked to hold
        exactly ``numel`` elements of its type."""
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self._fail(f"an unexpected persistent id {short(pid)}", "data.pkl")
        _, kind, key, _location, numel = pid
        name = kind.name if isinstance(kind, Global) and kind.module == "torch" else None
        if name not in STORAGES:
            raise self._fail(f"a storage of type {short(kind)}, which frame does not read", "data.pkl")
        if not isinstance(key, str) or not _STORAGE_KEY.fullmatch(key):
            raise self._fail(f"a storage key {short(key)}", "data.pkl")
        dtype, numpy = STORAGES[name]
        entry = self.archive.NameToInfo.get(f"{self.prefix}data/{key}")
        if entry is None:
            raise self._fail(f"storage {key} is missing from the archive", f"data/{key}")
        if not _int(numel) or numel < 0 or numel * np.dtype(numpy).itemsize != entry.file_size:
            raise self._fail(f"storage {key} says {short(numel)} {dtype} elements but holds {entry.file_size} "
                             "bytes", f"data/{key}")
        return _Storage(entry, key, dtype, numpy, numel)

    def _rebuild(self, storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> TorchTensor:
        """``_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])``,
        checked against the storage before anything is read."""
        if not isinstance(storage, _Storage):
            raise self._fail(f"a tensor over {short(storage)}, not a storage", "data.pkl")
        field_ = f"data/{storage.key}"
        if not (isinstance(size, (tuple, list)) and isinstance(stride, (tuple, list)) and len(size) == len(stride)
                and len(size) <= MAX_DIMS and all(map(_int, size)) and all(map(_int, stride))):
            raise self._fail(f"a tensor's shape {short(size)} and stride {short(stride)} do not match", field_)
        if not _int(offset) or offset < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride):
            raise self._fail(f"a tensor has a negative offset, size or stride (offset {short(offset)}, shape "
                             f"{short(size)}, stride {short(stride)})", field_)
        self._count += 1
        if self._count > self.limits.max_tensors:
            raise self._fail(f"more than {self.limits.max_tensors} tensors", "data.pkl")
        item = np.dtype(storage.numpy).itemsize
        cap = self.limits.max_tensor_bytes
        numel = 1
        for n in size:  # stop multiplying as soon as the product passes the cap (no giant integers)
            numel *= n
            if numel * item > cap:
                raise self._fail(f"a tensor of shape {short(tuple(size))} would take more than {cap >> 20} MiB "
                                 f"(at most {cap >> 20} MiB)", field_)
        tensor = TorchTensor(storage.dtype, tuple(size), tuple(stride), offset, storage, self)
        span = tensor._span()
        if numel and offset + span > storage.numel:
            raise self._fail(f"a tensor (offset {offset}, shape {tuple(size)}, stride {tuple(stride)}) reaches past "
                             f"its storage of {storage.numel} elements", field_)
        if span * item > cap:
            raise self._fail(f"a tensor spans {span * item >> 20} MiB of its storage (at most {cap >> 20} MiB)",
                             field_)
        return tensor

    def tensors(self) -> Iterator[tuple[str, TorchTensor]]:
        """Every tensor with its key path (``state_dict.model.x.weight``; list items by index), in
        the order they were saved, each once (the first path that reaches it)."""
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("", self.root)]
        while stack:
            prefix, value = stack.pop()
            if isinstance(value, TorchTensor):
                if id(value) not in seen:
                    seen.add(id(value))
                    yield prefix, value
                continue
            if isinstance(value, dict):
                items = [(str(k), v) for k, v in value.items()]
            elif isinstance(value, (list, tuple)):
                items = [(str(i), v) for i, v in enumerate(value)]
            else:
                continue
            if id(value) in seen:
                continue
            seen.add(id(value))
            stack.extend((f"{prefix}.{k}" if prefix else k, v) for k, v in reversed(items))


def _parameter(tensor: Any, *_rest: Any) -> Any:
    """``torch._utils._rebuild_parameter(data, requires_grad, hooks[, state])``: the tensor itself."""
    return tensor


def _ordered_dict(*items: Any) -> OrderedDict:
    """``collections.OrderedDict()``: pickles fill it afterwards with SETITEMS, never with arguments."""
    if items:
        raise TypeError("OrderedDict with arguments")
    return OrderedDict()


def _check_entry_count(opener: Any, where: str, limit: int) -> None:
    """Refuse a zip whose directory lists more than ``limit`` entries, before ``zipfile`` builds an
    object for each (its end-of-directory record says how many; zip64's when the file is large)."""
    try:
        with opener() as f:
            size = f.seek(0, 2)
            start = max(0, size - (22 + 65535 + 20))
            f.seek(start)
            tail = f.read()
            at = tail.rfind(b"PK\x05\x06")
            if at < 0 or at + 22 > len(tail):
                return  # not a zip: zipfile says so
            count = struct.unpack("<H", tail[at + 10:at + 12])[0]
            if count == 0xFFFF and at >= 20 and tail[at - 20:at - 16] == b"PK\x06\x07":
                (where,) = struct.unpack("<Q", tail[at - 12:at - 4])
                f.seek(where)
                record = f.read(56)
                if len(record) == 56 and record[:4] == b"PK\x06\x06":
                    (count,) = struct.unpack("<Q", record[32:40])
    except OSError as exc:
        raise FileFormatError(f"{where}: cannot be read ({exc.strerror or exc})", path=where, field="file") from None
    if count > limit:
        raise FileFormatError(f"{where}: the zip lists {count} entries (at most {limit})", path=where, field="zip")


def open_torch(path: str | Path, limits: TorchLimits = TorchLimits(), *, inert: bool = False,
               source: ByteSource | None = None) -> TorchFile:
    """The torch file at ``path`` (or read through ``source``, e.g. a URL's Range requests, which
    the file then owns and closes), its tensors not read yet. ``inert``: a call of a global frame
    does not read (a training tool's callback object) becomes an ``Opaque`` value instead of an
    error; nothing is ever called either way."""
    return TorchFile(path, limits, inert, source)

"""Optional local cache of weights fetched over HTTP (``model.cache``): written once, read every night.

A frame whose SD card has room can keep the weights it streamed on its first night and read them from
the card afterwards. One file per tensor, in a folder per model file and version::

    <cache dir>/<hash of the URL>/<hash of the file's validator>/<offset>-<length>-<crc32>.w

* **validated by ETag/size**: the version folder is named after the server's validator for the file
  (its ETag, else its size and Last-Modified, as ``HttpSource.validator``), learned from one small
  Range request per file per night. A changed model lands in a new folder; the old version's folder is
  removed when the first weight of the new one is stored.
* **written once**: an entry is written when its tensor is first fetched and never again (unless it
  proved corrupt); later nights only read. When the next entry would pass ``max_bytes`` nothing more
  is written and the remaining weights keep streaming, so the same ones are cached every night.
* **corruption is detected**: an entry must have exactly the tensor's length, and its CRC-32 (in the
  name) is checked on its first read in each process; a bad entry is deleted and the weight fetched
  again. Entries are written with ``write_bytes_atomic`` (temporary file, fsync, rename), so a power cut
  leaves either no entry or a whole one; stale temporaries are removed when a version folder is opened.
* a cache that cannot be written (card full, read-only) is logged once and then only read.
* **usable while the server is off**: the validator last learned for each file is kept beside its
  versions (``validator.txt``), and with it the file's structure (``frame.engine.io.cached_model``), so
  a model whose weights are all cached paints with the NAS switched off (see ``cached_model``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from frame.atomicfile import make_dirs, remove_tree, replace_durably, write_bytes_atomic
from frame.engine.io.fetch_stats import FetchStats
from frame.redact import redact_url

log = logging.getLogger(__name__)

SUFFIX = ".w"
VALIDATOR_FILE = "validator.txt"
VALIDATOR_MAX_BYTES = 4096
CHUNK_BYTES = 8 << 20  # read and checksum a big entry this much at a time
Read = TypeVar("Read")  # what one read of a cached entry gives (its bytes, or the parts asked for)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))


class _Version:
    """The entries of one version of one remote file: ``(offset, length) -> (path, crc)``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.entries: dict[tuple[int, int], tuple[Path, int]] = {}
        if folder.is_dir():
            for path in folder.iterdir():
                if path.name.startswith("."):  # a temporary left by a killed writer
                    path.unlink(missing_ok=True)
                    continue
                try:
                    offset, length, crc = path.name.removesuffix(SUFFIX).split("-")
                    self.entries[(int(offset), int(length))] = (path, int(crc, 16))
                except ValueError:
                    continue


class WeightCache:
    """Lookups and stores keyed by (URL, validator, offset, length); see the module docstring."""

    def __init__(self, folder: str | os.PathLike, max_bytes: int, stats: FetchStats | None = None) -> None:
        self.folder = Path(folder)
        self.max_bytes = int(max_bytes)
        self.stats = stats
        self._lock = threading.Lock()
        self._versions: dict[tuple[str, str], _Version] = {}
        self._verified: set[Path] = set()
        self._used: int | None = None
        self._writable = True
        self._full_logged = False

    def _version(self, url: str, validator: str) -> _Version:
        key = (_without_userinfo(url), validator)
        if key not in self._versions:
            self._versions[key] = _Version(self.folder / _key(key[0]) / _key(validator))
        return self._versions[key]

    def remembered_validator(self, url: str) -> str | None:
        """The validator this cache last learned for ``url`` from its server (None: never)."""
        path = self.folder / _key(_without_userinfo(url)) / VALIDATOR_FILE
        try:
            with open(path, "rb") as file:
                raw = file.read(VALIDATOR_MAX_BYTES + 1)  # an ETag and a date: a longer file is not ours
            return (raw.decode("utf-8").strip() or None) if len(raw) <= VALIDATOR_MAX_BYTES else None
        except (OSError, UnicodeDecodeError):
            return None

    def remember_validator(self, url: str, validator: str) -> None:
        """Keep ``validator`` as the version of ``url`` to read while its server cannot be reached."""
        if self.remembered_validator(url) == validator:
            return
        try:
            with self._lock:
                self._make_version_folder(url, self._version(url, validator))
            write_bytes_atomic(self.folder / _key(_without_userinfo(url)) / VALIDATOR_FILE, validator.encode())
        except OSError as exc:
            log.warning("weight cache %s: cannot note the version of %s (%s)", self.folder, redact_url(url),
                        exc.strerror or exc)

    def version_folder(self, url: str, validator: str, create: bool = False) -> Path:
        """The folder of this version of ``url``; ``create``: make it (dropping older versions) if
        need be, which raises OSError when the cache cannot be written."""
        with self._lock:
            version = self._version(url, validator)
            if create:
                self._make_version_folder(url, version)
            return version.folder

    def _entry(self, url: str, validator: str, offset: int, length: int) -> tuple[_Version, tuple[Path, int] | None]:
        """This version of ``url`` and its cached ``(path, crc)`` for ``offset..offset+length``, if any."""
        with self._lock:
            version = self._version(url, validator)
            return version, version.entries.get((offset, length))

    def read_parts(self, url: str, validator: str, offset: int, length: int,
                   spans: list[tuple[int, int]]) -> list[np.ndarray] | None:
        """``(start, size)`` spans (file offsets) of the cached bytes ``offset..offset+length`` (a token table's
        rows), without loading the rest; None when not cached or found corrupt (then removed). The
        checksum is checked once per process, a chunk at a time."""
        def read(f: BinaryIO, path: Path, crc: int) -> list[np.ndarray]:
            if path not in self._verified:
                running = 0
                while chunk := f.read(CHUNK_BYTES):
                    running = zlib.crc32(chunk, running)
                if running != crc:
                    raise ValueError("checksum mismatch")
                self._verified.add(path)
            parts = []
            for start, size in spans:
                part = np.empty(size, dtype=np.uint8)
                if os.preadv(f.fileno(), [memoryview(part)], start - offset) != size:
                    raise ValueError("short read")
                parts.append(part)
            return parts

        return self._read_entry(url, validator, offset, length, read, sum(size for _, size in spans))

    def store_chunks(self, url: str, validator: str, offset: int, length: int, read) -> bool:
        """Keep the bytes ``offset..offset+length``, fetched ``CHUNK_BYTES`` at a time with
        ``read(offset, size)`` and written as they come (a 152 MB token table is never held whole);
        False when the cap or the card does not allow it."""
        with self._lock:
            version = self._version(url, validator)
            if not self._writable or (offset, length) in version.entries:
                return (offset, length) in version.entries
            try:
                self._make_version_folder(url, version)
                used = self.used_bytes()
            except OSError:
                return False
            if used + length > self.max_bytes:
                self._log_full()
                return False
        temporary = version.folder / f".{offset}-{length}.part"
        try:
            crc = 0
            with open(temporary, "wb") as f:
                for start in range(offset, offset + length, CHUNK_BYTES):
                    chunk = memoryview(read(start, min(CHUNK_BYTES, offset + length - start)))
                    crc = zlib.crc32(chunk, crc)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            path = version.folder / f"{offset}-{length}-{crc:08x}{SUFFIX}"
            replace_durably(temporary, path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            log.warning("weight cache %s cannot be written (%s): weights are streamed instead",
                        self.folder, exc.strerror or exc)
            self._writable = False
            return False
        with self._lock:
            version.entries[(offset, length)] = (path, crc)
            self._verified.add(path)
            if self._used is not None:
                self._used += length
        return True

    def used_bytes(self) -> int:
        if self._used is None:
            total = 0
            for root, _, files in os.walk(self.folder):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(SUFFIX))
            self._used = total
        return self._used

    def load(self, url: str, validator: str, offset: int, length: int) -> np.ndarray | None:
        """The cached bytes, or None when missing or found corrupt (then removed)."""
        def read(f: BinaryIO, path: Path, crc: int) -> np.ndarray:
            buf = np.empty(length, dtype=np.uint8)
            if f.readinto(memoryview(buf)) != length:
                raise ValueError("short read")
            if path not in self._verified:
                if zlib.crc32(memoryview(buf)) != crc:
                    raise ValueError("checksum mismatch")
                self._verified.add(path)
            return buf

        return self._read_entry(url, validator, offset, length, read, length)

    def _read_entry(self, url: str, validator: str, offset: int, length: int,
                    read: Callable[[BinaryIO, Path, int], Read], counted: int) -> Read | None:
        """``read(file, path, crc)`` of the cached bytes ``offset..offset+length`` (``counted`` of them in
        the fetch stats); None when not cached, or when the read fails (OSError) or finds them corrupt
        (ValueError): the entry is then removed, to be fetched again."""
        version, found = self._entry(url, validator, offset, length)
        if found is None:
            return None
        path, crc = found
        started = time.perf_counter()
        try:
            with _open_sized(path, length) as f:
                result = read(f, path, crc)
        except (OSError, ValueError) as exc:
            self._discard(version, (offset, length), path, str(exc))
            return None
        if self.stats is not None:
            self.stats.add("cache", counted, time.perf_counter() - started)
        return result

    def _discard(self, version: _Version, key: tuple[int, int], path: Path, why: str) -> None:
        log.warning("weight cache entry %s %s: fetching it again", path, why)
        with self._lock:
            version.entries.pop(key, None)
            if self._used is not None and path.exists():
                self._used -= path.stat().st_size
        path.unlink(missing_ok=True)

    def store(self, url: str, validator: str, offset: int, length: int, data: np.ndarray) -> None:
        """Keep ``data`` unless the cap would be passed or the cache cannot be written (writes are
        serialised: in practice only the prefetch thread stores)."""
        with self._lock:
            version = self._version(url, validator)
            if not self._writable or (offset, length) in version.entries:
                return
            try:
                self._make_version_folder(url, version)
                used = self.used_bytes()
                if used + length > self.max_bytes:
                    self._log_full()
                    return
                crc = zlib.crc32(memoryview(data))
                path = version.folder / f"{offset}-{length}-{crc:08x}{SUFFIX}"
                write_bytes_atomic(path, memoryview(np.ascontiguousarray(data)))
            except OSError as exc:
                self._writable = False
                log.warning("weight cache %s cannot be written (%s): weights are streamed instead",
                            self.folder, exc.strerror or exc)
                return
            version.entries[(offset, length)] = (path, crc)
            self._verified.add(path)
            self._used = used + length

    def _log_full(self) -> None:
        if not self._full_logged:
            log.info("weight cache %s holds %.0f MiB of its %.0f MiB: further weights are streamed",
                     self.folder, self.used_bytes() / 2**20, self.max_bytes / 2**20)
            self._full_logged = True

    def _make_version_folder(self, url: str, version: _Version) -> None:
        """Create the version's folder; remove the file's other (older) versions first."""
        if version.folder.is_dir():
            return
        file_folder = version.folder.parent
        if file_folder.is_dir():
            for old in file_folder.iterdir():
                if old.is_dir() and old != version.folder:
                    log.info("weight cache: %s changed on the server; dropping the old copy", redact_url(url))
                    remove_tree(old)
                    self._used = None
        make_dirs(version.folder)
        label = file_folder / "source.txt"
        if not label.exists():
            write_bytes_atomic(label, (redact_url(url) + "\n").encode())


def _open_sized(path: Path, length: int) -> BinaryIO:
    """``path`` opened for reading, refused (ValueError) unless it holds exactly ``length`` bytes."""
    f = open(path, "rb")  # noqa: SIM115 - the caller's with-block closes it
    size = os.fstat(f.fileno()).st_size
    if size != length:
        f.close()
        raise ValueError(f"has {size} bytes, expected {length}")
    return f

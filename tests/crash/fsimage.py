"""The state folder as inodes, and what a power cut or a kill would leave of it on the card.

Each file inode holds its current bytes (the page cache) and its bytes at the last ``fsync``/``fdatasync``
(what the card holds); each directory holds its current entries and its entries at its last fsync.
``fsmodel.Model`` replays recorded calls onto these inodes. The crash models (``disk_image(roots, model)``):

* ``kill``  — the process dies, the page cache survives: every call so far took effect.
* ``lost``  — power cut, strictest POSIX reading: a file keeps only the bytes of its last fsync (a file
  never synced is empty), a directory keeps only the entries of its last fsync (so a file or folder whose
  parent was never synced after it was created, renamed or removed is back as it was).
* ``meta``  — power cut on a file system that journals names but not data (ext4 ``data=writeback``,
  the 2009 zero-length-file case): every create/rename/unlink/truncate took effect, but every byte
  written since the file's last fsync reads back as zeros.
* ``torn``  — (``torn_image``) the cut comes in the middle of one write: its first half (to a 512-byte
  sector) reached the card, the rest did not; everything before it as in ``kill``.

SQLite's ``-shm`` file is never part of an image: it is a memory-mapped index (its writes are not
system calls) that SQLite rebuilds from the WAL when the first connection opens after a crash.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

SECTOR = 512
_ids = itertools.count(1)


@dataclass(eq=False)
class Inode:
    is_dir: bool
    data: bytearray = field(default_factory=bytearray)
    synced: bytes = b""
    unsynced: list[tuple] = field(default_factory=list)  # ("w", offset, length) / ("t", size) since the last sync
    entries: dict[str, Inode] = field(default_factory=dict)
    synced_entries: dict[str, Inode] = field(default_factory=dict)
    id: int = field(default_factory=lambda: next(_ids))
    version: int = 0
    synced_version: int = 0

    def sync(self) -> None:
        if self.is_dir:
            self.synced_entries = dict(self.entries)
        else:
            self.synced, self.unsynced = bytes(self.data), []
        self.synced_version = self.version

    def write(self, offset: int, data: bytes) -> None:
        if offset > len(self.data):
            self.data.extend(bytes(offset - len(self.data)))
        self.data[offset:offset + len(data)] = data
        self.unsynced.append(("w", offset, len(data)))
        self.version += 1

    def truncate(self, size: int) -> None:
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data.extend(bytes(size - len(self.data)))
        self.unsynced.append(("t", size))
        self.version += 1

    def meta_bytes(self) -> bytes:
        """The ``meta`` model's view: names and sizes as now, unsynced bytes zeroed."""
        if not self.unsynced:
            return self.synced
        data = bytearray(self.synced)
        for entry in self.unsynced:
            if entry[0] == "t":
                del data[entry[1]:]
                data.extend(bytes(max(0, entry[1] - len(data))))
            else:
                _, offset, length = entry
                end = offset + length
                data.extend(bytes(max(0, end - len(data))))
                data[offset:end] = bytes(length)
        return bytes(data)


@dataclass
class Image:
    """A disk state: file bytes and directories by path (absolute), and a key for de-duplication."""

    files: dict[str, bytes]
    dirs: set[str]
    key: tuple


def disk_image(roots: dict[str, Inode], model: str) -> Image:
    """What the card holds under ``roots`` (path -> root inode) if the crash ``model`` happened now."""
    files, dirs, key = {}, set(), []
    synced_names = model == "lost"
    for root, node in roots.items():
        stack = [(root, node)]
        while stack:
            path, current = stack.pop()
            dirs.add(path)
            entries = current.synced_entries if synced_names else current.entries
            for name, child in entries.items():
                child_path = os.path.join(path, name)
                if name.endswith("-shm"):
                    continue
                if child.is_dir:
                    stack.append((child_path, child))
                    key.append((child_path, child.id))
                elif model == "kill":
                    files[child_path] = bytes(child.data)
                    key.append((child_path, child.id, child.version))
                elif model == "lost":
                    files[child_path] = child.synced
                    key.append((child_path, child.id, child.synced_version))
                else:
                    files[child_path] = child.meta_bytes()
                    key.append((child_path, child.id, child.synced_version, child.version))
    return Image(files, dirs, (model, tuple(sorted(key))))


def torn_image(roots: dict[str, Inode], node: Inode, offset: int, data: bytes) -> Image:
    """The ``kill`` image with ``data`` half-written at ``offset`` of ``node`` (call before applying it)."""
    saved, version = bytes(node.data), node.version
    half = (len(data) // 2) // SECTOR * SECTOR
    if offset + len(data) > len(node.data):
        node.data.extend(bytes(offset + len(data) - len(node.data)))
    node.data[offset:offset + half] = data[:half]
    node.version = -next(_ids)
    try:
        image = disk_image(roots, "kill")
    finally:
        node.data[:] = saved
        node.version = version
    return Image(image.files, image.dirs, ("torn",) + image.key[1:])


def walk(node: Inode) -> Iterator[Inode]:
    """``node`` and every inode under it, as the names are now."""
    yield node
    if node.is_dir:
        for child in node.entries.values():
            yield from walk(child)

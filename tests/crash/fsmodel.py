"""A file-system model that replays recorded calls and shows what a power cut would leave on disk.

Inodes, not paths: a rename moves an inode, a descriptor keeps writing to the inode it opened
(``fsimage.Inode``). Everything present when recording starts counts as synced. The images of the
crash models (``kill``, ``lost``, ``meta``, ``torn``) are described and built in ``fsimage``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tests.crash.fsimage import Image, Inode, disk_image, torn_image, walk
from tests.crash.strace import Call, Fd, TraceError


@dataclass
class Effect:
    """What one call did, in path terms, for the ledger of atomic writes (``checks.FileLedger``)."""

    index: int
    pid: int
    kind: str  # create / write / rename / unlink / rmdir / mkdir / sync
    path: str
    target: str | None = None
    content: bytes | None = None
    is_dir: bool = False


class Model:
    """Replays calls under ``roots`` (absolute folders that exist when recording starts)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = {str(Path(r)): self._load(Path(r)) for r in roots}
        self.fds: dict[tuple[int, int], Inode] = {}
        self.pos: dict[tuple[int, int], int] = {}
        self.append: set[tuple[int, int]] = set()
        self.ignored_deleted = 0
        self.on_write = None  # called with (inode, offset, data) before each write (torn images)

    # loading and resolving -----------------------------------------------------------------------

    def _load(self, path: Path) -> Inode:
        if path.is_dir() and not path.is_symlink():
            node = Inode(True)
            for child in sorted(path.iterdir()):
                node.entries[child.name] = self._load(child)
        else:
            node = Inode(False, bytearray(path.read_bytes()))
        node.sync()
        return node

    def _root_of(self, path: str) -> tuple[str, list[str]] | None:
        for root in self.roots:
            if path == root or path.startswith(root + os.sep):
                rest = path[len(root):].strip(os.sep)
                return root, rest.split(os.sep) if rest else []
        return None

    def lookup(self, path: str) -> Inode | None:
        found = self._root_of(path)
        if found is None:
            return None
        node = self.roots[found[0]]
        for part in found[1]:
            if not node.is_dir or part not in node.entries:
                return None
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[Inode, str] | None:
        parent = self.lookup(os.path.dirname(path))
        if parent is None or not parent.is_dir:
            return None
        return parent, os.path.basename(path)

    def _node(self, pid: int, fd: Fd) -> Inode | None:
        if fd.path is None:
            return None
        if fd.path.endswith(" (deleted)"):
            node = self.fds.get((pid, fd.num))
            if node is None and self._root_of(fd.path[: -len(" (deleted)")]):
                self.ignored_deleted += 1
            return node
        return self.lookup(fd.path)

    @staticmethod
    def _abs(base: object, name: str) -> str:
        if os.path.isabs(name):
            return os.path.normpath(name)
        if isinstance(base, Fd) and base.path:
            return os.path.normpath(os.path.join(base.path, name))
        raise TraceError(f"relative path {name!r} without a known directory")

    # applying calls -------------------------------------------------------------------------------

    def apply(self, index: int, call: Call) -> list[Effect]:
        handler = getattr(self, f"_do_{call.name}", None)
        return handler(index, call) or [] if handler else []

    def _open(self, index: int, call: Call, flags: str) -> list[Effect]:
        if not isinstance(call.ret, Fd) or call.ret.path is None or self._root_of(call.ret.path) is None:
            return []
        path, effects = call.ret.path, []
        node = self.lookup(path)
        if node is None:
            found = self._parent(path)
            if found is None:
                raise TraceError(f"{call.name} created {path} in a folder the model does not know")
            node = Inode(False)
            found[0].entries[found[1]] = node
            found[0].version += 1
            effects.append(Effect(index, call.pid, "create", path))
        elif "O_TRUNC" in flags and not node.is_dir:
            node.truncate(0)
            effects.append(Effect(index, call.pid, "write", path))
        key = (call.pid, call.ret.num)
        self.fds[key], self.pos[key] = node, 0
        self.append.discard(key)
        if "O_APPEND" in flags:
            self.append.add(key)
        return effects

    def _do_openat(self, index: int, call: Call) -> list[Effect]:
        return self._open(index, call, str(call.args[2]))

    def _do_open(self, index: int, call: Call) -> list[Effect]:
        return self._open(index, call, str(call.args[1]))

    def _do_creat(self, index: int, call: Call) -> list[Effect]:
        return self._open(index, call, "O_CREAT|O_TRUNC")

    def _write_at(self, index: int, call: Call, fd: Fd, offset: int | None, data: bytes) -> list[Effect]:
        node = self._node(call.pid, fd)
        if node is None or node.is_dir:
            return []
        key = (call.pid, fd.num)
        if offset is None:
            if key not in self.pos:
                raise TraceError(f"write to {fd.path} through a descriptor whose position is unknown")
            offset = len(node.data) if key in self.append else self.pos[key]
            self.pos[key] = offset + len(data)
        if self.on_write is not None:
            self.on_write(node, offset, data)
        node.write(offset, data)
        return [Effect(index, call.pid, "write", fd.path)]

    def _do_write(self, index: int, call: Call) -> list[Effect]:
        return self._write_at(index, call, call.args[0], None, call.data or b"")

    _do_writev = _do_write

    def _do_pwrite64(self, index: int, call: Call) -> list[Effect]:
        return self._write_at(index, call, call.args[0], int(call.args[3]), call.data or b"")

    def _do_pwritev(self, index: int, call: Call) -> list[Effect]:
        return self._write_at(index, call, call.args[0], int(call.args[3]), call.data or b"")

    _do_pwritev2 = _do_pwritev

    def _advance(self, call: Call) -> None:
        key = (call.pid, call.args[0].num) if isinstance(call.args[0], Fd) else None
        if key in self.pos and isinstance(call.ret, int):
            self.pos[key] += call.ret

    def _do_read(self, index: int, call: Call) -> None:
        self._advance(call)

    _do_readv = _do_read

    def _do_lseek(self, index: int, call: Call) -> None:
        if isinstance(call.args[0], Fd) and isinstance(call.ret, int):
            self.pos[(call.pid, call.args[0].num)] = call.ret

    def _copy(self, index: int, call: Call, src: Fd, src_offset: str, dst: Fd, count: int) -> list[Effect]:
        source = self._node(call.pid, src)
        if source is None:
            if src.path is None or not os.path.isfile(src.path):
                raise TraceError(f"{call.name} from an unknown file {src.path}")
            blob = Path(src.path).read_bytes()
        else:
            blob = bytes(source.data)
        explicit = src_offset.strip("[]").split("]")[0] if src_offset.startswith("[") else None
        start = int(explicit) if explicit is not None else self.pos.get((call.pid, src.num), 0)
        if explicit is None:
            self.pos[(call.pid, src.num)] = start + count
        return self._write_at(index, call, dst, None, blob[start:start + count])

    def _do_sendfile(self, index: int, call: Call) -> list[Effect]:
        return self._copy(index, call, call.args[1], str(call.args[2]), call.args[0], int(call.ret))

    def _do_copy_file_range(self, index: int, call: Call) -> list[Effect]:
        if str(call.args[3]) != "NULL":
            raise TraceError("copy_file_range with an explicit destination offset")
        return self._copy(index, call, call.args[0], str(call.args[1]), call.args[2], int(call.ret))

    def _do_ftruncate(self, index: int, call: Call) -> list[Effect]:
        node = self._node(call.pid, call.args[0])
        if node is None or node.is_dir:
            return []
        node.truncate(int(call.args[1]))
        return [Effect(index, call.pid, "write", call.args[0].path)]

    def _do_truncate(self, index: int, call: Call) -> list[Effect]:
        path = self._abs(None, str(call.args[0]))
        node = self.lookup(path)
        if node is None:
            return []
        node.truncate(int(call.args[1]))
        return [Effect(index, call.pid, "write", path)]

    def _do_fallocate(self, index: int, call: Call) -> list[Effect]:
        node = self._node(call.pid, call.args[0])
        if node is None or node.is_dir or str(call.args[1]) != "0":
            return []
        end = int(call.args[2]) + int(call.args[3])
        if end > len(node.data):
            node.truncate(end)
        return [Effect(index, call.pid, "write", call.args[0].path)]

    def _do_fsync(self, index: int, call: Call) -> list[Effect]:
        node = self._node(call.pid, call.args[0])
        if node is None:
            return []
        node.sync()
        return [Effect(index, call.pid, "sync", call.args[0].path, is_dir=node.is_dir)]

    _do_fdatasync = _do_fsync

    def _do_sync(self, index: int, call: Call) -> list[Effect]:
        for root in self.roots.values():
            for node in walk(root):
                node.sync()
        return [Effect(index, call.pid, "sync", root, is_dir=True) for root in self.roots]

    _do_syncfs = _do_sync

    def _rename(self, index: int, call: Call, old: str, new: str) -> list[Effect]:
        src, dst = self._parent(old), self._parent(new)
        if src is None and dst is None:
            return []
        if src is None or src[1] not in src[0].entries:
            raise TraceError(f"rename into the traced folders from outside: {old} -> {new}")
        node = src[0].entries.pop(src[1])
        src[0].version += 1
        if dst is None:
            return [Effect(index, call.pid, "unlink", old)]
        dst[0].entries[dst[1]] = node
        dst[0].version += 1
        content = None if node.is_dir else bytes(node.data)
        return [Effect(index, call.pid, "rename", old, new, content, node.is_dir)]

    def _do_rename(self, index: int, call: Call) -> list[Effect]:
        return self._rename(index, call, self._abs(None, call.args[0]), self._abs(None, call.args[1]))

    def _do_renameat(self, index: int, call: Call) -> list[Effect]:
        return self._rename(index, call, self._abs(call.args[0], call.args[1]), self._abs(call.args[2], call.args[3]))

    _do_renameat2 = _do_renameat

    def _remove(self, index: int, call: Call, path: str, kind: str) -> list[Effect]:
        found = self._parent(path)
        if found is None or found[1] not in found[0].entries:
            return []
        found[0].entries.pop(found[1])
        found[0].version += 1
        return [Effect(index, call.pid, kind, path)]

    def _do_unlink(self, index: int, call: Call) -> list[Effect]:
        return self._remove(index, call, self._abs(None, call.args[0]), "unlink")

    def _do_unlinkat(self, index: int, call: Call) -> list[Effect]:
        kind = "rmdir" if "AT_REMOVEDIR" in str(call.args[2]) else "unlink"
        return self._remove(index, call, self._abs(call.args[0], call.args[1]), kind)

    def _do_rmdir(self, index: int, call: Call) -> list[Effect]:
        return self._remove(index, call, self._abs(None, call.args[0]), "rmdir")

    def _mkdir(self, index: int, call: Call, path: str) -> list[Effect]:
        found = self._parent(path)
        if found is None:
            return []
        found[0].entries[found[1]] = Inode(True)
        found[0].version += 1
        return [Effect(index, call.pid, "mkdir", path, is_dir=True)]

    def _do_mkdir(self, index: int, call: Call) -> list[Effect]:
        return self._mkdir(index, call, self._abs(None, call.args[0]))

    def _do_mkdirat(self, index: int, call: Call) -> list[Effect]:
        return self._mkdir(index, call, self._abs(call.args[0], call.args[1]))

    def _link(self, index: int, call: Call, old: str, new: str) -> list[Effect]:
        node, dst = self.lookup(old), self._parent(new)
        if dst is None:
            return []
        if node is None:
            raise TraceError(f"hard link into the traced folders from outside: {old} -> {new}")
        dst[0].entries[dst[1]] = node
        dst[0].version += 1
        return [Effect(index, call.pid, "link", old, new, bytes(node.data), node.is_dir)]

    def _do_link(self, index: int, call: Call) -> list[Effect]:
        return self._link(index, call, self._abs(None, call.args[0]), self._abs(None, call.args[1]))

    def _do_linkat(self, index: int, call: Call) -> list[Effect]:
        return self._link(index, call, self._abs(call.args[0], call.args[1]), self._abs(call.args[2], call.args[3]))

    # images ---------------------------------------------------------------------------------------

    def image(self, model: str) -> Image:
        """What the card would hold if the crash ``model`` happened after the calls applied so far."""
        return disk_image(self.roots, model)

    def torn_image(self, node: Inode, offset: int, data: bytes) -> Image:
        """The ``kill`` image with ``data`` half-written at ``offset`` of ``node`` (call before applying it)."""
        return torn_image(self.roots, node, offset, data)

"""Atomic, durable file replacement: a power cut at any moment leaves either the old file or the new one.

A frame on a wall loses power without warning, so every file that must survive (gallery pictures,
state files, the token, the render checkpoint, the panel-care record) is written the same way:
complete into a temporary file beside the target, fsynced, renamed over the target, then the folder
is fsynced so the rename itself reaches the card. One implementation keeps that order in one place.

Folders follow the same rule: a new folder exists after a power cut only if its parent was fsynced
after the ``mkdir`` (``make_dirs``), and a removed one stays removed only if its parent was fsynced
after the removal (``remove_tree``). Without that, a job folder whose files were all fsynced can vanish
whole. ``docs/durability.md`` lists what each file of the state folder promises.
"""

from __future__ import annotations

import glob
import os
import shutil
import threading
from pathlib import Path


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename in ``folder`` durable.

    The data file is already in place when this runs, so a folder that cannot be opened or synced
    (unsupported on some filesystems) is a no-op rather than an error for a write that happened.
    """
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def make_dirs(folder: str | os.PathLike) -> None:
    """``mkdir -p`` that survives a power cut: each folder it creates has its parent fsynced after
    the ``mkdir``. Folders that already exist are left alone (whoever created them made them durable)."""
    folder = Path(folder)
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for created in reversed(missing):
        try:
            created.mkdir()
        except FileExistsError:
            if not created.is_dir():
                raise
            continue
        fsync_dir(created.parent)


def remove_tree(folder: str | os.PathLike) -> None:
    """Remove a folder and everything in it, durably: the parent is fsynced after the removal, so a
    power cut cannot bring the folder back. A folder that is already gone is not an error."""
    folder = Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    fsync_dir(folder.parent)


def replace_durably(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``os.replace`` whose result survives a power cut (the folder of each name is fsynced). The
    caller has already fsynced ``source``'s data."""
    source, target = Path(source), Path(target)
    os.replace(source, target)
    fsync_dir(target.parent)
    if source.parent != target.parent:
        fsync_dir(source.parent)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically; the file is created with ``mode`` (less the umask).

    The folder must exist. On any error (ENOSPC included) the temporary file is removed, the old
    ``path`` is untouched and the OSError propagates. The temporary name is unique per process and
    thread, so concurrent writers of one path never share a temporary file.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def unwritable_reason(path: str | os.PathLike) -> str | None:
    """Why ``write_bytes_atomic(path, ...)`` would fail, or None: checked before long work (a render)
    so a bad output path is found at once. The folder must exist and take a new file (a probe file is
    created and removed); ``path`` must not be a folder; a pipe or device must be writable."""
    target = Path(path).expanduser()
    if target.is_symlink():
        target = target.resolve()
    if target.is_dir():
        return "is a folder; name a file in it"
    if target.exists() and not target.is_file():  # /dev/stdout, a pipe: written directly
        return None if os.access(target, os.W_OK) else "cannot be written"
    folder = target.parent
    if not folder.is_dir():
        return f"the folder {folder} {'is not a folder' if folder.exists() else 'does not exist'}"
    probe = folder / f".{target.name}.probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as exc:
        return f"cannot write into {folder} ({exc.strerror})"
    return None


def write_private_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Replace a secret (owner token, session key) atomically; the file ends up exactly 0600.

    The temporary file is created 0600 (less the umask) so the secret is never readable by others,
    and the final chmod restores owner read/write even under an unusual umask.
    """
    write_bytes_atomic(path, data, mode=0o600)
    os.chmod(path, 0o600)


def stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Temporary files of ``write_bytes_atomic(path, ...)`` left behind by a killed process."""
    path = Path(path)
    return sorted(path.parent.glob(f".{glob.escape(path.name)}.tmp-*"))

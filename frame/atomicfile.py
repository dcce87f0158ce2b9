"""Atomic, durable file replacement: a power cut at any moment leaves either the old file or the new one.

A frame on a wall loses power without warning, so every file that must survive (gallery pictures,
state files, the token, the render checkpoint, the panel-care record) is written the same way:
complete into a temporary file beside the target, fsynced, renamed over the target, then the folder
is fsynced so the rename itself reaches the card. One implementation keeps that order in one place.
"""

from __future__ import annotations

import glob
import os
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

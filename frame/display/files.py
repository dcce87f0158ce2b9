"""Atomic file writes: a power cut mid-write must leave the old file, never a truncated one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from PIL import Image


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def save_png_atomic(image: Image.Image, path: Path) -> Path:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    write_atomic(path, buffer.getvalue())
    return path

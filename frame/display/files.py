"""Atomic file writes for the display: a power cut mid-write must leave the old file, never a truncated one."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from frame.atomicfile import make_dirs, write_bytes_atomic


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, creating its folder; owner-only (0600) like the
    panel-care record and virtual-panel PNGs have always been."""
    make_dirs(path.parent)  # a new folder's parent is fsynced too, so the file cannot vanish with it
    write_bytes_atomic(path, data, mode=0o600)


def save_png_atomic(image: Image.Image, path: Path) -> Path:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    write_atomic(path, buffer.getvalue())
    return path

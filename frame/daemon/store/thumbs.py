"""The gallery's thumbnails on the SD card: ``<state_dir>/thumbs/<gallery file name>.jpg``.

They used to be made with Pillow in the web threads and kept in an in-memory LRU of 96
entries that still held the thumbnails of pictures retention had deleted (part of the daemon's
+5.4 MiB/h in a soak). Now the image child makes them (``frame.web.images``) and they live here:
served from disk like the pictures, so they cost the daemon nothing, and bounded twice:

* by bytes: at most ``MAX_BYTES`` (about 650 thumbnails of 24 KiB), the least recently served go
  first (a served thumbnail's time is refreshed at most once an hour, to spare the SD card);
* by the gallery: ``drop_unreferenced`` removes the thumbnail of every file no picture uses any more,
  called by ``gallery``'s sweep after a delete or a retention pass, so a deleted picture's thumbnail
  goes with it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

THUMB_DIR = "thumbs"
SUFFIX = ".jpg"
MAX_BYTES = 16 * 1024 * 1024
TOUCH_SECONDS = 3600


def thumb_dir(state_dir: Path) -> Path:
    return Path(state_dir) / THUMB_DIR


def thumb_path(state_dir: Path, gallery_name: str) -> Path:
    """Where the thumbnail of the gallery file ``gallery_name`` (a checked name: no folders) lives."""
    return thumb_dir(state_dir) / f"{Path(gallery_name).name}{SUFFIX}"


def served(path: Path) -> None:
    """Mark a thumbnail as recently used (at most once an hour: an SD card write)."""
    try:
        if time.time() - path.stat().st_mtime > TOUCH_SECONDS:
            os.utime(path)
    except OSError:
        pass


def _files(state_dir: Path) -> list[Path]:
    folder = thumb_dir(state_dir)
    return [p for p in folder.iterdir() if p.suffix == SUFFIX] if folder.is_dir() else []


def drop_unreferenced(state_dir: Path, referenced: Iterable[str]) -> int:
    """Remove the thumbnails of gallery files no picture uses; how many were removed."""
    keep = {f"{Path(name).name}{SUFFIX}" for name in referenced}
    gone = 0
    for path in _files(state_dir):
        if path.name not in keep:
            path.unlink(missing_ok=True)
            gone += 1
    if gone:
        log.info("removed %d thumbnail(s) of deleted pictures", gone)
    return gone


def prune(state_dir: Path, max_bytes: int = MAX_BYTES) -> int:
    """Remove the least recently used thumbnails until they take at most ``max_bytes``; how many."""
    entries = []
    for path in _files(state_dir):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((stat.st_mtime, stat.st_size, path))
    entries.sort(reverse=True)  # newest first
    total, gone = 0, 0
    for _mtime, size, path in entries:
        total += size
        if total > max_bytes:
            path.unlink(missing_ok=True)
            gone += 1
    return gone

"""The gallery folder: publishing a finished render and the retention policy.

A picture is first written complete into the gallery under a temp name, fsynced and renamed, and only
then recorded in the store — so the database never points at a half-written file, and a full disk
fails the save cleanly while the previous picture stays on the panel. File names are made from the
time and the render id only: prompt or feed text never becomes part of a path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frame.atomicfile import write_bytes_atomic
from frame.daemon.store import Store
from frame.errors import FrameError

log = logging.getLogger(__name__)


def gallery_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "gallery"


@dataclass(frozen=True)
class Retention:
    max_pictures: int
    max_disk_mb: int


def publish(store: Store, state_dir: Path, render_id: int, image: Path, panel: Path | None,
            meta: dict[str, Any], why_plot: Path | None = None) -> int:
    """Copy the worker's output into the gallery atomically and record it; return the picture id.
    The explanation plot, when there is one, is named in ``meta["why"]["plot"]``.

    Raises FrameError when the files cannot be written (e.g. disk full); nothing is recorded then.
    """
    folder = gallery_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{datetime.now(UTC):%Y%m%d-%H%M%S}-r{render_id}"
    sources = {f"{stem}.png": image, f"{stem}-panel.png": panel, f"{stem}-why.png": why_plot}
    written: list[Path] = []
    try:
        for name, source in sources.items():
            if source is not None:
                write_bytes_atomic(folder / name, Path(source).read_bytes())
                written.append(folder / name)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        raise FrameError(f"could not save the new picture into {folder}: {exc.strerror or exc}") from exc
    meta = dict(meta)
    if why_plot is not None:
        meta["why"] = {**(meta.get("why") or {}), "plot": f"{stem}-why.png"}
    size = sum(p.stat().st_size for p in written)
    return store.add_picture(file=f"{stem}.png", panel_file=f"{stem}-panel.png" if panel else None, bytes=size,
                             **meta)


def picture_path(state_dir: Path, name: str | None) -> Path | None:
    """Absolute path of a gallery file name from the store (refusing anything that leaves the folder)."""
    if not name:
        return None
    folder = gallery_dir(state_dir).resolve()
    path = (folder / name).resolve()
    if path.parent != folder:
        raise FrameError(f"refusing gallery file name outside the gallery: {name!r}")
    return path


def apply_retention(store: Store, state_dir: Path, policy: Retention, keep: set[int] = frozenset()) -> list[int]:
    """Delete the oldest pictures beyond ``max_pictures`` or ``max_disk_mb``; never favourites, never
    ids in ``keep`` (e.g. the one on the panel). Returns the deleted ids."""
    protected = set(store.favourite_ids()) | set(keep)
    rows = store.query("SELECT id, file, panel_file, bytes, json_extract(why, '$.plot') AS plot "
                       "FROM pictures ORDER BY id")
    count = len(rows)
    total = sum(r["bytes"] or 0 for r in rows)
    limit_bytes = policy.max_disk_mb * 1024 * 1024
    deleted: list[int] = []
    for row in rows:
        if count <= policy.max_pictures and total <= limit_bytes:
            break
        if row["id"] in protected:
            continue
        for name in (row["file"], row["panel_file"], row["plot"]):
            path = picture_path(state_dir, name)
            if path is not None:
                path.unlink(missing_ok=True)
        store.delete_picture(row["id"])
        deleted.append(row["id"])
        count -= 1
        total -= row["bytes"] or 0
    if deleted:
        log.info("gallery retention removed %d pictures (now %d, %.1f MB)", len(deleted), count, total / 2**20)
    return deleted

"""The gallery folder: publishing a finished render and the retention policy.

A picture is first written complete into the gallery under a temp name, fsynced and renamed, and only
then recorded in the store — so the database never points at a half-written file, and a full disk
fails the save cleanly while the previous picture stays on the panel. File names are made from the
time and the render id only: prompt or feed text never becomes part of a path.

Deleting runs the other way round, for retention and for the owner's delete (``remove_picture``) alike:
the record is deleted (a durable commit that also names its files in the store's ``gallery_trash``)
before the files, so a power cut in between leaves unreferenced files, never a record pointing at a
missing one; those files are removed by the next deletion or retention run (``_sweep``).
"""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from frame.atomicfile import fsync_dir, make_dirs, write_bytes_atomic
from frame.daemon.store import thumbs
from frame.daemon.store.database import Store
from frame.errors import FrameError
from frame.worker.events import PictureMeta

log = logging.getLogger(__name__)


def gallery_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "gallery"


@dataclass(frozen=True)
class Retention:
    max_pictures: int
    max_disk_mb: int


def publish(store: Store, state_dir: Path, render_id: int, image: Path, panel: Path | None,
            meta: PictureMeta, why_plot: Path | None = None) -> int:
    """Copy the worker's output into the gallery atomically and record it; return the picture id.
    The explanation plot, when there is one, is named in the stored ``why["plot"]``.

    Raises FrameError when the files cannot be written (e.g. disk full); nothing is recorded then.
    """
    folder = gallery_dir(state_dir)
    make_dirs(folder)
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
    fields = meta.to_json()
    if why_plot is not None:
        fields["why"] = {**(meta.why or {}), "plot": f"{stem}-why.png"}
    size = sum(p.stat().st_size for p in written)
    return store.add_picture(file=f"{stem}.png", panel_file=f"{stem}-panel.png" if panel else None, bytes=size,
                             **fields)


UPLOAD_ORIGIN = "upload"


UPLOAD_DIGEST_CHARS = 16  # of the SHA-256 of the file the owner sent: 64 bits, in the stored file's name


def upload_with_digest(store: Store, digest: str) -> int | None:
    """The uploaded photo whose original file had SHA-256 ``digest`` (hex), or None: the same photo sent
    twice is stored once. The digest is part of the stored file's name (``publish_upload``), so no
    column is needed; photos stored before that have random names and are not matched."""
    key = digest[:UPLOAD_DIGEST_CHARS].lower()
    if len(key) != UPLOAD_DIGEST_CHARS or any(c not in "0123456789abcdef" for c in key):
        raise ValueError(f"not a SHA-256 digest: {digest!r}")
    rows = store.query("SELECT id FROM pictures WHERE origin = ? AND (file LIKE ? OR file LIKE ?) ORDER BY id LIMIT 1",
                       (UPLOAD_ORIGIN, f"%-upload-{key}.jpg", f"%-upload-{key}.png"))
    return int(rows[0][0]) if rows else None


def publish_upload(store: Store, state_dir: Path, data: bytes, suffix: str, *, caption: str, width: int,
                   height: int, digest: str | None = None) -> int:
    """Store an owner's photo (already decoded, upright and re-encoded by the web page) like a
    generated picture: the file written atomically into the gallery first, then its record with
    ``origin`` "upload". It has no panel file yet; the first preview or show prepares one. ``digest``:
    the SHA-256 of the file sent, kept in the name for ``upload_with_digest`` (else a random name).

    Raises FrameError when the file cannot be written (e.g. disk full); nothing is recorded then."""
    if suffix not in (".jpg", ".png"):
        raise ValueError(f"an upload is stored as .jpg or .png, not {suffix!r}")
    folder = gallery_dir(state_dir)
    make_dirs(folder)
    tag = digest[:UPLOAD_DIGEST_CHARS].lower() if digest else secrets.token_hex(4)
    name = f"{datetime.now(UTC):%Y%m%d-%H%M%S}-upload-{tag}{suffix}"
    try:
        write_bytes_atomic(folder / name, data)
    except OSError as exc:
        (folder / name).unlink(missing_ok=True)
        raise FrameError(f"could not save the photo into {folder}: {exc.strerror or exc}") from exc
    return store.add_picture(file=name, bytes=len(data), prompt=caption, origin=UPLOAD_ORIGIN, width=width,
                             height=height)


def add_panel_file(store: Store, state_dir: Path, picture_id: int, file: str, prepared_png: Path) -> str:
    """Keep the panel image a preview prepared for a picture that had none (an upload, gallery name
    ``file``) beside it in the gallery, so later shows need no dithering; returns its gallery name."""
    name = f"{Path(file).stem}-panel.png"
    data = Path(prepared_png).read_bytes()
    write_bytes_atomic(gallery_dir(state_dir) / name, data)
    store.set_panel_file(picture_id, name, len(data))
    return name


def picture_path(state_dir: Path, name: str | None) -> Path | None:
    """Absolute path of a gallery file name from the store (refusing anything that leaves the folder)."""
    if not name:
        return None
    folder = gallery_dir(state_dir).resolve()
    path = (folder / name).resolve()
    if path.parent != folder:
        raise FrameError(f"refusing gallery file name outside the gallery: {name!r}")
    return path


def remove_picture(store: Store, state_dir: Path, picture_id: int) -> None:
    """The owner's delete: the record first (with its files named in the trash, and a painted
    picture's latest rating kept for the taste model, in one commit), then the files. KeyError for an
    unknown id. What may not be deleted (the picture on the panel) is the caller's to refuse."""
    store.delete_picture(picture_id, remember_rating=True)
    log.info("picture %d deleted by the owner", picture_id)
    _sweep(store, state_dir)


def apply_retention(store: Store, state_dir: Path, policy: Retention, keep: set[int] = frozenset()) -> list[int]:
    """Delete the oldest pictures beyond ``max_pictures`` or ``max_disk_mb``; never favourites, never
    ids in ``keep`` (e.g. the one on the panel), never the owner's uploaded photos (only the owner
    has them; the frame cannot paint them again). Returns the deleted ids."""
    protected = set(store.favourite_ids()) | set(store.upload_ids()) | set(keep)
    rows = store.query("SELECT id, bytes FROM pictures ORDER BY id")
    count = len(rows)
    total = sum(r["bytes"] or 0 for r in rows)
    limit_bytes = policy.max_disk_mb * 1024 * 1024
    deleted: list[int] = []
    for row in rows:
        if count <= policy.max_pictures and total <= limit_bytes:
            break
        if row["id"] in protected:
            continue
        store.delete_picture(row["id"], remember_rating=False)  # the record first: it never points at a deleted file
        deleted.append(row["id"])
        count -= 1
        total -= row["bytes"] or 0
    _sweep(store, state_dir)
    if deleted:
        log.info("gallery retention removed %d pictures (now %d, %.1f MB)", len(deleted), count, total / 2**20)
    if count > policy.max_pictures or total > limit_bytes:
        log.info("gallery holds %d pictures (%.1f MB), over gallery.max_pictures %d or max_disk_mb %d: favourites, "
                 "uploads and the pictures on and for the panel are never deleted", count, total / 2**20,
                 policy.max_pictures, policy.max_disk_mb)
    return deleted


def _sweep(store: Store, state_dir: Path) -> None:
    """Remove the files of deleted pictures — those the store's trash names, and older leftovers of
    renders (``_leftover_files``) — durably, then forget the trash names. A cut anywhere in here
    leaves the names in the trash for the next sweep; a name a picture still uses is never removed."""
    trashed = store.trashed_files()
    referenced = _referenced(store)
    files: list[Path] = []
    for name in trashed:
        try:
            path = picture_path(state_dir, name)
        except FrameError as exc:
            log.warning("gallery trash: %s; left alone", exc)
            continue
        if path is not None and name not in referenced:
            files.append(path)
    files += _leftover_files(store, state_dir, referenced)
    for path in files:
        path.unlink(missing_ok=True)
    if files:
        fsync_dir(gallery_dir(state_dir))
    thumbs.drop_unreferenced(state_dir, referenced)  # a deleted picture's thumbnail goes with it
    if trashed:
        store.empty_trash(trashed)


def _referenced(store: Store) -> set[str]:
    return {name for row in store.query(
        "SELECT file, panel_file, json_extract(why, '$.plot') FROM pictures") for name in row if name}


_RENDER_OF_FILE = re.compile(r"-r(\d+)(?:-panel|-why)?\.png$")


def _leftover_files(store: Store, state_dir: Path, referenced: set[str]) -> list[Path]:
    """Gallery files of pictures retention deleted from the store before it kept a trash (a power cut
    came between the record and the files). Only files of a render that finished with a picture that
    no longer exists qualify: after a restore from an older backup, newer pictures' files stay
    untouched."""
    folder = gallery_dir(state_dir)
    try:
        names = [p.name for p in folder.iterdir() if _RENDER_OF_FILE.search(p.name)]
    except FileNotFoundError:
        return []
    gone = {row[0] for row in store.query(
        "SELECT r.id FROM renders r WHERE r.status = 'done' AND r.picture_id IS NOT NULL AND "
        "NOT EXISTS (SELECT 1 FROM pictures p WHERE p.id = r.picture_id)")}
    return [folder / name for name in names
            if name not in referenced and int(_RENDER_OF_FILE.search(name).group(1)) in gone]

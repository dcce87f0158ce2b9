"""The phone page's preview of a picture: exactly the image the panel will show, before "show on frame".

The preview is made by the show worker (``frame.worker.show``, a job with ``preview`` set), so the
daemon still never imports the dithering or the drivers, and the preview takes the same decision and
writes the same PNG as a show on the virtual panel: the stored panel image when it was made for the
configured panel, else the original prepared again with today's ``display`` settings.

Cached on the SD card, computed on first request. Dithering 800x480 takes seconds on a Pi Zero 2 (and
more for larger panels), so it must not be repeated on every page view; yet most previews cost nothing
to make (a generated picture's stored panel image only needs converting), so precomputing them for
the whole gallery at every settings change would spend minutes of CPU on pictures nobody looks at.
The cache lives in ``<state_dir>/previews/p<id>-<key>.png``; the key is a digest of the ``display``
section, the picture's file and frame's version, so a change of panel, palette, fit, rotation,
saturation or dither makes a new one. At most ``MAX_PREVIEWS`` files are kept (least recently used
go first), a few MB. An upload has no panel image yet: its first preview keeps the prepared one in the
gallery (``gallery.add_panel_file``), so its shows need no dithering either.

One preview worker runs at a time in this process; a request that waits longer than
``WAIT_SECONDS`` for it gets ``PreviewBusy``. The page is open to the LAN like the pictures, and this
bounds what a flood of preview requests can cost: one worker, one picture at a time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

import frame
from frame.atomicfile import make_dirs, write_bytes_atomic
from frame.config import to_plain
from frame.daemon.jobs.night import RenderContext, worker_output, write_job_files
from frame.daemon.jobs.supervisor import worker_command
from frame.daemon.store import gallery
from frame.errors import FrameError
from frame.worker.events import PreviewOutput
from frame.worker.records import ShowJob

log = logging.getLogger(__name__)

PREVIEW_DIR = "previews"
MAX_PREVIEWS = 48
WAIT_SECONDS = 120.0
WORK_SECONDS = 600.0  # a 13.3" panel dithered on a Pi Zero 2 stays well inside this
_WORKER = threading.Lock()


class PreviewBusy(FrameError):
    """Another preview is being made and did not finish in time; ask again in a moment."""


def preview_dir(state_dir: Path) -> Path:
    return Path(state_dir) / PREVIEW_DIR


def preview_key(ctx: RenderContext, file: str) -> str:
    """What the preview depends on: the display settings, the picture's file, frame's version (the
    measured inks and the dithering live in the code)."""
    basis = json.dumps({"display": to_plain(ctx.config)["display"], "file": file, "frame": frame.__version__},
                       sort_keys=True)
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def cached(ctx: RenderContext, picture_id: int, file: str) -> Path:
    return preview_dir(ctx.state_dir) / f"p{picture_id}-{preview_key(ctx, file)}.png"


def panel_preview(ctx: RenderContext, picture_id: int, wait: float | None = None) -> Path:
    """The PNG of what the panel will show for ``picture_id`` (made now when not cached).

    Raises KeyError for an unknown picture, PreviewBusy when another preview holds the worker for
    longer than ``wait`` seconds (default ``WAIT_SECONDS``), FrameError when the worker fails."""
    picture = ctx.store.picture(picture_id)
    if picture is None:
        raise KeyError(picture_id)
    path = cached(ctx, picture_id, picture.file)
    if path.is_file():
        os.utime(path)  # recently used: the last to be pruned
        return path
    if not _WORKER.acquire(timeout=WAIT_SECONDS if wait is None else wait):
        raise PreviewBusy("another preview is being prepared; try again in a minute")
    try:
        if not path.is_file():  # made by the request we waited for
            _make(ctx, picture_id, picture.file, picture.panel_file, path)
    finally:
        _WORKER.release()
    return path


def _make(ctx: RenderContext, picture_id: int, file: str, panel_file: str | None, out: Path) -> None:
    folder = Path(ctx.state_dir) / "checkpoints" / f"preview-{picture_id}-{secrets.token_hex(4)}"
    make_dirs(folder)  # transient: swept at start like the show folders
    job = ShowJob(state_dir=Path(ctx.state_dir), image=gallery.picture_path(ctx.state_dir, file),
                  panel=gallery.picture_path(ctx.state_dir, panel_file), preview=folder / "preview.png",
                  prepared=None if panel_file else folder / "prepared.png")
    started = time.monotonic()
    try:
        write_job_files(folder, ctx.config, job)
        supervisor = ctx.supervisor_factory(ctx.config.worker.memory_limit_mb, 0, command=worker_command("show"))
        outcome = supervisor.run(folder, stop=ctx.stop, deadline=time.time() + WORK_SECONDS)
        result = worker_output(outcome, PreviewOutput, f"the preview of picture {picture_id}")
        make_dirs(out.parent)
        write_bytes_atomic(out, result.preview.read_bytes())
        if result.prepared is not None:
            gallery.add_panel_file(ctx.store, ctx.state_dir, picture_id, file, result.prepared)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    log.info("made the panel preview of picture %d in %.1f s", picture_id, time.monotonic() - started)
    prune(ctx.state_dir, keep=out)


def prune(state_dir: Path, keep: Path, limit: int = MAX_PREVIEWS) -> None:
    """Drop older previews of the same picture (other settings) and all but the ``limit`` most
    recently used ones."""
    folder = preview_dir(state_dir)
    same = keep.name.split("-", 1)[0] + "-"
    files = [p for p in folder.glob("p*.png") if p != keep]
    for path in [p for p in files if p.name.startswith(same)]:
        path.unlink(missing_ok=True)
        files.remove(path)
    files.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for path in files[max(0, limit - 1):]:
        path.unlink(missing_ok=True)

"""Image routes (of ``frame.web.routes.bp``). Every file is found through the store by numeric id;
nothing in the request is a path.

The store holds gallery file *names*; ``frame.daemon.store.gallery.picture_path`` refuses any name that
would leave the gallery folder, and a missing file is a 404 like an unknown id. Thumbnails for the
gallery are made with Pillow on first request and kept in a small in-memory LRU cache, so a phone
downloads ~15 kB per tile instead of the full PNG.
"""

from __future__ import annotations

import io
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from flask import abort, current_app, send_file

from frame.daemon.jobs import preview as previews
from frame.daemon.jobs.night import job_dir
from frame.daemon.store.gallery import picture_path
from frame.errors import FrameError
from frame.web.context import WebContext
from frame.web.present import why_plot_name
from frame.web.routes import bp, web_context
from frame.web.views import live_status

log = logging.getLogger(__name__)

THUMB_SIZE = (360, 360)
THUMB_CACHE_ENTRIES = 96
MAX_AGE_SECONDS = 300
THUMBS_KEY = "frame.web.thumbs"


class ThumbCache:
    """JPEG thumbnails keyed by (path, mtime, size) with least-recently-used eviction."""

    def __init__(self, entries: int = THUMB_CACHE_ENTRIES) -> None:
        self._entries = entries
        self._data: OrderedDict[tuple, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path) -> bytes:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        data = make_thumbnail(path)
        with self._lock:
            self._data[key] = data
            while len(self._data) > self._entries:
                self._data.popitem(last=False)
        return data


def make_thumbnail(path: Path) -> bytes:
    """A JPEG no larger than ``THUMB_SIZE`` (aspect kept)."""
    from PIL import Image

    with Image.open(path) as image:
        image.thumbnail(THUMB_SIZE)
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, "JPEG", quality=82, optimize=True)
    return buffer.getvalue()


def gallery_file(ctx: WebContext, name: str | None) -> Path:
    """The existing gallery file for a stored name, or abort(404)."""

    try:
        path = picture_path(ctx.state_dir, name)
    except FrameError:
        log.warning("store holds a gallery name outside the gallery: %r", name)
        abort(404)
    if path is None or not path.is_file():
        abort(404)
    return path


def _thumbs() -> ThumbCache:
    """This app's thumbnail cache (one per app, like its context)."""
    return current_app.extensions.setdefault(THUMBS_KEY, ThumbCache())


@bp.get("/pictures/<id:picture_id>/image")
def image(picture_id: int) -> Any:
    ctx = web_context()
    path = gallery_file(ctx, ctx.picture_or_404(picture_id).file)
    return send_file(path, conditional=True, max_age=MAX_AGE_SECONDS)


@bp.get("/pictures/<id:picture_id>/panel")
def panel(picture_id: int) -> Any:
    ctx = web_context()
    path = gallery_file(ctx, ctx.picture_or_404(picture_id).panel_file)
    return send_file(path, conditional=True, max_age=MAX_AGE_SECONDS)


@bp.get("/pictures/<id:picture_id>/preview.png")
def panel_preview(picture_id: int) -> Any:
    """Exactly what the panel will show for this picture (``frame.daemon.jobs.preview``: made by the
    show worker on first request, then cached on the card). Revalidated on every view (ETag), since a
    change of the display settings changes it under the same URL."""
    ctx = web_context()
    try:
        path = previews.panel_preview(ctx.render_context(), picture_id)
    except KeyError:
        abort(404)
    except previews.PreviewBusy as exc:
        log.info("web: preview of picture %d: %s", picture_id, exc)
        return str(exc), 503, {"Retry-After": "30", "Content-Type": "text/plain; charset=utf-8"}
    except FrameError as exc:
        log.error("web: %s", exc)
        abort(404)
    return send_file(path, mimetype="image/png", conditional=True, max_age=0)


@bp.get("/pictures/<id:picture_id>/thumb")
def thumb(picture_id: int) -> Any:
    ctx = web_context()
    path = gallery_file(ctx, ctx.picture_or_404(picture_id).file)
    try:
        data = _thumbs().get(path)
    except OSError as exc:
        log.warning("cannot make a thumbnail of %s: %s", path, exc)
        abort(404)
    return send_file(io.BytesIO(data), mimetype="image/jpeg", max_age=MAX_AGE_SECONDS)


@bp.get("/pictures/<id:picture_id>/why.png")
def why_plot(picture_id: int) -> Any:
    ctx = web_context()
    path = gallery_file(ctx, why_plot_name(ctx.picture_or_404(picture_id).why))
    return send_file(path, mimetype="image/png", conditional=True, max_age=MAX_AGE_SECONDS)


@bp.get("/render/preview")
def preview() -> Any:
    ctx = web_context()
    render = live_status(ctx).get("render") or {}
    render_id = render.get("id")
    if not render.get("preview") or not isinstance(render_id, int) or isinstance(render_id, bool):
        abort(404)
    path = job_dir(ctx.state_dir, render_id) / "preview.png"
    if not path.is_file():
        abort(404)
    return send_file(path, mimetype="image/png", max_age=0)

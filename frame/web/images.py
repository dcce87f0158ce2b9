"""Image routes (of ``frame.web.routes.bp``). Every file is found through the store by numeric id;
nothing in the request is a path.

The store holds gallery file *names*; ``frame.daemon.store.gallery.picture_path`` refuses any name that
would leave the gallery folder, and a missing file is a 404 like an unknown id. Thumbnails for the
gallery are made on first request by the image child (``frame.worker.imagechild``: the daemon never
imports Pillow) and kept on the SD card (``frame.daemon.store.thumbs``: bounded in bytes, dropped with
their picture), so a phone downloads ~15 kB per tile instead of the full PNG and the daemon holds none.
One child makes the missing thumbnails of the ``THUMB_BATCH`` pictures around the one asked for,
since a gallery page asks for all of its tiles at once. A tile whose thumbnail cannot be made now (the
image child busy for longer than ``WAIT_SECONDS``, or failing) is sent to the full picture, uncached:
an ``<img>`` never asks again after a 503 or 404, so such tiles stayed blank.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from flask import abort, redirect, send_file, url_for

from frame.atomicfile import make_dirs
from frame.daemon.jobs import preview as previews
from frame.daemon.jobs.children import IMAGE_CAP_MB, WAIT_SECONDS, ChildBusy, run_child
from frame.daemon.jobs.night import job_dir
from frame.daemon.store import gallery, thumbs
from frame.daemon.store.gallery import picture_path
from frame.daemon.store.records import StoredPicture
from frame.errors import FrameError
from frame.web import photos
from frame.web.context import WebContext
from frame.web.present import why_plot_name
from frame.web.routes import bp, web_context
from frame.web.views import live_status
from frame.worker.shortjobs import ImageLimits, ThumbsJob

log = logging.getLogger(__name__)

THUMB_SIZE = 360
THUMB_BATCH = 24
THUMB_SECONDS = 300.0
MAX_AGE_SECONDS = 300
_MAKING = threading.Lock()


def thumbnail(ctx: WebContext, picture: StoredPicture) -> Path:
    """The thumbnail of ``picture``'s file, made now (with the other missing ones of the pictures
    around it in the gallery's order: the rest of its page) when it is not on the SD card. FrameError
    when it cannot be made."""
    source = gallery_file(ctx, picture.file)
    path = thumbs.thumb_path(ctx.state_dir, picture.file)
    if path.is_file():
        thumbs.served(path)
        return path
    if not _MAKING.acquire(timeout=WAIT_SECONDS):  # the tiles of a page wait for the child making them all
        raise ChildBusy("the thumbnails are being made; try again in a minute")
    try:
        if path.is_file():
            return path
        items = {source: path}
        newer = ctx.store.count_newer_pictures(picture.id)
        for other in ctx.store.pictures(limit=THUMB_BATCH, offset=max(0, newer - THUMB_BATCH // 2)):
            target = thumbs.thumb_path(ctx.state_dir, other.file)
            other_source = gallery.picture_path(ctx.state_dir, other.file)
            if len(items) < THUMB_BATCH and other_source is not None and other_source.is_file() \
                    and not target.is_file():
                items.setdefault(other_source, target)
        make_dirs(thumbs.thumb_dir(ctx.state_dir))
        job = ThumbsJob(items=tuple(items.items()), limits=ImageLimits(photos.MAX_PIXELS, photos.DECODE_BYTES,
                                                                        IMAGE_CAP_MB), size=THUMB_SIZE)
        result = run_child(job, timeout=THUMB_SECONDS)
        for failed, reason in getattr(result, "failed", ()):
            log.warning("cannot make a thumbnail of %s: %s", failed, reason)
        thumbs.prune(ctx.state_dir)
    finally:
        _MAKING.release()
    if not path.is_file():
        raise FrameError(f"no thumbnail of {picture.file}")
    return path


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
    picture = ctx.picture_or_404(picture_id)
    try:
        thumb_file = thumbnail(ctx, picture)
    except FrameError as exc:  # the image child busy (ChildBusy) or failing: the tile shows the picture
        log.warning("no thumbnail of picture %d now (%s): the tile gets the picture itself", picture_id, exc)
        response = redirect(url_for("web.image", picture_id=picture_id), 302)
        response.headers["Cache-Control"] = "no-store"  # a later view asks for the thumbnail again
        return response
    return send_file(thumb_file, mimetype="image/jpeg", conditional=True, max_age=MAX_AGE_SECONDS)


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

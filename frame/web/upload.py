"""Photos from elsewhere: the owner uploads a photo from the phone, and it joins the gallery.

Routes of ``frame.web.routes.bp`` (``GET /upload`` the form, ``POST /upload`` the photo), plus the two
pieces that let exactly this one route take a body of up to 20 MB while every other request stays
capped at 64 KiB by the server:

* ``upload_policy`` (the server's ``BodyPolicy``, ``frame.net.bodylimit``) raises the cap for a
  ``POST /upload`` whose headers carry a logged-in owner session and a declared ``Content-Length``
  within ``UPLOAD_REQUEST_MAX``. It runs before a single body byte is read: without a valid session,
  with a larger declared length or with a chunked body the server answers 413 from the headers alone
  and nothing is buffered or spooled. An admitted body goes to a temporary file (waitress spools it),
  not into the daemon's memory: twelve uploads at once cost the daemon no more than one.
* ``UploadFiles``: Flask's request class with every file part written to a temporary file (werkzeug
  would keep a part below 500 kB in memory), which the image child reads as its stdin.

The guard every POST passes (``blueprint._guard``) still checks the size, the origin, the session and
the CSRF token; the photo itself is decoded by ``photos.read_photo`` (in a short child) and stored by
``gallery.publish_upload`` (``origin`` "upload"), like a generated picture.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from flask import Flask, Request, flash, redirect, render_template, request, url_for
from itsdangerous import BadSignature
from werkzeug.http import parse_cookie

from frame.daemon.http.contract import storage_full
from frame.daemon.store import gallery
from frame.errors import FrameError
from frame.net.bodylimit import RequestHead
from frame.web.context import WebContext
from frame.web.forms import FormError, clean_text
from frame.web.photos import FIELD, MAX_UPLOAD_BYTES, accepted_types, content_digest, read_photo
from frame.web.routes import bp, web_context

log = logging.getLogger(__name__)

UPLOAD_PATH = "/upload"
FORM_SLACK = 64 * 1024  # multipart boundaries, the CSRF token and the caption around the photo
UPLOAD_REQUEST_MAX = MAX_UPLOAD_BYTES + FORM_SLACK
CAPTION_MAX = 120
DEFAULT_CAPTION = "A photo"


class UploadFiles(Request):
    """Flask's request with every uploaded file part in a temporary file (unlinked at once): the
    image child reads it as its stdin, so the photo's bytes never sit in the daemon's memory."""

    def _get_file_stream(self, total_content_length: int | None, content_type: str | None,
                         filename: str | None = None, content_length: int | None = None) -> Any:
        return tempfile.TemporaryFile()


def upload_policy(app: Flask, ctx: WebContext):
    """The server's body policy for ``app``: ``UPLOAD_REQUEST_MAX`` for the owner's upload, else the
    default. Reads the signed session cookie itself, since no request exists yet."""

    def policy(head: RequestHead) -> int | None:
        if head.method != "POST" or head.path != UPLOAD_PATH or head.content_length is None:
            return None
        if head.content_length > UPLOAD_REQUEST_MAX:
            return None
        value = parse_cookie(head.headers.get("COOKIE", "")).get(app.config["SESSION_COOKIE_NAME"])
        serializer = app.session_interface.get_signing_serializer(app)
        if not value or serializer is None:
            return None
        try:
            data = serializer.loads(value, max_age=int(app.permanent_session_lifetime.total_seconds()))
        except BadSignature:
            return None
        if not isinstance(data, dict) or not ctx.owner_session(data):
            log.warning("refused a %d-byte upload without an owner session", head.content_length)
            return None
        return UPLOAD_REQUEST_MAX

    return policy


def _form(error: FormError | str | None = None, caption: str = "", status: int = 200) -> Any:
    return render_template("upload.html", error=error, caption=caption, accept=accepted_types(),
                           max_mb=MAX_UPLOAD_BYTES // 1_000_000), status


@bp.get(UPLOAD_PATH)
def upload_form() -> Any:
    return _form()


@bp.post(UPLOAD_PATH)
def upload() -> Any:
    ctx = web_context()
    caption = str(request.form.get("caption", ""))[:CAPTION_MAX * 4]
    try:
        caption = clean_text(request.form, "caption", CAPTION_MAX)
        part = request.files.get(FIELD)
        digest = content_digest(part.stream) if part is not None else None
        stored = gallery.upload_with_digest(ctx.store, digest) if digest else None
        if stored is not None:  # the same file again: nothing decoded, nothing stored twice
            log.info("web: upload is picture %d again", stored)
            flash("This photo is already in the gallery: here it is.")
            return redirect(url_for("web.picture", picture_id=stored), 303)
        photo = read_photo(part.stream if part is not None else None, ctx.state_dir)
    except FormError as exc:
        log.info("web: upload refused: %s", exc)
        return _form(exc, caption, 400)
    try:
        picture_id = gallery.publish_upload(ctx.store, ctx.state_dir, photo.data, photo.suffix,
                                            caption=caption or DEFAULT_CAPTION, width=photo.width,
                                            height=photo.height, digest=digest)
    except FrameError as exc:
        if storage_full(exc.__cause__ or exc):
            log.error("web: upload refused: %s", exc)
            return _form("The frame's storage is full, so the photo was not saved. Free space on its SD card "
                         "(gallery.max_pictures or gallery.max_disk_mb).", caption, 507)
        raise
    log.info("web: photo uploaded as picture %d (%s, %dx%d)", picture_id, photo.source_format, photo.width,
             photo.height)
    flash("Photo added to the gallery. Below: how the panel will show it.")
    return redirect(url_for("web.picture", picture_id=picture_id), 303)

"""The pages: now showing, one picture (rate, show, delete), gallery, status and configuration, plus
login/logout (the queue and a picture's "reuse seed" / "more like this": ``queue_pages``).

Routes of the module-level blueprint ``frame.web.routes.bp``, added when this module is imported;
each reads its app's ``WebContext`` with ``web_context()``.

GET pages only read the store; every POST has already passed ``blueprint._guard`` (logged in, CSRF
token, same origin, size limit) before it gets here, validates its fields with ``forms.py`` and then
calls the owner action of ``frame.daemon.actions`` that the JSON API calls too (an unknown picture
is that layer's ``NotFound``: the 404 page). After a successful POST the browser is redirected (303)
so a reload never repeats it.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import flash, redirect, render_template, request, session, url_for
from werkzeug.exceptions import HTTPException

from frame.config import embedding_names
from frame.daemon import deletion
from frame.daemon.actions import pictures as picture_actions
from frame.daemon.actions.errors import NotFound, NotRunning
from frame.daemon.http.contract import Busy, storage_full
from frame.daemon.store.records import StoredPicture
from frame.errors import FrameError
from frame.redact import redact_deep
from frame.web import auth, present, too_large
from frame.web.context import WebContext
from frame.web.forms import TOKEN_MAX, FormError, parse_page, parse_rating, safe_next
from frame.web.routes import bp, web_context
from frame.web.sessions import FORGOT_ALL, SAVED

log = logging.getLogger(__name__)

GALLERY_PAGE = 24
NOT_FOUND = "There is no such picture or page."


def live_status(ctx: WebContext) -> dict[str, Any]:
    """The daemon's live status, or {} when the web page runs without one (or it fails)."""
    if ctx.status is None:
        return {}
    try:
        return dict(ctx.status() or {})
    except Exception:  # the page must render even if the daemon's status is broken
        log.exception("reading the daemon status failed")
        return {}


def on_panel(ctx: WebContext, status: dict[str, Any]) -> tuple[int | None, bool]:
    """What the panel shows: (picture id or None, whether the info screen covers it). None means the
    panel has shown nothing yet — a finished picture may still wait for its show time, and must not be
    called "now showing". The rule the delete refusal uses too (``frame.daemon.deletion``)."""
    return deletion.panel_picture(status, ctx.store)


def _picture_page_view(ctx: WebContext, picture: StoredPicture) -> dict[str, Any]:
    """A picture for its own page, whose details name the embeddings its prompts used: the files found
    now, listed by name only (as the queue page lists them)."""
    found = embedding_names.available(embedding_names.configured_folders(ctx.config))
    return present.picture_view(picture, found)


# now showing, one picture, the gallery, and the rate / show-on-frame actions ---------------------

@bp.get("/")
def now() -> Any:
    """What the panel shows; when it has shown nothing yet (or that picture is gone), the newest
    picture, labelled as waiting — never as "now showing"."""
    ctx = web_context()
    status = live_status(ctx)
    picture_id, info_screen = on_panel(ctx, status)
    picture = ctx.store.picture(picture_id) if picture_id is not None else None
    now_showing = picture is not None
    if picture is None:
        newest = ctx.store.pictures(limit=1)
        picture = newest[0] if newest else None
    return render_template("picture.html", picture=_picture_page_view(ctx, picture) if picture else None,
                           panel=present.panel_view(ctx.config.display),
                           now_showing=now_showing, home=True, info_screen=info_screen,
                           progress=present.progress_view(status))


@bp.get("/pictures/<id:picture_id>")
def picture(picture_id: int) -> Any:
    ctx = web_context()
    row = ctx.picture_or_404(picture_id)
    return render_template("picture.html", picture=_picture_page_view(ctx, row), now_showing=False,
                           panel=present.panel_view(ctx.config.display),
                           home=False, info_screen=False, progress=None)


@bp.post("/pictures/<id:picture_id>/rate")
def rate(picture_id: int) -> Any:
    ctx = web_context()
    kind, value = parse_rating(request.form.get("rating"))
    picture_actions.rate_picture(ctx.store, picture_id, kind, value, source="web")
    flash("Rating saved: the frame learns from it tonight.")
    return redirect(safe_next(request.form.get("next"), url_for("web.picture", picture_id=picture_id)), 303)


@bp.post("/pictures/<id:picture_id>/show")
def show(picture_id: int) -> Any:
    ctx = web_context()
    try:
        picture_actions.show(ctx.store, ctx.controller, picture_id, "web")
    except NotRunning:
        flash("The frame's daemon is not running, so nothing can be shown now.")
    else:
        flash("Sent to the frame: the panel refreshes in a minute.")
    return redirect(url_for("web.picture", picture_id=picture_id), 303)


def _delete_page(ctx: WebContext, row: Any, problem: str | None, status: int = 200) -> Any:
    waiting = sum(1 for q in ctx.store.queued_prompts() if q.source_picture_id == row.id)
    return render_template("delete.html", picture=present.picture_view(row), problem=problem,
                           waiting_variations=waiting), status


@bp.get("/pictures/<id:picture_id>/delete")
def confirm_delete(picture_id: int) -> Any:
    """The confirmation step: what deleting this picture does (or why it cannot be deleted now), and
    the one form that deletes. A plain page, so it works without JavaScript."""
    ctx = web_context()
    row = ctx.picture_or_404(picture_id)
    return _delete_page(ctx, row, deletion.deletion_problem(ctx.store, ctx.state_dir, picture_id, live_status(ctx)))


@bp.post("/pictures/<id:picture_id>/delete")
def delete(picture_id: int) -> Any:
    ctx = web_context()
    row = ctx.picture_or_404(picture_id)
    try:
        picture_actions.delete(ctx.store, ctx.state_dir, picture_id, live_status(ctx), "web")
    except deletion.PictureInUse as exc:
        return _delete_page(ctx, row, str(exc), 409)
    flash(f"Picture {picture_id} deleted.")
    return redirect(url_for("web.gallery"), 303)


@bp.get("/gallery")
def gallery() -> Any:
    """The owner's gallery; for a visitor who is not logged in (only with ``web.public_gallery``, see
    ``access.py``) the painted pictures alone, without ratings, each tile opening its picture."""
    ctx = web_context()
    page = parse_page(request.args.get("page"))
    visitor = not ctx.logged_in()
    favourites = request.args.get("favourites") == "1" and not visitor
    rows = ctx.store.pictures(limit=GALLERY_PAGE + 1, offset=(page - 1) * GALLERY_PAGE,
                              favourites_only=favourites, painted_only=visitor)
    return render_template("gallery.html", pictures=[present.picture_view(r) for r in rows[:GALLERY_PAGE]],
                           page=page, more=len(rows) > GALLERY_PAGE, favourites=favourites, visitor=visitor,
                           total=ctx.store.count_pictures(painted_only=visitor))


# render now and the status page (the queue: queue_pages.py; the settings: settings_views.py) ----------

@bp.post("/render")
def render_now() -> Any:
    try:
        picture_actions.render_now(web_context().controller, "web")
    except NotRunning:
        flash("The frame's daemon is not running, so no render can start.")
    except Busy as exc:
        flash(f"No new render: {exc}")
    else:
        flash("Rendering a new picture now.")
    return redirect(url_for("web.status"), 303)


@bp.get("/favicon.ico")
def favicon() -> Any:
    """The tab's icon (a framed landscape), where every browser asks for it (it was a 404 per page view)."""
    return bp.send_static_file("favicon.ico")


@bp.get("/status")
def status() -> Any:
    ctx = web_context()
    live = redact_deep(live_status(ctx))
    renders = [present.render_row_view(r) for r in ctx.store.renders(10)]
    feeds = [present.feed_view(f) for f in ctx.store.feed_health()]
    next_runs = sorted((name, present.short_time(when) or str(when))
                       for name, when in (live.get("next_runs") or {}).items() if when)
    return render_template("status.html", progress=present.progress_view(live), renders=renders,
                           feeds=feeds, feeds_configured=bool(ctx.config.feeds.sources), next_runs=next_runs,
                           live=bool(live), model_import=ctx.model_imports().state(),
                           state=str(live.get("state") or ""), queued=len(ctx.store.queued_prompts()))


# login (token form → session), logout, and logout of every session -------------------------------

@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    ctx = web_context()
    back = safe_next(request.values.get("next"), url_for("web.now"))
    if request.method == "GET":
        return render_template("login.html", error=None, next=back)
    address = request.remote_addr or "?"
    if ctx.limiter.blocked(address):
        log.warning("web: login from %s refused: too many failures", address)
        return render_template("login.html", error="Too many wrong tokens. Try again in a few minutes.",
                               next=back), 429, {"Retry-After": str(ctx.limiter.retry_after(address))}
    given = str(request.form.get("token", ""))[:TOKEN_MAX].strip()
    try:
        expected = ctx.owner_token()
    except FrameError as exc:
        return render_template("login.html", error=f"The frame has no usable owner token: {exc}",
                               next=back), 503
    if not auth.tokens_match(given, expected):
        ctx.limiter.failed(address)
        log.warning("web: failed login from %s", address)
        return render_template("login.html", error="That is not the owner token (see: frame token).",
                               next=back), 401
    ctx.limiter.succeeded(address)
    ctx.open_owner_session()
    log.info("web: owner logged in from %s", address)
    return redirect(back, 303)


@bp.post("/logout")
def logout() -> Any:
    """Ends this session on the server too: a copy of its cookie stops working."""
    ctx = web_context()
    kept = ctx.session_registry().revoke(session.get("sid"))
    session.clear()
    if kept != SAVED:
        return _logout_unsaved(kept)
    return redirect(url_for("web.now"), 303)


@bp.route("/logout-everywhere", methods=["GET", "POST"])
def logout_everywhere() -> Any:
    """Ends every session: every phone and browser (and any copied cookie) must log in again. Asks
    first, on the server: a GET, or a POST without ``confirm=yes`` (the settings page's button, an old
    form), shows what it ends and the one form that does it; nothing is ended before that."""
    ctx = web_context()
    if request.method == "GET" or request.form.get("confirm") != "yes":
        return render_template("logout_everywhere.html", count=len(ctx.session_registry()))
    count, kept = ctx.session_registry().revoke_all()
    session.clear()
    log.info("web: logged out everywhere (%d sessions ended) from %s", count, request.remote_addr)
    if kept != SAVED:
        return _logout_unsaved(kept)
    flash(f"Logged out everywhere: {count} session{'s' if count != 1 else ''} ended.")
    return redirect(url_for("web.now"), 303)


def _logout_unsaved(kept: str) -> Any:
    """A logout that holds now but could not be written: say what a restart will do (507)."""
    if kept == FORGOT_ALL:
        after = ("So that a restart cannot undo it, the frame forgot its saved logins: unless its storage "
                 "has room again before then, every phone and browser must log in again after the next restart.")
    else:
        after = ("It could not be made to last either: after a restart this login may work again. "
                 "Free space, then log in and log out again.")
    return render_template("error.html", code=507, message=(
        "You are logged out, but the frame's storage is full, so the logout could not be written down. "
        f"{after} Free space on its SD card (gallery.max_pictures or gallery.max_disk_mb).")), 507


# friendly error pages for the blueprint's own 4xx answers, a full disk (507) and bugs (500) ------

def _answer(code: int, message: str) -> Any:
    """An error answer: the error page (the JSON API answers its own errors, in ``frame.daemon.http``)."""
    return render_template("error.html", code=code, message=message), code


@bp.errorhandler(FormError)
def bad_form(exc: FormError) -> Any:
    return _answer(400, str(exc))


@bp.errorhandler(NotFound)
def not_found(_exc: NotFound) -> Any:
    """An owner action named a picture or queued prompt that is not there (any more): the 404 page."""
    return _answer(404, NOT_FOUND)


@bp.errorhandler(Exception)
def failed(exc: Exception) -> Any:
    if isinstance(exc, HTTPException):
        return exc
    if storage_full(exc):
        log.error("web: %s %s refused: %s", request.method, request.path, exc)
        return _answer(507, "The frame's storage is full, so nothing was saved. Free space on its SD card "
                            "(fewer pictures kept: gallery.max_pictures or gallery.max_disk_mb).")
    log.exception("web: %s %s failed", request.method, request.path)
    return _answer(500, "Something went wrong on the frame; nothing was changed. Its log has the details "
                        "(journalctl -u frame).")


ERROR_PAGES = ((400, "The request was incomplete (missing form token?). Reload the page."),
               (403, "Refused: the form was stale or came from another site. Reload the page."),
               (404, NOT_FOUND),
               (429, "Too many attempts. Wait a few minutes."))


def _error_page(code: int, message: str) -> Any:
    def handler(_exc: Exception) -> Any:
        return _answer(code, message)
    return handler


for _code, _message in ERROR_PAGES:
    bp.register_error_handler(_code, _error_page(_code, _message))


@bp.errorhandler(413)
def _too_large(_exc: Exception) -> Any:
    """A body over its cap that reached the app (a chunked one, or a declared length the server let
    through): the limit that applies and a link back, as the server's own 413 page says it."""
    cap = request.max_content_length or 0
    return render_template("error.html", **too_large.error_page_values(
        request.method, request.path, request.content_length, cap)), 413

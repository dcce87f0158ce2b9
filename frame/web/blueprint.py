"""The phone page's blueprint set-up: per-app context, session settings and the guard every POST passes.

The routes are module-level (``views.py``, ``queue_pages.py``, ``images.py`` on ``routes.bp``, added when
those modules are imported here). ``create_blueprint`` (offered as ``frame.web.create_blueprint``, what the daemon's app
factory registers) pairs ``bp`` with one app's ``WebContext``; at registration ``record_once`` puts the context in
``app.extensions`` and sets the session (signed cookie, HttpOnly, SameSite=Lax, Secure over https)
described in ``auth.py``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import flask
from flask import Flask, abort, render_template, request, session
from flask.blueprints import BlueprintSetupState
from flask.sessions import SecureCookieSessionInterface

from frame.config import Config, state_dir
from frame.daemon.http.contract import CONFIG_LISTENERS, LOGIN_OR_TOKEN, PAGE_ACCESS, PAGE_SESSION
from frame.net.bodylimit import BODY_POLICY_KEY, TOO_LARGE_PAGE_KEY
from frame.net.hosts import same_origin
from frame.web import (  # noqa: F401 - importing them adds their routes to bp
    access,
    auth,
    images,
    models_pages,
    pair_views,
    queue_pages,
    settings_views,
    too_large,
    upload,
    views,
)
from frame.web.context import WebContext
from frame.web.forms import safe_next
from frame.web.routes import WEB_KEY, bp, web_context

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 16 * 1024
SESSION_COOKIE = "frame_session"
CONTEXT_OPTION = "frame_web_context"  # the register option that carries an app's WebContext


class _SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session, marked Secure whenever this request arrived over https."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure


def _configure_app(setup: BlueprintSetupState) -> None:
    """Once per app: bind the context ``create_blueprint`` made, then the session settings."""
    app, ctx = setup.app, setup.options[CONTEXT_OPTION]
    shared = app.extensions.get("frame")
    ctx.adopt(shared or {})
    app.extensions[WEB_KEY] = ctx
    if shared is not None:
        if shared.get(CONFIG_LISTENERS) is not None:  # settings the daemon takes over reach the pages too
            shared[CONFIG_LISTENERS].append(ctx.take_config)
        shared[PAGE_SESSION] = functools.partial(_session_problem, ctx)  # the settings API's phone
        shared[PAGE_ACCESS] = access.PageAccess(ctx)  # the app's gate asks who may read what
    else:
        access.install_gate(app, access.PageAccess(ctx))
    ctx.session_registry()
    if not app.secret_key:
        app.secret_key = auth.load_or_create_secret(ctx.state_dir)
    app.session_interface = _SessionInterface()
    if app.request_class is flask.Request:
        app.request_class = upload.UploadFiles
    app.extensions[BODY_POLICY_KEY] = upload.upload_policy(app, ctx)  # the server lets the upload be larger
    app.extensions[TOO_LARGE_PAGE_KEY] = too_large.too_large_page(app)  # and says so in the pages' style
    app.config.update(
        SESSION_COOKIE_NAME=SESSION_COOKIE,
        SESSION_COOKIE_HTTPONLY=True,
        # Lax, not Strict: a phone that opens the frame from another app's link (a chat, a bookmark
        # app) is sent its cookie; every change still needs the form's CSRF token and the frame's Origin
        SESSION_COOKIE_SAMESITE="Lax",
        PERMANENT_SESSION_LIFETIME=timedelta(days=auth.SESSION_DAYS),
    )


bp.record_once(_configure_app)


class Pages:
    """The module-level ``bp`` with one app's context: what ``frame.web.create_blueprint`` returns and
    ``app.register_blueprint`` takes (it calls ``register``), so the blueprint's routes stay
    module-level while every app gets its own configuration and store."""

    def __init__(self, ctx: WebContext) -> None:
        self.ctx = ctx
        self.name = bp.name

    def register(self, app: Flask, options: dict[str, Any]) -> None:
        bp.register(app, {**options, CONTEXT_OPTION: self.ctx})


def create_blueprint(config: Config, store: Any, status: Callable[[], dict] | None = None,
                     config_path: str | Path | None = None) -> Pages:
    """The ``web`` pages at ``/``, ``/gallery``, ``/queue``, ``/status``, ``/config`` for ``config``
    and the daemon's ``store`` (``frame.daemon.store.database.Store``).

    ``status``: optional callable returning the daemon's live status (``LiveStatus.snapshot``) for the
    render progress; ``config_path``: the file the daemon loaded, re-validated on the settings page.
    """
    return Pages(WebContext(config=config, store=store, state_dir=state_dir(config), status=status,
                            config_path=Path(config_path) if config_path else None))


@bp.before_request
def guard() -> Any:
    return _guard(web_context())


@bp.after_request
def headers(response: Any) -> Any:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
    if request.method == "GET" and response.mimetype == "text/html":
        response.headers.setdefault("Cache-Control", "no-store")
    return response


@bp.app_template_global()
def csrf_token() -> str:
    return auth.csrf_token(session)


@bp.context_processor
def common() -> dict[str, Any]:
    ctx = web_context()
    return {"logged_in": ctx.logged_in(), "csrf_field": auth.CSRF_FIELD,
            "public_gallery": bool(ctx.config.web.public_gallery)}


def _guard(ctx: WebContext) -> Any:
    """Every state-changing request: size limit (the photo upload's own, else ``MAX_FORM_BYTES``), same
    origin, logged in (except login), CSRF token."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return None
    uploading = request.endpoint == "web.upload"
    limit = upload.UPLOAD_REQUEST_MAX if uploading else MAX_FORM_BYTES
    if request.content_length is not None and request.content_length > limit:
        abort(413)
    request.max_content_length = limit  # also caps a body sent without a Content-Length (chunked)
    if request.content_length is None and not uploading and len(request.get_data(cache=True)) >= limit:
        abort(413)  # werkzeug's capped stream ends at the cap without a word: a cut body is never parsed
    if not same_origin(request.headers.get("Origin"), request.host_url):
        log.warning("refused a %s to %s from origin %s", request.method, request.path,
                    request.headers.get("Origin"))
        abort(403)
    if request.endpoint not in access.ALWAYS_PUBLIC and not ctx.logged_in():
        # the app's gate refuses it first; this holds for a change however the pages are mounted
        back = upload.UPLOAD_PATH if uploading else safe_next(request.form.get("next"), "/")
        return render_template("login.html", error=access.LOGIN_FIRST, next=back), 401
    return _csrf(request.form.get(auth.CSRF_FIELD))


def _csrf(submitted: str | None) -> None:
    problem = auth.csrf_problem(session, submitted)
    if problem is not None:
        log.warning("refused a %s to %s: %s CSRF token", request.method, request.path,
                    "missing" if problem == 400 else "wrong")
        abort(problem)


def _session_problem(ctx: WebContext, csrf: str | None) -> tuple[int, str] | None:
    """``contract.PageSession`` for the settings API (``frame.daemon.http.settings_api``): a change
    without the owner token is the owner's when this session is logged in and ``csrf`` (its
    ``X-CSRF-Token`` header) is the session's token; else the status and message to answer."""
    if not ctx.logged_in():
        return 401, LOGIN_OR_TOKEN
    problem = auth.csrf_problem(session, csrf)
    if problem is None:
        return None
    log.warning("refused a %s to %s: %s CSRF token", request.method, request.path,
                "missing" if problem == 400 else "wrong")
    return problem, dict(views.ERROR_PAGES)[problem]

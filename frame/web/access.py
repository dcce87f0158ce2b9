"""What a visitor who is not logged in may have: the pages' half of the app's gate.

The daemon's app asks ``PageAccess`` (``frame.daemon.http.contract.PageAccess``) on every request,
before any route runs (``frame.daemon.http.access``). By default the answer is: the login page, the
static files (style sheet, script, icon) and nothing else, so the gallery, the originals of uploaded
family photos, the status (feeds, model paths), the queue and the settings all need the owner.

``web.public_gallery: true`` opens one more thing for owners who want to show their frame's pictures
on the LAN: the gallery of *painted* pictures, read-only (its tiles and their full pictures). An
uploaded photo is never public, nor any picture's details page, the status, the queue, the settings
or any change: a public picture route is open only for a GET of a picture whose origin is not an
upload, so an upload's id answers exactly as a missing id does (the login page).

Without the daemon's app (the pages registered on a plain Flask app, as some tests do) the pages
install the same gate themselves (``install_gate``).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, redirect, render_template, request, url_for

from frame.daemon.store.gallery import UPLOAD_ORIGIN
from frame.web.context import WebContext
from frame.web.forms import safe_next

# anyone may have these: the way in, and what every page (the login page too) loads
ALWAYS_PUBLIC = frozenset({"web.login", "web.static", "web.favicon",
                           "web.pair_code", "web.pair_link", "web.pair_panel"})
# with web.public_gallery: the gallery page, and a painted picture's tile and full picture
GALLERY_PAGES = frozenset({"web.gallery"})
GALLERY_PICTURES = frozenset({"web.thumb", "web.image"})
READING = ("GET", "HEAD")
LOGIN_FIRST = "Log in with the owner token to make changes."


class PageAccess:
    """The pages' answers to the gate for one app (``contract.PageAccess``)."""

    def __init__(self, ctx: WebContext) -> None:
        self.ctx = ctx

    def public(self) -> bool:
        """Anyone may have this request: the way in, or (``web.public_gallery``) a painted picture."""
        endpoint = request.endpoint
        if endpoint in ALWAYS_PUBLIC:
            return True
        if not self.public_gallery() or request.method not in READING:
            return False
        if endpoint in GALLERY_PAGES:
            return True
        if endpoint in GALLERY_PICTURES:
            picture_id = (request.view_args or {}).get("picture_id")
            picture = self.ctx.store.picture(picture_id) if isinstance(picture_id, int) else None
            return picture is not None and picture.origin != UPLOAD_ORIGIN
        return False

    def public_gallery(self) -> bool:
        return bool(self.ctx.config.web.public_gallery)

    def logged_in(self) -> bool:
        return self.ctx.logged_in()

    def refuse(self) -> Any:
        """A page asked for without a login: to the login page (and back here after it), or, with the
        public gallery, ``/`` to the gallery; a change is refused with the login form (401)."""
        if request.method in READING:
            if self.public_gallery() and request.endpoint == "web.now":
                return redirect(url_for("web.gallery"), 303)
            back = safe_next(request.full_path.rstrip("?"), url_for("web.now"))
            return redirect(url_for("web.login", next=back), 303)
        # the body is not read for someone who is not logged in (an upload's is not even parsed)
        back = request.path if request.endpoint == "web.upload" else url_for("web.now")
        return render_template("login.html", error=LOGIN_FIRST, next=back), 401


def install_gate(app: Flask, access: PageAccess) -> None:
    """The gate for pages registered without the daemon's app (which has its own, covering the API)."""

    @app.before_request
    def pages_only_for_the_owner() -> Any:
        if request.routing_exception is not None or access.public() or access.logged_in():
            return None
        return access.refuse()

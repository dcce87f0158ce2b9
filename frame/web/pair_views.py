"""Pairing a phone (``pairing.py``): the link ``frame token --pair`` prints, the short code typed on the
login page, and the button that shows a code on the panel. Routes of ``frame.web.routes.bp``, public
(``access.ALWAYS_PUBLIC``: they are the way in), each POST through ``blueprint._guard`` (size, origin,
CSRF token) like every form.

A link opens a page with one button rather than logging in on the GET itself: a chat app's link
preview or a browser's prefetch would otherwise use up the single-use link before the owner taps it.

Wrong codes and links are refused by the per-address limiter the token login uses (10 per 5
minutes) and by a limiter of all addresses together (``pairing.GLOBAL_FAILURES``): within a code's
10 minutes a guesser gets at most 60 tries at 30^8 codes, however many addresses it has.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import flash, redirect, render_template, request, url_for

from frame.daemon.actions.errors import NotRunning
from frame.errors import FrameError
from frame.web import pairing
from frame.web.context import WebContext
from frame.web.forms import safe_next
from frame.web.routes import bp, web_context

log = logging.getLogger(__name__)

EVERYONE = "*"  # the global limiters' one key
PAIRED = "This phone is paired with the frame: it stays logged in until you log out."
USED_OR_EXPIRED = ("That pairing code is wrong, used or expired. Codes work once, for 10 minutes: "
                   "ask for a new one (frame token --pair, or show one on the frame).")
TOO_MANY = "Too many wrong codes. Try again in a few minutes."


def _limited(ctx: WebContext) -> int:
    """Seconds to wait before another try from this address (or from anyone), 0 when it may try now."""
    address = request.remote_addr or "?"
    return max(ctx.limiter.retry_after(address), ctx.pair_limiter.retry_after(EVERYONE))


def _failed(ctx: WebContext, what: str) -> None:
    address = request.remote_addr or "?"
    ctx.limiter.failed(address)
    ctx.pair_limiter.failed(EVERYONE)
    log.warning("web: wrong %s from %s", what, address)


def _paired(ctx: WebContext, origin: str) -> Any:
    try:
        ctx.open_owner_session()
    except FrameError as exc:  # e.g. a token file others can read: nobody is logged in until fixed
        return render_template("login.html", error=f"The frame has no usable owner token: {exc}",
                               next=url_for("web.now")), 503
    ctx.limiter.succeeded(request.remote_addr or "?")
    log.info("web: a phone paired from %s (a code from %s)", request.remote_addr, origin)
    if origin == "panel" and hasattr(ctx.controller, "after_pairing"):
        ctx.controller.after_pairing()  # the picture the code covered goes back up
    flash(PAIRED)
    return redirect(safe_next(request.form.get("next"), url_for("web.now")), 303)


def _refused(template: str, message: str, status: int, retry: int = 0, **values: Any) -> Any:
    headers = {"Retry-After": str(retry)} if retry else {}
    return render_template(template, error=message, next=url_for("web.now"), **values), status, headers


@bp.post("/pair")
def pair_code() -> Any:
    """The short code typed on the login page."""
    ctx = web_context()
    wait = _limited(ctx)
    if wait:
        return _refused("login.html", TOO_MANY, 429, wait)
    origin = ctx.pairing_codes().redeem_code(str(request.form.get("code", "")))
    if origin is None:
        _failed(ctx, "pairing code")
        return _refused("login.html", USED_OR_EXPIRED, 401)
    return _paired(ctx, origin)


@bp.route("/pair/<secret>", methods=["GET", "POST"])
def pair_link(secret: str) -> Any:
    """``frame token --pair``'s link: a page with one button (GET), which pairs (POST)."""
    ctx = web_context()
    if request.method == "GET":
        return render_template("pair.html", secret=secret, error=None)
    wait = _limited(ctx)
    if wait:
        return _refused("pair.html", TOO_MANY, 429, wait, secret=None)
    origin = ctx.pairing_codes().redeem_link(secret)
    if origin is None:
        _failed(ctx, "pairing link")
        return _refused("pair.html", USED_OR_EXPIRED, 401, secret=None)
    return _paired(ctx, origin)


@bp.post("/pair/panel")
def pair_panel() -> Any:
    """Show a new pairing code on the frame's panel: whoever can read it stands at the frame."""
    ctx = web_context()
    wait = ctx.panel_limiter.retry_after(EVERYONE)
    if wait:
        flash(f"A code was just sent to the frame; a new one can be asked for in {wait} s.")
        return redirect(url_for("web.login"), 303)
    if ctx.controller is None or not hasattr(ctx.controller, "show_pairing_code"):
        flash("The frame's daemon is not running, so it cannot show a code. On the frame: frame token --pair")
        return redirect(url_for("web.login"), 303)
    ctx.panel_limiter.failed(EVERYONE)  # counts the request: the next waits PANEL_INTERVAL
    code = ctx.pairing_codes().create("panel")
    try:
        answer = ctx.controller.show_pairing_code(code.shown_code(), pairing.LIFETIME_SECONDS // 60)
    except NotRunning:
        answer = {"deferred": "not running"}
    if answer.get("deferred"):
        ctx.pairing_codes().redeem_code(code.code)  # never shown: nobody may use it
        flash(f"The frame cannot show a code now ({answer['deferred']}). On the frame: frame token --pair")
    else:
        log.info("web: a pairing code goes to the panel (asked from %s)", request.remote_addr)
        flash("A code is on its way to the frame's panel (an e-paper refresh takes up to a minute). "
              "Type it below within 10 minutes.")
    return redirect(url_for("web.login"), 303)

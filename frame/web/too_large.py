"""The answer to a request body over its cap, in the phone page's own style.

The server refuses such a body from its headers, before the app sees the request
(``frame.net.bodylimit``), and used to answer with waitress's bare text: "Request Entity Too Large /
exceeds max_body of 65537", unstyled and ~980 px wide on a phone, naming the 64 KiB cap of every
other request rather than the photo's 20 MB. ``too_large_page`` (the server's ``TooLargePage``)
renders the pages' error template instead, with the limit that applies and a link back; an ``/api/``
request gets JSON, like every API error. The app's own 413 (``blueprint._guard``) says the same.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Flask, render_template

from frame.net.bodylimit import RequestHead
from frame.web.photos import MAX_UPLOAD_BYTES
from frame.web.upload import UPLOAD_PATH, UPLOAD_REQUEST_MAX

log = logging.getLogger(__name__)


def _amount(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1_000_000 else f"{max(1, round(size / 1e3))} kB"


def too_large_message(method: str, path: str, content_length: int | None, cap: int) -> tuple[str, str, str]:
    """(message, link target, link text) for a body over ``cap`` bytes sent to ``path``."""
    sent = f" (this one is {_amount(content_length)})" if content_length else ""
    if method == "POST" and path == UPLOAD_PATH:
        if content_length is not None and content_length <= UPLOAD_REQUEST_MAX:
            return ("The photo was not accepted: your login has ended, so the frame takes no photo. Log in "
                    "again, then choose the photo once more.", f"/login?next={UPLOAD_PATH}", "Log in")
        return (f"The photo is too large: the frame takes photos of at most {MAX_UPLOAD_BYTES // 1_000_000} MB"
                f"{sent}. Choose a smaller copy (a phone's \"medium\" size, or a screenshot) and try again.",
                UPLOAD_PATH, "Back to the upload form")
    return (f"That was too much data: the frame takes at most {_amount(cap)} here{sent}.", "/",
            "Back to the frame's page")


def too_large_page(app: Flask):
    """The server's ``TooLargePage`` for ``app``: the styled error page, or JSON for ``/api/``."""

    def page(head: RequestHead, cap: int) -> tuple[str, bytes]:
        message, back, label = too_large_message(head.method, head.path, head.content_length, cap)
        log.warning("refused a %s body to %s over its cap of %d bytes", _amount(head.content_length or 0),
                    head.path, cap)
        if head.path.startswith("/api/"):
            return "application/json", json.dumps({"error": message}).encode()
        with app.test_request_context(head.path, method="GET"):  # the template's url_for, no session
            html = render_template("error.html", code=413, message=message, back=back, back_label=label)
        return "text/html; charset=utf-8", html.encode()

    return page


def error_page_values(method: str, path: str, content_length: int | None, cap: int) -> dict[str, Any]:
    """The error template's values for the app's own 413 (the same words as the server's)."""
    message, back, label = too_large_message(method, path, content_length, cap)
    return {"code": 413, "message": message, "back": back, "back_label": label}

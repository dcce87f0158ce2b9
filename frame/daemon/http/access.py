"""The app's one gate: nothing on the frame is read or changed without the owner.

Before, reading was open to the LAN: a visitor who was never logged in saw the gallery, the originals
of the owner's uploaded family photos, the status with its feed and model paths, and the settings.
Now every request passes ``admit`` first, registered by ``create_app`` on the whole app rather than
on a blueprint, so a route added later anywhere in the app is closed until it is reviewed: what
may be had without the owner is the short list the pages name (``contract.PageAccess.public``: the
login and pairing pages, static files, and with ``web.public_gallery`` the painted pictures), and
``tests/web/test_access.py`` walks the app's whole URL map logged out to keep it so.

Everything else needs the owner token (``Authorization: Bearer``, wrong ones counted in the shared
limiter) or a logged-in page session, which the pages vouch for. This gate only decides who is
asking; what a change needs on top (the token on the API, the CSRF token on a page or the settings
API) is still checked by each blueprint.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import request

from frame.daemon.http.api import CHANGE_NEEDS_TOKEN, ApiError, api_deps, check_token
from frame.daemon.http.contract import LOGIN_OR_TOKEN, PAGE_ACCESS
from frame.daemon.http.settings_api import settings

READING = ("GET", "HEAD", "OPTIONS")

log = logging.getLogger(__name__)


def admit(shared: dict[str, Any]) -> Any:
    """None when this request may go on to its route; else the answer for someone who is not the owner
    (the pages' login redirect, or 401 JSON under ``/api/``)."""
    if request.routing_exception is not None:
        return None  # no such route (404) or method (405): Flask answers that, nothing is read
    pages = shared.get(PAGE_ACCESS)
    if pages is not None and pages.public():
        return None
    if request.headers.get("Authorization") is not None:
        check_token(api_deps())  # ApiError 401/429 when it is not the owner token
        return None
    if pages is not None and pages.logged_in():
        return None
    if request.path.startswith("/api/") or pages is None:
        # a session reads the API and changes the settings (with its CSRF token); other changes need the token
        session_will_do = request.method in READING or request.blueprint == settings.name
        raise ApiError(401, LOGIN_OR_TOKEN if session_will_do else CHANGE_NEEDS_TOKEN)
    return pages.refuse()

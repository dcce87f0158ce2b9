"""What the daemon's HTTP side and the phone pages (``frame.web``) agree on, so that the web depends
on the daemon and never the other way round: the ``Controller`` the running daemon offers, ``Busy``
when a render is already running, the ``<id:...>`` URL converter, how a full disk is recognised,
the ``PageFactory`` ``frame run`` hands the daemon (``frame.web.create_blueprint``), and what the
pages put in the app's shared ``app.extensions["frame"]``: ``CONFIG_LISTENERS`` (told of saved
settings), ``PAGE_SESSION`` (vouches for a logged-in phone on the settings API) and ``PAGE_ACCESS``
(who may read what without the owner token: ``frame.daemon.http.access`` asks it on every request).

Standard library and werkzeug's routing only: the daemon imports it at start.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from werkzeug.routing import IntegerConverter

if TYPE_CHECKING:
    from flask import Blueprint

    from frame.config import Config
    from frame.daemon.store.database import Store

SQLITE_MAX_INT = 2 ** 63 - 1
CONFIG_LISTENERS = "config_listeners"
PAGE_SESSION = "page_session"
PAGE_ACCESS = "page_access"
MODEL_IMPORTS = "model_imports"  # the frame's one model import (frame.daemon.jobs.model_import)
LOGIN_OR_TOKEN = "log in, or send the owner token: Authorization: Bearer TOKEN"


class Busy(Exception):
    """A render is already running (only one at a time)."""


class Controller(Protocol):
    """What the API and the pages ask of the running daemon (``service.Daemon`` implements it)."""

    def status(self) -> dict[str, Any]: ...

    def render_now(self) -> dict[str, Any]: ...

    def show(self, picture_id: int) -> dict[str, Any]: ...

    # settings from the phone; a controller without them (a test's) serves a page that only saves

    def apply_settings(self, config: Config) -> dict[str, Any]: ...

    def settings_state(self) -> dict[str, Any]: ...

    def request_restart(self) -> None: ...

    # pairing a phone; a controller without them (a test's) cannot show a code on the panel

    def show_pairing_code(self, code: str, minutes: int) -> dict[str, Any]: ...

    def after_pairing(self) -> None: ...


class PageFactory(Protocol):
    """Builds the phone pages' blueprint for the daemon's app (``frame.web.create_blueprint``)."""

    def __call__(self, config: Config, store: Store, status: Callable[[], dict] | None = None,
                 config_path: str | Path | None = None) -> Blueprint: ...


class PageSession(Protocol):
    """How the pages vouch for a change sent without the owner token (the settings API, from the
    settings page's phone): None when the request's session is logged in and ``csrf`` (its
    ``X-CSRF-Token`` header) is that session's token, else the (status, message) to answer."""

    def __call__(self, csrf: str | None) -> tuple[int, str] | None: ...


class PageAccess(Protocol):
    """What the pages tell the app's gate (``frame.daemon.http.access``) about this request: whether
    anyone may have it (the login and pairing pages, static files, the public gallery when configured),
    whether its session is the owner's, and the pages' answer to a visitor who is not logged in."""

    def public(self) -> bool: ...

    def logged_in(self) -> bool: ...

    def refuse(self) -> Any: ...


def digits_at_most(limit: int) -> str:
    """A regular expression for ASCII digit strings whose value is at most ``limit``: any shorter
    string, or one as long that is smaller digit by digit (``[0-9]``, never ``\\d``, which also
    matches ``١`` and ``０``)."""
    text = str(limit)
    options = [f"[0-9]{{1,{len(text) - 1}}}"] if len(text) > 1 else []
    for i, digit in enumerate(text):
        if digit != "0":
            rest = len(text) - i - 1
            options.append(text[:i] + f"[0-{int(digit) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    options.append(text)
    return "(?:" + "|".join(options) + ")"


class IdConverter(IntegerConverter):
    """``<id:name>``: a row id in a URL: ASCII digits up to SQLite's largest INTEGER.

    Werkzeug's ``\\d+`` took Unicode digits, so ``/pictures/١`` and ``/pictures/０１`` showed picture 1.
    The range is in the pattern itself, not only in the conversion: a number the pattern takes but the
    conversion refuses counted as a route found for another method, so ``DELETE /api/pictures/2**63``
    answered 405 instead of 404. Beyond the range the path matches no route (404) instead of
    overflowing inside SQLite."""

    regex = digits_at_most(SQLITE_MAX_INT)

    def __init__(self, url_map: Any) -> None:
        super().__init__(url_map, max=SQLITE_MAX_INT)


def storage_full(exc: BaseException) -> bool:
    """True when ``exc`` means the disk (or the database's allowed size) is full."""
    if isinstance(exc, sqlite3.OperationalError):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)

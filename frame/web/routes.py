"""The phone pages' one module-level blueprint (``bp``) and how a route finds its app's context.

Every route is added to ``bp`` when its module (``views``, ``images``) is imported, so the same
blueprint serves every app that registers it — the daemon's, and the many a test session builds.
What differs per app (configuration, store, the daemon's status, login bookkeeping) is the
``WebContext`` that ``blueprint.create_blueprint`` binds at registration: ``record_once`` puts it in
``app.extensions[WEB_KEY]``, and each route reads it with ``web_context()``.
"""

from __future__ import annotations

from flask import Blueprint, current_app
from flask.blueprints import BlueprintSetupState

from frame.daemon.http.contract import IdConverter
from frame.web import shown_text
from frame.web.context import WebContext

WEB_KEY = "frame.web"

bp = Blueprint("web", __name__, template_folder="templates", static_folder="static", static_url_path="/web-static")


def _id_converter(setup: BlueprintSetupState) -> None:
    """``<id:...>`` (picture ids within SQLite's range, else 404) before the first route that uses it:
    Flask runs the blueprint's registrations in the order they were recorded."""
    setup.app.url_map.converters.setdefault("id", IdConverter)


bp.record_once(_id_converter)
bp.record_once(lambda setup: shown_text.install(setup.app))  # names shown as they are: shown_text.py


def web_context() -> WebContext:
    """The context of the app handling this request."""
    return current_app.extensions[WEB_KEY]

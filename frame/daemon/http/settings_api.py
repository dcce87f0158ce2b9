"""The owner's settings on the JSON API: ``GET /api/settings`` (values, where each comes from, the
fields), ``PUT /api/settings`` (``{"field.key": value}``: 200 with what changed and when it applies,
422 with ``problems`` per field key) and ``POST /api/settings/restore``.

Their own blueprint, because a change here may come with the owner token (``Authorization: Bearer``,
counted in the shared wrong-token limiter) or from the settings page's phone: a logged-in session with
its CSRF token in ``X-CSRF-Token``, which the pages vouch for (``contract.PAGE_SESSION``; without the
pages only the token works). A change from another site's ``Origin`` is refused, and a body is
capped at 16 KiB (the page's forms' cap; the API's is 64 KiB). Saving, restoring and handing the
settings over to the running daemon are the owner actions of ``frame.daemon.actions.settings``, the
ones the settings page calls. Every answer, errors included, is JSON.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, abort, jsonify, request

from frame.config import fields as owner_fields
from frame.daemon.actions import settings as settings_actions
from frame.daemon.http.api import ApiError, api_deps, check_token
from frame.daemon.http.contract import LOGIN_OR_TOKEN, PAGE_SESSION
from frame.daemon.settings import GENERAL, SettingsEditor
from frame.net.hosts import same_origin

log = logging.getLogger(__name__)

SETTINGS_BODY_MAX = 16 * 1024
FOREIGN_ORIGIN = "Refused: the form was stale or came from another site. Reload the page."

settings = Blueprint("api_settings", __name__, url_prefix="/api/settings")


def _editor() -> SettingsEditor:
    deps = api_deps()
    return SettingsEditor(deps.config_path, state_dir=deps.state_dir)


@settings.before_request
def owner_only() -> Any:
    """A read got past the app's gate (the owner's token or session); a change is capped, from the
    frame's own origin, and the owner's: the bearer token, else a page session with its CSRF token."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return None
    if request.content_length is not None and request.content_length > SETTINGS_BODY_MAX:
        abort(413)
    request.max_content_length = SETTINGS_BODY_MAX  # also caps a body sent without a length (chunked)
    if request.content_length is None and len(request.get_data(cache=True)) >= SETTINGS_BODY_MAX:
        abort(413)  # werkzeug's capped stream ends at the cap without a word: a cut body is never parsed
    if not same_origin(request.headers.get("Origin"), request.host_url):
        log.warning("refused a %s to %s from origin %s", request.method, request.path, request.headers.get("Origin"))
        raise ApiError(403, FOREIGN_ORIGIN)
    deps = api_deps()
    if request.headers.get("Authorization") is not None:
        check_token(deps)
        return None
    vouch = deps.shared.get(PAGE_SESSION)
    problem = vouch(request.headers.get("X-CSRF-Token")) if vouch else (401, LOGIN_OR_TOKEN)
    if problem is not None:
        raise ApiError(*problem)
    return None


@settings.get("")
def read() -> Any:
    deps = api_deps()
    current = _editor().current()
    specs = [{"key": spec.key, "group": spec.group, "label": spec.label, "kind": spec.kind,
              "choices": list(spec.choices), "optional": spec.optional, "applies": spec.applies, "help": spec.help}
             for spec in owner_fields.FIELDS]
    return jsonify({"settings": current["values"], "fields": specs, "previous": current["previous"],
                    "owner_problems": current["owner_problems"], **settings_actions.daemon_state(deps.controller)})


@settings.put("")
def save() -> Any:
    """Body: ``{"schedule.render_at": "02:00", ...}`` (only the fields to change). 200 with what changed
    and when it applies, or 422 with ``problems`` per field key (``""``: not tied to one field)."""
    deps = api_deps()
    try:
        body = json.loads(request.get_data(cache=True) or b"null")
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object of field keys and values")
    proposal, applied = settings_actions.save(_editor(), body, deps.adopt, deps.controller, "api")
    if not proposal.ok:
        return jsonify(proposal.to_json()), 422
    return jsonify({**proposal.to_json(), "applies": {key: owner_fields.by_key()[key].applies
                                                      for key in proposal.changed},
                    "restart_needed": applied.get("restart_needed", [])})


@settings.post("/restore")
def restore() -> Any:
    deps = api_deps()
    problems = settings_actions.restore(_editor(), deps.adopt, deps.controller, "api")
    if problems:
        return jsonify({"ok": False, "problems": {GENERAL: problems}}), 409
    return jsonify({"ok": True})

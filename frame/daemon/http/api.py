"""The JSON API's blueprint and what its routes share: the owner-token check, errors, the request body.

Every route needs the owner: a read the owner token or a logged-in page session (the app's gate,
``access.py``), a change (POST, PATCH, DELETE) ``Authorization: Bearer TOKEN``.
Every request body is validated before anything is stored; bad JSON, wrong types or unknown ids give
a 4xx with ``{"error": "..."}`` (``ApiError``, turned into JSON by ``app.create_app``). The routes
belong to the module-level blueprint ``api``: the pictures (read, rate, delete), render and show routes
here, the prompt queue's in ``queue_api``; the settings (``settings_api``) have their own blueprint
because a logged-in page session may change them too. They read what they share from
``app.extensions[API_KEY]`` (``ApiDeps``), which ``create_app`` sets for each app. What a change does
is the owner action of ``frame.daemon.actions``, the one the phone pages call: here only the request
is read and the action's errors answered (``NotFound`` 404, ``NotRunning`` 503, ``BadValue`` 400).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, current_app, jsonify, request, send_file

from frame.config.schema import Config
from frame.daemon import deletion
from frame.daemon.actions import pictures as picture_actions
from frame.daemon.actions.errors import BadValue, NotFound, NotRunning
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.contract import CONFIG_LISTENERS, SQLITE_MAX_INT, Busy, Controller
from frame.daemon.http.token import token_matches
from frame.daemon.jobs.night import job_dir
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import StoredPicture
from frame.net.ratelimit import FailureLimiter
from frame.redact import redact_deep

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


def request_body() -> dict[str, Any]:
    """The request's JSON object. Parsed here rather than with ``get_json(silent=True)``, which lets a
    deeply nested document's RecursionError through as a 500."""
    try:
        data = json.loads(request.get_data(cache=True))
    except RecursionError:
        raise ApiError(400, "the request body is not usable JSON: nested too deeply") from None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _parse_rating(body: dict[str, Any]) -> tuple[str, int]:
    """``{"rating": 1|-1}`` (like/dislike) or ``{"stars": 1..5}``; anything else is a 400."""
    if set(body) - {"rating", "stars"} or len(body) != 1:
        raise ApiError(400, 'send exactly one of {"rating": 1 or -1} or {"stars": 1..5}')
    key, value = next(iter(body.items()))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key} must be an integer")
    if key == "rating" and value not in (1, -1):
        raise ApiError(400, 'rating must be 1 (like) or -1 (dislike); use {"stars": n} for 1..5 stars')
    if key == "stars" and value not in range(1, 6):
        raise ApiError(400, "stars must be from 1 to 5")
    return ("thumb" if key == "rating" else "stars"), value


def text_field(body: dict[str, Any], key: str, sanitiser: Sanitiser, required: bool = False) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise ApiError(400, f"{key} must be a string")
    cleaned = sanitiser.clean(value)
    if required and not cleaned:
        raise ApiError(400, f"{key} must not be empty")
    if sanitiser.blocked(cleaned):
        raise ApiError(422, f"{key} contains a blocklisted word")
    return cleaned


api = Blueprint("api", __name__, url_prefix="/api")
CHANGE_NEEDS_TOKEN = "this change needs the owner token: Authorization: Bearer TOKEN"
API_KEY = "frame.api"


class ApiDeps:
    """What the API routes share, one per app (``app.extensions[API_KEY]``): the store, the daemon, the
    gallery folder, the sanitiser, the owner token, the wrong-token limiter, the configuration file
    (the settings routes check it again) and ``shared``, the app's ``app.extensions["frame"]``."""

    def __init__(self, config: Config, store: Store, controller: Controller | None, state_dir: Path, token: str,
                 limiter: FailureLimiter, config_path: Path | None = None, shared: dict | None = None) -> None:
        self.config, self.store, self.controller, self.state_dir = config, store, controller, state_dir
        self.token, self.limiter, self.config_path = token, limiter, config_path
        self.shared = shared if shared is not None else {}
        self.sanitiser = Sanitiser(config.feeds.max_prompt_chars, tuple(config.feeds.blocklist))

    def adopt(self, config: Config) -> None:
        """Take over a configuration the owner saved (``app.update_config``): the API's own copy (the
        queue's model rules), the shared copy, the prompt limits and blocklist, and whatever the pages
        registered in ``CONFIG_LISTENERS``."""
        self.config = config  # the queue's checks (model rules, LoRA folders) follow the saved settings
        self.shared["config"] = config
        self.sanitiser = Sanitiser(config.feeds.max_prompt_chars, tuple(config.feeds.blocklist))
        for listener in self.shared.get(CONFIG_LISTENERS, []):
            listener(config)

    def status(self) -> dict[str, Any]:
        """The running daemon's live status, or {} without one."""
        return self.controller.status() if self.controller else {}

    def need_picture(self, picture_id: int) -> StoredPicture:
        return picture_actions.picture(self.store, picture_id)


def api_deps() -> ApiDeps:
    return current_app.extensions[API_KEY]


@api.errorhandler(NotFound)
def not_found(exc: NotFound):
    return jsonify({"error": exc.message}), 404


@api.errorhandler(NotRunning)
def not_running(exc: NotRunning):
    return jsonify({"error": str(exc)}), 503


@api.errorhandler(BadValue)
def bad_value(exc: BadValue):
    return jsonify({"error": exc.message}), 400


@api.before_request
def require_token():
    """A change needs the owner token (a read got past the app's gate with the token or a session)."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    check_token(api_deps())


def check_token(deps: ApiDeps) -> None:
    """The request's ``Authorization: Bearer`` is the owner token, else ``ApiError`` 401. Wrong tokens
    count per address in the limiter (shared with the login form): too many and that address gets
    429 for a while."""
    address = request.remote_addr or "?"
    if deps.limiter.blocked(address):
        log.warning("api: %s %s from %s refused: too many wrong tokens", request.method, request.path, address)
        raise ApiError(429, "too many wrong owner tokens from this address; try again in a few minutes",
                       retry_after=deps.limiter.retry_after(address))
    if not token_matches(request.headers.get("Authorization"), deps.token):
        deps.limiter.failed(address)
        raise ApiError(401, CHANGE_NEEDS_TOKEN)
    deps.limiter.succeeded(address)


# reads ----------------------------------------------------------------------------------------------

@api.get("/status")
def status():
    deps = api_deps()
    data = deps.status() if deps.controller else {"state": "not running"}
    data["feeds"] = [feed.to_json() for feed in deps.store.feed_health()]
    data["queued_prompts"] = len(deps.store.queued_prompts())
    return jsonify(redact_deep(data))  # feed URLs and errors lose their credentials, even for the owner


@api.get("/pictures")
def pictures():
    store = api_deps().store
    limit = request.args.get("limit", 50, type=int)
    offset = request.args.get("offset", 0, type=int)
    if not 1 <= limit <= 500 or not 0 <= offset <= SQLITE_MAX_INT:
        raise ApiError(400, f"limit must be 1..500 and offset from 0 to {SQLITE_MAX_INT}")
    favourites = request.args.get("favourites", "") in ("1", "true")
    rows = store.pictures(limit, offset, favourites_only=favourites)
    return jsonify({"pictures": [row.to_json() for row in rows],
                    "total": store.count_pictures()})


@api.get("/pictures/<id:picture_id>")
def picture(picture_id: int):
    return jsonify(api_deps().need_picture(picture_id).to_json(detail=True))


@api.get("/pictures/<id:picture_id>/image")
def image(picture_id: int):
    deps = api_deps()
    picture = deps.need_picture(picture_id)
    variant = request.args.get("variant", "original")
    if variant not in ("original", "panel"):
        raise ApiError(400, "variant must be original or panel")
    name = picture.panel_file if variant == "panel" else picture.file
    path = gallery.picture_path(deps.state_dir, name)
    if path is None or not path.is_file():
        raise ApiError(404, f"the {variant} image of picture {picture_id} is missing")
    # painted pictures and panel images are PNG; an uploaded photo is kept as JPEG or PNG
    return send_file(path, mimetype="image/jpeg" if path.suffix == ".jpg" else "image/png", max_age=3600)


@api.get("/render/preview")
def preview():
    """Low-resolution preview of the render in progress (written after every finished step)."""
    deps = api_deps()
    render = deps.status().get("render") or {}
    path = job_dir(deps.state_dir, int(render["id"])) / "preview.png" if render.get("id") else None
    if path is None or not path.is_file():
        raise ApiError(404, "no render preview right now")
    return send_file(path, mimetype="image/png", max_age=0)


# changes (the owner token) ----------------------------------------------------------------------------

@api.post("/pictures/<id:picture_id>/rating")
def rate(picture_id: int):
    deps = api_deps()
    kind, value = _parse_rating(request_body())
    picture_actions.rate_picture(deps.store, picture_id, kind, value, source="api")
    return jsonify(deps.need_picture(picture_id).to_json())


@api.post("/render")
def render():
    try:
        return jsonify(picture_actions.render_now(api_deps().controller, "api")), 202
    except Busy as exc:
        raise ApiError(409, str(exc)) from None


@api.post("/show/<id:picture_id>")
def show(picture_id: int):
    deps = api_deps()
    return jsonify(picture_actions.show(deps.store, deps.controller, picture_id, "api")), 202


@api.delete("/pictures/<id:picture_id>")
def delete(picture_id: int):
    """Delete a picture and its files (``frame.daemon.deletion``): 200 with ``rating_kept`` (a painted
    picture's rating stays taste input), 404 for an unknown id, 409 while it is on the panel or a render
    varies it (the message says what to do)."""
    deps = api_deps()
    try:
        kept = picture_actions.delete(deps.store, deps.state_dir, picture_id, deps.status(), "api")
    except deletion.PictureInUse as exc:
        raise ApiError(409, str(exc)) from None
    return jsonify({"deleted": picture_id, "rating_kept": kept})

"""The JSON API's blueprint and what its routes share: the owner-token check, errors, the request body.

Reads are open to the LAN; every change (POST, PATCH, DELETE) needs ``Authorization: Bearer TOKEN``.
Every request body is validated before anything is stored; bad JSON, wrong types or unknown ids give
a 4xx with ``{"error": "..."}`` (``ApiError``, turned into JSON by ``app.create_app``). The routes
belong to the module-level blueprint ``api``: the pictures (read, rate, delete), render and show routes
here, the prompt queue's in ``queue_api``. They read what they share from ``app.extensions[API_KEY]``
(``ApiDeps``), which ``create_app`` sets for each app.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, current_app, jsonify, request, send_file

from frame.config.redact import redact_deep
from frame.config.schema import Config
from frame.daemon import deletion
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.contract import SQLITE_MAX_INT, Busy, Controller
from frame.daemon.http.token import token_matches
from frame.daemon.jobs.night import job_dir
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import StoredPicture
from frame.net.ratelimit import FailureLimiter

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


def rate_picture(store: Store, picture_id: int, kind: str, value: int, source: str = "api") -> None:
    """Store one rating (``thumb`` +1/-1 or ``stars`` 1..5) and log it: the one path the API and the
    frame's buttons share. Raises KeyError for an unknown picture, ValueError for a bad value."""
    store.rate(picture_id, kind, value)
    log.info("picture %d rated %s %+d (%s)", picture_id, kind, value, source)


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
API_KEY = "frame.api"


class ApiDeps:
    """What the API routes share, one per app (``app.extensions[API_KEY]``): the store, the daemon, the
    gallery folder, the sanitiser, the owner token and the wrong-token limiter."""

    def __init__(self, config: Config, store: Store, controller: Controller | None, state_dir: Path, token: str,
                 limiter: FailureLimiter) -> None:
        self.config, self.store, self.controller, self.state_dir = config, store, controller, state_dir
        self.token, self.limiter = token, limiter
        self.sanitiser = Sanitiser(config.feeds.max_prompt_chars, tuple(config.feeds.blocklist))

    def need_controller(self) -> Controller:
        if self.controller is None:
            raise ApiError(503, "the daemon is not running in this process")
        return self.controller

    def need_picture(self, picture_id: int) -> StoredPicture:
        picture = self.store.picture(picture_id)
        if picture is None:
            raise ApiError(404, f"no picture with id {picture_id}")
        return picture


def api_deps() -> ApiDeps:
    return current_app.extensions[API_KEY]


@api.before_request
def require_token():
    """Reads are open; a change needs the owner token. Wrong tokens count per address in the limiter
    (shared with the login form): too many and that address gets 429 for a while."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    deps = api_deps()
    address = request.remote_addr or "?"
    if deps.limiter.blocked(address):
        log.warning("api: %s %s from %s refused: too many wrong tokens", request.method, request.path, address)
        raise ApiError(429, "too many wrong owner tokens from this address; try again in a few minutes",
                       retry_after=deps.limiter.retry_after(address))
    if not token_matches(request.headers.get("Authorization"), deps.token):
        deps.limiter.failed(address)
        raise ApiError(401, "this change needs the owner token: Authorization: Bearer TOKEN")
    deps.limiter.succeeded(address)


# reads ----------------------------------------------------------------------------------------------

@api.get("/status")
def status():
    deps = api_deps()
    data = deps.controller.status() if deps.controller else {"state": "not running"}
    data["feeds"] = [feed.to_json() for feed in deps.store.feed_health()]
    data["queued_prompts"] = len(deps.store.queued_prompts())
    return jsonify(redact_deep(data))  # open to the LAN: feed URLs and errors lose their credentials


@api.get("/pictures")
def pictures():
    store = api_deps().store
    limit = request.args.get("limit", 50, type=int)
    offset = request.args.get("offset", 0, type=int)
    if not 1 <= limit <= 500 or not 0 <= offset <= SQLITE_MAX_INT:
        raise ApiError(400, f"limit must be 1..500 and offset from 0 to {SQLITE_MAX_INT}")
    favourites = request.args.get("favourites", "") in ("1", "true")
    rows = store.pictures(limit, offset, favourites_only=favourites)
    return jsonify({"pictures": [row.api_json() for row in rows],
                    "total": store.count_pictures()})


@api.get("/pictures/<id:picture_id>")
def picture(picture_id: int):
    return jsonify(api_deps().need_picture(picture_id).api_json(detail=True))


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
    render = (deps.controller.status() if deps.controller else {}).get("render") or {}
    path = job_dir(deps.state_dir, int(render["id"])) / "preview.png" if render.get("id") else None
    if path is None or not path.is_file():
        raise ApiError(404, "no render preview right now")
    return send_file(path, mimetype="image/png", max_age=0)


# changes (the owner token) ----------------------------------------------------------------------------

@api.post("/pictures/<id:picture_id>/rating")
def rate(picture_id: int):
    deps = api_deps()
    kind, value = _parse_rating(request_body())
    deps.need_picture(picture_id)
    try:
        rate_picture(deps.store, picture_id, kind, value)
    except KeyError:  # retention (or the owner) deleted it since the check above
        raise ApiError(404, f"no picture with id {picture_id}") from None
    return jsonify(deps.need_picture(picture_id).api_json())


@api.post("/render")
def render():
    try:
        return jsonify(api_deps().need_controller().render_now()), 202
    except Busy as exc:
        raise ApiError(409, str(exc)) from None


@api.post("/show/<id:picture_id>")
def show(picture_id: int):
    deps = api_deps()
    deps.need_picture(picture_id)
    return jsonify(deps.need_controller().show(picture_id)), 202


@api.delete("/pictures/<id:picture_id>")
def delete(picture_id: int):
    """Delete a picture and its files (``frame.daemon.deletion``): 200 with ``rating_kept`` (a painted
    picture's rating stays taste input), 404 for an unknown id, 409 while it is on the panel or a render
    varies it (the message says what to do)."""
    deps = api_deps()
    deps.need_picture(picture_id)
    try:
        kept = deletion.delete_picture(deps.store, deps.state_dir, picture_id,
                                       deps.controller.status() if deps.controller else {})
    except KeyError:
        raise ApiError(404, f"no picture with id {picture_id}") from None
    except deletion.PictureInUse as exc:
        raise ApiError(409, str(exc)) from None
    return jsonify({"deleted": picture_id, "rating_kept": kept})

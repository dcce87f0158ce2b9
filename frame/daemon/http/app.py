"""The JSON API (Flask app factory; served by waitress in ``server.py``).

Reads are open to the LAN; every change (POST) needs ``Authorization: Bearer TOKEN``. Every request
body is validated before anything is stored; bad JSON, wrong types or unknown ids give a 4xx with
``{"error": "..."}``. The routes belong to the module-level blueprint ``api`` (added at import) and
read what they share from ``app.extensions[API_KEY]``, set by ``create_app`` for each app. The web
pages (``frame.web``, handed over by ``frame run`` as a ``contract.PageFactory``) are registered next to
it and find the shared objects in ``app.extensions["frame"]`` (config, store, token, controller,
state_dir, limiter).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, current_app, jsonify, request, send_file
from werkzeug.exceptions import HTTPException, InternalServerError

from frame.config import state_dir as config_state_dir
from frame.config.redact import redact_deep
from frame.config.schema import Config
from frame.daemon import queue as queue_rules
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.contract import SQLITE_MAX_INT, Busy, Controller, IdConverter, PageFactory, storage_full
from frame.daemon.http.token import token_matches
from frame.daemon.jobs.night import job_dir
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import QueuedPrompt, StoredPicture
from frame.net.ratelimit import FailureLimiter

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
STORAGE_FULL = ("the frame's storage is full, so nothing was saved; free space on the SD card "
                "(lower gallery.max_pictures or gallery.max_disk_mb)")


class InsufficientStorage(HTTPException):
    """507: werkzeug has no class for it."""

    code = 507
    description = STORAGE_FULL


class ApiError(Exception):
    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


def _body() -> dict[str, Any]:
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


def _text_field(body: dict[str, Any], key: str, sanitiser: Sanitiser, required: bool = False) -> str:
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


class _Deps:
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


def _deps() -> _Deps:
    return current_app.extensions[API_KEY]


@api.before_request
def require_token():
    """Reads are open; a change needs the owner token. Wrong tokens count per address in the limiter
    (shared with the login form): too many and that address gets 429 for a while."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    deps = _deps()
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
    deps = _deps()
    data = deps.controller.status() if deps.controller else {"state": "not running"}
    data["feeds"] = [feed.to_json() for feed in deps.store.feed_health()]
    data["queued_prompts"] = len(deps.store.queued_prompts())
    return jsonify(redact_deep(data))  # open to the LAN: feed URLs and errors lose their credentials


@api.get("/pictures")
def pictures():
    store = _deps().store
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
    return jsonify(_deps().need_picture(picture_id).api_json(detail=True))


@api.get("/pictures/<id:picture_id>/image")
def image(picture_id: int):
    deps = _deps()
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
    deps = _deps()
    render = (deps.controller.status() if deps.controller else {}).get("render") or {}
    path = job_dir(deps.state_dir, int(render["id"])) / "preview.png" if render.get("id") else None
    if path is None or not path.is_file():
        raise ApiError(404, "no render preview right now")
    return send_file(path, mimetype="image/png", max_age=0)


@api.get("/prompts")
def queued():
    return jsonify({"prompts": [prompt.to_json() for prompt in _deps().store.queued_prompts()]})


# changes (the owner token) ----------------------------------------------------------------------------

@api.post("/pictures/<id:picture_id>/rating")
def rate(picture_id: int):
    deps = _deps()
    kind, value = _parse_rating(_body())
    deps.need_picture(picture_id)
    rate_picture(deps.store, picture_id, kind, value)
    return jsonify(deps.need_picture(picture_id).api_json())


PROMPT_TEXT = ("prompt", "negative_prompt", "theme")


def _prompt_fields(body: dict[str, Any], sanitiser: Sanitiser, new: bool, variation: bool = False) -> dict[str, Any]:
    """A queued prompt's columns from a request body: its texts (sanitised) and its own settings
    (``frame.daemon.queue``); ``new`` requires the prompt, an edit changes only what it sends."""
    allowed = set(PROMPT_TEXT) | set(queue_rules.SETTING_FIELDS) | ({"strength"} if variation else set())
    unknown = set(body) - allowed
    if unknown:
        extra = " (strength is for a variation)" if "strength" in unknown else ""
        raise ApiError(400, f"unknown fields: {', '.join(sorted(unknown))}{extra}")
    values = {key: _text_field(body, key, sanitiser, required=key == "prompt")
              for key in PROMPT_TEXT if new or key in body}
    try:
        values.update(queue_rules.parse_settings(body))
        if "strength" in body:
            values["strength"] = queue_rules.parse_strength(body["strength"])
    except queue_rules.QueueError as exc:
        raise ApiError(400, str(exc)) from None
    return values


def _need_waiting(store: Store, prompt_id: int) -> QueuedPrompt:
    prompt = store.queued_prompt(prompt_id)
    if prompt is None:
        raise ApiError(404, f"no queued prompt with id {prompt_id} (already painted or removed?)")
    return prompt


@api.post("/prompts")
def queue():
    deps = _deps()
    values = _prompt_fields(_body(), deps.sanitiser, new=True)
    prompt_id = deps.store.queue_prompt(**values)
    log.info("queued prompt %d", prompt_id)
    return jsonify({"id": prompt_id, "prompt": values["prompt"]}), 201


@api.patch("/prompts/<id:prompt_id>")
def edit_prompt(prompt_id: int):
    deps = _deps()
    body = _body()
    values = _prompt_fields(body, deps.sanitiser, new=False,
                            variation=_need_waiting(deps.store, prompt_id).variation)
    try:
        prompt = deps.store.update_prompt(prompt_id, **values)
    except KeyError:
        raise ApiError(404, f"no queued prompt with id {prompt_id}") from None
    log.info("queued prompt %d edited (%s)", prompt_id, ", ".join(sorted(values)) or "nothing")
    return jsonify(prompt.to_json())


@api.delete("/prompts/<id:prompt_id>")
def remove_prompt(prompt_id: int):
    deps = _deps()
    try:
        deps.store.remove_prompt(prompt_id)
    except KeyError:
        raise ApiError(404, f"no queued prompt with id {prompt_id} (already painted or removed?)") from None
    log.info("queued prompt %d removed", prompt_id)
    return jsonify({"removed": prompt_id})


@api.post("/prompts/<id:prompt_id>/move")
def move_prompt(prompt_id: int):
    deps = _deps()
    body = _body()
    if set(body) != {"position"}:
        raise ApiError(400, 'send {"position": N}: 1 is the next night\'s prompt')
    _need_waiting(deps.store, prompt_id)
    try:
        prompts = deps.store.move_prompt(prompt_id, body["position"])
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    log.info("queued prompt %d moved to position %s", prompt_id, body["position"])
    return jsonify({"prompts": [prompt.to_json() for prompt in prompts]})


@api.post("/pictures/<id:picture_id>/reuse-seed")
def reuse_seed(picture_id: int):
    """Queue the picture's prompt again with its seed (the night's other settings)."""
    deps = _deps()
    picture = deps.need_picture(picture_id)
    if picture.seed is None:
        raise ApiError(422, f"picture {picture_id} has no stored seed")
    prompt_id = deps.store.queue_prompt(picture.prompt, picture.negative_prompt, picture.theme, seed=picture.seed)
    log.info("queued prompt %d: picture %d's prompt with seed %d", prompt_id, picture_id, picture.seed)
    return jsonify({"id": prompt_id, "prompt": picture.prompt, "seed": picture.seed}), 201


@api.post("/pictures/<id:picture_id>/variation")
def variation(picture_id: int):
    """"More like this": queue an image-to-image variation (``{"strength": 0.3..0.8}``, default 0.6) that
    counts as the strongest like (``frame.daemon.queue.queue_variation``)."""
    deps = _deps()
    body = _body()
    if set(body) - {"strength"}:
        raise ApiError(400, f"unknown fields: {', '.join(sorted(set(body) - {'strength'}))}")
    picture = deps.need_picture(picture_id)
    try:
        prompt_id, strength = queue_rules.queue_variation(deps.config, deps.store, deps.state_dir, picture,
                                                           body.get("strength"))
    except queue_rules.QueueError as exc:
        raise ApiError(400 if exc.field == "strength" else 422, str(exc)) from None
    return jsonify({"id": prompt_id, "prompt": picture.prompt, "source_picture_id": picture_id,
                    "strength": strength}), 201


@api.post("/render")
def render():
    try:
        return jsonify(_deps().need_controller().render_now()), 202
    except Busy as exc:
        raise ApiError(409, str(exc)) from None


@api.post("/show/<id:picture_id>")
def show(picture_id: int):
    deps = _deps()
    deps.need_picture(picture_id)
    return jsonify(deps.need_controller().show(picture_id)), 202


def _register_pages(app: Flask, pages: PageFactory, config: Config, store: Store, config_path: Path | None) -> None:
    """Add the phone pages (``frame run`` passes ``frame.web.create_blueprint``); if they fail to
    build, the API still runs and the log says why."""
    try:
        app.register_blueprint(pages(config, store, config_path=config_path))
    except Exception:
        log.exception("the web pages could not be built; running the JSON API only")


CONFIG_LISTENERS = "config_listeners"


def update_config(app: Flask, config: Config) -> None:
    """Give the API and the pages a configuration the running daemon took over (settings from the
    phone): the API's prompt limits and blocklist, and whatever the pages registered in
    ``app.extensions["frame"]["config_listeners"]``."""
    shared = app.extensions["frame"]
    shared["config"] = config
    deps = app.extensions[API_KEY]
    deps.sanitiser = Sanitiser(config.feeds.max_prompt_chars, tuple(config.feeds.blocklist))
    for listener in shared.get(CONFIG_LISTENERS, []):
        listener(config)


def create_app(config: Config, store: Store, *, token: str, controller: Controller | None = None,
               state_dir: Path | None = None, pages: PageFactory | None = None,
               config_path: str | Path | None = None, limiter: FailureLimiter | None = None) -> Flask:
    """The daemon's WSGI app: the JSON API under /api plus the web pages ``pages`` builds, if given.

    ``config_path``: the file the daemon loaded its configuration from (the settings page checks it
    again); None means the file ``load_config`` would pick by default."""

    state = Path(state_dir) if state_dir else config_state_dir(config)
    app = Flask("frame")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.config["JSON_SORT_KEYS"] = False
    app.url_map.converters["id"] = IdConverter
    limiter = limiter or FailureLimiter()  # one for the API and the login form: same token, same count
    app.extensions["frame"] = {"config": config, "store": store, "token": token, "controller": controller,
                               "state_dir": state, "limiter": limiter, CONFIG_LISTENERS: []}
    app.extensions[API_KEY] = _Deps(config, store, controller, state, token, limiter)
    app.register_blueprint(api)

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
        return jsonify({"error": exc.message}), exc.status, headers

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if request.path.startswith("/api/"):
            return jsonify({"error": exc.description or exc.name}), exc.code
        return exc

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        """A full disk is 507 with nothing stored; anything else a logged 500, JSON under /api."""
        if storage_full(exc):
            log.error("%s %s refused: %s", request.method, request.path, exc)
            failure: HTTPException = InsufficientStorage()
        else:
            log.exception("%s %s failed", request.method, request.path)
            failure = InternalServerError("internal error; the daemon's log has the details")
        return http_error(failure)

    if pages is not None:
        _register_pages(app, pages, config, store, Path(config_path) if config_path else None)
    return app

"""The JSON API (Flask app factory; served by waitress in ``server.py``).

Reads are open to the LAN; every change (POST) needs ``Authorization: Bearer TOKEN``. Every request
body is validated before anything is stored; bad JSON, wrong types or unknown ids give a 4xx with
``{"error": "..."}``. The web pages (``frame.web``) are registered as a blueprint when installed, and
find the shared objects in ``app.extensions["frame"]`` (config, store, token, controller, state_dir).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from flask import Blueprint, Flask, jsonify, request, send_file
from werkzeug.exceptions import HTTPException

from frame.daemon import gallery
from frame.daemon.feedparse import Sanitiser
from frame.daemon.night import job_dir
from frame.daemon.store import Store
from frame.daemon.token import token_matches

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
PUBLIC_FIELDS = ("id", "created_at", "night", "prompt", "negative_prompt", "theme", "style", "origin", "seed",
                 "sampler", "steps", "guidance", "width", "height", "model", "rating_kind", "rating_value",
                 "favourite")


class Busy(Exception):
    """A render is already running (only one at a time)."""


class Controller(Protocol):
    """What the API asks of the running daemon (``service.Daemon`` implements it)."""

    def status(self) -> dict[str, Any]: ...

    def render_now(self) -> dict[str, Any]: ...

    def show(self, picture_id: int) -> dict[str, Any]: ...


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _body() -> dict[str, Any]:
    data = request.get_json(silent=True, force=True)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _picture_json(picture: dict[str, Any], detail: bool = False) -> dict[str, Any]:
    data = {key: picture.get(key) for key in PUBLIC_FIELDS}
    data["image_url"] = f"/api/pictures/{picture['id']}/image"
    data["panel_url"] = f"/api/pictures/{picture['id']}/image?variant=panel" if picture.get("panel_file") else None
    if detail:
        data.update(why=picture.get("why"), features=picture.get("features"), timings=picture.get("timings"))
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


class _Deps:
    """What the route functions share: the store, the daemon, the gallery folder, the sanitiser."""

    def __init__(self, config: Any, store: Store, controller: Controller | None, state_dir: Path) -> None:
        self.store, self.controller, self.state_dir = store, controller, state_dir
        self.sanitiser = Sanitiser(config.feeds.max_prompt_chars, tuple(config.feeds.blocklist))

    def need_controller(self) -> Controller:
        if self.controller is None:
            raise ApiError(503, "the daemon is not running in this process")
        return self.controller

    def need_picture(self, picture_id: int) -> dict[str, Any]:
        picture = self.store.picture(picture_id)
        if picture is None:
            raise ApiError(404, f"no picture with id {picture_id}")
        return picture


def _read_routes(api: Blueprint, deps: _Deps) -> None:
    store = deps.store

    @api.get("/status")
    def status():
        data = deps.controller.status() if deps.controller else {"state": "not running"}
        data["feeds"] = store.feed_health()
        data["queued_prompts"] = len(store.queued_prompts())
        return jsonify(data)

    @api.get("/pictures")
    def pictures():
        limit = request.args.get("limit", 50, type=int)
        offset = request.args.get("offset", 0, type=int)
        if not 1 <= limit <= 500 or offset < 0:
            raise ApiError(400, "limit must be 1..500 and offset 0 or more")
        favourites = request.args.get("favourites", "") in ("1", "true")
        rows = store.pictures(limit, offset, favourites_only=favourites)
        return jsonify({"pictures": [_picture_json(p) for p in rows], "total": store.count_pictures()})

    @api.get("/pictures/<int:picture_id>")
    def picture(picture_id: int):
        return jsonify(_picture_json(deps.need_picture(picture_id), detail=True))

    @api.get("/pictures/<int:picture_id>/image")
    def image(picture_id: int):
        picture = deps.need_picture(picture_id)
        variant = request.args.get("variant", "original")
        if variant not in ("original", "panel"):
            raise ApiError(400, "variant must be original or panel")
        name = picture["panel_file"] if variant == "panel" else picture["file"]
        path = gallery.picture_path(deps.state_dir, name)
        if path is None or not path.is_file():
            raise ApiError(404, f"the {variant} image of picture {picture_id} is missing")
        return send_file(path, mimetype="image/png", max_age=3600)

    @api.get("/render/preview")
    def preview():
        """Low-resolution preview of the render in progress (written after every finished step)."""
        render = (deps.controller.status() if deps.controller else {}).get("render") or {}
        path = job_dir(deps.state_dir, int(render["id"])) / "preview.png" if render.get("id") else None
        if path is None or not path.is_file():
            raise ApiError(404, "no render preview right now")
        return send_file(path, mimetype="image/png", max_age=0)

    @api.get("/prompts")
    def queued():
        return jsonify({"prompts": store.queued_prompts()})


def _change_routes(api: Blueprint, deps: _Deps) -> None:
    store = deps.store

    @api.post("/pictures/<int:picture_id>/rating")
    def rate(picture_id: int):
        kind, value = _parse_rating(_body())
        deps.need_picture(picture_id)
        rate_picture(store, picture_id, kind, value)
        return jsonify(_picture_json(deps.need_picture(picture_id)))

    @api.post("/prompts")
    def queue():
        body = _body()
        unknown = set(body) - {"prompt", "negative_prompt", "theme"}
        if unknown:
            raise ApiError(400, f"unknown fields: {', '.join(sorted(unknown))}")
        prompt = _text_field(body, "prompt", deps.sanitiser, required=True)
        negative = _text_field(body, "negative_prompt", deps.sanitiser)
        theme = _text_field(body, "theme", deps.sanitiser)
        prompt_id = store.queue_prompt(prompt, negative, theme)
        log.info("queued prompt %d", prompt_id)
        return jsonify({"id": prompt_id, "prompt": prompt}), 201

    @api.post("/render")
    def render():
        try:
            return jsonify(deps.need_controller().render_now()), 202
        except Busy as exc:
            raise ApiError(409, str(exc)) from None

    @api.post("/show/<int:picture_id>")
    def show(picture_id: int):
        deps.need_picture(picture_id)
        return jsonify(deps.need_controller().show(picture_id)), 202


def create_api(config: Any, store: Store, token: str, controller: Controller | None,
               state_dir: Path) -> Blueprint:
    """The /api blueprint: open reads, token-protected changes."""
    api = Blueprint("api", __name__, url_prefix="/api")

    @api.before_request
    def require_token():
        if request.method not in ("GET", "HEAD", "OPTIONS") and not token_matches(
                request.headers.get("Authorization"), token):
            raise ApiError(401, "this change needs the owner token: Authorization: Bearer TOKEN")

    deps = _Deps(config, store, controller, state_dir)
    _read_routes(api, deps)
    _change_routes(api, deps)
    return api


def _register_web(app: Flask, config: Any, store: Store, config_path: Path | None) -> None:
    """Add the phone pages from ``frame.web`` when that package is installed."""
    try:
        import frame.web as web
    except ModuleNotFoundError as exc:
        if exc.name in ("frame.web",):
            return
        log.exception("frame.web is installed but cannot be imported; the web pages are disabled")
        return
    if not hasattr(web, "create_blueprint"):
        return
    try:
        app.register_blueprint(web.create_blueprint(config, store, config_path=config_path))
    except Exception:
        log.exception("frame.web.create_blueprint failed; the web pages are disabled")


def create_app(config: Any, store: Store, *, token: str, controller: Controller | None = None,
               state_dir: Path | None = None, web: bool = True, config_path: str | Path | None = None) -> Flask:
    """The daemon's WSGI app: the JSON API under /api plus (optionally) the web pages.

    ``config_path``: the file the daemon loaded its configuration from (the settings page checks it
    again); None means the file ``load_config`` would pick by default."""
    from frame.config import state_dir as config_state_dir

    state = Path(state_dir) if state_dir else config_state_dir(config)
    app = Flask("frame")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.config["JSON_SORT_KEYS"] = False
    app.extensions["frame"] = {"config": config, "store": store, "token": token, "controller": controller,
                               "state_dir": state}
    app.register_blueprint(create_api(config, store, token, controller, state))

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError):
        return jsonify({"error": exc.message}), exc.status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if request.path.startswith("/api/"):
            return jsonify({"error": exc.description or exc.name}), exc.code
        return exc

    if web:
        _register_web(app, config, store, Path(config_path) if config_path else None)
    return app

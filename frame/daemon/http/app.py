"""The daemon's WSGI app (served by waitress in ``frame.net.server``): the JSON API under /api plus the
phone pages.

The API's routes are the blueprint ``frame.daemon.http.api.api`` (pictures, ratings, render, show) and
``queue_api`` (the prompt queue), added when those modules are imported, and ``settings_api.settings``
(the owner's settings). The web pages (``frame.web``, handed over by ``frame run`` as a
``contract.PageFactory``) are registered next to them and find the shared objects in
``app.extensions["frame"]`` (config, store, token, controller, state_dir, limiter).
"""

from __future__ import annotations

import logging
from pathlib import Path

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException, InternalServerError

from frame.config import state_dir as config_state_dir
from frame.config.schema import Config
from frame.daemon.http import (
    access,
    models_api,  # noqa: F401 - importing it adds the models routes to api
    queue_api,  # noqa: F401 - importing it adds the queue's routes to api
)
from frame.daemon.http.api import API_KEY, ApiDeps, ApiError, api
from frame.daemon.http.contract import (
    CONFIG_LISTENERS,
    MODEL_IMPORTS,
    Controller,
    IdConverter,
    PageFactory,
    storage_full,
)
from frame.daemon.http.settings_api import settings
from frame.daemon.jobs.model_import import ModelImports
from frame.daemon.store.database import Store
from frame.net.hosts import HostPolicy
from frame.net.ratelimit import FailureLimiter
from frame.net.server import split_listen

__all__ = ["MAX_BODY", "create_app", "update_config"]

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
STORAGE_FULL = ("the frame's storage is full, so nothing was saved; free space on the SD card "
                "(lower gallery.max_pictures or gallery.max_disk_mb)")


class InsufficientStorage(HTTPException):
    """507: werkzeug has no class for it."""

    code = 507
    description = STORAGE_FULL


def _register_pages(app: Flask, pages: PageFactory, config: Config, store: Store, config_path: Path | None) -> None:
    """Add the phone pages (``frame run`` passes ``frame.web.create_blueprint``); if they fail to
    build, the API still runs and the log says why."""
    try:
        app.register_blueprint(pages(config, store, config_path=config_path))
    except Exception:
        log.exception("the web pages could not be built; running the JSON API only")


def update_config(app: Flask, config: Config) -> None:
    """Give the API and the pages a configuration the running daemon took over (settings from the
    phone): the API's prompt limits and blocklist, and whatever the pages registered in
    ``app.extensions["frame"]["config_listeners"]`` (``ApiDeps.adopt``)."""
    app.extensions[API_KEY].adopt(config)


def _rendering(controller: Controller | None) -> bool:
    return controller is not None and (controller.status() or {}).get("state") == "rendering"


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
    shared = {"config": config, "store": store, "token": token, "controller": controller,
              "state_dir": state, "limiter": limiter, CONFIG_LISTENERS: []}
    # one model import for the pages and the API; it yields to a render (frame.daemon.jobs.model_import)
    shared[MODEL_IMPORTS] = ModelImports(state, lambda: _rendering(controller))
    app.extensions["frame"] = shared
    app.extensions[API_KEY] = ApiDeps(config, store, controller, state, token, limiter,
                                      config_path=Path(config_path) if config_path else None, shared=shared)
    app.register_blueprint(api)
    app.register_blueprint(settings)
    hosts = HostPolicy(config.web.hosts, split_listen(config.web.listen)[0])

    @app.before_request
    def known_host():
        """421 for a Host name the frame does not go by (DNS rebinding; ``frame.net.hosts``)."""
        header = request.headers.get("Host")
        if hosts.allows(header):
            return None
        log.warning("refused %s %s for Host %r (not one of the frame's names; web.hosts)", request.method,
                    request.path, (header or "")[:100])
        if request.path.startswith("/api/"):
            return jsonify({"error": hosts.refusal(header or "")}), 421
        return hosts.refusal(header or ""), 421, {"Content-Type": "text/plain; charset=utf-8"}

    @app.before_request
    def owner_only():
        """Nothing without the owner token or a logged-in session but what the pages call public
        (``frame.daemon.http.access``); after the Host check, so a refused name learns nothing."""
        return access.admit(shared)

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

"""The models on the JSON API: ``GET /api/models`` (each model's name, kind, precision, whether it is in
use; the import's state), ``POST /api/models/use`` (``{"name": NAME}``: 200 with what changed, 422 with
the settings' problems, 404 for no such model) and ``POST /api/models/import`` (``{"url": URL, "name":
NAME, "weights": "fp16"}``: 202 when started, 400 for a bad URL or name, 409 while a render or another
import runs). The owner actions are ``frame.daemon.actions.models``, the settings page's own; every
change needs the owner token (``api.require_token``)."""

from __future__ import annotations

from typing import Any

from flask import jsonify

from frame.daemon.actions import models as model_actions
from frame.daemon.http.api import ApiError, api, api_deps, request_body
from frame.daemon.jobs.model_import import ImportRefused
from frame.daemon.settings import SettingsEditor


@api.get("/models")
def models() -> Any:
    deps = api_deps()
    return jsonify({"models": model_actions.listing(deps.state_dir, deps.config.model.source),
                    "import": model_actions.imports_of(deps.shared, deps.state_dir).state()})


@api.post("/models/use")
def use_model() -> Any:
    deps = api_deps()
    name = request_body().get("name")
    if not isinstance(name, str):
        raise ApiError(400, "name must be a string: a model's name from GET /api/models")
    editor = SettingsEditor(deps.config_path, state_dir=deps.state_dir)
    proposal, applied = model_actions.use(editor, deps.state_dir, name, deps.adopt, deps.controller, "api")
    if not proposal.ok:
        return jsonify(proposal.to_json()), 422
    return jsonify({**proposal.to_json(), "restart_needed": applied.get("restart_needed", [])})


@api.post("/models/import")
def import_model() -> Any:
    deps = api_deps()
    body = request_body()
    imports = model_actions.imports_of(deps.shared, deps.state_dir)
    try:
        name = model_actions.start_import(imports, body.get("url"), body.get("name"), body.get("weights", "fp16"),
                                          deps.config.worker.memory_limit_mb, "api")
    except ImportRefused as exc:
        raise ApiError(400 if exc.field else 409, str(exc)) from None
    return jsonify({"name": name, "import": imports.state()}), 202

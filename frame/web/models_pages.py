"""The settings page's models section (``/config#models-title``): the models on the frame with their
kind and precision, "use this model", and "import from a URL".

Each button is an owner action of ``frame.daemon.actions.models`` (the JSON API's ``/api/models`` calls
the same ones); here the form is read and the answer flashed. Every POST has passed
``blueprint._guard``: a logged-in session with its CSRF token.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import flash, redirect, request, url_for

from frame.daemon.actions import models as model_actions
from frame.daemon.actions.errors import NotFound
from frame.daemon.jobs.model_import import WEIGHTS, ImportRefused
from frame.daemon.models_folder import models_dir
from frame.daemon.settings import SettingsEditor
from frame.redact import redact_text
from frame.web.routes import bp, web_context

log = logging.getLogger(__name__)
ANCHOR = "models-title"


def models_section(ctx) -> dict[str, Any]:
    """What the section shows: the models listed, and the import's state when there is one."""
    return {"models": model_actions.listing(ctx.state_dir, ctx.config.model.source),
            "folder": str(models_dir(ctx.state_dir)), "importing": ctx.model_imports().state(),
            "rendering": ctx.rendering(), "weights": WEIGHTS}


def _back() -> Any:
    return redirect(url_for("web.config", _anchor=ANCHOR), 303)


@bp.post("/config/models/use")
def use_model() -> Any:
    ctx = web_context()
    name = request.form.get("name", "")
    try:
        editor = SettingsEditor(ctx.config_path, state_dir=ctx.state_dir)
        proposal, _ = model_actions.use(editor, ctx.state_dir, name, ctx.take_config, ctx.controller, "web")
    except NotFound as exc:
        flash(f"Not changed: {exc}.")
        return _back()
    if not proposal.ok:
        messages = [message for found in proposal.problems.values() for message in found]
        flash(redact_text(f"Not changed: {'; '.join(messages)}."))
    elif proposal.changed:
        flash(f"Tonight's picture is painted with {name}.")
    else:
        flash(f"{name} is already the model in use.")
    return _back()


@bp.post("/config/models/import")
def import_model() -> Any:
    """Start ``frame model import URL`` in a child; its progress is on the status page."""
    ctx = web_context()
    form = request.form
    try:
        name = model_actions.start_import(ctx.model_imports(), form.get("url", ""), form.get("name", ""),
                                          form.get("weights", "fp16"), ctx.config.worker.memory_limit_mb, "web")
    except ImportRefused as exc:
        flash(f"No import started: {exc}.")
        return _back()
    flash(f"Importing {name}: the progress is on the status page; the model appears here when it is complete.")
    return redirect(url_for("web.status", _anchor="model-import"), 303)

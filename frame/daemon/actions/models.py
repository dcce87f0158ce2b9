"""The owner's actions on the models (the settings page's models section and ``/api/models``): list the
models on the frame, use one, import one from a URL.

"Use this model" is a settings change like any other: ``model.source`` set to the folder through
``frame.daemon.actions.settings.save``, with the same checks (the check child reads the model's
facts) and the same hand-over to the running daemon. Only a model in ``<state_dir>/models`` or the
demo can be chosen by name, so a request cannot point the frame at an arbitrary path. The import runs
in a child (``frame.daemon.jobs.model_import``); here it is only asked for.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from frame.daemon.actions import settings as settings_actions
from frame.daemon.actions.errors import NotFound
from frame.daemon.http.contract import MODEL_IMPORTS, Controller
from frame.daemon.jobs.model_import import ModelImports
from frame.daemon.models_folder import list_models, model_in_folder
from frame.daemon.settings import Proposal, SettingsEditor
from frame.models import DEMO_SOURCE

log = logging.getLogger(__name__)


def listing(state_dir: Path, source: str) -> list[dict[str, Any]]:
    """Every model on the frame with its kind, precision and whether it is the one in use."""
    return [entry.to_json() for entry in list_models(state_dir, source)]


def use(editor: SettingsEditor, state_dir: Path, name: str, adopt: settings_actions.Adopt,
        controller: Controller | None, origin: str) -> tuple[Proposal, dict[str, Any]]:
    """Set ``model.source`` to the model NAME (a folder in ``<state_dir>/models``, or ``demo``) through
    the settings' save; NotFound when there is no such model. Returns what ``settings.save`` returns."""
    folder = DEMO_SOURCE if name == DEMO_SOURCE else model_in_folder(state_dir, name)
    if folder is None:
        raise NotFound(f"no model named {name[:80]!r} in {Path(state_dir) / 'models'}")
    proposal, applied = settings_actions.save(editor, {"model.source": str(folder)}, adopt, controller, origin)
    if proposal.ok and proposal.changed:
        log.info("model %s chosen (%s)", name, origin)
    return proposal, applied


def imports_of(shared: dict[str, Any], state_dir: Path) -> ModelImports:
    """The app's one ``ModelImports`` (made by ``frame.daemon.http.app.create_app``), or one for
    ``state_dir`` when the pages are mounted without the daemon's app."""
    found = shared.get(MODEL_IMPORTS)
    if found is None:
        found = shared[MODEL_IMPORTS] = ModelImports(state_dir, lambda: False)
    return found


def start_import(imports: ModelImports, url: Any, name: Any, weights: Any, cap_mb: float, origin: str) -> str:
    """Start ``frame model import URL <state_dir>/models/NAME --weights WEIGHTS`` in a child; returns the
    model's name. ``ImportRefused`` (its ``field`` names the bad value, "" when it is the moment: an
    import or a render runs) passes through for each side to answer."""
    name = imports.start(url, name, weights, cap_mb)
    log.info("model import of %s requested (%s)", name, origin)
    return name

"""The owner's actions on the settings: save a change, restore the previous version, restart.

``frame.daemon.settings.SettingsEditor`` checks and writes ``settings.yaml``; here a saved (or
restored) configuration is handed over: first to the app that took the request (``adopt``: the
pages' and the API's copy, so the next page shows it even without a daemon), then to the running
daemon (``Controller.apply_settings``), which answers what still waits for a restart. A controller
without the settings half (a test's) only saves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from frame.config.schema import Config
from frame.daemon.actions.errors import NotRunning
from frame.daemon.http.contract import Controller
from frame.daemon.settings import Proposal, SettingsEditor

log = logging.getLogger(__name__)

Adopt = Callable[[Config], None]
NO_DAEMON_STATE = {"restart_needed": [], "can_restart": False, "settings_problem": None}


def daemon_state(controller: Controller | None) -> dict[str, Any]:
    """The running daemon's view: settings waiting for a restart, whether it can restart itself, why
    ``settings.yaml`` was set aside at start."""
    state = getattr(controller, "settings_state", None)
    return state() if state else dict(NO_DAEMON_STATE)


def _hand_over(config: Config | None, adopt: Adopt, controller: Controller | None) -> dict[str, Any]:
    if config is None:
        return {}
    adopt(config)
    take = getattr(controller, "apply_settings", None)
    return take(config) if take else {}


def save(editor: SettingsEditor, changes: Mapping[str, Any], adopt: Adopt, controller: Controller | None,
         source: str) -> tuple[Proposal, dict[str, Any]]:
    """Check ``changes`` (field key → value); when they pass and change something, write them and hand
    the configuration over. Returns the proposal (its problems per field, what changed) and the
    daemon's answer ({} when nothing was saved)."""
    proposal = editor.propose(changes)
    applied: dict[str, Any] = {}
    if proposal.ok and proposal.changed:
        editor.save(proposal)
        applied = _hand_over(proposal.config, adopt, controller)
        log.info("settings saved (%s; %s)", ", ".join(proposal.changed), source)
    return proposal, applied


def restore(editor: SettingsEditor, adopt: Adopt, controller: Controller | None, source: str) -> list[str]:
    """Swap the previous settings back in and hand them over; returns why not ([] when restored)."""
    restored, config, problems = editor.restore_previous()
    if not restored:
        return problems
    _hand_over(config, adopt, controller)
    log.info("previous settings restored (%s)", source)
    return []


def restart(controller: Controller | None, source: str) -> None:
    """Ask the daemon to restart (it exits for systemd to start it again); ``NotRunning`` when this
    frame cannot restart itself (it does not run as the systemd service)."""
    if controller is None or not daemon_state(controller).get("can_restart"):
        raise NotRunning("this frame cannot restart itself (it does not run as the systemd service)")
    controller.request_restart()
    log.info("restart requested (%s)", source)

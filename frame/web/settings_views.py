"""The settings page (``/config``) and its JSON twin (``/api/settings``): the owner's settings, edited.

Both go through ``frame.daemon.settings.SettingsEditor``: the same checks as ``frame config check``,
every problem next to its field, ``settings.yaml`` written atomically with the previous version kept.
After a save the running daemon takes the settings over (``Controller.apply_settings``); those it can
only read at start are listed with a restart button. Every POST/PUT has passed ``blueprint._guard``:
a logged-in session with its CSRF token (form field, or ``X-CSRF-Token`` for the JSON API), or the
owner token as ``Authorization: Bearer``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from flask import flash, jsonify, redirect, render_template, request, url_for

from frame.config import fields as owner_fields
from frame.config.redact import redact_text
from frame.daemon.jobs.estimate_child import EstimateBusy
from frame.daemon.settings import GENERAL, Proposal, SettingsEditor
from frame.web.context import WebContext
from frame.web.routes import bp, web_context
from frame.web.settings import settings_report
from frame.web.settings_form import APPLIES, feed_name, form_rows, parse_form

log = logging.getLogger(__name__)


def editor(ctx: WebContext) -> SettingsEditor:
    return SettingsEditor(ctx.config_path, state_dir=ctx.state_dir)


def daemon_state(ctx: WebContext) -> dict[str, Any]:
    """The running daemon's view: settings waiting for a restart, whether it can restart itself."""
    state = getattr(ctx.controller, "settings_state", None)
    return state() if state else {"restart_needed": [], "can_restart": False, "settings_problem": None}


def apply(ctx: WebContext, proposal: Proposal) -> dict[str, Any]:
    """Hand a saved configuration to the running daemon (or just to this app's pages)."""
    if proposal.config is None:
        return {}
    ctx.config = proposal.config
    take = getattr(ctx.controller, "apply_settings", None)
    return take(proposal.config) if take else {}


def _page(ctx: WebContext, *, submitted: dict | None = None, proposal: Proposal | None = None,
          form_problems: dict | None = None) -> Any:
    current = editor(ctx).current()
    problems = dict(form_problems or {})
    for key, messages in (proposal.problems if proposal else {}).items():
        problems.setdefault(key, []).extend(messages)
    return render_template("config.html", report=settings_report(ctx.config, ctx.config_path), current=current,
                           groups=form_rows(current, submitted), problems=problems, general=problems.get(GENERAL, []),
                           others=proposal.others if proposal else [], daemon=daemon_state(ctx),
                           feed_name=feed_name, fields=owner_fields.by_key(), estimating=estimating(ctx))


def estimating(ctx: WebContext) -> dict[str, Any]:
    """The estimate card's live part: ``running`` (since when, as HH:MM, or ""), the last run's
    ``error`` (redacted: the page is open to the LAN) and ``rendering`` (the button is refused then)."""
    state = ctx.estimate_runner().state()
    since = state["running"]
    return {"running": time.strftime("%H:%M", time.localtime(since)) if since is not None else "",
            "error": redact_text(state["error"]) if state["error"] else "", "rendering": ctx.rendering()}


def _summary(changed: dict[str, str] | list[str]) -> str:
    keys = owner_fields.by_key()
    parts: dict[str, list[str]] = {}
    for key in changed:
        parts.setdefault(APPLIES[keys[key].applies], []).append(keys[key].label.replace(" …", ""))
    text = "; ".join(f"{when}: {', '.join(labels)}" for when, labels in parts.items())
    return text[:1].upper() + text[1:]


@bp.get("/config")
def config() -> Any:
    return _page(web_context())


@bp.post("/config")
def save_config() -> Any:
    ctx = web_context()
    current = editor(ctx).current()
    locked = {key for key, info in current["values"].items() if info["locked"]}
    changes, form_problems = parse_form(request.form, locked)
    proposal = editor(ctx).propose(changes) if not form_problems else None
    if proposal is not None and proposal.ok and proposal.changed:
        editor(ctx).save(proposal)
        apply(ctx, proposal)
        log.info("web: settings saved (%s)", ", ".join(proposal.changed))
        flash(f"Saved. {_summary(proposal.changed)}.")
        return redirect(url_for("web.config"), 303)
    if proposal is not None and proposal.ok:
        flash("Nothing changed.")
        return redirect(url_for("web.config"), 303)
    submitted = {key: value for key, value in changes.items()}
    return _page(ctx, submitted=submitted, proposal=proposal, form_problems=form_problems), 400


@bp.post("/config/restore")
def restore_config() -> Any:
    ctx = web_context()
    restored, config, problems = editor(ctx).restore_previous()
    if restored:
        apply(ctx, Proposal({}, config))
        log.info("web: previous settings restored")
        flash("The previous settings are back (restore again to undo).")
    else:
        flash(f"Nothing restored: {'; '.join(problems)}.")
    return redirect(url_for("web.config"), 303)


@bp.post("/config/restart")
def restart() -> Any:
    ctx = web_context()
    if not daemon_state(ctx).get("can_restart"):
        flash("This frame cannot restart itself (it does not run as the systemd service): restart it by hand.")
        return redirect(url_for("web.config"), 303)
    ctx.controller.request_restart()
    flash("Restarting: the page is back in about 20 seconds.")
    return redirect(url_for("web.config"), 303)


@bp.post("/config/estimate")
def estimate_now() -> Any:
    """The estimate card's button: ``frame estimate`` in a child (``frame.daemon.jobs.estimate_child``)."""
    ctx = web_context()
    try:
        ctx.estimate_runner().start(ctx.config, ctx.state_dir)
    except EstimateBusy as exc:
        flash(f"No estimate started: {exc}.")
    else:
        log.info("web: estimate requested")
        flash("Estimating: the result appears on this page in a minute or two (reload it).")
    return redirect(url_for("web.config", _anchor="estimate-title"), 303)


# the JSON API -----------------------------------------------------------------------------------

@bp.get("/api/settings")
def api_settings() -> Any:
    ctx = web_context()
    current = editor(ctx).current()
    specs = [{"key": spec.key, "group": spec.group, "label": spec.label, "kind": spec.kind,
              "choices": list(spec.choices), "optional": spec.optional, "applies": spec.applies, "help": spec.help}
             for spec in owner_fields.FIELDS]
    return jsonify({"settings": current["values"], "fields": specs, "previous": current["previous"],
                    "owner_problems": current["owner_problems"], **daemon_state(ctx)})


@bp.put("/api/settings")
def api_save_settings() -> Any:
    """Body: ``{"schedule.render_at": "02:00", ...}`` (only the fields to change). 200 with what changed
    and when it applies, or 422 with ``problems`` per field key (``""``: not tied to one field)."""
    ctx = web_context()
    try:
        body = json.loads(request.get_data(cache=True) or b"null")
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        return jsonify({"error": "the request body must be a JSON object of field keys and values"}), 400
    proposal = editor(ctx).propose(body)
    if not proposal.ok:
        return jsonify(proposal.to_json()), 422
    applied: dict[str, Any] = {}
    if proposal.changed:
        editor(ctx).save(proposal)
        applied = apply(ctx, proposal)
        log.info("api: settings saved (%s)", ", ".join(proposal.changed))
    return jsonify({**proposal.to_json(), "applies": {key: owner_fields.by_key()[key].applies
                                                      for key in proposal.changed},
                    "restart_needed": applied.get("restart_needed", [])})


@bp.post("/api/settings/restore")
def api_restore_settings() -> Any:
    ctx = web_context()
    restored, config, problems = editor(ctx).restore_previous()
    if not restored:
        return jsonify({"ok": False, "problems": {GENERAL: problems}}), 409
    apply(ctx, Proposal({}, config))
    return jsonify({"ok": True})

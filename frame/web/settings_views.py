"""The settings page (``/config``): the owner's settings, edited (its JSON twin ``/api/settings`` is
``frame.daemon.http.settings_api``).

Both go through ``frame.daemon.settings.SettingsEditor`` (the same checks as ``frame config check``,
every problem next to its field, ``settings.yaml`` written atomically with the previous version kept)
and the owner actions of ``frame.daemon.actions.settings``: after a save the running daemon takes the
settings over (``Controller.apply_settings``); those it can only read at start are listed with a
restart button. Every POST has passed ``blueprint._guard``: a logged-in session with its CSRF token.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import flash, redirect, render_template, request, url_for

from frame.config import fields as owner_fields
from frame.daemon.actions import settings as settings_actions
from frame.daemon.actions.errors import NotRunning
from frame.daemon.jobs.estimate_child import EstimateBusy
from frame.daemon.settings import GENERAL, Proposal, SettingsEditor
from frame.redact import redact_text
from frame.web.context import WebContext
from frame.web.models_pages import models_section
from frame.web.routes import bp, web_context
from frame.web.settings import APPLIES, feed_name, form_rows, parse_form, settings_report

log = logging.getLogger(__name__)


def editor(ctx: WebContext) -> SettingsEditor:
    return SettingsEditor(ctx.config_path, state_dir=ctx.state_dir)


def _page(ctx: WebContext, *, submitted: dict | None = None, proposal: Proposal | None = None,
          form_problems: dict | None = None) -> Any:
    current = editor(ctx).current()
    problems = dict(form_problems or {})
    for key, messages in (proposal.problems if proposal else {}).items():
        problems.setdefault(key, []).extend(messages)
    return render_template("config.html", report=settings_report(ctx.config, ctx.config_path), current=current,
                           groups=form_rows(current, submitted), problems=problems, general=problems.get(GENERAL, []),
                           others=proposal.others if proposal else [],
                           daemon=settings_actions.daemon_state(ctx.controller),
                           feed_name=feed_name, fields=owner_fields.by_key(), estimating=estimating(ctx),
                           models=models_section(ctx))


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
    proposal = None
    if not form_problems:
        proposal, _ = settings_actions.save(editor(ctx), changes, ctx.take_config, ctx.controller, "web")
    if proposal is not None and proposal.ok and proposal.changed:
        flash(f"Saved. {_summary(proposal.changed)}.")
        return redirect(url_for("web.config"), 303)
    if proposal is not None and proposal.ok:
        flash("Nothing changed.")
        return redirect(url_for("web.config"), 303)
    submitted = {key: value for key, value in changes.items()}
    return _page(ctx, submitted=submitted, proposal=proposal, form_problems=form_problems), 400


def _in_words(value: Any) -> str:
    """A setting's value for the restore table: "automatic" for none, lines and feeds counted."""
    if value is None or value == "":
        return "automatic"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(item, dict) for item in value):
            return ", ".join(str(item.get("name") or item.get("url") or "a feed") for item in value)
        return "; ".join(str(item) for item in value) or "none"
    return str(value)


@bp.post("/config/restore")
def restore_config() -> Any:
    """Restore the previous settings, after a confirmation: without ``confirm=yes`` (the settings page's
    button) the answer is the page that says what restoring undoes, setting by setting."""
    ctx = web_context()
    if request.form.get("confirm") != "yes":
        found = editor(ctx).restore_changes()
        labels = owner_fields.by_key()
        changes = None if found is None else [(labels[key].label.replace(" …", ""), _in_words(now), _in_words(then))
                                              for key, now, then in found]
        return render_template("restore.html", changes=changes)
    problems = settings_actions.restore(editor(ctx), ctx.take_config, ctx.controller, "web")
    if problems:
        flash(f"Nothing restored: {'; '.join(problems)}.")
    else:
        flash("The previous settings are back (restore again to undo).")
    return redirect(url_for("web.config"), 303)


@bp.post("/config/restart")
def restart() -> Any:
    try:
        settings_actions.restart(web_context().controller, "web")
    except NotRunning:
        flash("This frame cannot restart itself (it does not run as the systemd service): restart it by hand.")
        return redirect(url_for("web.config"), 303)
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

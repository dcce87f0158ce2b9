"""The queue pages: queue a prompt with its own settings; move, edit, remove and paint now queued ones;
and a picture's "reuse seed" and "more like this", each also "paint it now".

Routes of ``frame.web.routes.bp`` (added when ``blueprint`` imports this module). Every POST has
passed ``blueprint._guard`` (logged in, CSRF, same origin) and is checked by ``forms.clean_text`` and
``frame.daemon.queue`` — the rules the JSON API applies — before anything is stored; what it then
does is the owner action of ``frame.daemon.actions.queue``, the one the JSON API calls. Then a 303
back to the queue, so a reload never repeats it. Plain forms: the page works without JavaScript.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import flash, redirect, render_template, request, url_for

from frame.config import embedding_names, lora_tags
from frame.daemon import queue as queue_rules
from frame.daemon.actions import queue as queue_actions
from frame.daemon.actions.errors import BadValue, NotRunning
from frame.daemon.http.contract import Busy
from frame.daemon.jobs import config_checks
from frame.daemon.store import gallery
from frame.daemon.store.records import QueuedPrompt
from frame.errors import FrameError
from frame.redact import redact_text
from frame.web.context import WebContext
from frame.web.forms import NEGATIVE_MAX, PROMPT_MAX, THEME_MAX, FormError, check_blocklist, clean_text
from frame.web.routes import bp, web_context

log = logging.getLogger(__name__)

TEXT_FIELDS = ("prompt", "negative_prompt", "theme")
MAXIMA = {"steps": queue_rules.MAX_STEPS, "guidance": f"{queue_rules.MAX_GUIDANCE:g}"}  # the inputs' max
EMPTY = {"prompt": "", "negative_prompt": "", "theme": "", "steps": "", "sampler": "", "guidance": "", "seed": "",
         "size": "", "strength": ""}


def _limits(ctx: WebContext) -> dict[str, int]:
    return {"prompt": min(PROMPT_MAX, ctx.config.feeds.max_prompt_chars), "negative_prompt": NEGATIVE_MAX,
            "theme": THEME_MAX}


def _submitted(ctx: WebContext, form: Mapping[str, Any], variation: bool,
               current: QueuedPrompt | None = None) -> tuple[dict[str, Any], list[str]]:
    """The store's columns from the form, or FormError naming every bad field at once (nothing stored).
    The settings follow the configured model's rules (``frame.daemon.queue.parse_settings``); an unknown
    ``<lora:NAME>`` or a LoRA file that cannot be used is refused. Also the warnings to show once it
    is stored (a LoRA that matches no layer of the model)."""
    values: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for name, limit in _limits(ctx).items():
        try:
            values[name] = clean_text(form, name, limit, required=name == "prompt")
        except FormError as exc:
            problems.extend(exc.problems)
    lora_problems, warnings = queue_rules.lora_problems(ctx.config, [values.get("prompt"),
                                                                     values.get("negative_prompt")])
    problems.extend(("prompt", problem) for problem in lora_problems)  # refused now, not at night
    try:
        check_blocklist(values, ctx.config.feeds.blocklist)
    except FormError as exc:
        problems.extend(exc.problems)
    try:
        values.update(queue_rules.parse_settings({k: form.get(k, "") for k in queue_rules.SETTING_FIELDS},
                                                 ctx.config, current))
    except queue_rules.QueueError as exc:
        problems.extend(exc.problems)
    if variation:
        try:
            values["strength"] = queue_rules.parse_strength(form.get("strength"))
        except queue_rules.QueueError as exc:
            problems.extend(exc.problems)
    if problems:
        raise FormError(*problems[0], problems=problems)
    return values, warnings


def _as_form(prompt: QueuedPrompt) -> dict[str, str]:
    """A queued prompt's values as the edit form shows them (blank: the night's setting)."""
    def text(value: Any) -> str:
        return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    return {"prompt": prompt.prompt, "negative_prompt": prompt.negative_prompt, "theme": prompt.theme,
            "steps": text(prompt.steps), "sampler": prompt.sampler or "", "guidance": text(prompt.guidance),
            "seed": text(prompt.seed), "size": prompt.size or "", "strength": text(prompt.strength)}


def queued_view(ctx: WebContext, prompt: QueuedPrompt) -> dict[str, Any]:
    """One waiting prompt for the list: its text, what it sets itself, for a variation whether its
    picture is still there (a deleted one waits; the night takes the next prompt), and why it was set
    aside if its renders failed (the nights take the next prompt until it is edited)."""
    own = [f"{name} {getattr(prompt, name):g}" if isinstance(getattr(prompt, name), float)
           else f"{name} {getattr(prompt, name)}" for name in ("steps", "sampler", "guidance", "seed")
           if getattr(prompt, name) is not None]
    if prompt.size:
        own.append(f"size {prompt.size}")
    missing = False
    if prompt.variation:
        picture = ctx.store.picture(prompt.source_picture_id)
        path = gallery.picture_path(ctx.state_dir, picture.file) if picture else None
        missing = path is None or not path.is_file()
    return {"id": prompt.id, "prompt": prompt.prompt, "theme": prompt.theme, "own": own,
            "source": prompt.source_picture_id, "strength": prompt.strength, "missing": missing,
            "failures": prompt.failures, "set_aside": redact_text(prompt.set_aside) if prompt.set_aside else None}


def _size_hint(ctx: WebContext) -> dict[str, str]:
    """The size field's ``size_rule`` (the configured model's) and ``night_size``, the size tonight's
    picture is painted at (its placeholder, "" when unknown): both asked of the check child, which
    keeps its answer per settings. A fixed example once said 768x512 where the frame paints 672x400."""
    rule = night = None
    try:
        rule = config_checks.size_rule(ctx.config, ctx.state_dir)
        night = config_checks.night_size(ctx.config, ctx.state_dir)
    except FrameError as exc:
        log.warning("queue page: the model's size rule could not be asked: %s", exc)
    return {"size_rule": rule or f"multiples of {queue_rules.VAE_STEP} px at least (the model's own rule)",
            "night_size": night or ""}


def _found(ctx: WebContext) -> dict[str, list[str]]:
    """The LoRAs and embeddings in the configured folders, by file name only (nothing is read), for the
    form's tap-to-insert buttons."""
    return {"loras": [name for name, _ in lora_tags.available(lora_tags.configured_folders(ctx.config))],
            "embeddings": sorted(embedding_names.available(embedding_names.configured_folders(ctx.config)),
                                 key=str.lower)}


def _page(ctx: WebContext, values: Mapping[str, str], error: FormError | None) -> Any:
    queued = [queued_view(ctx, prompt) for prompt in ctx.store.queued_prompts()]
    return render_template("queue.html", queued=queued, values=values, error=error, limits=_limits(ctx),
                           samplers=queue_rules.SAMPLERS, maxima=MAXIMA, **_size_hint(ctx),
                           **_found(ctx)), \
        (400 if error else 200)


@bp.route("/queue", methods=["GET", "POST"])
def queue() -> Any:
    ctx = web_context()
    if request.method == "GET":
        return _page(ctx, EMPTY, None)
    try:
        values, warnings = _submitted(ctx, request.form, variation=False)
    except FormError as exc:
        return _page(ctx, {k: str(request.form.get(k, ""))[:PROMPT_MAX] for k in EMPTY}, exc)
    queue_actions.add(ctx.store, values, "web")
    flash(" ".join(["Queued for the next night."] + [f"Note: {warning}." for warning in warnings]))
    return redirect(url_for("web.queue"), 303)


@bp.route("/queue/<id:prompt_id>/edit", methods=["GET", "POST"])
def edit_prompt(prompt_id: int) -> Any:
    ctx = web_context()
    prompt = queue_actions.waiting(ctx.store, prompt_id)  # NotFound: the 404 page
    values, error = _as_form(prompt), None
    if request.method == "POST":
        try:
            changes, warnings = _submitted(ctx, request.form, variation=prompt.variation, current=prompt)
        except FormError as exc:
            error, values = exc, {k: str(request.form.get(k, ""))[:PROMPT_MAX] for k in EMPTY}
        else:
            queue_actions.edit(ctx.store, prompt_id, changes, "web")
            flash(" ".join(["Saved."] + [f"Note: {warning}." for warning in warnings]))
            return redirect(_at(prompt_id), 303)
    return render_template("queue_edit.html", prompt=prompt, values=values, error=error, limits=_limits(ctx),
                           samplers=queue_rules.SAMPLERS, maxima=MAXIMA, **_size_hint(ctx),
                           **_found(ctx)), \
        (400 if error else 200)


@bp.post("/queue/<id:prompt_id>/move")
def move_prompt(prompt_id: int) -> Any:
    """``direction`` up/down by one, or ``position`` (1 = next night; what a drag sends)."""
    ctx = web_context()
    queue_actions.waiting(ctx.store, prompt_id)
    direction, position = request.form.get("direction"), request.form.get("position", "")
    if direction in ("up", "down"):
        target = queue_actions.stepped_position(ctx.store, prompt_id, -1 if direction == "up" else 1)
    elif position.isascii() and position.isdigit():
        target = int(position)
    else:
        raise FormError("position", "must be up, down or a position in the queue")
    try:
        queue_actions.move(ctx.store, prompt_id, target, "web")
    except BadValue as exc:
        raise FormError(exc.field, exc.message) from None
    return redirect(_at(prompt_id), 303)


@bp.post("/queue/<id:prompt_id>/remove")
def remove_prompt(prompt_id: int) -> Any:
    store = web_context().store
    order = [prompt.id for prompt in store.queued_prompts()]
    queue_actions.remove(store, prompt_id, "web")
    flash("Removed from the queue.")
    at = order.index(prompt_id) if prompt_id in order else -1
    rest = order[at + 1:at + 2] or order[max(at - 1, 0):at]  # the one that takes its place, else the one above
    return redirect(_at(rest[0] if rest else None), 303)


def _at(prompt_id: int | None) -> str:
    """The queue page scrolled to the prompt just moved or edited (its fragment, ``prompt-N``), or to
    the waiting list: a tap on the tenth prompt's arrow once landed back at the top of the page."""
    return url_for("web.queue", _anchor=f"prompt-{prompt_id}" if prompt_id is not None else "waiting")


@bp.post("/queue/<id:prompt_id>/paint-now")
def paint_prompt_now(prompt_id: int) -> Any:
    """A queued prompt's "Paint now": first in the queue, and a render starts."""
    return _painted_now(web_context(), prompt_id)


def _painted_now(ctx: WebContext, prompt_id: int, queued: str = "") -> Any:
    """Paint the waiting prompt now (``queue_actions.paint_now``) and say what happened, after
    ``queued`` (what was just queued, for "reuse seed" and "more like this"): the render's progress on the
    Now page, or why it waits (a render runs: it is first in the queue; no daemon; set aside)."""
    try:
        queue_actions.paint_now(ctx.store, ctx.controller, ctx.state_dir, prompt_id, "web")
    except NotRunning:
        flash(f"{queued}The frame's daemon is not running, so nothing can be painted now: it waits in the queue.")
    except Busy:
        flash(f"{queued}A picture is being painted now, so this one is first in the queue: the next render "
              "paints it.")
    except BadValue as exc:
        flash(f"{queued}Not painted now: it {exc.message}.")
    else:
        flash(f"{queued}Painting it now: the picture appears here when it is done.")
        return redirect(url_for("web.now"), 303)
    return redirect(_at(prompt_id), 303)


@bp.post("/pictures/<id:picture_id>/reuse-seed")
def reuse_seed(picture_id: int) -> Any:
    """"Reuse seed" queues the picture's prompt again with its settings; with ``now`` it is painted now."""
    try:
        prompt_id, settings = queue_actions.reuse_seed(web_context().store, picture_id)
    except queue_rules.QueueError as exc:
        raise FormError(exc.field, exc.message) from None
    said = f"Queued: the same prompt with {queue_rules.describe_settings(settings)}."
    if request.form.get("now"):
        return _painted_now(web_context(), prompt_id, said + " ")
    flash(f"{said} Edit it here before its night to change any of them.")
    return redirect(url_for("web.queue"), 303)


@bp.post("/pictures/<id:picture_id>/more-like-this")
def more_like_this(picture_id: int) -> Any:
    ctx = web_context()
    try:
        _, prompt_id, strength = queue_actions.variation(ctx.config, ctx.store, ctx.state_dir, picture_id,
                                                         request.form.get("strength"))
    except queue_rules.QueueError as exc:
        flash(f"No variation queued: {exc.message if exc.field == 'model' else exc}.")
        return redirect(url_for("web.picture", picture_id=picture_id), 303)
    said = f"Queued a variation of this picture (strength {strength:g}); it counts as a strong like."
    if request.form.get("now"):
        return _painted_now(ctx, prompt_id, said + " ")
    flash(said)
    return redirect(url_for("web.queue"), 303)

"""The prompt queue on the JSON API: queue, edit, move, remove and paint now prompts; "reuse seed" and
"more like this" (an image-to-image variation) of a stored picture. The checks on a prompt's own settings live in
``frame.daemon.queue`` and the actions in ``frame.daemon.actions.queue``, both shared with the phone
page; here the JSON body is read and the answers written."""

from __future__ import annotations

import logging
from typing import Any

from flask import jsonify

from frame.config.schema import Config
from frame.daemon import queue as queue_rules
from frame.daemon.actions import queue as queue_actions
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.api import ApiError, api, api_deps, request_body, text_field
from frame.daemon.http.contract import Busy
from frame.daemon.store.records import QueuedPrompt

log = logging.getLogger(__name__)


@api.get("/prompts")
def queued():
    return jsonify({"prompts": [prompt.to_json() for prompt in api_deps().store.queued_prompts()]})


PROMPT_TEXT = ("prompt", "negative_prompt", "theme")


def _prompt_fields(body: dict[str, Any], sanitiser: Sanitiser, new: bool, variation: bool = False,
                   config: Config | None = None, current: QueuedPrompt | None = None
                   ) -> tuple[dict[str, Any], list[str]]:
    """A queued prompt's columns from a request body: its texts (sanitised) and its own settings
    (``frame.daemon.queue``, by the configured model's rules); ``new`` requires the prompt, an edit
    (``current``) changes only what it sends. Every bad setting is named in one answer. Also the
    warnings to answer with (a LoRA that matches no layer of the model)."""
    allowed = set(PROMPT_TEXT) | set(queue_rules.SETTING_FIELDS) | ({"strength"} if variation else set())
    unknown = set(body) - allowed
    if unknown:
        extra = " (strength is for a variation)" if "strength" in unknown else ""
        raise ApiError(400, f"unknown fields: {', '.join(sorted(unknown))}{extra}")
    values = {key: text_field(body, key, sanitiser, required=key == "prompt")
              for key in PROMPT_TEXT if new or key in body}
    if config is not None:  # a <lora:NAME> with no such file, or one that cannot be used, is refused now
        problems, warnings = queue_rules.lora_problems(config, [values.get("prompt"), values.get("negative_prompt")])
        if problems:
            raise ApiError(400, "; ".join(problems))
    else:
        warnings = []
    try:
        values.update(queue_rules.parse_settings(body, config, current))
        if "strength" in body:
            values["strength"] = queue_rules.parse_strength(body["strength"])
    except queue_rules.QueueError as exc:
        raise ApiError(400, str(exc)) from None
    return values, warnings


@api.post("/prompts")
def queue():
    deps = api_deps()
    values, warnings = _prompt_fields(request_body(), deps.sanitiser, new=True, config=deps.config)
    prompt_id = queue_actions.add(deps.store, values, "api")
    answer: dict[str, Any] = {"id": prompt_id, "prompt": values["prompt"]}
    if warnings:
        answer["warnings"] = warnings  # e.g. a LoRA that matched 0 layers of this model
    return jsonify(answer), 201


@api.patch("/prompts/<id:prompt_id>")
def edit_prompt(prompt_id: int):
    deps = api_deps()
    body = request_body()
    current = queue_actions.waiting(deps.store, prompt_id)
    values, warnings = _prompt_fields(body, deps.sanitiser, new=False, variation=current.variation,
                                      config=deps.config, current=current)
    answer = queue_actions.edit(deps.store, prompt_id, values, "api").to_json()
    return jsonify({**answer, "warnings": warnings} if warnings else answer)


@api.delete("/prompts/<id:prompt_id>")
def remove_prompt(prompt_id: int):
    queue_actions.remove(api_deps().store, prompt_id, "api")
    return jsonify({"removed": prompt_id})


@api.post("/prompts/<id:prompt_id>/move")
def move_prompt(prompt_id: int):
    body = request_body()
    if set(body) != {"position"}:
        raise ApiError(400, 'send {"position": N}: 1 is the next night\'s prompt')
    prompts = queue_actions.move(api_deps().store, prompt_id, body["position"], "api")
    return jsonify({"prompts": [prompt.to_json() for prompt in prompts]})


@api.post("/prompts/<id:prompt_id>/paint-now")
def paint_prompt_now(prompt_id: int):
    """Paint the waiting prompt now (``queue_actions.paint_now``): 202 with the render's id; 409 while a
    render runs (the prompt is then first in the queue); 400 for one no render would paint."""
    deps = api_deps()
    try:
        return jsonify(queue_actions.paint_now(deps.store, deps.controller, deps.state_dir, prompt_id, "api")), 202
    except Busy as exc:
        raise ApiError(409, f"{exc}; the prompt is first in the queue, so the next render paints it") from None


@api.post("/pictures/<id:picture_id>/reuse-seed")
def reuse_seed(picture_id: int):
    """Queue the picture's prompt again with its seed, steps, sampler, guidance and size
    (``frame.daemon.queue.queue_reuse``): the same picture unless the owner edits the queued prompt."""
    deps = api_deps()
    try:
        prompt_id, _settings = queue_actions.reuse_seed(deps.store, picture_id)
    except queue_rules.QueueError as exc:
        raise ApiError(422, str(exc)) from None
    return jsonify(deps.store.queued_prompt(prompt_id).to_json()), 201  # id, prompt, seed and the rest


@api.post("/pictures/<id:picture_id>/variation")
def variation(picture_id: int):
    """"More like this": queue an image-to-image variation (``{"strength": 0.3..0.8}``, default 0.6) that
    counts as the strongest like (``frame.daemon.queue.queue_variation``)."""
    deps = api_deps()
    body = request_body()
    if set(body) - {"strength"}:
        raise ApiError(400, f"unknown fields: {', '.join(sorted(set(body) - {'strength'}))}")
    try:
        picture, prompt_id, strength = queue_actions.variation(deps.config, deps.store, deps.state_dir, picture_id,
                                                               body.get("strength"))
    except queue_rules.QueueError as exc:
        raise ApiError(400 if exc.field == "strength" else 422, str(exc)) from None
    return jsonify({"id": prompt_id, "prompt": picture.prompt, "source_picture_id": picture_id,
                    "strength": strength}), 201

"""The owner's actions on the prompt queue: queue, edit, move and remove a waiting prompt; "reuse seed"
and "more like this" of a stored picture; paint a waiting prompt now (``paint_now``: first in the queue,
then a render now, which paints the first paintable prompt).

The values arrive already read from the request (the API's JSON body, the page's form: each side
reads its own, then checks a prompt's own settings with ``frame.daemon.queue.parse_settings``). Here
each action finds what it names, stores the change and logs it with ``source`` ("api", "web").
Raises ``errors.NotFound`` for a prompt that is no longer waiting or an unknown picture,
``errors.BadValue`` for a position outside the queue, and ``frame.daemon.queue.QueueError`` from
reuse seed and variation, whose messages the owner reads as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frame.config import lora_tags
from frame.config.schema import Config
from frame.daemon import queue as queue_rules
from frame.daemon.actions.errors import BadValue, NotRunning, no_prompt
from frame.daemon.actions.pictures import picture as find_picture
from frame.daemon.actions.pictures import render_now
from frame.daemon.feeds.parse import Sanitiser
from frame.daemon.http.contract import Controller
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import QueuedPrompt, StoredPicture

log = logging.getLogger(__name__)


def waiting(store: Store, prompt_id: int) -> QueuedPrompt:
    """The waiting prompt ``prompt_id``; ``NotFound`` once it was painted or removed."""
    prompt = store.queued_prompt(prompt_id)
    if prompt is None:
        raise no_prompt(prompt_id)
    return prompt


def add(store: Store, values: Mapping[str, Any], source: str) -> int:
    """Queue a prompt (``values``: the store's columns, checked by the caller); returns its id."""
    prompt_id = store.queue_prompt(**values)
    log.info("queued prompt %d (%d characters, %s)", prompt_id, len(values["prompt"]), source)
    return prompt_id


def add_text(config: Config, store: Store, sanitiser: Sanitiser, text: str, source: str) -> tuple[int, str]:
    """Queue a plain prompt sent as text alone (Home Assistant's text entity), with the JSON API's
    checks on a new prompt: sanitised by the feeds' rules, not empty, no blocklisted word, every
    ``<lora:NAME>`` a file there is, the configured model's rules. Returns its id and the prompt as
    stored; ``BadValue`` (field ``prompt``) names what is wrong."""
    prompt = sanitiser.clean(text)
    if not prompt:
        raise BadValue("prompt", "prompt must not be empty")  # the JSON API's words
    if sanitiser.blocked(prompt):
        raise BadValue("prompt", "prompt contains a blocklisted word")
    problems = lora_tags.check_prompts([prompt], lora_tags.configured_folders(config))
    if problems:
        raise BadValue("prompt", "; ".join(problems))
    try:
        settings = queue_rules.parse_settings({}, config)
    except queue_rules.QueueError as exc:
        raise BadValue("prompt", str(exc)) from None
    return add(store, {"prompt": prompt, "negative_prompt": "", "theme": "", **settings}, source), prompt


def edit(store: Store, prompt_id: int, changes: Mapping[str, Any], source: str) -> QueuedPrompt:
    """Change a waiting prompt's columns (None: back to the night's setting); returns it as stored."""
    try:
        prompt = store.update_prompt(prompt_id, **changes)
    except KeyError:  # painted since the caller looked it up
        raise no_prompt(prompt_id) from None
    log.info("queued prompt %d edited (%s; %s)", prompt_id, ", ".join(sorted(changes)) or "nothing", source)
    return prompt


def stepped_position(store: Store, prompt_id: int, step: int) -> int:
    """The position ``step`` places from where the waiting prompt is now (-1: up, towards the next
    night), kept within the queue: what the page's up and down buttons ask for."""
    order = [prompt.id for prompt in store.queued_prompts()]
    if prompt_id not in order:
        raise no_prompt(prompt_id)
    return max(1, min(len(order), order.index(prompt_id) + 1 + step))


def move(store: Store, prompt_id: int, position: Any, source: str) -> list[QueuedPrompt]:
    """Put a waiting prompt at ``position`` (1 = the next night's) and return the queue in its new
    order. ``BadValue`` (field ``position``) for anything but a whole number within the queue."""
    waiting(store, prompt_id)
    try:
        prompts = store.move_prompt(prompt_id, position)
    except KeyError:
        raise no_prompt(prompt_id) from None
    except ValueError as exc:
        raise BadValue("position", str(exc)) from None
    log.info("queued prompt %d moved to position %s (%s)", prompt_id, position, source)
    return prompts


def remove(store: Store, prompt_id: int, source: str) -> None:
    """Take a waiting prompt out of the queue."""
    try:
        store.remove_prompt(prompt_id)
    except KeyError:
        raise no_prompt(prompt_id) from None
    log.info("queued prompt %d removed (%s)", prompt_id, source)


def paint_now(store: Store, controller: Controller | None, state_dir: Path, prompt_id: int,
              source: str) -> dict[str, Any]:
    """Paint the waiting prompt now: put it first in the queue and start a render, which paints the first
    paintable prompt (``render_job.build_job``). Returns the daemon's answer (the render's id).

    ``NotRunning`` without a daemon and ``BadValue`` (field ``prompt``) for a prompt no render would paint
    (set aside after failed nights; a variation whose picture was deleted): the queue is left as it was.
    ``contract.Busy`` while a render runs: the prompt stays first, so the next render paints it."""
    prompt = waiting(store, prompt_id)
    if controller is None:
        raise NotRunning("the daemon is not running in this process")
    if prompt.set_aside:
        raise BadValue("prompt", "is set aside after failed nights: edit it to try again")
    if prompt.variation:
        picture = store.picture(prompt.source_picture_id)
        path = gallery.picture_path(state_dir, picture.file) if picture is not None else None
        if path is None or not path.is_file():
            raise BadValue("prompt", f"starts from picture {prompt.source_picture_id}, which was deleted")
    move(store, prompt_id, 1, source)
    log.info("queued prompt %d to be painted now (%s)", prompt_id, source)
    return render_now(controller, source)


def reuse_seed(store: Store, picture_id: int) -> tuple[int, dict[str, Any]]:
    """Queue the picture's prompt again with its seed and the settings it was painted with
    (``frame.daemon.queue.queue_reuse``); returns the prompt's id and those settings."""
    return queue_rules.queue_reuse(store, find_picture(store, picture_id))


def variation(config: Config, store: Store, state_dir: Path, picture_id: int,
              strength: Any) -> tuple[StoredPicture, int, float]:
    """Queue "more like this" of the picture at ``strength`` (blank: the default), rated as the strongest
    like (``frame.daemon.queue.queue_variation``); returns the picture, the prompt's id and the strength."""
    picture = find_picture(store, picture_id)
    prompt_id, value = queue_rules.queue_variation(config, store, state_dir, picture, strength)
    return picture, prompt_id, value

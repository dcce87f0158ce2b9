"""What the owner reads when something failed: one sentence that says what to do, with the raw error
kept apart as details (the phone page puts them behind a "details" disclosure).

Raw exception text is for the log and for whoever debugs; on a phone it is noise, and a long path or
URL without spaces once made the page wider than the screen. Every failure the owner sees — the
fallback notice, a failed render in the history, a failing feed — goes through here.
"""

from __future__ import annotations

import ast
import re

_STEP = re.compile(r"at step '([^']+)'")
# a failed render of a queued prompt names it (frame.daemon.jobs.night._count_prompt_failure)
_QUEUED = re.compile(r"queued prompt (\d+) (\('(?:[^'\\]|\\.)*'\)|\(\"(?:[^\"\\]|\\.)*\"\))( was set aside)?: ")

# What a failure in each worker step means for the owner, and what to check.
STEP_ADVICE = {
    "load model": "the model could not be loaded: check model.source on the settings page",
    "choose": "no prompt could be chosen: check taste.themes and the prompt feeds",
    "generate": "painting the picture failed: if it happens again, the details and the log "
                "(journalctl -u frame) say why",
    "prepare": "the picture could not be prepared for the panel: check display.panel and display.palette",
    "show": "the panel could not be updated: check its cable and display.panel",
    "store": "the picture could not be saved: the SD card may be full (keep fewer pictures with "
             "gallery.max_pictures)",
    "job": "the render's job files were unreadable: the next render starts afresh",
}
# A model served over HTTP (frame.engine.io.http's messages), whatever step met the problem.
MODEL_SERVER_ADVICE = {
    "is the model server on and reachable": "the model server did not answer for model.http_give_up_seconds: "
                                            "check that the NAS or computer serving model.source is on",
    "ignored the range header": "the model server does not support range requests: serve the model with "
                                "nginx, Caddy, Apache or frame serve-model (docs/serving-models.md)",
    "refused access": "the model server refused access: check model.token or the password in model.source",
}
NO_RENDER = "no render ran last night (was the frame switched off?); it paints again tonight"
UNEXPECTED = "something unexpected failed: if it happens again, the details and the log (journalctl -u frame) say why"


def _unquoted(literal: str) -> str:
    """The prompt as the night wrote it (Python's repr of a string: a literal, never code)."""
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return literal
    return value if isinstance(value, str) else literal


def render_advice(status: str, error: str | None) -> str:
    """Lower-case clause for a render that ended with ``status`` (failed / missed / ...) and ``error``."""
    text = error or ""
    queued = _QUEUED.search(text)
    if queued:  # the owner is told which prompt, and that it no longer blocks the queue
        number, prompt = queued.group(1), _unquoted(queued.group(2)[1:-1])
        if queued.group(3):
            return (f"queued prompt {number} (\u201c{prompt}\u201d) could not be painted and is set aside: the queue "
                    "page says why (edit it to try again); the next prompt is painted instead")
        rest = text[:queued.start()] + text[queued.end():]
        return f"queued prompt {number} (\u201c{prompt}\u201d) could not be painted: {render_advice(status, rest)}"
    lowered = text.lower()
    if status == "missed" or "deadline" in lowered:
        if "daemon was down" in lowered:
            return "the frame was off or restarting until after the deadline; nothing to do"
        return "it was not finished by the deadline: fewer steps (model.steps) or a smaller model.size finish sooner"
    if "superseded" in lowered:
        return "a newer render replaced it; nothing to do"
    if "memory" in lowered:
        return ("it ran out of memory: use a smaller model.size, or raise worker.memory_limit_mb if the "
                "frame has room")
    for marker, advice in MODEL_SERVER_ADVICE.items():
        if marker in lowered:
            return advice
    if "no space left" in lowered or "disk is full" in lowered or "storage is full" in lowered:
        return "the SD card is full: keep fewer pictures (gallery.max_pictures, gallery.max_disk_mb)"
    step = _STEP.search(text)
    if step and step.group(1) in STEP_ADVICE:
        return STEP_ADVICE[step.group(1)]
    return UNEXPECTED


def sentence(clause: str) -> str:
    """A clause as a sentence: capital first letter, full stop."""
    clause = clause.strip().rstrip(".")
    return clause[:1].upper() + clause[1:] + "." if clause else ""


def render_failure(status: str, error: str | None) -> str:
    """The sentence the history shows for a render that did not produce a picture."""
    return sentence(render_advice(status, error))


def fallback_notice(cause: str, favourite: int | None) -> str:
    """The notice when tonight's picture did not come: ``cause`` is a ``render_advice`` clause."""
    instead = (f"favourite {favourite} is shown meanwhile" if favourite is not None
               else "like a picture to have a favourite shown next time")
    return sentence(f"No new picture — {cause}; {instead}")


def show_failure_notice(picture_id: int, deleted: bool = False) -> str:
    """Why picture ``picture_id`` is not on the panel. A picture deleted while its show waited for the
    panel (``night.PictureDeleted``) is not the panel's fault: no advice about its cable then."""
    if deleted:
        return sentence(f"Picture {picture_id} was deleted before it could be shown, so the previous one stays")
    return sentence(f"Picture {picture_id} could not be shown, so the previous one stays: {STEP_ADVICE['show']}")


def feed_failure(from_cache: bool) -> str:
    """The sentence for a feed whose last fetch failed (the error itself goes to the details)."""
    if from_cache:
        return "The last fetch failed; its last good prompts are used meanwhile."
    return "The last fetch failed and there is no earlier copy: check the feed's URL on the settings page."

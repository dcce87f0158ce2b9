"""Deleting a picture the owner no longer wants: the phone's "Delete", ``DELETE /api/pictures/<id>`` and
``frame delete``. This module says what may not be deleted right now and then hands over to
``gallery.remove_picture`` (the record first, then the files; see ``frame.daemon.store.gallery``).

Refused, with a sentence that says what to do, rather than worked around:

* **The picture on the panel** (also while the info screen covers it). Showing another one first
  would mean choosing for the owner, and an e-paper refresh takes half a minute, may wait for the
  panel's rest or for the end of quiet hours, and can fail; until it is done the panel, the buttons'
  next/previous and the info screen would all refer to a picture the gallery no longer has. Showing
  another picture is one tap on the page, after which the delete goes through.
* **The picture a render is varying** ("more like this" running, or interrupted and resumed at the
  next start): the resume reads the picture again and checks it is the same one.

What the taste model keeps: a painted picture's latest rating stays in the store's ``taste_memory``
(a disliked picture the owner deleted is the clearest dislike there is). The deletion itself is not
turned into a rating: an owner also deletes a picture that came out broken or was simply seen enough.
A queued variation of a deleted picture stays queued and is skipped by the night (``night._paintable``),
and picture ids are never handed out again, so it can never vary a newer picture by mistake.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frame.daemon.jobs.info import INFO_REASON
from frame.daemon.jobs.night import job_dir
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.worker.records import JobUnreadable, RenderJob, read_job

log = logging.getLogger(__name__)


class PictureInUse(Exception):
    """The picture cannot be deleted now; the message says why and what to do instead."""


def panel_picture(status: Mapping[str, Any], store: Store) -> tuple[int | None, bool]:
    """What the panel shows: (picture id or None, whether the info screen covers it). The daemon's live
    status first, then the store's display history; None: the panel has shown nothing yet."""
    shown = status.get("shown")
    if isinstance(shown, Mapping):
        picture_id = shown.get("picture_id")
        info = shown.get("reason") == INFO_REASON
        if isinstance(picture_id, int) and not isinstance(picture_id, bool):
            return picture_id, info
        if info:
            return None, True
    last = store.last_shown()
    return (last.picture_id, last.reason == INFO_REASON) if last else (None, False)


def deletion_problem(store: Store, state_dir: Path, picture_id: int, status: Mapping[str, Any]) -> str | None:
    """Why picture ``picture_id`` cannot be deleted now (a sentence for the owner), or None."""
    shown, info = panel_picture(status, store)
    if picture_id == shown:
        where = "under the info screen on the frame" if info else "on the frame now"
        return f"Picture {picture_id} is {where}. Show another picture first, then delete this one."
    for render in store.unfinished_renders():
        try:
            job = read_job(job_dir(state_dir, render.id))
        except JobUnreadable:
            continue
        if isinstance(job, RenderJob) and job.variation is not None and job.variation.picture_id == picture_id:
            return (f"The frame is painting a variation of picture {picture_id} (render {render.id}); "
                    "delete it when that render is done.")
    return None


def delete_picture(store: Store, state_dir: Path, picture_id: int, status: Mapping[str, Any]) -> bool:
    """Delete picture ``picture_id`` (record, then files); True when its rating stays taste input.
    KeyError when there is no such picture, ``PictureInUse`` when it may not be deleted now; nothing
    changes in either case."""
    if store.picture(picture_id) is None:
        raise KeyError(picture_id)
    problem = deletion_problem(store, state_dir, picture_id, status)
    if problem is not None:
        log.info("picture %d not deleted: %s", picture_id, problem)
        raise PictureInUse(problem)
    gallery.remove_picture(store, state_dir, picture_id)
    return store.rating_remembered(picture_id)

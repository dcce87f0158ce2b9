"""The owner's actions on pictures and on the frame: rate, show on the panel, delete, render now.

Raises ``errors.NotFound`` for an unknown picture and ``errors.NotRunning`` when the action needs the
running daemon (``contract.Controller``) and this app has none; ``deletion.PictureInUse`` (delete the
picture on the panel) and ``contract.Busy`` (a render is running) pass through with their messages.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frame.daemon import deletion
from frame.daemon.actions.errors import NotFound, NotRunning, no_picture
from frame.daemon.http.contract import Controller
from frame.daemon.store.database import Store
from frame.daemon.store.records import StoredPicture

log = logging.getLogger(__name__)


def picture(store: Store, picture_id: int) -> StoredPicture:
    """The stored picture ``picture_id``, or ``NotFound``."""
    found = store.picture(picture_id)
    if found is None:
        raise no_picture(picture_id)
    return found


def rate_picture(store: Store, picture_id: int, kind: str, value: int, source: str = "api") -> None:
    """Store one rating (``thumb`` +1/-1 or ``stars`` 1..5) and log it: the one path of the API, the
    pages and the frame's buttons. ``NotFound`` (a ``KeyError``) for an unknown picture."""
    try:
        store.rate(picture_id, kind, value)
    except KeyError:
        raise no_picture(picture_id) from None
    log.info("picture %d rated %s %+d (%s)", picture_id, kind, value, source)


def _running(controller: Controller | None) -> Controller:
    if controller is None:
        raise NotRunning("the daemon is not running in this process")
    return controller


def show(store: Store, controller: Controller | None, picture_id: int, source: str) -> dict[str, Any]:
    """Ask the running daemon to show the picture on the panel; returns the daemon's answer."""
    picture(store, picture_id)
    answer = _running(controller).show(picture_id)
    log.info("asked to show picture %d (%s)", picture_id, source)
    return answer


def show_next(store: Store, controller: Controller | None, base: int | None, source: str) -> dict[str, Any]:
    """Show the gallery's next (newer, wrapping) picture after ``base`` (the picture on the panel or on
    its way), as the frame's *next* button does; ``NotFound`` for an empty gallery."""
    ids = store.picture_ids()
    later = [i for i in ids if base is None or i > base]
    target = (later or ids or [None])[0]
    if target is None:
        raise NotFound("the gallery is empty: there is no picture to show")
    return show(store, controller, target, source)


def show_favourite(store: Store, controller: Controller | None, on_panel: int | None, source: str) -> dict[str, Any]:
    """Show a favourite: the next one after the picture on the panel, wrapping, so that pressing again
    goes through them all; ``NotFound`` without any."""
    favourites = sorted(store.favourite_ids())
    later = [i for i in favourites if on_panel is None or i > on_panel]
    if not favourites:
        raise NotFound("there is no favourite yet: a like or 4 or 5 stars makes a picture one")
    return show(store, controller, (later or favourites)[0], source)


def render_now(controller: Controller | None, source: str) -> dict[str, Any]:
    """Start a render now; ``Busy`` while one runs. Returns the daemon's answer (the render's id)."""
    answer = _running(controller).render_now()
    log.info("render requested (%s)", source)
    return answer


def delete(store: Store, state_dir: Path, picture_id: int, status: Mapping[str, Any], source: str) -> bool:
    """Delete the picture and its files (``frame.daemon.deletion``, which refuses the one on the panel
    or being varied: ``PictureInUse``); ``status`` is the daemon's live status. Returns whether its
    rating was kept as taste input."""
    picture(store, picture_id)
    try:
        kept = deletion.delete_picture(store, state_dir, picture_id, status)
    except KeyError:  # deleted since the look-up (retention, another phone)
        raise no_picture(picture_id) from None
    log.info("picture %d deleted (%s)", picture_id, source)
    return kept

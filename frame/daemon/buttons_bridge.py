"""The frame's buttons, answered by the daemon: like/dislike the picture on the panel, previous/next
picture of the gallery, the info screen.

``frame.buttons.dispatch`` reads the pins and calls these actions one at a time on its own thread; here they
are turned into the daemon's ordinary operations, so a button does exactly what the phone page
does: a rating goes through ``actions.pictures.rate_picture`` (the owner action of the API and the
pages), a picture through ``Daemon.request_show`` (quiet hours, refresh guard, one refresh at a time).
Every action returns quickly (a panel refresh runs in the daemon's show thread) and none may take the
daemon down: an action that fails is logged by the button dispatcher and the next press works again.

Gallery order for previous/next is the order pictures were painted: *next* is the newer neighbour,
*previous* the older one, wrapping around at either end. The base is the picture the panel shows or
is about to show, so pressing *next* three times quickly moves three pictures on (and the daemon
refreshes the panel only for the last).
"""

from __future__ import annotations

import bisect
import logging
import threading
from typing import Any, Protocol

from frame.buttons.dispatch import ButtonCallbacks, Buttons, start_buttons
from frame.config.schema import ButtonsConfig
from frame.daemon.actions.pictures import rate_picture
from frame.daemon.store.database import Store
from frame.errors import FrameError

log = logging.getLogger(__name__)


class ButtonTarget(Protocol):
    """What the buttons need from the daemon (``service.Daemon`` implements it)."""

    store: Store
    stop_event: threading.Event

    def on_panel(self) -> int | None: ...

    def browse_base(self) -> int | None: ...

    def info_on_panel(self) -> bool: ...

    def request_show(self, picture_id: int, reason: str) -> dict[str, Any]: ...

    def show_info(self) -> dict[str, Any]: ...


def neighbour(ids: list[int], base: int | None, step: int) -> int | None:
    """The picture ``step`` (+1 newer, -1 older) from ``base`` in the sorted ``ids``, wrapping around.

    ``base`` need not be in ``ids`` any more (retention may have removed it): the nearest picture in
    that direction is taken. Without a base, both directions start at the newest picture.
    """
    if not ids:
        return None
    if base is None:
        return ids[-1]
    if step > 0:
        index = bisect.bisect_right(ids, base)
        return ids[index] if index < len(ids) else ids[0]
    index = bisect.bisect_left(ids, base) - 1
    return ids[index] if index >= 0 else ids[-1]


class ButtonBridge:
    """The four button actions of ``frame.buttons.dispatch.ButtonCallbacks`` for one running daemon."""

    def __init__(self, daemon: ButtonTarget) -> None:
        self.daemon = daemon

    def callbacks(self) -> ButtonCallbacks:
        return ButtonCallbacks(rate=self.rate, previous=self.previous, next=self.next, info=self.info)

    def _stopping(self, action: str) -> bool:
        if self.daemon.stop_event.is_set():
            log.info("button %s ignored: the daemon is stopping", action)
            return True
        return False

    def rate(self, value: int) -> None:
        """Like (+1) or dislike (-1) the picture on the panel, also while the info screen covers it."""
        if self._stopping("like" if value > 0 else "dislike"):
            return
        picture_id = self.daemon.on_panel()
        if picture_id is None:
            log.warning("button %s: no picture has been shown yet, nothing to rate", "like" if value > 0 else "dislike")
            return
        try:
            rate_picture(self.daemon.store, picture_id, "thumb", value, source="button")
        except KeyError:
            log.warning("button rating: picture %d is no longer in the gallery", picture_id)

    def next(self) -> None:
        self._step(+1)

    def previous(self) -> None:
        self._step(-1)

    def _step(self, step: int) -> None:
        name = "next" if step > 0 else "previous"
        if self._stopping(name):
            return
        ids = self.daemon.store.picture_ids()
        base = self.daemon.browse_base()
        target = neighbour(ids, base, step)
        if target is None:
            log.info("button %s: the gallery is empty", name)
            return
        if target == base and not self.daemon.info_on_panel():
            log.info("button %s: picture %d is the only one in the gallery", name, target)
            return
        self.daemon.request_show(target, f"{name} button")

    def info(self) -> None:
        """Show the info screen; when it is already up, go back to the picture it describes."""
        if self._stopping("info"):
            return
        picture_id = self.daemon.on_panel()
        if self.daemon.info_on_panel() and picture_id is not None:
            self.daemon.request_show(picture_id, "back from the info screen")
        else:
            self.daemon.show_info()


def start(daemon: ButtonTarget, config: ButtonsConfig, pin_factory: Any = None) -> Buttons | None:
    """Start the buttons when ``buttons.enabled``; a missing gpiozero or a busy pin is logged and the
    daemon runs on without buttons (the nightly picture matters more than the buttons)."""
    try:
        return start_buttons(config, ButtonBridge(daemon).callbacks(), pin_factory=pin_factory)
    except FrameError as exc:
        log.error("the buttons are not available: %s", exc)
    except Exception:
        log.exception("the buttons could not be started")
    return None

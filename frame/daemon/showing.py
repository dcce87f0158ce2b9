"""What the panel shows and when: the daemon's show requests, one refresh at a time.

Why apart from ``service``: showing has rules of its own that every caller (a new picture, rotation,
the fallback, the API, a button, the info screen) must go through alike, and threads of its own.
Every request takes a ticket; the show thread refreshes the panel only for the newest ticket, so
presses that come faster than the panel can refresh end in one refresh, for the last one. During
quiet hours a picture waits (``pending``) until they end; a panel that needs a rest ("too-soon") is
asked again when it allows. The info screen is neither deferred nor retried: shown hours after the
press it would only confuse.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from frame.daemon import notices, schedule
from frame.daemon.jobs import info as infoscreen
from frame.daemon.jobs import night as nights
from frame.daemon.status import LiveStatus
from frame.daemon.store.database import Store, now_iso
from frame.daemon.wishes import Wishes
from frame.errors import FrameError
from frame.worker.records import InfoFacts

if TYPE_CHECKING:
    from frame.config.schema import Config
    from frame.net.server import HttpServer

log = logging.getLogger(__name__)

Spawn = Callable[[str, Callable[[], None]], threading.Thread]


class ShowHost(Protocol):
    """What showing reads of the running daemon (read on each use: the settings page replaces
    ``config`` and ``tz`` while it runs)."""

    config: Config
    tz: tzinfo
    store: Store
    state_dir: Path
    live: LiveStatus
    ctx: nights.RenderContext
    server: HttpServer | None
    wishes: Wishes


class PanelShows:
    """The show requests of one daemon; ``spawn(name, target)`` starts the daemon's show thread."""

    def __init__(self, host: ShowHost, spawn: Spawn) -> None:
        self._host = host
        self._spawn = spawn
        self._lock = threading.Lock()  # one refresh at a time
        self.pending: tuple[int, str] | None = None  # (picture id, reason) waiting for quiet hours or the panel
        self._pending_not_before = 0.0
        self._ticket_lock = threading.Lock()
        self._ticket = 0  # the newest show request; older ones still waiting are skipped
        self._requested: int | None = None  # the picture last asked for (on the panel or on its way)

    def quiet(self) -> bool:
        """Quiet hours, or the owner's quiet hold (``frame.daemon.wishes``): no refresh either way."""
        host = self._host
        return host.wishes.quiet_hold() or schedule.in_quiet_hours(datetime.now(host.tz),
                                                                   host.config.schedule.quiet_hours, host.tz)

    def refreshing(self) -> bool:
        """Whether a show thread is putting a picture (or the info screen) on the panel right now."""
        return self._lock.locked()

    def on_panel(self) -> int | None:
        """The picture the panel shows (also while the info screen covers it), or None."""
        shown = self._host.store.last_shown()
        return shown.picture_id if shown else None

    def browse_base(self) -> int | None:
        """Where previous/next start from: the picture last asked for, else the one on the panel."""
        requested = self._requested
        return requested if requested is not None else self.on_panel()

    def info_on_panel(self) -> bool:
        return (self._host.live.snapshot().get("shown") or {}).get("reason") == infoscreen.INFO_REASON

    def request(self, picture_id: int, reason: str) -> dict[str, Any]:
        """Show now, or after quiet hours (the panel is not refreshed during them)."""
        ticket = self._take_ticket()
        self._requested = picture_id
        if self.quiet():
            self.pending, self._pending_not_before = (picture_id, reason), 0.0
            log.info("quiet hours: picture %d will be shown when they end", picture_id)
            return {"picture_id": picture_id, "deferred": "quiet hours"}
        self._spawn("show", lambda: self._show_thread(picture_id, reason, ticket))
        return {"picture_id": picture_id, "deferred": None}

    def show_info(self) -> dict[str, Any]:
        """Put the info screen on the panel: what is shown, why, and the phone page's address."""
        if self.quiet():
            log.info("quiet hours: the info screen is not shown")
            return {"deferred": "quiet hours"}
        ticket = self._take_ticket()
        picture_id = self.on_panel()
        server = self._host.server
        url = infoscreen.page_url(self._host.config.web.listen, server.port if server else None)
        self._spawn("show", lambda: self._info_thread(picture_id, url, ticket))
        return {"picture_id": picture_id, "deferred": None}

    def show_pairing(self, code: str, minutes: int) -> dict[str, Any]:
        """Put a pairing code on the panel (the login page's "Show a code on the frame"), on the info
        screen's path: same worker, same refresh guard; the picture under it is remembered."""
        if self.quiet():
            log.info("quiet hours: the pairing code is not shown")
            return {"deferred": "quiet hours"}
        ticket = self._take_ticket()
        picture_id = self.on_panel()
        server = self._host.server
        url = infoscreen.page_url(self._host.config.web.listen, server.port if server else None)
        facts = infoscreen.pairing_facts(code, minutes, url)
        self._spawn("show", lambda: self._info_thread(picture_id, url, ticket, facts))
        return {"picture_id": picture_id, "deferred": None}

    def after_pairing(self) -> None:
        """A phone paired with a code from the panel: the picture the code covered goes back up."""
        picture_id = self.on_panel()
        if self.info_on_panel() and picture_id is not None:
            self.request(picture_id, "after pairing")

    def flush_pending(self) -> None:
        """Show the waiting picture once quiet hours are over and the panel allows (the main loop's tick)."""
        if self.pending and not self.quiet() and time.time() >= self._pending_not_before:
            picture_id, reason = self.pending
            self.pending = None
            self.request(picture_id, reason)

    def _take_ticket(self) -> int:
        with self._ticket_lock:
            self._ticket += 1
            return self._ticket

    def _superseded(self, ticket: int, what: str) -> bool:
        if ticket != self._ticket:
            log.info("%s skipped: a newer show request came in", what)
            return True
        return False

    def _show_thread(self, picture_id: int, reason: str, ticket: int) -> None:
        host = self._host
        with self._lock:
            if self._superseded(ticket, f"showing picture {picture_id}"):
                return
            try:
                result = nights.show_picture(host.ctx, picture_id, reason)
            except FrameError as exc:
                log.error("%s; the previous picture stays shown", exc)
                host.live.update(notice=notices.show_failure_notice(
                    picture_id, deleted=isinstance(exc, nights.PictureDeleted)), notice_details=str(exc))
                if self._requested == picture_id:
                    self._requested = None
                return
        if result.status == "too-soon":  # the panel needs a rest: try again when it allows
            self.pending = (picture_id, reason)
            self._pending_not_before = float(result.retry_at or time.time() + 60)

    def _info_thread(self, picture_id: int | None, url: str, ticket: int, facts: InfoFacts | None = None) -> None:
        host = self._host
        with self._lock:
            if self._superseded(ticket, "the info screen"):
                return
            try:
                facts = facts or infoscreen.info_facts(host.store, host.state_dir, picture_id, url, host.tz)
                result = infoscreen.show_info(host.ctx, facts)
            except Exception as exc:
                log.error("could not show the info screen: %s", exc, exc_info=not isinstance(exc, FrameError))
                return
        if result.status == "too-soon":
            log.info("info screen not shown: %s", result.message)
            return
        host.live.update(shown={"picture_id": picture_id, "reason": infoscreen.INFO_REASON, "since": now_iso(),
                                "output": result.shown})

"""Panel care: never refresh for nothing, never refresh too often.

E-paper wears with every refresh and colour panels need rest between them (Waveshare: at least 180 s).
The guard remembers, in the state directory, a digest of the last picture sent to each panel and when
it was sent. ``show`` then either goes ahead, reports ``unchanged`` (same picture: nothing to do), or
reports ``too-soon`` with ``retry_at`` -- it never sleeps for minutes, so a daemon can schedule the
retry and stay responsive (systemd watchdog, buttons).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from frame.config.panels import Panel
from frame.display.files import write_atomic

log = logging.getLogger(__name__)

SHOWN, UNCHANGED, TOO_SOON = "shown", "unchanged", "too-soon"


@dataclass(frozen=True)
class ShowResult:
    """What ``Display.show`` did. ``retry_at`` (epoch seconds) is set when ``status == "too-soon"``."""

    status: str
    panel: str
    digest: str
    message: str
    paths: tuple[str, ...] = field(default=())
    retry_at: float | None = None

    @property
    def shown(self) -> bool:
        return self.status == SHOWN


def picture_digest(panel: Panel, index_bytes: bytes) -> str:
    """Identity of what the panel would show: panel, geometry, inks and every pixel's ink."""
    digest = hashlib.sha256()
    digest.update(f"{panel.name}|{panel.size}|{panel.palette}|{panel.native_indices}|".encode())
    digest.update(index_bytes)
    return digest.hexdigest()


class RefreshGuard:
    """Decides whether a refresh may happen; state in ``path`` (JSON, written atomically)."""

    def __init__(self, path: Path | None, panel_name: str, min_interval: float,
                 now: Callable[[], float] = time.time) -> None:
        self.path, self.panel_name, self.min_interval, self.now = path, panel_name, min_interval, now
        self._memory: dict = {}

    def _load(self) -> dict:
        if self.path is None or not self.path.exists():
            return self._memory
        try:
            state = json.loads(self.path.read_text())
            return state if isinstance(state, dict) else {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable panel state %s: %s", self.path, exc)
            return {}

    def too_soon(self) -> ShowResult | None:
        """A ``too-soon`` result if the panel refreshed less than ``min_interval`` ago, else ``None``.

        Checked before the picture is prepared: on a Pi Zero preparing costs seconds of CPU that a
        refresh which cannot happen should not spend.
        """
        shown_at = float(self._load().get(self.panel_name, {}).get("shown_at", 0.0))
        retry_at = shown_at + self.min_interval
        now = self.now()
        if now >= retry_at:
            return None
        return ShowResult(TOO_SOON, self.panel_name, "",
                          f"{self.panel_name} refreshed {now - shown_at:.0f} s ago; it needs "
                          f"{self.min_interval:.0f} s between refreshes, retry in {retry_at - now:.0f} s",
                          retry_at=retry_at)

    def unchanged(self, digest: str) -> ShowResult | None:
        """An ``unchanged`` result if the panel already shows exactly this picture, else ``None``."""
        if self._load().get(self.panel_name, {}).get("digest") == digest:
            return ShowResult(UNCHANGED, self.panel_name, digest, "same picture as on the panel; not refreshed")
        return None

    def check(self, digest: str, force: bool = False) -> ShowResult | None:
        """``None`` if a refresh with ``digest`` may go ahead, else the result to report instead
        (``force`` skips only the unchanged test)."""
        return (None if force else self.unchanged(digest)) or self.too_soon()

    def record(self, digest: str) -> None:
        """Remember a completed refresh."""
        state = dict(self._load())
        state[self.panel_name] = {"digest": digest, "shown_at": self.now()}
        if self.path is None:
            self._memory = state
            return
        write_atomic(self.path, json.dumps(state, indent=1, sort_keys=True).encode())

    def forget(self) -> None:
        """After a failed refresh the panel content is unknown: the next show must not be skipped."""
        state = dict(self._load())
        entry = dict(state.get(self.panel_name, {}))
        entry.pop("digest", None)
        state[self.panel_name] = entry
        if self.path is None:
            self._memory = state
        else:
            write_atomic(self.path, json.dumps(state, indent=1, sort_keys=True).encode())

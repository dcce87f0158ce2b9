"""The owner's standing wishes that are not settings: the theme of the next painted night and the quiet
hold (no panel refresh until it is lifted).

Why apart from the settings: both are flipped from a home automation (Home Assistant through MQTT,
``frame.daemon.mqtt``) many times a week, are undone by themselves (the theme is used once) or by the
next flip, and belong to this frame's state, not to its configuration; writing ``settings.yaml`` for
each would make every "goodnight" automation a settings save with its checks and history. They are
kept in ``STATE/wishes.json`` (``frame.statefile``: atomic, checksummed; a damaged file is set aside
and the wishes start empty), so a restart keeps them.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from frame import statefile

log = logging.getLogger(__name__)

WISHES_FILE = "wishes.json"
MAX_THEME_CHARS = 500  # a theme is a line of taste.themes; a longer stored one is not from us


class Wishes:
    """The wishes of one state directory, read once and written through on each change."""

    def __init__(self, state_dir: str | Path) -> None:
        self._path = Path(state_dir) / WISHES_FILE
        self._lock = threading.Lock()
        data = statefile.read_json(self._path, {})
        data = data if isinstance(data, dict) else {}
        theme = data.get("theme")
        self._theme = theme if isinstance(theme, str) and 0 < len(theme) <= MAX_THEME_CHARS else None
        self._quiet = data.get("quiet_hold") is True

    def _save(self) -> None:
        statefile.write_json(self._path, {"theme": self._theme, "quiet_hold": self._quiet})

    def theme(self) -> str | None:
        """The theme chosen for the next night painted from the themes, or None (the taste model chooses)."""
        return self._theme

    def set_theme(self, theme: str | None) -> None:
        with self._lock:
            self._theme = theme
            self._save()

    def take_theme(self, known: tuple[str, ...]) -> str | None:
        """The chosen theme, cleared: a render that paints from the themes uses it once. A theme the
        owner has since removed from ``taste.themes`` is dropped with a log line."""
        with self._lock:
            theme, self._theme = self._theme, None
            if theme is not None:
                self._save()
        if theme is not None and theme not in known:
            log.warning("tonight's theme %r is no longer in taste.themes; the taste model chooses", theme)
            return None
        return theme

    def quiet_hold(self) -> bool:
        """Whether the owner holds the panel quiet (as in quiet hours) until they lift it."""
        return self._quiet

    def set_quiet_hold(self, on: bool) -> None:
        with self._lock:
            self._quiet = bool(on)
            self._save()

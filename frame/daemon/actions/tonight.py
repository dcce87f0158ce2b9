"""The owner's wishes for tonight and for the panel (``frame.daemon.wishes``): the theme of the next
painted night, and the quiet hold (no refresh until lifted, as in quiet hours).

Home Assistant sets them through MQTT (``frame.daemon.mqtt``); like every owner action they are checked
here, stored and logged with their ``source``, and a value outside the rules is ``errors.BadValue``.
"""

from __future__ import annotations

import logging

from frame.config.schema import Config
from frame.config.validate import did_you_mean
from frame.daemon.actions.errors import BadValue
from frame.daemon.wishes import Wishes

log = logging.getLogger(__name__)

AUTO_THEME = "auto"  # no wish: the taste model chooses among every theme


def choose_theme(config: Config, wishes: Wishes, theme: str, source: str) -> str | None:
    """Paint ``theme`` (one of ``taste.themes``) the next night that paints from the themes (a queued
    prompt still comes first); ``AUTO_THEME`` withdraws the wish. Returns the wish as stored."""
    if theme == AUTO_THEME:
        wishes.set_theme(None)
        log.info("tonight's theme: the taste model chooses (%s)", source)
        return None
    if theme not in config.taste.themes:
        shown = theme if len(theme) <= 80 else theme[:77] + "..."
        raise BadValue("theme", f"{shown!r} is not one of taste.themes{did_you_mean(theme, list(config.taste.themes))}"
                                f" (or {AUTO_THEME!r})")
    wishes.set_theme(theme)
    log.info("tonight's theme: %s (%s)", theme, source)
    return theme


def hold_quiet(wishes: Wishes, on: bool, source: str) -> None:
    """Hold the panel quiet (pictures wait, as in quiet hours) until lifted; lifting shows what waited."""
    wishes.set_quiet_hold(on)
    log.info("quiet hold %s (%s)", "on" if on else "off", source)

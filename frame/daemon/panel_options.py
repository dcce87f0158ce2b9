"""Since when the panel options (fit, rotation, saturation, dither, panel, palette) are what they are now.

A picture's panel image is dithered once, when it is rendered, with the options of that night. When
the owner changes an option, pictures made before the change must be prepared again from their
original when they are shown, or a favourite shown next week would still wear the old dither. The
daemon keeps the options and the moment they last changed in ``<state_dir>/panel-options.json``
(a checksummed state file); ``show_picture`` re-prepares every picture older than that moment.

The first time a daemon sees this file missing (an upgrade), it records the options without a
moment: nothing is re-prepared until the owner really changes something.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from frame.config.schema import DisplayConfig
from frame.daemon.store.database import now_iso
from frame.statefile import read_json, write_json

FILE = "panel-options.json"
KEYS = ("panel", "size", "palette", "rotate", "fit", "saturation", "dither")


def _options(display: DisplayConfig) -> dict:
    plain = dataclasses.asdict(display)
    return {key: plain[key] for key in KEYS}


def note(state_dir: Path, display: DisplayConfig) -> str:
    """Record ``display``'s options; return since when they hold (UTC ISO time, "" = always)."""
    path = Path(state_dir) / FILE
    stored = read_json(path)
    options = _options(display)
    if isinstance(stored, dict) and isinstance(stored.get("since"), str):
        if stored.get("options") == options:
            return stored["since"]
        since = now_iso()
    else:
        since = ""
    write_json(path, {"options": options, "since": since})
    return since

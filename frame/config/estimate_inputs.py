"""The settings a night estimate depends on, kept beside it so that the page can say it is stale.

``estimate.json`` (written by tonight's step choice and by ``frame estimate --state-dir``) holds the
values of these settings as the estimate saw them (``inputs``); the settings page compares them with the
running configuration (``changed_since``) and names what changed since, instead of showing an old
verdict as today's. Secrets are kept hidden as ``frame config show`` hides them (``to_plain``): a new
token does not change what the night costs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from frame.config.loader import to_plain
from frame.config.schema import Config

# besides every model.* setting: what the window, the memory limit and the picture's size come from
_OTHER_KEYS = (("worker", "memory_limit_mb"), ("schedule", "render_at"), ("schedule", "deadline"),
               ("display", "panel"), ("display", "size"), ("display", "rotate"))
MAX_KEYS = 200  # a stored file is read back: never more keys than the configuration has


def _text(value: Any) -> str:
    """A value as text, the same whichever way the configuration was built (a tuple and a list alike)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def inputs(config: Config) -> dict[str, str]:
    """``{"model.steps": "None", "schedule.deadline": "07:00", ...}``: each value as text."""
    plain = to_plain(config)
    found = {f"model.{key}": _text(value) for key, value in sorted(plain["model"].items())}
    for section, key in _OTHER_KEYS:
        found[f"{section}.{key}"] = _text(plain[section][key])
    return found


def changed_since(stored: Any, config: Config) -> list[str] | None:
    """The settings whose value differs from the estimate's (``stored``: its ``inputs``, read back from
    the file), sorted; None when the file has none (an estimate made before this was kept)."""
    if not isinstance(stored, Mapping) or len(stored) > MAX_KEYS:
        return None
    now = inputs(config)  # a setting the estimate did not know (added since) is not a change
    return sorted(key for key, value in now.items() if key in stored and stored[key] != value)

"""What the frame tells Home Assistant: one retained JSON document on ``BASE/state`` that every sensor,
select and switch reads with its ``value_template``, and the picture's URL on ``BASE/picture_url``.

Why one document: the frame's facts change together (a render ends: state, progress, prompt, rating),
one retained message is one write for the broker and one parse for HA, and the publisher compares
whole documents, so an unchanged frame publishes nothing. Built from the daemon's live status and the
store's reads only; a value HA should show as "unknown" is ``None`` (rendered "None", which HA's MQTT
entities take for unknown).
"""

from __future__ import annotations

from typing import Any, Protocol

from frame.daemon.mqtt.commands import CommandHost
from frame.daemon.mqtt.discovery import OFF, ON, RATINGS
from frame.daemon.store.records import StoredPicture
from frame.redact import redact_deep

MAX_STATE_CHARS = 255  # Home Assistant keeps at most 255 characters of a state (attributes hold the rest)


class StateHost(CommandHost, Protocol):
    """What the state needs beyond the commands: whether the panel is being refreshed."""

    def refreshing(self) -> bool: ...


def rating_option(picture: StoredPicture | None) -> str | None:
    """The rate select's option for the picture's latest rating, or None (unrated)."""
    if picture is None or picture.rating_kind is None:
        return None
    for option, (kind, value) in RATINGS.items():
        if (kind, value) == (picture.rating_kind, picture.rating_value):
            return option
    return None


def _feeds(host: CommandHost) -> tuple[str, list[dict[str, Any]]]:
    feeds = host.store.feed_health()
    failing = [feed for feed in feeds if feed.last_error]
    summary = "no feeds" if not feeds else "ok" if not failing else f"{len(failing)} of {len(feeds)} failing"
    # the error may name the feed's URL with its credentials: as on /api/status, they are hidden
    return summary, redact_deep([{"name": feed.name, "ok": not feed.last_error, "items": feed.items,
                                  "last_ok_at": feed.last_ok_at, "error": feed.last_error} for feed in feeds])


def progress(render: dict[str, Any] | None) -> int | None:
    """The render's progress in whole percent, None when no render runs."""
    if not render:
        return None
    fraction = render.get("fraction")
    if fraction is None and render.get("steps"):
        fraction = (render.get("step") or 0) / render["steps"]
    return max(0, min(100, round(100 * float(fraction or 0))))


def document(host: StateHost) -> dict[str, Any]:
    """The state document as it is now."""
    status = host.status()
    picture_id = host.on_panel()
    picture = host.store.picture(picture_id) if picture_id is not None else None
    rendering = status.get("state") == "rendering"
    summary, feed_list = _feeds(host)
    option = rating_option(picture)
    prompt = picture.prompt if picture is not None else None
    return {
        "state": "rendering" if rendering else "showing" if host.refreshing() else "idle",
        "progress": progress(status.get("render")) if rendering else 0,
        "next_night": (status.get("next_runs") or {}).get("night"),
        "prompt": prompt[:MAX_STATE_CHARS] if prompt else None,
        "rating": option or ("not rated" if picture is not None else None),
        "rate": option or "None",
        "picture": {"picture_id": picture_id, "prompt": prompt, "theme": picture.theme if picture else None,
                    "style": picture.style if picture else None, "rating": option},
        "feeds": summary,
        "feed_list": feed_list,
        "theme": host.wishes.theme() or "auto",
        "quiet_hold": ON if host.wishes.quiet_hold() else OFF,
        "quiet": bool(status.get("quiet")),
        "queued": len(host.store.queued_prompts()),
        "notice": status.get("notice"),
    }


def picture_url(frame_url: str, picture_id: int | None) -> str | None:
    """Where Home Assistant fetches the picture on the panel (the JSON API's open image route)."""
    if picture_id is None:
        return None
    return f"{frame_url.rstrip('/')}/api/pictures/{picture_id}/image"

"""Home Assistant MQTT discovery: the retained ``config`` message of each of the frame's entities.

Home Assistant reads ``<discovery_prefix>/<component>/<node>/<key>/config`` and creates the entity it
describes, grouped under one device by the ``device`` block (its ``identifiers``). Each message
follows HA's documented schema for its component (the keys are checked against lists written from
HA's MQTT docs in ``tests/daemon/mqtt/ha_schema.py``): ``unique_id``, the availability topic, the
state topic with a ``value_template`` into the one JSON state document (``frame.daemon.mqtt.state``)
and, for what the owner can do, a ``command_topic``.

The picture is an ``image`` entity with ``url_topic``, not ``image_topic``: with bytes the daemon
would read each picture into its own memory and push it through the broker, which keeps a retained
copy (a 800x480 PNG is 300-600 KB, and the daemon's budget is ~50 MiB); with a URL the daemon
publishes one short line and Home Assistant fetches the picture from the frame's JSON API (open to
the LAN for reads) only when a dashboard shows it, with its own cache.
"""

from __future__ import annotations

from typing import Any

from frame import __version__
from frame.daemon.mqtt.topics import Topics

PRESS = "PRESS"
ON, OFF = "ON", "OFF"
AVAILABLE, NOT_AVAILABLE = "online", "offline"
STATES = ("idle", "rendering", "showing")
# the rate select's options: a thumb (the frame's buttons) or stars (the phone page)
RATINGS = {"like": ("thumb", 1), "dislike": ("thumb", -1), "1 star": ("stars", 1), "2 stars": ("stars", 2),
           "3 stars": ("stars", 3), "4 stars": ("stars", 4), "5 stars": ("stars", 5)}
TEXT_MAX = 255  # Home Assistant's text entity holds at most 255 characters


def _value(field: str) -> str:
    return "{{ value_json." + field + " }}"


def entities(topics: Topics, themes: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any]]]:
    """(component, key, the entity's own keys) of every entity, without the keys all of them share."""
    state = topics.state
    return [
        ("image", "picture", {"name": "Picture", "url_topic": topics.picture_url, "icon": "mdi:image-frame"}),
        ("sensor", "state", {"name": "State", "state_topic": state, "value_template": _value("state"),
                             "device_class": "enum", "options": list(STATES), "icon": "mdi:palette"}),
        ("sensor", "progress", {"name": "Render progress", "state_topic": state, "value_template": _value("progress"),
                                "unit_of_measurement": "%", "state_class": "measurement",
                                "icon": "mdi:progress-clock"}),
        ("sensor", "next_night", {"name": "Next night", "state_topic": state, "value_template": _value("next_night"),
                                  "device_class": "timestamp"}),
        ("sensor", "prompt", {"name": "Prompt", "state_topic": state, "value_template": _value("prompt"),
                              "json_attributes_topic": state,
                              "json_attributes_template": "{{ value_json.picture | tojson }}",
                              "icon": "mdi:text"}),
        ("sensor", "rating", {"name": "Rating", "state_topic": state, "value_template": _value("rating"),
                              "icon": "mdi:star"}),
        ("sensor", "feeds", {"name": "Feed health", "state_topic": state, "value_template": _value("feeds"),
                             "json_attributes_topic": state,
                             "json_attributes_template": "{{ {'feeds': value_json.feed_list} | tojson }}",
                             "entity_category": "diagnostic", "icon": "mdi:rss"}),
        ("button", "paint", {"name": "Paint now", "command_topic": topics.command("paint"), "payload_press": PRESS,
                             "icon": "mdi:brush"}),
        ("button", "next", {"name": "Next picture", "command_topic": topics.command("next"), "payload_press": PRESS,
                            "icon": "mdi:skip-next"}),
        ("button", "favourite", {"name": "Show a favourite", "command_topic": topics.command("favourite"),
                                 "payload_press": PRESS, "icon": "mdi:heart"}),
        ("text", "prompt_queue", {"name": "Queue a prompt", "command_topic": topics.command("prompt"),
                                  "min": 0, "max": TEXT_MAX, "mode": "text", "icon": "mdi:playlist-plus"}),
        ("select", "theme", {"name": "Tonight's theme", "command_topic": topics.command("theme"),
                             "state_topic": state, "value_template": _value("theme"),
                             "options": ["auto", *themes], "icon": "mdi:palette-swatch"}),
        ("select", "rate", {"name": "Rate the picture", "command_topic": topics.command("rate"),
                            "state_topic": state, "value_template": _value("rate"), "options": list(RATINGS),
                            "icon": "mdi:thumbs-up-down"}),
        ("switch", "quiet", {"name": "Quiet hold", "command_topic": topics.command("quiet"), "state_topic": state,
                             "value_template": _value("quiet_hold"), "payload_on": ON, "payload_off": OFF,
                             "state_on": ON, "state_off": OFF, "icon": "mdi:sleep"}),
    ]


def device(topics: Topics, frame_url: str) -> dict[str, Any]:
    block: dict[str, Any] = {"identifiers": [topics.node], "name": "frame", "manufacturer": "frame",
                             "model": "generative e-paper frame", "sw_version": __version__}
    if frame_url:
        block["configuration_url"] = frame_url
    return block


def messages(topics: Topics, themes: tuple[str, ...], frame_url: str) -> list[tuple[str, dict[str, Any]]]:
    """(topic, payload) of every discovery message, to publish retained."""
    shared = {"availability_topic": topics.availability, "payload_available": AVAILABLE,
              "payload_not_available": NOT_AVAILABLE, "device": device(topics, frame_url),
              "origin": {"name": "frame", "sw_version": __version__}}
    found = []
    for component, key, own in entities(topics, themes):
        payload = {**own, "unique_id": f"{topics.node}_{key}", **shared}
        if "command_topic" in own:
            payload["qos"] = 1
        found.append((topics.discovery(component, key), payload))
    return found

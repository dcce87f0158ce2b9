"""Discovery on a real broker: the retained config messages Home Assistant reads, checked against HA's
schema keys (``ha_schema``), the availability and the state document they point at."""

from __future__ import annotations

import json

from frame.daemon.mqtt.discovery import RATINGS
from tests.daemon.conftest import add_picture
from tests.daemon.mqtt import ha_schema

EXPECTED = {("image", "picture"), ("sensor", "state"), ("sensor", "progress"), ("sensor", "next_night"),
            ("sensor", "prompt"), ("sensor", "rating"), ("sensor", "feeds"), ("button", "paint"),
            ("button", "next"), ("button", "favourite"), ("text", "prompt_queue"), ("select", "theme"),
            ("select", "rate"), ("switch", "quiet")}


def _entities(ha) -> dict[tuple[str, str], dict]:
    found = ha.wait_for(lambda: (lambda d: d if len(d) >= len(EXPECTED) else None)(ha.discovery()),
                        what="every discovery message")
    return {(topic.split("/")[1], topic.split("/")[3]): payload for topic, payload in found.items()}


def test_discovery_messages_follow_home_assistants_schema(daemon, ha):
    entities = _entities(ha)
    assert set(entities) == EXPECTED
    for (component, key), payload in entities.items():
        assert ha_schema.problems(component, payload) == [], (component, key)
        assert payload["availability_topic"] == "frame/availability"
        assert payload["device"]["identifiers"] == ["frame"] and payload["device"]["name"] == "frame"
    assert len({payload["unique_id"] for payload in entities.values()}) == len(EXPECTED)
    # every topic an entity names is one the frame publishes or listens on
    for payload in entities.values():
        for key in ("state_topic", "json_attributes_topic", "url_topic"):
            if key in payload:
                assert payload[key] in ("frame/state", "frame/picture_url")
        if "command_topic" in payload:
            assert payload["command_topic"].startswith("frame/cmd/") and payload["qos"] == 1
    assert entities[("select", "theme")]["options"] == ["auto", *daemon.config.taste.themes]
    assert entities[("select", "rate")]["options"] == list(RATINGS)
    # retained, so HA learns it whenever it subscribes (frame/# may come after homeassistant/#)
    ha.wait_for(lambda: ha.retained.get("frame/availability") == b"online", what="online")


def test_the_schema_check_refuses_what_ha_would_drop():
    """The check itself can fail: a misspelt key, a missing command topic, an image with both topics."""
    base = {"unique_id": "x", "device": {"identifiers": ["f"]}}
    assert ha_schema.problems("button", base) == ["missing command_topic"]
    assert "unknown key state_topc" in ha_schema.problems("sensor", {**base, "state_topic": "a", "state_topc": "b"})
    assert ha_schema.problems("image", {**base, "url_topic": "a", "image_topic": "b"}) != []


def test_state_document_and_picture_url_follow_the_panel(daemon, ha):
    picture_id = add_picture(daemon.store, prompt="a koi pond in autumn, linocut print")
    daemon.store.record_shown(picture_id, "test")
    daemon.mqtt._wake.set()
    state = ha.wait_for(lambda: (lambda s: s if s.get("prompt") else None)(ha.state()), what="the prompt")
    assert state["state"] == "idle" and state["progress"] == 0
    assert state["prompt"] == "a koi pond in autumn, linocut print" and state["rating"] == "not rated"
    assert state["rate"] == "None" and state["theme"] == "auto" and state["quiet_hold"] == "OFF"
    assert state["feeds"] == "no feeds" and state["next_night"].endswith("+00:00")
    url = f"http://frame.test:8080/api/pictures/{picture_id}/image".encode()
    ha.wait_for(lambda: ha.retained.get("frame/picture_url") == url, what="the picture's URL")  # sent after the state
    assert json.loads(ha.retained["frame/state"])["prompt"] == state["prompt"]  # retained for HA's next start


def test_a_clean_stop_says_offline(daemon, ha, caplog):
    ha.wait_for(lambda: ha.retained.get("frame/availability") == b"online", what="online")
    daemon.stop()
    ha.wait_for(lambda: ha.retained.get("frame/availability") == b"offline", what="offline")
    assert not [r for r in caplog.records if "lost the broker" in r.getMessage()]  # it left, nothing was lost

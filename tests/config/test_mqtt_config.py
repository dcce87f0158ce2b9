"""The mqtt section: off by default, each bad value named with its key and line, the password hidden."""

from __future__ import annotations

from frame.config import load_config, to_plain
from tests.config.test_loader import problems_of, write


def test_mqtt_is_off_by_default_and_a_good_section_loads(tmp_path):
    assert load_config(None, environ={}).mqtt.host == ""
    config = load_config(write(tmp_path, "mqtt:\n  host: homeassistant.local\n  username: frame\n"
                                         "  password: s3cret\n  base_topic: home/frame\n"), environ={})
    assert (config.mqtt.host, config.mqtt.port, config.mqtt.discovery_prefix) == ("homeassistant.local", 1883,
                                                                                  "homeassistant")
    assert to_plain(config)["mqtt"]["password"] == "***"


def test_each_bad_mqtt_value_is_named(tmp_path):
    path = write(tmp_path, "mqtt:\n  host: mqtt://broker:1883\n  port: 70000\n  base_topic: frame/#\n"
                           "  discovery_prefix: ''\n  tls:\n    enabld: true\n  frame_url: frame.local\n")
    problems = problems_of(path)
    assert problems[0] == ("mqtt.host: must be a host name or address like homeassistant.local (no scheme, port "
                           "or path), got 'mqtt://broker:1883' (line 2)")
    assert problems[1] == "mqtt.port: must be from 1 to 65535, got 70000 (line 3)"
    assert problems[2].startswith("mqtt.base_topic: must be topic levels") and "(line 4)" in problems[2]
    assert problems[3].startswith("mqtt.discovery_prefix: must be topic levels") and "(line 5)" in problems[3]
    assert problems[4] == "mqtt.tls.enabld: unknown key; did you mean 'enabled'? (line 7)"
    assert problems[5].startswith("mqtt.frame_url: ") and len(problems) == 6

"""The broker going away and coming back, a wrong password, a redelivered command."""

from __future__ import annotations

import logging
import time

import paho.mqtt.client as paho

from frame.daemon.mqtt.bridge import MqttBridge
from frame.daemon.service import Daemon
from tests.daemon.fakesupervisor import FakeSupervisor
from tests.daemon.mqtt.broker import Broker
from tests.daemon.mqtt.conftest import mqtt_config
from tests.daemon.mqtt.homeassistant import HomeAssistant


def _until(predicate, timeout: float = 20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_commands_the_broker_accepted_while_the_frame_was_away_arrive_once(daemon, broker, ha):
    """Ten prompts and one paint: sent before the broker stops, while the frame reconnects (taken by the
    broker for the frame's persistent session), kept by the broker across a second restart; each is
    carried out exactly once."""
    _until(daemon.mqtt.link.connected.is_set)
    ha.wait_for(lambda: ha.retained.get("frame/availability") == b"online", what="online")
    for i in range(3):
        ha.send("frame/cmd/prompt", f"prompt {i}")
    _until(lambda: len(daemon.store.queued_prompts()) == 3)
    daemon.mqtt.link.client.reconnect_delay_set(10, 10)  # the frame stays away while HA sends
    broker.stop()
    _until(lambda: not daemon.mqtt.link.connected.is_set())
    broker.start()
    ha.wait_for(lambda: ha.client.is_connected(), what="HA back")
    for i in range(3, 10):
        ha.send("frame/cmd/prompt", f"prompt {i}")  # the broker's acknowledgement: it has them
    ha.send("frame/cmd/paint", "PRESS")
    assert not daemon.mqtt.link.connected.is_set()  # they wait in the frame's session on the broker
    broker.stop()  # and survive the broker's own restart (persistence)
    broker.start()
    daemon.mqtt.link.client.reconnect_delay_set(1, 2)
    _until(lambda: daemon.store.count_pictures() == 1, timeout=40)
    _until(lambda: len(daemon.store.queued_prompts()) + daemon.store.count_pictures() >= 10, timeout=20)
    time.sleep(1.0)  # anything duplicated would have come by now
    painted = [p.prompt for p in daemon.store.pictures(limit=10)]
    queued = [p.prompt for p in daemon.store.queued_prompts()]
    assert sorted(queued + painted) == sorted(f"prompt {i}" for i in range(10))  # none lost, none twice
    assert [row.kind for row in daemon.store.renders()] == ["now"]  # one paint
    assert ha.retained.get("frame/availability") == b"online"


def test_a_redelivered_command_is_not_carried_out_twice(daemon):
    """A QoS 1 message the frame carried out but whose acknowledgement the broker never got comes again
    marked dup, with its packet id: skipped. The same words in a new message (another id) are new."""
    bridge: MqttBridge = daemon.mqtt
    _until(bridge.link.connected.is_set)

    def message(mid: int, dup: bool) -> paho.MQTTMessage:
        made = paho.MQTTMessage(mid=mid, topic=b"frame/cmd/prompt")
        made.payload, made.qos, made.dup = b"a red fox", 1, dup
        return made

    for made in (message(7, False), message(7, True), message(8, False)):
        bridge._received(made)
    _until(lambda: bridge.inbox.empty())
    time.sleep(0.5)
    assert [p.prompt for p in daemon.store.queued_prompts()] == ["a red fox", "a red fox"]


def test_a_wrong_password_is_one_clear_line_and_retried_with_backoff(tmp_path, caplog):
    broker = Broker(tmp_path / "broker", users={"frame": "the-right-one"})
    caplog.set_level(logging.INFO, logger="frame.daemon.mqtt")
    running = Daemon(mqtt_config(tmp_path, broker, username="frame", password="a-wrong-one"),
                     supervisor_factory=FakeSupervisor)
    try:
        running.start()
        link = running.mqtt.link
        _until(lambda: link.attempts >= 3, timeout=15)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == [f"mqtt: the broker at 127.0.0.1:{broker.port} refused the connection: Not authorized "
                          "(check mqtt.username and the password); trying again with backoff (up to every 120 s)"]
        first, second, third = list(link.failed_at)[:3]
        assert 0.8 < second - first < 1.8 and 1.8 < third - second < 3.5  # 1 s, then 2 s
        assert not link.connected.is_set() and running.store.queued_prompts() == []
    finally:
        running.stop()
        broker.stop()


def test_a_password_file_and_a_login_that_works(tmp_path):
    broker = Broker(tmp_path / "broker", users={"frame": "the-right-one", "ha": "ha-password"})
    (tmp_path / "mqtt-password").write_text("the-right-one\n")
    running = Daemon(mqtt_config(tmp_path, broker, username="frame", password_file=str(tmp_path / "mqtt-password")),
                     supervisor_factory=FakeSupervisor)
    ha = HomeAssistant(broker.port, "ha", "ha-password")
    try:
        running.start()
        _until(running.mqtt.link.connected.is_set)
        assert ha.command("prompt", "a lighthouse in a storm")["ok"]
    finally:
        ha.close()
        running.stop()
        broker.stop()


def test_a_password_file_that_cannot_be_read_is_one_line_and_the_daemon_runs_on(tmp_path, broker, caplog):
    running = Daemon(mqtt_config(tmp_path, broker, password_file=str(tmp_path / "missing")),
                     supervisor_factory=FakeSupervisor)
    try:
        running.start()
        assert running.mqtt is None and running.server is not None
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
            f"mqtt.password_file: cannot read {tmp_path / 'missing'}: No such file or directory; "
            "MQTT is off until this is fixed"]
    finally:
        running.stop()

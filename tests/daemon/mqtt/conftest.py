"""A real broker, a daemon connected to it (in this process, with the fake supervisor) and a client
playing Home Assistant."""

from __future__ import annotations

import pytest

from frame.daemon.service import Daemon
from tests.daemon.conftest import clock, make_config
from tests.daemon.fakesupervisor import FakeSupervisor
from tests.daemon.mqtt.broker import Broker
from tests.daemon.mqtt.homeassistant import HomeAssistant


@pytest.fixture
def broker(tmp_path):
    running = Broker(tmp_path / "broker")
    yield running
    running.stop()


def mqtt_config(tmp_path, broker: Broker, **mqtt):
    return make_config(tmp_path / "state", web={"listen": "127.0.0.1:0", "token": "test-token-123456"},
                       schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240),
                                 "show_at": clock(240)},
                       mqtt={"host": "127.0.0.1", "port": broker.port, "frame_url": "http://frame.test:8080", **mqtt})


@pytest.fixture
def daemon(tmp_path, broker):
    FakeSupervisor.render_status = "done"
    FakeSupervisor.runs = []
    running = Daemon(mqtt_config(tmp_path, broker), supervisor_factory=FakeSupervisor)
    running.start()
    yield running
    if not running.stop_event.is_set():
        running.stop()


@pytest.fixture
def ha(broker):
    client = HomeAssistant(broker.port)
    yield client
    client.close()

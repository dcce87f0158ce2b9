"""TLS to the broker with a certificate authority of the test's own (``mqtt.tls.ca_file``): the frame
connects and checks the broker's certificate; against another CA it refuses, in one line."""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from frame.config.schema import MqttTlsConfig
from frame.daemon.service import Daemon
from tests.daemon.fakesupervisor import FakeSupervisor
from tests.daemon.mqtt.broker import Broker
from tests.daemon.mqtt.conftest import mqtt_config
from tests.daemon.mqtt.homeassistant import HomeAssistant


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _authority(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt",
             "-days", "2", "-subj", f"/CN={name}", cwd=folder)
    return folder / f"{name}.crt"


@pytest.fixture
def certificates(tmp_path) -> dict[str, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path / "tls"
    ca = _authority(folder, "frame-test-ca")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj",
             "/CN=127.0.0.1", cwd=folder)
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", ca.name, "-CAkey", "frame-test-ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "san.cnf", cwd=folder)
    return {"ca": ca, "cert": folder / "server.crt", "key": folder / "server.key",
            "other_ca": _authority(folder, "another-ca")}


def _until(predicate, timeout: float = 15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_tls_with_the_brokers_authority(tmp_path, certificates):
    broker = Broker(tmp_path / "broker", tls=certificates)
    running = Daemon(mqtt_config(tmp_path, broker, tls=MqttTlsConfig(True, str(certificates["ca"]))),
                     supervisor_factory=FakeSupervisor)
    ha = HomeAssistant(broker.port, ca_file=str(certificates["ca"]))
    try:
        running.start()
        _until(running.mqtt.link.connected.is_set)
        assert ha.command("prompt", "a lighthouse in a storm")["ok"]
    finally:
        ha.close()
        running.stop()
        broker.stop()


def test_tls_refuses_a_broker_another_authority_signed(tmp_path, certificates, caplog):
    broker = Broker(tmp_path / "broker", tls=certificates)
    caplog.set_level(logging.INFO, logger="frame.daemon.mqtt")
    config = mqtt_config(tmp_path, broker, tls=MqttTlsConfig(True, str(certificates["other_ca"])))
    running = Daemon(config, supervisor_factory=FakeSupervisor)
    try:
        running.start()
        _until(lambda: running.mqtt.link.attempts >= 2)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and errors[0].startswith(f"mqtt: cannot reach the broker at 127.0.0.1:{broker.port}")
        assert not running.mqtt.link.connected.is_set()
    finally:
        running.stop()
        broker.stop()

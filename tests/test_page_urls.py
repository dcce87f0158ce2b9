"""Issue 40 item 15: the daemon logged ``API listening on http://0.0.0.0:8080/api/status``, an address no
browser opens and the JSON API rather than the page. It now names the phone page's URLs; client
commands without a configuration file say which state folder and daemon they use."""

from __future__ import annotations

import dataclasses
import logging

from frame.cli.client import config_note
from frame.config import Config, WebConfig
from frame.net import addresses


def test_a_named_bind_address_is_the_one_url():
    assert addresses.page_urls("192.168.1.20:8080") == ["http://192.168.1.20:8080/"]
    assert addresses.page_urls("[::1]:0", port=4321) == ["http://[::1]:4321/"]


def test_a_wildcard_bind_gives_this_computer_then_the_network(monkeypatch):
    monkeypatch.setattr(addresses.socket, "gethostname", lambda: "frame.fritz.box")
    monkeypatch.setattr(addresses, "lan_address", lambda: "192.168.1.20")
    assert addresses.page_urls("0.0.0.0:8080") == [
        "http://127.0.0.1:8080/", "http://frame.local:8080/", "http://192.168.1.20:8080/"]
    monkeypatch.setattr(addresses, "lan_address", lambda: None)
    assert addresses.page_urls(":8080", port=9000) == ["http://127.0.0.1:9000/", "http://frame.local:9000/"]


def test_the_lan_address_is_never_loopback():
    found = addresses.lan_address()
    assert found is None or not found.startswith("127.")


def test_the_daemon_logs_its_phone_page(tmp_path, caplog):
    from frame.daemon.service import Daemon
    from tests.daemon.fakesupervisor import FakeSupervisor

    config = Config(state_dir=str(tmp_path / "state"), web=WebConfig(listen="127.0.0.1:0", token="t" * 24))
    daemon = Daemon(dataclasses.replace(config), supervisor_factory=FakeSupervisor)
    with caplog.at_level(logging.INFO, logger="frame.daemon.service"):
        daemon.start()
        try:
            port = daemon.server.port
        finally:
            daemon.stop()
    assert f"phone page: http://127.0.0.1:{port}/" in caplog.text


def test_a_client_without_a_configuration_file_says_which_state_it_reads(tmp_path, monkeypatch):
    monkeypatch.setattr("frame.config.loader.SYSTEM_CONFIG", tmp_path / "missing.yaml")
    config = Config(state_dir=str(tmp_path / "defaults"))
    note = config_note(None, config, environ={})
    assert note is not None and str(tmp_path / "defaults") in note and "http://127.0.0.1:8080" in note
    assert "--config" in note
    assert config_note(str(tmp_path / "demo" / "config.yaml"), config, environ={}) is None
    assert config_note(None, config, environ={"FRAME_CONFIG": "/etc/frame/other.yaml"}) is None


def test_frame_status_without_a_configuration_file_prints_the_note(tmp_path):
    import os
    import subprocess
    import sys

    import pytest

    from frame.config.loader import SYSTEM_CONFIG

    if SYSTEM_CONFIG.is_file():
        pytest.skip(f"{SYSTEM_CONFIG} exists here: a client finds it")
    env = {k: v for k, v in os.environ.items() if k != "FRAME_CONFIG"} | {"HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "frame", "status"], capture_output=True, text=True,
                            env=env, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"so this reads the state folder {tmp_path}/.local/state/frame" in result.stderr
    given = subprocess.run([sys.executable, "-m", "frame", "--config", str(tmp_path / "none.yaml"), "status"],
                           capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert "note: no configuration file" not in given.stderr

"""The real daemon process: API over HTTP, sd_notify, SIGTERM, failures that must not stop it."""

import socket
import time

import pytest

from tests.daemon.daemonproc import DaemonProcess, write_config


@pytest.fixture
def notify_socket(tmp_path):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    yield path, sock
    sock.close()


def _messages(sock, until: str, timeout: float = 10) -> list[str]:
    got, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            break
        if any(until in m for m in got):
            break
    return got


def test_daemon_serves_notifies_and_stops_cleanly_on_sigterm(tmp_path, notify_socket):
    path, sock = notify_socket
    config, url = write_config(tmp_path)
    daemon = DaemonProcess(config, url, env={"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "400000"})
    try:
        messages = _messages(sock, "WATCHDOG=1")
        assert any("READY=1" in m for m in messages) and any("WATCHDOG=1" in m for m in messages)
        status = daemon.get("/api/status").json()
        assert status["state"] == "idle" and {"night", "deadline", "show"} <= set(status["next_runs"])
        assert daemon.post("/api/prompts", {"prompt": "a red fox"}).status_code == 201
        assert daemon.post("/api/prompts", {"prompt": "x"}, token="wrong-token-0000").status_code == 401
        code, seconds = daemon.terminate()
        assert code == 0 and seconds < 10
        assert any("STOPPING=1" in m for m in _messages(sock, "STOPPING=1", timeout=2) + messages)
    finally:
        daemon.kill()

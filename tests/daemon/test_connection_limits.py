"""Idle and dribbling connections cannot lock the owner out of the daemon (``frame.net.connguard``).

The daemon's real app behind the real HttpServer on 127.0.0.1. 200 sockets — 100 from 127.0.0.1, the
owner's own address, and 100 from 127.0.0.2 (also loopback on Linux) — each send a request's headers
one byte at a time, as long as the test runs. The owner's ``GET /api/status`` still answers at once."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests

from frame.daemon.http.app import create_app
from frame.daemon.store.database import Store
from frame.net import connguard
from frame.net.server import HttpServer
from frame.web import create_blueprint
from tests.daemon.conftest import make_config

TOKEN = "limits-test-token-1"


@pytest.fixture
def server(tmp_path):
    store = Store.open(tmp_path)
    http = HttpServer(create_app(make_config(tmp_path), store, token=TOKEN, pages=create_blueprint), "127.0.0.1:0")
    http.start()
    yield http
    http.close()
    store.close()


class Dribblers:
    """``count`` sockets from ``address`` that send a request head one byte per ``every`` seconds."""

    def __init__(self, port: int, address: str, count: int, every: float = 0.3) -> None:
        self.sockets: list[socket.socket] = []
        self.stop = threading.Event()
        for _ in range(count):
            sock = socket.socket()
            sock.bind((address, 0))
            sock.settimeout(2)
            try:
                sock.connect(("127.0.0.1", port))
                sock.sendall(b"GET /api/status HTTP/1.1\r\n")
            except OSError:
                sock.close()
                continue
            self.sockets.append(sock)
        self.thread = threading.Thread(target=self._dribble, args=(every,), daemon=True)
        self.thread.start()

    def _dribble(self, every: float) -> None:
        while not self.stop.wait(every):
            for sock in self.sockets:
                try:
                    sock.send(b"X")
                except OSError:
                    pass  # closed by the server: what the limits do

    def open_count(self) -> int:
        """Sockets the server has not closed (a closed one reads EOF or a reset at once)."""
        alive = 0
        for sock in self.sockets:
            sock.setblocking(False)
            try:
                sock.recv(1, socket.MSG_PEEK)  # EOF or an answer: the server is done with it
            except BlockingIOError:
                alive += 1  # nothing to read yet: still open
            except OSError:
                pass  # reset
        return alive

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for sock in self.sockets:
            sock.close()


def _status_seconds(port: int) -> float:
    started = time.monotonic()
    answer = requests.get(f"http://127.0.0.1:{port}/api/status", timeout=5,
                          headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200 and "state" in answer.json()
    return time.monotonic() - started


def test_200_dribbling_sockets_do_not_lock_the_owner_out(server):
    crowd = [Dribblers(server.port, "127.0.0.1", 100), Dribblers(server.port, "127.0.0.2", 100)]
    try:
        time.sleep(0.5)  # the server has accepted (and limited) them all
        for _ in range(5):
            assert _status_seconds(server.port) < 2.0
        for dribblers in crowd:  # one address holds at most its share of the connections
            assert dribblers.open_count() <= connguard.PER_ADDRESS
    finally:
        for dribblers in crowd:
            dribblers.close()


def test_request_headers_must_arrive_within_the_head_deadline(server, monkeypatch):
    monkeypatch.setattr(connguard.GuardedServer, "head_seconds", 1)
    dribblers = Dribblers(server.port, "127.0.0.2", 3, every=0.2)
    try:
        time.sleep(0.3)
        assert dribblers.open_count() == 3
        deadline = time.monotonic() + 5
        while dribblers.open_count() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert dribblers.open_count() == 0  # cut although a byte arrived every 0.2 s
        assert _status_seconds(server.port) < 2.0
    finally:
        dribblers.close()

"""DNS rebinding: the daemon answers only to its own names and addresses (``frame.net.hosts``).

A page on evil.example whose name is rebound to the frame's address would otherwise read the open GET
pages and API from the owner's browser. The daemon's real app behind the real HttpServer on 127.0.0.1;
requests carry the Host header a browser would send."""

from __future__ import annotations

import http.client
import socket

import pytest

from frame.daemon.http.app import create_app
from frame.daemon.store.database import Store
from frame.net.server import HttpServer
from frame.web import create_blueprint
from tests.daemon.conftest import make_config

TOKEN = "host-test-token-12"


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(**web):
        store = Store.open(tmp_path / f"s{len(started)}")
        config = make_config(tmp_path, web={"listen": "0.0.0.0:8080", **web})
        http = HttpServer(create_app(config, store, token=TOKEN, pages=create_blueprint), "127.0.0.1:0")
        http.start()
        started.append((http, store))
        return http.port

    yield start
    for server, store in started:
        server.close()
        store.close()


def get(port: int, path: str, host: str | None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.putheader("Authorization", f"Bearer {TOKEN}")  # the owner's request: only its Host is wrong
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, answer.getheader("Content-Type", ""), answer.read()
    finally:
        conn.close()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "frame.evil.example", "127.0.0.1.evil.example",
                                  "localhost.evil.example", "xn--80ak6aa92e.com", "[::1].evil"])
@pytest.mark.parametrize("path", ["/api/status", "/", "/gallery"])
def test_a_foreign_host_name_is_refused(serve, host, path):
    status, kind, body = get(serve(), path, host)
    assert status == 421
    assert b"web.hosts" in body  # the answer says how to allow a name
    if path.startswith("/api/"):
        assert kind.startswith("application/json")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8080", "192.168.1.20:8080", "[::1]:8080", "[fe80::1]",
                                  "localhost", "localhost:8080", "LOCALHOST.", socket.gethostname(),
                                  f"{socket.gethostname()}.local:8080", None])
def test_the_frames_own_names_and_any_address_are_answered(serve, host):
    assert get(serve(), "/api/status", host)[0] == 200


def test_web_hosts_adds_names_and_star_allows_any(serve):
    port = serve(hosts=("frame.example.org",))
    assert get(port, "/api/status", "frame.example.org:443")[0] == 200
    assert get(port, "/api/status", "evil.example")[0] == 421
    assert get(serve(hosts=("*",)), "/api/status", "evil.example")[0] == 200


def test_a_listen_name_is_allowed(serve):
    assert get(serve(listen="myframe.lan:8080"), "/api/status", "myframe.lan:8080")[0] == 200

"""The HTTP server in front of the API: oversized bodies are refused before they are read or spooled."""

from __future__ import annotations

import socket

import pytest
import waitress.buffers

from frame.daemon.http.app import MAX_BODY, create_app
from frame.daemon.store.database import Store
from frame.net.server import HttpServer
from frame.web import create_blueprint
from tests.daemon.conftest import make_config

TEN_MB = 10 * 1024 * 1024


@pytest.fixture
def server(tmp_path, monkeypatch):
    """The daemon's real app behind the real HttpServer on an ephemeral port; records every file
    waitress would spool a request body into."""
    spooled: list[object] = []
    original = waitress.buffers.TempfileBasedBuffer.newfile

    def recording_newfile(buffer):
        spooled.append(buffer)
        return original(buffer)

    monkeypatch.setattr(waitress.buffers.TempfileBasedBuffer, "newfile", recording_newfile)
    store = Store.open(tmp_path)
    config = make_config(tmp_path)
    http = HttpServer(create_app(config, store, token="server-test-token-1", pages=create_blueprint), "127.0.0.1:0")
    http.start()
    http.spooled = spooled
    yield http
    http.close()
    store.close()


def _request(port: int, head: str, body_chunks=(), timeout: float = 5.0) -> bytes:
    """Send ``head`` then as many body chunks as the server accepts; return what it answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1"))
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending: what we want
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def test_oversized_body_is_refused_from_its_headers_alone(server):
    """Content-Length says 10 MB: the 413 comes before a single body byte is sent."""
    head = (f"POST /api/prompts HTTP/1.1\r\nHost: frame\r\nContent-Type: application/json\r\n"
            f"Content-Length: {TEN_MB}\r\nConnection: close\r\n\r\n")
    answer = _request(server.port, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert server.spooled == []


@pytest.mark.parametrize("path", ["/api/prompts", "/login"])
def test_unauthenticated_10mb_upload_is_refused_and_nothing_is_spooled(server, path):
    block = b"x" * 65536
    head = (f"POST {path} HTTP/1.1\r\nHost: frame\r\nContent-Type: application/json\r\n"
            f"Content-Length: {TEN_MB}\r\nConnection: close\r\n\r\n")
    answer = _request(server.port, head, [block] * (TEN_MB // len(block)))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert server.spooled == [], "waitress wrote the request body to a temporary file"


def test_chunked_10mb_upload_is_cut_off_and_nothing_is_spooled(server):
    """Without a Content-Length the server counts as it reads and stops at the limit."""
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
    head = ("POST /api/prompts HTTP/1.1\r\nHost: frame\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    answer = _request(server.port, head, [chunk] * (TEN_MB // 0x10000))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert server.spooled == []


def test_a_body_at_the_limit_still_reaches_the_app(server):
    """The server's cap is the API's own: a MAX_BODY request is read and answered by the app (401 here,
    no token), one byte more is refused by the server."""
    head = ("POST /api/prompts HTTP/1.1\r\nHost: frame\r\nContent-Type: application/json\r\n"
            f"Content-Length: {MAX_BODY}\r\nConnection: close\r\n\r\n")
    answer = _request(server.port, head, [b" " * MAX_BODY])
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    over = head.replace(str(MAX_BODY), str(MAX_BODY + 1))
    assert _request(server.port, over).startswith(b"HTTP/1.1 413")

"""The HTTP server in front of the API: oversized bodies are refused before they are read or spooled."""

from __future__ import annotations

import socket
import time

import pytest
import waitress.buffers

from frame.daemon.http.app import MAX_BODY, create_app
from frame.daemon.store.database import Store
from frame.net.server import HttpServer
from frame.web import create_blueprint
from tests.daemon.conftest import make_config

TEN_MB = 10 * 1024 * 1024
ONE_GB = 1024 ** 3
TOKEN = "server-test-token-1"


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
    config = make_config(tmp_path, web={"hosts": ("frame",)})  # the raw requests below say Host: frame
    app = create_app(config, store, token=TOKEN, pages=create_blueprint)
    http = HttpServer(app, "127.0.0.1:0")
    http.start()
    http.spooled = spooled
    http.app, http.store = app, store
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


def _owner_cookie(app) -> tuple[str, str]:
    """A logged-in owner session (cookie header value) and its CSRF token, made through the login form."""
    from tests.web.conftest import csrf_from

    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    assert client.post("/login", data={"token": TOKEN, "csrf_token": csrf_from(page), "next": "/"}).status_code == 303
    csrf = csrf_from(client.get("/upload").get_data(as_text=True))
    return f"frame_session={client.get_cookie('frame_session').value}", csrf


def _upload_head(length: int, cookie: str = "", boundary: str = "b0undary") -> str:
    return (f"POST /upload HTTP/1.1\r\nHost: frame\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {length}\r\n{'Cookie: ' + cookie + chr(13) + chr(10) if cookie else ''}"
            "Connection: close\r\n\r\n")


def _multipart(csrf: str, photo: bytes, boundary: str = "b0undary") -> bytes:
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\n{csrf}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"p.jpg\"\r\n"
            f"Content-Type: image/jpeg\r\n\r\n").encode() + photo + f"\r\n--{boundary}--\r\n".encode()


@pytest.mark.parametrize("owner", [False, True])
def test_a_1_gb_upload_is_refused_at_once_and_nothing_is_spooled(server, owner):
    """Declared 1 GB: 413 from the headers alone, with or without the owner's session; the server
    never waits for the body."""
    import time

    cookie = _owner_cookie(server.app)[0] if owner else ""
    started = time.monotonic()
    answer = _request(server.port, _upload_head(ONE_GB, cookie), timeout=3.0)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert time.monotonic() - started < 2.0
    assert server.spooled == []


def test_an_upload_without_a_session_keeps_the_64_kib_cap(server):
    """1 MB to /upload without (or with a forged) session: 413, nothing spooled, nothing stored."""
    for cookie in ("", "frame_session=eyJvd25lciI6IngifQ.forged.signature"):
        answer = _request(server.port, _upload_head(1_000_000, cookie), [b"x" * 65536] * 16)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert server.spooled == [] and server.store.count_pictures() == 0


def test_a_logged_out_session_loses_the_larger_cap(server):
    cookie, csrf = _owner_cookie(server.app)
    server.app.extensions["frame.web"].session_registry().revoke_all()
    answer = _request(server.port, _upload_head(1_000_000, cookie), [b"x" * 65536] * 16)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_the_owners_3_mb_upload_goes_to_temporary_files_not_memory_and_is_stored(server):
    """Over the 64 KiB default but under 20 MB, with the owner's session and CSRF token: read in full
    into waitress's spool file and werkzeug's part file (twelve uploads at once must not multiply the
    daemon's memory, issue 27; the image child reads the part's file) and stored as a picture."""
    import io
    import tempfile

    import numpy as np
    from PIL import Image

    cookie, csrf = _owner_cookie(server.app)
    noise = np.random.default_rng(1).integers(0, 256, (1200, 1600, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noise).save(buffer, "JPEG", quality=98)
    photo = buffer.getvalue()
    assert 2_000_000 < len(photo) < 20_000_000
    body = _multipart(csrf, photo)
    temporary = []
    original = tempfile.TemporaryFile
    tempfile.TemporaryFile = lambda *a, **k: temporary.append(1) or original(*a, **k)
    try:
        answer = _request(server.port, _upload_head(len(body), cookie), [body])
    finally:
        tempfile.TemporaryFile = original
    assert answer.startswith(b"HTTP/1.1 303"), answer[:300]
    assert len(server.spooled) == 1 and len(temporary) >= 2  # waitress's spool and the form part's file
    [picture] = server.store.pictures()
    assert picture.origin == "upload" and (picture.width, picture.height) == (1600, 1200)


def test_a_chunked_upload_is_not_admitted(server):
    """No declared length, no larger cap: a chunked body to /upload is cut off at 64 KiB."""
    cookie, _ = _owner_cookie(server.app)
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
    head = ("POST /upload HTTP/1.1\r\nHost: frame\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            f"Cookie: {cookie}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    answer = _request(server.port, head, [chunk] * 32)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert server.spooled == []



def test_close_wakes_the_socket_loop_instead_of_waiting_for_its_timeout(tmp_path):
    """close() of an idle server returns at once with its loop thread ended: it does not wait for the
    loop's select() timeout (``LOOP_TIMEOUT_SECONDS``). It used to wait that 1 s, in every daemon stop
    and every test's server; closing in the loop thread takes milliseconds."""
    from frame.net.server import LOOP_TIMEOUT_SECONDS

    store = Store.open(tmp_path)
    http = HttpServer(create_app(make_config(tmp_path), store, token=TOKEN, pages=create_blueprint), "127.0.0.1:0")
    http.start()
    port = http.port
    time.sleep(0.5)  # the loop sleeps in select() (an idle server, as when a daemon stops)
    try:
        started = time.monotonic()
        http.close(timeout=2.0)
        took = time.monotonic() - started
        assert took < LOOP_TIMEOUT_SECONDS / 2, f"close() took {took:.2f} s: it waited for select() to time out"
        assert not http._thread.is_alive()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        store.close()


def test_close_after_the_loops_trigger_closed_still_closes(tmp_path):
    """The wake-up pipe can be closed while the loop thread still runs (the whole suite once met this in
    a teardown: EBADF from close()); close() then closes from the caller's thread, as it always did."""
    store = Store.open(tmp_path)
    http = HttpServer(create_app(make_config(tmp_path), store, token=TOKEN, pages=create_blueprint), "127.0.0.1:0")
    http.start()
    port = http.port
    try:
        http._server.trigger.close()
        http.close(timeout=2.0)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        store.close()

"""``frame serve-model``: range requests, conditional requests, keep-alive, path safety, the token."""

from __future__ import annotations

import base64
import http.client
import logging
import os

import pytest
import requests

from tests.modelserver.conftest import TOKEN

DATA = bytes(range(256)) * 4


def raw_get(served, path: str, headers: dict | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    """One request with the path sent exactly as given (requests would normalise ``..`` away)."""
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_whole_file_with_validators(served):
    r = requests.get(served.url("weights.bin"), timeout=5)
    assert r.status_code == 200 and r.content == DATA
    assert r.headers["Accept-Ranges"] == "bytes" and r.headers["ETag"] and r.headers["Last-Modified"]


@pytest.mark.parametrize("header, first, last", [
    ("bytes=2-5", 2, 5),
    ("bytes=1000-", 1000, 1023),
    ("bytes=-3", 1021, 1023),
    ("bytes=1020-5000", 1020, 1023),  # an end past the file is clipped, as RFC 9110 says
])
def test_single_ranges(served, header, first, last):
    r = requests.get(served.url("weights.bin"), headers={"Range": header}, timeout=5)
    assert r.status_code == 206 and r.content == DATA[first:last + 1]
    assert r.headers["Content-Range"] == f"bytes {first}-{last}/{len(DATA)}"


@pytest.mark.parametrize("header", ["bytes=5000-6000", "bytes=9-3", "bytes=abc", "bytes=0-1,5-6", "pages=1-2"])
def test_bad_or_unsatisfiable_ranges_are_416(served, header):
    r = requests.get(served.url("weights.bin"), headers={"Range": header}, timeout=5)
    assert r.status_code == 416
    assert r.headers["Content-Range"] == f"bytes */{len(DATA)}"


def test_if_range_and_if_none_match(served):
    etag = requests.head(served.url("weights.bin"), timeout=5).headers["ETag"]
    same = requests.get(served.url("weights.bin"), headers={"Range": "bytes=0-9", "If-Range": etag}, timeout=5)
    assert same.status_code == 206 and same.content == DATA[:10]
    stale = requests.get(served.url("weights.bin"), headers={"Range": "bytes=0-9", "If-Range": '"old"'}, timeout=5)
    assert stale.status_code == 200 and stale.content == DATA  # changed file: the whole new one
    assert requests.get(served.url("weights.bin"), headers={"If-None-Match": etag}, timeout=5).status_code == 304


def test_head_has_headers_and_no_body(served):
    status, headers, body = raw_get(served, "/weights.bin", method="HEAD")
    assert status == 200 and body == b"" and headers["content-length"] == str(len(DATA))


def test_keep_alive_serves_many_requests_on_one_connection(served):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    try:
        for start in (0, 100, 200):
            conn.request("GET", "/weights.bin", headers={"Range": f"bytes={start}-{start + 9}"})
            r = conn.getresponse()
            assert r.status == 206 and r.read() == DATA[start:start + 10]
            assert r.getheader("Connection", "").lower() != "close"
        assert conn.sock is not None  # the same socket all along
    finally:
        conn.close()


@pytest.mark.parametrize("path", [
    "/../secret.txt", "/sub/../../secret.txt", "/%2e%2e/secret.txt", "/sub/%2e%2e/%2e%2e/secret.txt",
    "/%252e%252e/secret.txt", "/..%2fsecret.txt", "/sub%5c..%5c..%5csecret.txt", "/.hidden", "/sub",
    "/", "/nothing.bin", "/weights.bin%00.txt",
])
def test_paths_outside_the_folder_hidden_files_and_folders_are_refused(served, path):
    status, _, body = raw_get(served, path)
    assert status == 404 and b"outside" not in body


def test_symlinks_leading_outside_are_refused_inside_ones_work(served, folder):
    os.symlink(folder.parent / "secret.txt", folder / "escape.txt")
    os.symlink(folder.parent, folder / "up")
    os.symlink(folder / "weights.bin", folder / "alias.bin")
    assert raw_get(served, "/escape.txt")[0] == 404
    assert raw_get(served, "/up/secret.txt")[0] == 404
    assert raw_get(served, "/alias.bin", {"Range": "bytes=0-3"})[2] == DATA[:4]


def test_only_get_and_head(served):
    for method in ("POST", "PUT", "DELETE"):
        assert raw_get(served, "/weights.bin", method=method)[0] == 405


def test_token_is_required_in_either_form(served_with_token):
    url = served_with_token.url("sub/small.json")
    refused = requests.get(url, timeout=5)
    assert refused.status_code == 401 and "Bearer" in refused.headers["WWW-Authenticate"]
    assert requests.get(url, headers={"Authorization": "Bearer wrong-token-0000"}, timeout=5).status_code == 401
    assert requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).json() == {"a": 1}
    basic = base64.b64encode(f"frame:{TOKEN}".encode()).decode()
    assert requests.get(url, headers={"Authorization": f"Basic {basic}"}, timeout=5).status_code == 200
    in_url = served_with_token.url("sub/small.json", userinfo=f"frame:{TOKEN}")
    assert requests.get(in_url, timeout=5).status_code == 200
    assert requests.get(served_with_token.url("sub/small.json", userinfo="frame:nope"), timeout=5).status_code == 401


def test_token_never_reaches_the_log(served_with_token, caplog):
    caplog.set_level(logging.DEBUG)
    requests.get(served_with_token.url("weights.bin"), headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
    requests.get(served_with_token.url("weights.bin"), headers={"Authorization": "Bearer guessed-wrong-1"}, timeout=5)
    assert TOKEN not in caplog.text and "guessed-wrong" not in caplog.text


def _status_from(address: str, port: int, token: str) -> tuple[int, dict]:
    """One GET of sub/small.json with ``token``, sent from the loopback ``address`` (127.0.0.x)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(address, 0))
    try:
        conn.request("GET", "/sub/small.json", headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def test_token_guessing_is_limited_per_address(folder):
    """Ten wrong tokens from one address lock it out (429 with Retry-After, even for the right token, as
    on the daemon and serve-render); another address is not affected."""
    from tests.modelserver.conftest import Served

    served = Served(folder, TOKEN)
    try:
        for guess in range(10):
            assert _status_from("127.0.0.1", served.port, f"guess-{guess:08d}")[0] == 401
        status, headers = _status_from("127.0.0.1", served.port, "guess-10")
        assert status == 429 and int(headers["retry-after"]) > 0
        assert _status_from("127.0.0.1", served.port, TOKEN)[0] == 429
        assert _status_from("127.0.0.2", served.port, TOKEN)[0] == 200
    finally:
        served.close()


def test_unread_downloads_do_not_block_the_server(tmp_path):
    """99 clients ask for a 64 MiB file and never read it (waitress used to hold each connection for
    two minutes and stop accepting at 100): a new client is still served at once."""
    import socket
    import time

    from tests.modelserver.conftest import Served

    (tmp_path / "big.bin").write_bytes(b"\0" * (64 << 20))
    (tmp_path / "small.json").write_text('{"a": 1}')
    served = Served(tmp_path)
    stalled = []
    try:
        for _ in range(99):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=2)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            stalled.append(sock)
        time.sleep(0.5)
        for _ in range(3):
            started = time.monotonic()
            assert requests.get(served.url("small.json"), timeout=5).json() == {"a": 1}
            assert time.monotonic() - started < 2.0
    finally:
        for sock in stalled:
            sock.close()
        served.close()

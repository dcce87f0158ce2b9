"""``frame config check`` with a URL model: reaches the server, probes ranges, warns with the fix."""

from __future__ import annotations

import functools
import socket
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from frame.cli.program import main
from frame.diffusion import url_check
from frame.models import demo_model_path
from tests.engine.http_server import RangeServer
from tests.modelserver.conftest import TOKEN, Served


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """frame hangs up on a whole-file answer to its range probe: expected, no traceback."""


@pytest.fixture
def plain_http_server():
    """``python -m http.server``: whole files only, Range ignored."""
    httpd = _QuietServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(demo_model_path())))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def check(tmp_path, capsys, source: str, extra: str = "") -> tuple[int, list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text(f"model:\n  source: {source}\n{extra}")
    code = main(["config", "check", str(path)])
    out = capsys.readouterr()
    return code, (out.out + out.err).splitlines()


def test_serve_model_passes_with_a_range_line(tmp_path, capsys):
    served = Served(demo_model_path())
    try:
        code, lines = check(tmp_path, capsys, served.url())
    finally:
        served.close()
    assert code == 0 and lines[0].endswith(": ok")
    assert "model.source: the model server answers and serves range requests (unet/model.onnx" in lines[1]


def test_a_server_without_ranges_is_a_warning_naming_what_works(tmp_path, capsys, plain_http_server):
    code, lines = check(tmp_path, capsys, plain_http_server)
    assert code == 0
    (warning,) = [line for line in lines if "warning" in line]
    assert "ignores range requests" in warning
    for name in ("nginx", "Caddy", "Apache", "frame serve-model"):
        assert name in warning


def test_an_unreachable_server_is_a_warning(tmp_path, capsys):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, lines = check(tmp_path, capsys, f"http://127.0.0.1:{port}/models/")
    assert code == 0
    assert any(line.startswith("model.source: warning: cannot reach the model server at http://127.0.0.1:"
                               ) and "switched on" in line for line in lines)


def test_a_server_that_does_not_answer_within_the_timeout(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(url_check, "PROBE_TIMEOUT", 0.3)
    server = RangeServer(str(demo_model_path())).start()
    server.gate = lambda path: "hang"
    try:
        code, lines = check(tmp_path, capsys, server.url(""))
    finally:
        server.gate = None
        server.stop()
    assert code == 0 and any("cannot reach" in line and "ReadTimeout" in line for line in lines)


def test_token_protected_server_needs_model_token_and_nothing_secret_is_printed(tmp_path, capsys):
    served = Served(demo_model_path(), TOKEN)
    try:
        code, refused = check(tmp_path, capsys, served.url())
        _, with_token = check(tmp_path, capsys, served.url(), f"  token: {TOKEN}\n")
        _, in_url = check(tmp_path, capsys, served.url(userinfo=f"frame:{TOKEN}"))
    finally:
        served.close()
    assert code == 0 and any("refused access (HTTP 401): set model.token" in line for line in refused)
    assert any("serves range requests" in line for line in with_token)
    assert any("serves range requests" in line for line in in_url)
    assert TOKEN not in "\n".join(refused + with_token + in_url)

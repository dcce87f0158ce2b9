"""Models on an authenticated NAS: a token in the config or user:password in the URL works, and the
secret never shows; a server without range support is one clear line naming servers that work."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from frame.cli.program import main
from frame.config import load_config
from frame.diffusion import load_pipeline
from frame.diffusion.configured import load_configured_pipeline
from frame.models import demo_model_path
from tests.modelserver.conftest import TOKEN, Served
from tests.painting import paint

ARGS = dict(steps=1, guidance=0, seed=3, width=32, height=32)


@pytest.fixture(scope="module")
def reference():
    return np.asarray(paint(load_pipeline(demo_model_path()), "a cat", **ARGS))


@pytest.fixture(scope="module")
def nas():
    served = Served(demo_model_path(), TOKEN)
    yield served
    served.close()


def config_for(tmp_path, source: str, token: str = ""):
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\nmodel:\n  source: '{source}'\n  token: '{token}'\n")
    return load_config(path, environ={})


def test_token_in_the_config(nas, tmp_path, reference):
    image = paint(load_configured_pipeline(config_for(tmp_path, nas.url(), TOKEN)), "a cat", **ARGS)
    assert np.array_equal(np.asarray(image), reference)


def test_basic_auth_in_the_url(nas, tmp_path, reference):
    source = nas.url(userinfo=f"frame:{TOKEN}")
    image = paint(load_configured_pipeline(config_for(tmp_path, source)), "a cat", **ARGS)
    assert np.array_equal(np.asarray(image), reference)


def test_wrong_credentials_are_one_line_without_the_secret(nas, tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\n")
    code = main(["--config", str(path), "render", "--model", nas.url(userinfo="frame:not-the-token-42"),
                 "--prompt", "a cat", "--steps", "1", "--size", "32x32", "--out", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "refused access (HTTP 401)" in err and "model.token" in err
    assert "not-the-token-42" not in err and "***@127.0.0.1" in err


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """frame hangs up on a whole-file answer to its range probe: expected, no traceback."""


def test_a_server_without_ranges_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    httpd = _QuietServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(demo_model_path())))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        path = tmp_path / "config.yaml"
        path.write_text(f"state_dir: {tmp_path / 'state'}\n")
        code = main(["--config", str(path), "render", "--model",
                     f"http://user:pw-secret@127.0.0.1:{httpd.server_address[1]}/", "--prompt", "a cat",
                     "--out", str(tmp_path / "x.png")])
    finally:
        httpd.shutdown()
        httpd.server_close()
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "the server ignored the Range header" in err
    for name in ("nginx", "Caddy", "Apache", "frame serve-model"):
        assert name in err
    assert "pw-secret" not in err

"""A real ``frame serve-model`` server (waitress + the app) on 127.0.0.1 over a temporary folder."""

from __future__ import annotations

import pytest

from frame.net.server import HttpServer
from frame.serve.model.app import ModelServerApp

TOKEN = "s3cret-token-0123456789"


class Served:
    def __init__(self, folder, token: str = "") -> None:
        self.folder = folder
        self.server = HttpServer(ModelServerApp(folder, token), "127.0.0.1:0", threads=4, max_body=0,
                                 announce="test model server on %s:%d")
        self.server.start()
        self.port = self.server.port

    def url(self, relative: str = "", userinfo: str = "") -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}/{relative}"

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("serve")
    root = tmp_path / "models"
    (root / "sub").mkdir(parents=True)
    (root / "weights.bin").write_bytes(bytes(range(256)) * 4)
    (root / "sub" / "small.json").write_text('{"a": 1}')
    (root / ".hidden").write_text("hidden")
    (tmp_path / "secret.txt").write_text("outside")
    return root


@pytest.fixture(scope="module")
def served(folder):
    s = Served(folder)
    yield s
    s.close()


@pytest.fixture(scope="module")
def served_with_token(folder):
    s = Served(folder, TOKEN)
    yield s
    s.close()

"""Shared fixtures for the engine runtime tests: a Range-capable HTTP server on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.engine.http_server import RangeServer


@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    server = RangeServer(str(root)).start()
    yield root, server
    server.stop()

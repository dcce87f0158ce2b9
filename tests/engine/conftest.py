"""Fixtures for the engine runtime tests: a Range-capable HTTP server on 127.0.0.1."""

from __future__ import annotations

import pytest

import frame.engine.ops  # noqa: F401  (fills the kernel registry)
from tests.engine.http_server import RangeServer

for _family in ("linalg", "norm", "conv", "reduce", "resize"):  # kernels not yet imported by ops/__init__
    try:
        __import__(f"frame.engine.ops.{_family}")
    except ImportError:
        pass


@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    server = RangeServer(str(root)).start()
    yield root, server
    server.stop()

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


class _FakeBlas:
    """Stands in for OpenBLAS so tests can put the engine in its "split over two cores" state."""

    def __init__(self, threads: int) -> None:
        self.num_threads = threads

    def set_num_threads(self, n: int) -> None:
        self.num_threads = n


@pytest.fixture
def two_way_splits(monkeypatch):
    """Kernels split their products and row blocks two ways (as inside a run on a 2-core machine),
    whatever this machine's BLAS is."""
    from frame.engine import blas_threads

    controller = blas_threads.BlasThreads()
    controller._libraries = [_FakeBlas(2)]
    controller.default, controller.current = 2, 1
    monkeypatch.setattr(blas_threads, "_shared", controller)
    yield controller

"""The night tests' context fixture (``tests/remote/nights.py`` holds the rest of their setup)."""

from __future__ import annotations

import pytest

from tests.remote.nights import night_context


@pytest.fixture
def open_night(tmp_path):
    """``open_night(url, backend="remote", **remote)``: a render context in ``tmp_path`` (see
    ``nights.night_context``) whose store is closed after the test."""
    opened = []

    def open_context(url: str, backend: str = "remote", **remote):
        ctx = night_context(tmp_path, url, backend, **remote)
        opened.append(ctx)
        return ctx

    yield open_context
    for ctx in opened:
        ctx.store.close()

"""glibc tuning that returns freed buffers to the OS (what keeps peak RSS near live bytes)."""

from __future__ import annotations

import sys

import pytest

from frame.engine import memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_mmap_threshold_is_fixed_once():
    assert memory.return_freed_buffers_to_os() is True
    assert memory.return_freed_buffers_to_os() is True  # idempotent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_closing_a_model_trims_malloc_arenas(tmp_path, monkeypatch):
    """Model.close hands freed arena memory back (what the next pipeline phase starts on)."""
    from frame.engine import load_model
    from frame.engine import model as model_module
    from tests.engine import builders

    assert memory.trim_free_memory() is True
    calls = []
    monkeypatch.setattr(model_module, "trim_free_memory", lambda: calls.append(1) or True)
    proto, feeds = builders.mlp()
    model = load_model(builders.save(proto, tmp_path / "m.onnx"))
    assert len(calls) == 1  # after load: the parsed structure's freed heap
    model.run(feeds)
    model.close()
    assert len(calls) == 2

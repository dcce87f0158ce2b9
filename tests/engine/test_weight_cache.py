"""The optional weight cache for models served over HTTP: written once, used by later nights, checked."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from frame.engine import load_model
from frame.engine.io.http_settings import HttpSettings
from tests.engine import builders
from tests.modelserver.conftest import Served


@pytest.fixture
def served_mlp(tmp_path):
    root = tmp_path / "served"
    proto, feeds = builders.mlp(hidden=300)
    path = builders.save(proto, root / "mlp" / "model.onnx", external=True)
    expected = builders.ort_run(path, feeds)["y"]
    server = Served(root)
    yield server, server.url("mlp/model.onnx"), feeds, expected, path
    server.close()


PROBES = 2  # one one-byte version probe per file holding weights (model.onnx keeps the tiny int64 ones)


def night(url, feeds, cache_dir, max_bytes=1 << 30):
    """One 'night': a fresh load (a new process would do the same), one run; outputs, bytes by kind, and
    the bytes a whole fetch reads: each file's span of weights (the int64s embedded in model.onnx are a
    few bytes of protobuf framing apart, read along with them)."""
    settings = HttpSettings(cache_dir=str(cache_dir), cache_max_bytes=max_bytes, backoff=0.01)
    with load_model(url, http=settings) as model:
        files = {r.location for r in model.streamed_weights}
        assert len(files) == PROBES
        before = model.fetch_stats
        y = model.run(feeds)["y"]
        span = sum(max(r.offset + r.length for r in model.streamed_weights if r.location == f)
                   - min(r.offset for r in model.streamed_weights if r.location == f) for f in files)
        return y, (model.fetch_stats - before).bytes, span


def entries(cache_dir):
    return sorted(p for p in cache_dir.rglob("*.w"))


def test_later_nights_read_the_weights_from_the_cache_written_once(served_mlp, tmp_path):
    _, url, feeds, expected, _ = served_mlp
    cache = tmp_path / "cache"
    first, fetched, span = night(url, feeds, cache)
    assert fetched["http"] == span + PROBES and fetched["cache"] == 0  # + the version probes
    files = entries(cache)
    weights = sum(f.stat().st_size for f in files)
    assert len(files) == 8 and span - 100 < weights <= span
    stamps = {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files}
    second, fetched, _ = night(url, feeds, cache)
    assert fetched["http"] == PROBES and fetched["cache"] == weights
    assert {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in entries(cache)} == stamps  # nothing rewritten
    assert np.array_equal(first, second) and builders.rel_l2(second, expected) < 1e-6
    assert "source.txt" in {p.name for p in cache.rglob("*")}


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_or_partial_entries_are_refetched(served_mlp, tmp_path, caplog, damage):
    _, url, feeds, _, _ = served_mlp
    cache = tmp_path / "cache"
    clean, _, _ = night(url, feeds, cache)
    victim = max(entries(cache), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
        victim.write_bytes(bytes(data))
    else:
        victim.write_bytes(bytes(data[: len(data) // 3]))
    caplog.set_level(logging.WARNING)
    again, fetched, _ = night(url, feeds, cache)
    assert np.array_equal(again, clean)
    assert fetched["http"] == PROBES + len(data)  # the probes and the damaged tensor, nothing else
    assert "fetching it again" in caplog.text
    assert len(entries(cache)) == 8
    third, fetched, _ = night(url, feeds, cache)
    assert fetched["http"] == PROBES and np.array_equal(third, clean)


def test_a_changed_model_on_the_server_replaces_the_cached_copy(served_mlp, tmp_path):
    _, url, feeds, _, path = served_mlp
    cache = tmp_path / "cache"
    night(url, feeds, cache)
    old_versions = {p.parent for p in entries(cache)}
    proto, _ = builders.mlp(seed=7, hidden=300)
    builders.save(proto, path, external=True)  # same sizes, new weights: a new ETag
    os.utime(path + "_data", (1, 1))  # and a different modification time, whatever the clock's resolution
    expected = builders.ort_run(path, feeds)["y"]
    got, fetched, span = night(url, feeds, cache)
    assert fetched["http"] == span + PROBES and builders.rel_l2(got, expected) < 1e-6
    assert not any(v.exists() for v in old_versions) and len(entries(cache)) == 8


def test_the_size_cap_is_kept_and_the_rest_streams(served_mlp, tmp_path):
    _, url, feeds, expected, _ = served_mlp
    cache = tmp_path / "cache"
    _, first, _ = night(url, feeds, cache, max_bytes=10_000)
    stored = sum(f.stat().st_size for f in entries(cache))
    assert 0 < stored <= 10_000
    got, fetched, _ = night(url, feeds, cache, max_bytes=10_000)
    assert fetched["cache"] == stored and 0 < fetched["http"] <= first["http"] - stored
    assert builders.rel_l2(got, expected) < 1e-6


def test_leftover_temporaries_are_removed_and_an_unwritable_cache_only_streams(served_mlp, tmp_path, caplog):
    _, url, feeds, expected, _ = served_mlp
    cache = tmp_path / "cache"
    night(url, feeds, cache)
    version = entries(cache)[0].parent
    stale = version / ".0-1-00000000.w.tmp-1-2"
    stale.write_bytes(b"x")
    night(url, feeds, cache)
    assert not stale.exists()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    caplog.set_level(logging.WARNING)
    got, fetched, span = night(url, feeds, blocked)
    assert builders.rel_l2(got, expected) < 1e-6 and fetched["http"] == span + PROBES
    assert "cannot be written" in caplog.text

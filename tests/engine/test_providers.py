"""Every weights provider gives the same outputs as onnxruntime, for embedded and external data."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from frame.engine import load_model
from frame.engine.providers import NoCache, Prefetch, Ram
from frame.errors import UsageError
from tests.engine import builders


class CountingReads:
    """Wraps ReadingProvider.read to count reads and note the reading thread."""

    def __init__(self, provider) -> None:
        self.reads: list[tuple[str, str]] = []
        original, original_group = provider.read, provider.read_group

        def read(ref):
            self.reads.append((ref.name, threading.current_thread().name))
            return original(ref)

        def read_group(refs):
            if len(refs) == 1:
                return [read(refs[0])]
            self.reads.extend((ref.name, threading.current_thread().name) for ref in refs)
            return original_group(refs)

        provider.read = read
        provider.read_group = read_group


@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize("weights", ["nocache", "prefetch", "ram"])
def test_providers_match_onnxruntime(tmp_path, weights, external):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx", external=external)
    expected = builders.ort_run(path, feeds)["y"]
    with load_model(path, weights=weights) as model:
        for _ in range(2):
            got = model.run(feeds)["y"]
            assert builders.rel_l2(got, expected) < 1e-6


def test_ram_reads_each_weight_once_across_runs(tmp_path):
    proto, feeds = builders.mlp()
    provider = Ram()
    counter = CountingReads(provider)
    with load_model(builders.save(proto, tmp_path / "m.onnx"), weights=provider) as model:
        first = model.run(feeds)["y"]
        reads_after_first = len(counter.reads)
        second = model.run(feeds)["y"]
        cached = provider.cached_bytes
    assert reads_after_first == len(proto.graph.initializer) == len(counter.reads)
    assert np.array_equal(first, second)
    assert cached == sum(r.nbytes for r in model.streamed_weights)


def test_nocache_reads_every_run(tmp_path):
    proto, feeds = builders.mlp()
    provider = NoCache()
    counter = CountingReads(provider)
    with load_model(builders.save(proto, tmp_path / "m.onnx"), weights=provider) as model:
        model.run(feeds)
        model.run(feeds)
    assert len(counter.reads) == 2 * len(proto.graph.initializer)


@pytest.mark.parametrize("budget", [1, 4096, 1 << 20])
def test_prefetch_reads_ahead_on_its_thread_within_budget(tmp_path, budget):
    proto, feeds = builders.mlp(hidden=128)
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    provider = Prefetch(budget_bytes=budget)
    counter = CountingReads(provider)
    peak = []
    original_loop_check = provider._can_read

    def can_read():
        peak.append(provider._ready_bytes)
        return original_loop_check()

    provider._can_read = can_read
    expected = builders.ort_run(path, feeds)["y"]
    with load_model(path, weights=provider) as model:
        for _ in range(3):
            assert builders.rel_l2(model.run(feeds)["y"], expected) < 1e-6
    assert {thread for _, thread in counter.reads} == {"frame-weights-prefetch"}
    assert len(counter.reads) == 3 * len(proto.graph.initializer)
    largest = max(r.nbytes for r in model.streamed_weights)
    assert max(peak) <= max(budget, largest) + largest


def test_prefetch_recovers_after_a_failed_run(tmp_path):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx")
    with load_model(path, weights=Prefetch(budget_bytes=1)) as model:
        calls = {"n": 0}

        def fail_midway(i, env):
            calls["n"] += 1
            if i == 3 and calls["n"] < 10:
                raise RuntimeError("interrupted")

        model._executor.after_step = fail_midway
        with pytest.raises(RuntimeError):
            model.run(feeds)
        model._executor.after_step = None
        expected = builders.ort_run(path, feeds)["y"]
        assert builders.rel_l2(model.run(feeds)["y"], expected) < 1e-6


def test_user_provider_object(tmp_path):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx")

    class Zeros:  # the whole interface: prepare / get / release
        def prepare(self, refs):
            self.names = [r.name for r in refs]

        def get(self, ref):
            return np.ones(ref.shape, ref.dtype) if ref.dtype.kind == "i" else np.zeros(ref.shape, ref.dtype)

        def release(self, ref):
            pass

    provider = Zeros()
    model = load_model(path, weights=provider)
    assert set(provider.names) == {t.name for t in proto.graph.initializer}
    with pytest.raises(Exception):  # noqa: B017  zero weights → ones-slices of int consts break Slice
        model.run(feeds)


def test_bad_provider_names_and_objects(tmp_path):
    proto, _ = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx")
    with pytest.raises(UsageError, match="unknown weights provider"):
        load_model(path, weights="floppy")
    with pytest.raises(UsageError, match="needs an http"):
        load_model(path, weights="http")
    with pytest.raises(UsageError, match="release"):
        load_model(path, weights=type("Half", (), {"prepare": lambda s, r: None, "get": lambda s, r: None})())


def test_prefetch_reads_a_big_weight_ahead_only_when_asked_and_nothing_big_is_held(tmp_path):
    """With big_weights_ahead, weights over the budget load during small ops, never next to another
    big one; by default they wait for the engine's request."""
    from onnx import helper, numpy_helper

    big = [np.full((50, 20), i, np.float32) for i in range(2)]  # 4000 bytes each
    small = np.ones((20,), np.float32)                            # 80 bytes
    nodes = [helper.make_node("Add", ["x", "s"], ["a"]), helper.make_node("MatMul", ["b0", "a"], ["m0"]),
             helper.make_node("MatMul", ["b1", "a"], ["m1"]), helper.make_node("Add", ["m0", "m1"], ["y"])]
    inits = [numpy_helper.from_array(small, "s"), numpy_helper.from_array(big[0], "b0"),
             numpy_helper.from_array(big[1], "b1")]
    proto = builders.model(nodes, [builders.value("x", [20])], [builders.value("y", [50])], inits)
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    strict = Prefetch(budget_bytes=100)
    with load_model(path, weights=strict) as model:
        refs = {r.name: r for r in model.streamed_weights}
        strict.get(refs["s"])
        strict.release(refs["s"])
        with strict._cond:  # default: a weight over the budget waits for the engine's request
            assert not strict._cond.wait_for(lambda: refs["b0"].index in strict._ready, timeout=0.3)
    provider = Prefetch(budget_bytes=100, big_weights_ahead=True)
    with load_model(path, weights=provider) as model:
        refs = {r.name: r for r in model.streamed_weights}
        assert [r.name for r in model.streamed_weights] == ["s", "b0", "b1"]

        def ready_within(index, seconds=5.0):
            with provider._cond:
                return provider._cond.wait_for(lambda: index in provider._ready, timeout=seconds)

        provider.get(refs["s"])
        provider.release(refs["s"])
        assert ready_within(refs["b0"].index)  # read ahead although larger than the budget
        provider.get(refs["b0"])
        assert not ready_within(refs["b1"].index, seconds=0.3)  # b0 is held: no second big buffer
        provider.release(refs["b0"])
        assert ready_within(refs["b1"].index)
        provider.get(refs["b1"])
        provider.release(refs["b1"])
        feeds = {"x": np.arange(20, dtype=np.float32)}
        expected = builders.ort_run(path, feeds)["y"]
        for _ in range(2):
            assert builders.rel_l2(model.run(feeds)["y"], expected) < 1e-6


def test_local_weights_over_the_threshold_are_mapped_read_only_and_equal_to_a_read(tmp_path):
    import mmap

    from frame.engine.io import sources

    data = np.random.default_rng(0).integers(0, 255, sources.MAP_MIN_BYTES * 3, dtype=np.uint8)
    path = tmp_path / "blob.bin"
    data.tofile(path)
    source = sources.LocalSource(str(path))
    try:
        offset, length = 12345, sources.MAP_MIN_BYTES + 999  # not page aligned
        mapped = source.map_at(offset, length)
        assert isinstance(mapped.base.obj, mmap.mmap)  # a view of the page cache, no copy
        assert not mapped.flags.writeable and not mapped.flags.owndata
        np.testing.assert_array_equal(mapped, data[offset:offset + length])
        np.testing.assert_array_equal(mapped, source.read_at(offset, length))
        small = source.map_at(7, 100)  # under the threshold: an ordinary read
        assert small.flags.owndata and small.tobytes() == data[7:107].tobytes()
        with pytest.raises(sources.SourceTruncated):
            source.map_at(len(data) - 10, sources.MAP_MIN_BYTES)
        del mapped
    finally:
        source.close()


def test_prefetch_counts_held_weights_against_the_budget(tmp_path):
    """Read-ahead stops at budget minus the weights the engine holds, and resumes when they are released."""
    from onnx import helper, numpy_helper

    weights = {"b0": np.full((50, 20), 1, np.float32), "c1": np.full((10, 20), 2, np.float32),
               "c2": np.full((10, 20), 3, np.float32)}  # 4000, 800 and 800 bytes
    nodes = [helper.make_node("MatMul", ["b0", "x"], ["m0"]), helper.make_node("MatMul", ["c1", "x"], ["m1"]),
             helper.make_node("MatMul", ["c2", "x"], ["m2"]), helper.make_node("Concat", ["m0", "m1", "m2"], ["y"],
                                                                               axis=0)]
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    proto = builders.model(nodes, [builders.value("x", [20])], [builders.value("y", [70])], inits)
    path = builders.save(proto, tmp_path / "m.onnx", external=True)
    provider = Prefetch(budget_bytes=5000)
    with load_model(path, weights=provider) as model:
        refs = {r.name: r for r in model.streamed_weights}

        def ready_within(name, seconds=5.0):
            with provider._cond:
                return provider._cond.wait_for(lambda: refs[name].index in provider._ready, timeout=seconds)

        provider.get(refs["b0"])
        assert ready_within("c1")  # 4000 held + 800 ahead fits in 5000
        assert not ready_within("c2", seconds=0.3)  # another 800 would not
        provider.release(refs["b0"])
        assert ready_within("c2")
        provider.get(refs["c1"])
        provider.release(refs["c1"])
        provider.get(refs["c2"])
        provider.release(refs["c2"])
        feeds = {"x": np.arange(20, dtype=np.float32)}
        assert builders.rel_l2(model.run(feeds)["y"], builders.ort_run(path, feeds)["y"]) < 1e-6

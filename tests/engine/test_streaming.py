"""Streaming: weights fetched once per run just before first use and released after last use;
intermediates freed right after their last consumer; in-place reuse only when nothing aliases."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import onnx
import pytest
from onnx import helper

from frame.engine import load_model
from frame.engine.errors import NodeError
from frame.engine.providers import NoCache
from tests.engine import builders


class RecordingProvider(NoCache):
    """NoCache that logs every call into a shared event list."""

    def __init__(self, events: list) -> None:
        super().__init__()
        self.events = events

    def get(self, ref):
        self.events.append(("get", ref.name))
        return super().get(ref)

    def release(self, ref):
        self.events.append(("release", ref.name))


def _uses(proto: onnx.ModelProto) -> tuple[dict, dict]:
    first, last = {}, {}
    for i, node in enumerate(proto.graph.node):
        for name in node.input:
            first.setdefault(name, i)
            last[name] = i
    return first, last


@pytest.mark.parametrize("external", [False, True])
def test_each_weight_fetched_once_just_before_first_use_released_after_last(tmp_path, external):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx", external=external)
    events: list = []
    model = load_model(path, weights=RecordingProvider(events))
    model._executor.after_step = lambda i, env: events.append(("step", model.steps[i].node.name))
    first, last = _uses(proto)
    names = [n.name for n in proto.graph.node]
    streamed = {t.name for t in proto.graph.initializer}
    for _ in range(2):
        events.clear()
        model.run(feeds)
        gets = [e[1] for e in events if e[0] == "get"]
        assert sorted(gets) == sorted(streamed)  # each weight exactly once per run
        for weight in streamed:
            at = events.index(("get", weight))
            before = [e[1] for e in events[:at] if e[0] == "step"]
            assert before == names[:first[weight]]  # fetched after the previous node, not earlier
            released = events.index(("release", weight))
            steps_before_release = [e[1] for e in events[:released] if e[0] == "step"]
            assert steps_before_release == names[:last[weight]]  # released as its last user finishes
    model.close()


def test_intermediates_freed_after_last_consumer(tmp_path):
    proto, feeds = builders.mlp()
    path = builders.save(proto, tmp_path / "m.onnx")
    model = load_model(path, weights="nocache")
    first, last = _uses(proto)
    produced = {o: i for i, n in enumerate(proto.graph.node) for o in n.output}
    refs: dict[str, weakref.ref] = {}
    live_sets = []

    def after(i, env):
        live_sets.append(set(env))
        for name, value in env.items():
            refs.setdefault(name, weakref.ref(value))

    model._executor.after_step = after
    y = model.run(feeds)["y"]
    for i, live in enumerate(live_sets):
        expected = {n for n, p in produced.items() if p <= i and (last.get(n, -1) > i or n == "y")}
        expected |= {n for n in first if n not in produced and first[n] <= i < last[n]}  # weights, feeds
        assert live == expected, f"after step {i}"
    gc.collect()
    alive = [name for name, ref in refs.items() if ref() is not None and ref() is not y]
    assert alive == []  # every intermediate and weight buffer is gone (in-place ones became y)


def test_small_view_of_large_weight_is_copied(tmp_path):
    proto, feeds = builders.mlp(hidden=256)
    model = load_model(builders.save(proto, tmp_path / "m.onnx"), weights="nocache")
    seen = {}
    model._executor.after_step = lambda i, env: seen.update({k: v for k, v in env.items() if k == "w1row"})
    model.run(feeds)
    assert seen["w1row"].base is None  # a (1, 256) row no longer pins the (32, 256) weight


def test_in_place_reuse_only_for_dying_unaliased_intermediates(tmp_path):
    x = builders.value("x", [4, 8])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),           # graph input: must not be overwritten
             helper.make_node("Neg", ["a"], ["b"]),            # a dies here: may be reused
             helper.make_node("Reshape", ["b", "shape"], ["c"]),  # c is a view of b
             helper.make_node("Neg", ["b"], ["d"]),            # b dies, but its view c lives on
             helper.make_node("Add", ["c", "d"], ["y"])]
    shape = onnx.numpy_helper.from_array(np.array([4, 8], np.int64), "shape")
    proto = builders.model(nodes, [x], [builders.value("y", [4, 8])], [shape])
    model = load_model(builders.save(proto, tmp_path / "m.onnx"), weights="nocache")
    ids = {}
    model._executor.after_step = lambda i, env: ids.update({k: id(v) for k, v in env.items()})
    feed = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    original = feed.copy()
    y = model.run({"x": feed})["y"]
    assert np.array_equal(feed, original)
    relu = np.maximum(original, 0)
    np.testing.assert_allclose(y, -relu + relu, atol=0)
    assert ids["b"] == ids["a"]          # Neg wrote into a's buffer
    assert ids["d"] != ids["b"]          # not into b: the Reshape view c still reads it


def _embedding_model(tmp_path):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((1000, 16)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("Relu", ["e"], ["y"])]
    proto = builders.model(nodes, [builders.value("ids", [2, 5], onnx.TensorProto.INT64)],
                           [builders.value("y", [2, 5, 16])], [onnx.numpy_helper.from_array(table, "table")])
    path = builders.save(proto, tmp_path / "emb.onnx", external=True)
    return path, {"ids": np.array([[0, 1, 2, 999, -1], [5, 5, 6, 7, 500]], np.int64)}


def test_gather_from_weight_reads_only_needed_rows(tmp_path):
    path, feeds = _embedding_model(tmp_path)
    events: list = []
    provider = RecordingProvider(events)
    reads = []
    original = provider.sources.get

    def spy(location):
        source = original(location)
        read_at = source.read_at
        source.read_at = lambda offset, length: reads.append(length) or read_at(offset, length)
        return source

    provider.sources.get = spy
    with load_model(path, weights=provider) as model:
        got = model.run(feeds)["y"]
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-7
    assert ("get", "table") not in events  # never fetched whole
    assert sum(reads) == 8 * 16 * 4  # rows 0-2, 5-7, 500, 999 (= -1): 8 rows of 64 bytes


def test_gather_from_weight_falls_back_for_providers_without_get_rows(tmp_path):
    path, feeds = _embedding_model(tmp_path)
    inner = NoCache()

    class Minimal:
        def prepare(self, refs):
            inner.prepare(refs)

        def get(self, ref):
            return inner.get(ref)

        def release(self, ref):
            pass

    with load_model(path, weights=Minimal()) as model:
        got = model.run(feeds)["y"]
        bad = {"ids": np.array([[0, 1, 2, 3, 1000]] * 2, np.int64)}
        with pytest.raises(NodeError, match="out of range"):
            model.run(bad)
    assert builders.rel_l2(got, builders.ort_run(path, feeds)["y"]) < 1e-7

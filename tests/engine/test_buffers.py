"""The reused buffer pool (frame.engine.buffers): reuse only when no view is alive, bounded idle memory."""

from __future__ import annotations

import numpy as np

from frame.engine import buffers
from frame.engine.buffers import MIN_POOLED_BYTES, BufferPool
from frame.engine.executor import _may_overwrite

SHAPE = (MIN_POOLED_BYTES // 4 // 64, 64)  # float32: exactly the pooling threshold


def _far_below_peak() -> tuple[int, int]:
    return 0, 1 << 40


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_a_buffer_is_reused_only_after_every_view_of_it_died():
    pool = BufferPool(memory=_far_below_peak)
    first = pool.empty(SHAPE)
    alias = first.reshape(-1)[10:]
    del first
    second = pool.empty(SHAPE)
    assert _address(second) != _address(alias) - 40  # the alias still lives: a fresh buffer
    del alias
    third = pool.empty(SHAPE, np.int32)
    assert third.shape == SHAPE and third.dtype == np.int32 and third.flags.c_contiguous
    assert pool.held_bytes() == (2 * MIN_POOLED_BYTES, 0)
    del third
    fourth = pool.empty(SHAPE)
    assert pool.held_bytes() == (2 * MIN_POOLED_BYTES, 0)  # reused, not grown
    del second, fourth


def test_writing_a_reused_buffer_does_not_touch_a_live_array():
    pool = BufferPool(memory=_far_below_peak)
    live = pool.empty(SHAPE)
    live[:] = 1.0
    dead = pool.empty(SHAPE)
    dead[:] = 2.0
    del dead
    reused = pool.empty(SHAPE)
    reused[:] = 3.0
    assert np.all(live == 1.0)


def test_small_arrays_are_not_pooled():
    pool = BufferPool(memory=_far_below_peak)
    small = pool.empty((10, 10))
    assert small.flags.owndata and pool.held_bytes() == (0, 0)


def test_trim_keeps_at_most_the_idle_allowance_most_recent_first():
    pool = BufferPool(idle_bytes=MIN_POOLED_BYTES, memory=_far_below_peak)
    older, newer = pool.empty(SHAPE), pool.empty((2 * SHAPE[0], SHAPE[1]))
    del older, newer
    pool.trim()
    assert pool.held_bytes() == (0, 0)  # the newer buffer (2 MB) alone is over 1 MB, the older went first
    a, b = pool.empty(SHAPE), pool.empty(SHAPE)
    del a, b
    pool.trim()
    assert pool.held_bytes() == (0, MIN_POOLED_BYTES)


def test_free_buffers_are_kept_only_below_the_process_peak():
    usage = {"rss": 100 << 20, "peak": 100 << 20}
    pool = BufferPool(idle_bytes=64 << 20, memory=lambda: (usage["rss"], usage["peak"]))
    a = pool.empty(SHAPE)
    del a
    pool.trim()  # at the peak already: keeping the free buffer could make a new one
    assert pool.held_bytes() == (0, 0)
    usage["peak"] = 200 << 20
    b = pool.empty(SHAPE)
    del b
    pool.trim()
    assert pool.held_bytes() == (0, MIN_POOLED_BYTES)
    pool.forget()


def test_forget_leaves_live_arrays_intact():
    pool = BufferPool(memory=_far_below_peak)
    kept = pool.empty(SHAPE)
    kept[:] = 5.0
    pool.forget()
    assert pool.held_bytes() == (0, 0) and np.all(kept == 5.0)
    again = pool.empty(SHAPE)
    assert _address(again) != _address(kept)


def test_the_run_loop_may_still_overwrite_a_pooled_array_it_alone_holds():
    env = {"x": buffers.empty(SHAPE)}
    array = env["x"]
    assert _may_overwrite(array)
    view = array.reshape(-1)
    assert not _may_overwrite(array)
    del view
    env["y"] = array.reshape(-1)  # a Reshape's output: a view spanning the pooled buffer
    del env["x"]
    reshaped = env["y"]
    del array
    assert _may_overwrite(reshaped)
    buffers.shared().forget()


def test_a_model_run_leaves_the_pool_empty_and_repeats_exactly(tmp_path):
    from onnx import helper, numpy_helper

    from frame.engine import load_model
    from tests.engine.builders import model, save, value

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((256, 256)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    proto = model(nodes, [value("x", [1024, 256])], [value("y", [1024, 256])], [numpy_helper.from_array(weight, "w")])
    engine = load_model(save(proto, tmp_path / "m.onnx"))
    x = rng.standard_normal((1024, 256)).astype(np.float32)
    first = engine.run({"x": x})["y"]
    second = engine.run({"x": x})["y"]
    want = np.maximum(x @ weight, 0) @ weight
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-3)
    assert np.array_equal(first, second) and _address(first) != _address(second)
    assert buffers.shared().held_bytes() == (0, 0)

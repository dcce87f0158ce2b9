"""Row-blocked, multi-threaded kernels give the same results as onnxruntime in every block layout."""

import numpy as np
import pytest

from frame.engine.ops import blocks, resolve
from tests.engine.ops.node_check import rand, run_node


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of a few rows and threads for any size, so small tests cover the blocked paths."""
    monkeypatch.setattr(blocks, "BLOCK_BYTES", 3 * 37 * 4)
    monkeypatch.setattr(blocks, "MIN_PARALLEL_BYTES", 0)


@pytest.mark.parametrize("op, opset, attrs", [("Erf", 13, {}), ("Sigmoid", 13, {}), ("Gelu", 20, {}),
                                              ("Gelu", 20, {"approximate": "tanh"}), ("Softmax", 13, {}),
                                              ("Softmax", 13, {"axis": 1}), ("LogSoftmax", 13, {})])
def test_blocked_kernels_match_onnxruntime(tiny_blocks, op, opset, attrs):
    run_node(op, [rand(5, 41, 37, seed=3, low=-6, high=6)], opset=opset, rtol=1e-5, atol=2e-6, **attrs)


def test_map_row_blocks_covers_every_row_once(tiny_blocks):
    x = np.arange(101 * 37, dtype=np.float32).reshape(101, 37)
    out = np.zeros_like(x)

    def double(block, target):
        target += 2 * block

    blocks.map_row_blocks(double, x, out)
    np.testing.assert_array_equal(out, 2 * x)


def test_in_place_softmax_on_a_big_blocked_input(tiny_blocks):
    x = rand(4, 64, 37)
    want = np.exp(x - x.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    out = resolve("Softmax", 13).fn(x, _reuse=True)
    assert np.shares_memory(out, x)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_forked_child_gets_its_own_thread_pool(tiny_blocks):
    """A pool inherited through fork has no live threads and would queue jobs forever."""
    import multiprocessing

    parent_pool = blocks._executor()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child_pool_id, total = pool.apply_async(_pool_id_and_softmax_sum, (rand(4, 64, 37),)).get(timeout=30)
    assert child_pool_id != id(parent_pool)
    assert total == pytest.approx(4 * 64, rel=1e-5)


def _pool_id_and_softmax_sum(x):
    return id(blocks._executor()), float(resolve("Softmax", 13).fn(x).sum())


def _at_threads(monkeypatch, count, fn):
    with monkeypatch.context() as patch:
        patch.setattr(blocks, "workers", lambda: count)
        return fn()


@pytest.mark.parametrize("threads", [2, 3])
def test_map_row_blocks_cuts_the_same_blocks_whatever_the_thread_count(tiny_blocks, monkeypatch, threads):
    """Each thread's share is whole blocks, so every block holds the same rows as on one thread."""
    x = np.arange(101 * 37, dtype=np.float32).reshape(101, 37)
    seen = {}

    def record(block, target):
        seen.setdefault(count, set()).add((int(block[0, 0]) // 37, block.shape[0]))

    for count in (1, threads):
        _at_threads(monkeypatch, count, lambda: blocks.map_row_blocks(record, x, np.empty_like(x)))
    assert seen[1] == seen[threads] and len(seen[1]) > threads


@pytest.mark.parametrize("shape, axis", [((2, 41, 37), -1), ((3, 7, 5, 37), 2), ((1, 101, 37), -1)])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_on_threads_is_bitwise_the_one_thread_result(tiny_blocks, monkeypatch, shape, axis, bias):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    scale = rng.standard_normal(shape[axis:]).astype(np.float32)
    b = rng.standard_normal(shape[axis:]).astype(np.float32) if bias else None
    fn = resolve("LayerNormalization", 17).fn
    one = _at_threads(monkeypatch, 1, lambda: fn(x, scale, b, axis=axis).copy())
    for count in (2, 3):
        np.testing.assert_array_equal(_at_threads(monkeypatch, count, lambda: fn(x, scale, b, axis=axis)), one)
    mean = x.reshape(-1, scale.size).mean(1, keepdims=True)
    centred = x.reshape(-1, scale.size) - mean
    want = centred / np.sqrt((centred ** 2).mean(1, keepdims=True) + 1e-5) * scale.reshape(-1)
    if bias:
        want += b.reshape(-1)
    np.testing.assert_allclose(one.reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_split_rows_gives_each_core_one_share_and_small_work_one_call(two_way_splits):
    calls: list[tuple[int, int]] = []
    blocks.split_rows(lambda s, e: calls.append((s, e)), 7, blocks.MIN_PARALLEL_BYTES)
    assert sorted(calls) == [(0, 4), (4, 7)]
    calls.clear()
    blocks.split_rows(lambda s, e: calls.append((s, e)), 7, blocks.MIN_PARALLEL_BYTES - 1)
    assert calls == [(0, 7)]
    calls.clear()
    blocks.split_rows(lambda s, e: calls.append((s, e)), 0, 1 << 30)
    assert calls == []

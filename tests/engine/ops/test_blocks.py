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

"""BLAS threads per step and the engine's own GEMM splitting (frame.engine.blas_threads, ops.blocks)."""

import threading

import numpy as np
import pytest

from frame.engine import blas_threads
from frame.engine.ops import blocks


class FakeLibrary:
    def __init__(self, threads):
        self.num_threads = threads
        self.calls = []

    def set_num_threads(self, n):
        self.calls.append(n)
        self.num_threads = n


def _threads(default):
    controller = blas_threads.BlasThreads()
    library = FakeLibrary(default)
    controller._libraries = [library]
    controller.default = controller.current = default
    return controller, library


def test_small_products_run_on_one_thread_big_ones_on_the_default():
    controller, library = _threads(4)
    controller.fit(1000)
    controller.fit(2000)  # already one thread: no call
    controller.fit(blas_threads.SINGLE_THREAD_WORK)
    controller.restore()
    assert library.calls == [1, 4]
    controller.fit(5)
    controller.restore()
    assert library.calls == [1, 4, 1, 4]


def test_self_splitting_steps_hold_blas_on_one_thread_and_split_into_the_default_count():
    controller, library = _threads(4)
    assert controller.split_count() == 1  # BLAS threads it: kernels must not split on top
    big = [np.zeros((1, 4096, 320)), np.zeros((320, 2560))]
    controller.fit_step("MatMul", big)
    assert library.calls == [1] and controller.split_count() == 4
    controller.fit_step("ConvTranspose", [np.zeros((1, 8, 4, 4)), np.zeros((8, 8, 3, 3))])  # small: 1 thread
    controller.fit_step("Relu", [])  # not a GEMM: left as it is
    assert library.calls == [1] and controller.split_count() == 4
    controller.restore()
    assert library.calls == [1, 4] and controller.split_count() == 1


def test_single_threaded_library_is_left_alone():
    controller, library = _threads(1)
    controller.fit(10)
    controller.fit_step("Conv", [np.zeros((1, 8, 4, 4)), np.zeros((8, 8, 3, 3))])
    controller.restore()
    assert library.calls == [] and controller.split_count() == 1


def test_work_estimates():
    x, w = np.zeros((2, 16, 10, 12)), np.zeros((32, 8, 3, 3))
    assert blas_threads.gemm_work("Conv", [x, w]) == 2 * 120 * 32 * 8 * 9
    assert blas_threads.gemm_work("ConvTranspose", [x, np.zeros((16, 4, 2, 2))]) == 2 * 120 * 16 * 4 * 4
    assert blas_threads.gemm_work("MatMul", [np.zeros((5, 13, 384)), np.zeros((384, 1536))]) == 5 * 13 * 384 * 1536
    assert blas_threads.gemm_work("SlicedAttention", [np.zeros((1, 8, 64, 40)), np.zeros((1, 8, 40, 77))]) == \
        8 * 64 * 40 * 77
    assert blas_threads.gemm_work("Conv", [x, None]) == 0


@pytest.mark.parametrize("shapes", [((300, 64), (64, 40)), ((40, 64), (64, 300)), ((4, 50, 64), (4, 64, 60)),
                                    ((1, 50, 64), (3, 64, 60)), ((3, 50, 64), (64, 60))])
def test_matmul_into_splits_big_products_exactly(two_way_splits, monkeypatch, shapes):
    monkeypatch.setattr(blocks, "MIN_SPLIT_WORK", 1)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    expected = np.matmul(a, b)
    seen = set()
    original = np.matmul

    def spy(x, y, **kw):
        seen.add(threading.current_thread().name)
        return original(x, y, **kw)

    monkeypatch.setattr(np, "matmul", spy)
    out = np.empty(expected.shape, np.float32)
    assert blocks.matmul_into(a, b, out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert any(name.startswith("frame-ops") for name in seen) and threading.current_thread().name in seen


def test_pool_threads_never_hand_work_to_the_pool_again(two_way_splits):
    """A split kernel running inside a pool task runs its pieces itself (no wait on its own pool)."""
    inner = []

    def task():
        inner.append(blocks.gemm_pieces(1 << 40))
        blocks.run_tasks([lambda: inner.append(threading.current_thread().name)] * 2)

    blocks.run_tasks([task, lambda: None])
    assert inner[0] == 1 and inner[1] == inner[2] and inner[1].startswith("frame-ops")

"""One BLAS thread for small GEMMs, the default count for big ones (frame.engine.blas_threads)."""

import numpy as np

from frame.engine import blas_threads


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


def test_single_threaded_library_is_left_alone():
    controller, library = _threads(1)
    controller.fit(10)
    controller.restore()
    assert library.calls == []


def test_work_estimates():
    x, w = np.zeros((2, 16, 10, 12)), np.zeros((32, 8, 3, 3))
    assert blas_threads.gemm_work("Conv", [x, w]) == 2 * 120 * 32 * 8 * 9
    assert blas_threads.gemm_work("ConvTranspose", [x, np.zeros((16, 4, 2, 2))]) == 2 * 120 * 16 * 4 * 4
    assert blas_threads.gemm_work("MatMul", [np.zeros((5, 13, 384)), np.zeros((384, 1536))]) == 5 * 13 * 384 * 1536
    assert blas_threads.gemm_work("SlicedAttention", [np.zeros((1, 8, 64, 40)), np.zeros((1, 8, 40, 77))]) == \
        8 * 64 * 40 * 77
    assert blas_threads.gemm_work("Conv", [x, None]) == 0

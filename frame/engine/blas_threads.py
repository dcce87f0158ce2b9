"""BLAS threads per step: the engine's own kernels split big products over the cores themselves.

OpenBLAS hands a GEMM to its worker threads once it passes a small size, and the workers then spin
for a while waiting for the next one. That spinning is CPU time spent on nothing, after every GEMM:
on the SD 1.5 UNet with two threads frame used 30 % more CPU time than with one (onnxruntime 4 %),
and a busy machine's other processes lose the core. Small networks suffered most: PaddleOCR's
classifier burnt 3× the CPU of one thread for the same result.

So the engine's GEMM kernels (Conv, MatMul, Gemm, attention, their fused forms) run with BLAS on one
thread and split their work into one piece per core themselves (``ops.blocks.matmul_into`` and
friends): the pieces run on the engine's thread pool, whose idle threads sleep instead of spinning,
and the copies around the GEMMs (im2col bands, softmax passes) run in parallel too. Other GEMM
steps (ConvTranspose, RNNs) keep BLAS's own threads for products over ``SINGLE_THREAD_WORK`` and one
thread below. The thread count is BLAS's own default (so ``OPENBLAS_NUM_THREADS`` still sets it).
Each switch is one C call, made only when the count changes; without threadpoolctl or OpenBLAS the
engine leaves BLAS alone and does not split.
"""

from __future__ import annotations

import math
import os

import numpy as np

SINGLE_THREAD_WORK = 1 << 28  # multiply-adds: ~270M, ~10 ms on one core; SD convs are billions
GEMM_OPS = ("Conv", "ConvAffine", "ConvTranspose", "MatMul", "Gemm", "UpsampleConv", "NormConv", "SlicedAttention",
            "DecodedWeight", "GegluFF")
# Steps whose kernels split their own products (ops.blocks): BLAS stays on one thread for them.
SELF_SPLITTING_OPS = frozenset({"Conv", "ConvAffine", "MatMul", "Gemm", "UpsampleConv", "NormConv", "SlicedAttention",
                                "DecodedWeight", "GegluFF"})


def gemm_work(op_type: str, args: list) -> int:
    """Multiply-adds of the step's main product, estimated from its inputs (0 if unknown)."""
    if len(args) < 2 or not all(isinstance(a, np.ndarray) for a in args[:2]):
        return 0
    x, w = args[0], args[1]
    if op_type == "SlicedAttention":  # Q (…, N, d) times Kᵀ (…, d, M): the score GEMMs
        return int(x.size * w.shape[-1])
    if op_type in ("MatMul", "Gemm"):
        return int(x.size * (w.shape[-1] if w.ndim > 1 else 1))
    if w.ndim < 3:
        return 0
    # every input position meets every weight: exact for ConvTranspose and stride-1 Conv (a stride-s
    # Conv does 1/s² of it, which only matters near the threshold)
    return int(x.shape[0] * math.prod(x.shape[2:]) * w.size)


class BlasThreads:
    """Switches OpenBLAS between one thread and its default count (see the module docstring)."""

    def __init__(self) -> None:
        self._libraries = None
        self.default = 1
        self.current = 1

    def _load(self) -> list:
        if self._libraries is None:
            try:
                from threadpoolctl import ThreadpoolController

                self._libraries = ThreadpoolController().select(internal_api="openblas").lib_controllers
            except Exception:  # no threadpoolctl, or it cannot inspect this process: leave BLAS alone
                self._libraries = []
            if self._libraries:
                self.default = self.current = max(lib.num_threads for lib in self._libraries)
        return self._libraries

    def _set(self, wanted: int) -> None:
        if wanted != self.current:
            for lib in self._libraries:
                lib.set_num_threads(wanted)
            self.current = wanted

    def fit(self, work: int) -> None:
        """BLAS's own threads for a product of ``work`` multiply-adds (one thread below the threshold)."""
        if not self._load() or self.default == 1:
            return
        self._set(1 if work < SINGLE_THREAD_WORK else self.default)

    def fit_step(self, op_type: str, args: list) -> None:
        """Before a step: one BLAS thread for the self-splitting kernels, ``fit`` for other GEMMs."""
        if op_type in SELF_SPLITTING_OPS:
            if self._load() and self.default > 1:
                self._set(1)
        elif op_type in GEMM_OPS:
            self.fit(gemm_work(op_type, args))

    def split_count(self) -> int:
        """Pieces a kernel should split a big product into now: the default thread count while BLAS is
        held on one thread (inside a self-splitting step), else 1 (BLAS threads it, or nobody may)."""
        return self.default if self._libraries and self.current == 1 and self.default > 1 else 1

    def compute_threads(self) -> int:
        """Threads for the engine's memory-bound row blocks: BLAS's default count, or every core when
        the process has no OpenBLAS to ask."""
        return self.default if self._load() else max(1, os.cpu_count() or 1)

    def restore(self) -> None:
        if self._libraries:
            self._set(self.default)


_shared = BlasThreads()


def shared() -> BlasThreads:
    return _shared

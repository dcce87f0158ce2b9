"""BLAS threads per GEMM: one thread for small products, the library default for big ones.

OpenBLAS hands a GEMM to its worker threads once it passes a small size, and the workers then spin
for a while waiting for the next one. A small network makes hundreds of mid-sized GEMMs (a 3×3 conv
over 64 channels at 40×40 is a 64 × 576 × 1600 product): with two threads it burnt 3× the CPU time
of one thread for the same result (PaddleOCR's classifier: 110 vs 37 ms CPU per run), and on a
busy machine the spinning steals the core the work needs. Big GEMMs (Stable Diffusion's convs, a
512×512 VAE layer) still gain from every core. So before each Conv/MatMul/Gemm step the executor
asks ``fit`` with the product's size (multiply-adds); products under ``SINGLE_THREAD_WORK`` (every
GEMM of YOLOv8n at 320×320 or of a CLIP text encoder) run on one thread, bigger ones on the default
count. The switch is one C call, made only when the count changes; without threadpoolctl or
OpenBLAS this does nothing.
"""

from __future__ import annotations

import math

import numpy as np

SINGLE_THREAD_WORK = 1 << 28  # multiply-adds: ~270M, ~10 ms on one core; SD convs are billions
GEMM_OPS = ("Conv", "ConvAffine", "ConvTranspose", "MatMul", "Gemm", "UpsampleConv", "NormConv",
            "SlicedAttention")


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

    def fit(self, work: int) -> None:
        if not self._load() or self.default == 1:
            return
        wanted = 1 if work < SINGLE_THREAD_WORK else self.default
        if wanted != self.current:
            for lib in self._libraries:
                lib.set_num_threads(wanted)
            self.current = wanted

    def restore(self) -> None:
        if self._libraries and self.current != self.default:
            for lib in self._libraries:
                lib.set_num_threads(self.default)
            self.current = self.default


_shared = BlasThreads()


def shared() -> BlasThreads:
    return _shared

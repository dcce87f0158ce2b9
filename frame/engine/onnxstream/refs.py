"""Weight references for OnnxStream's per-tensor ``.bin`` files, including channels-last conv weights.

A ``.bin`` file is one tensor's raw bytes, so a plain ``WeightRef`` (offset 0, the whole file) covers
float32/float16/int64/uint8 weights and every provider streams it as it would an ONNX initializer,
HTTP range requests included. Conv weights are the exception: model.txt names ``<w>_nchw.bin`` but a
folder may hold only ``<w>_nhwc.bin`` (O, kH, kW, I), which is all OnnxStream's own downloader fetches.
``NhwcWeightRef`` reads that file and hands the engine the NCHW array the ONNX Conv expects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from frame.engine.errors import WeightDataError
from frame.engine.io.weights import WeightRef


@dataclass(eq=False)
class NhwcWeightRef(WeightRef):
    """A conv weight stored channels-last; ``shape`` is the NCHW shape the graph uses."""

    stored_shape: tuple[int, ...] = ()

    def decode(self, buf: np.ndarray) -> np.ndarray:
        if buf.size != self.length:
            raise WeightDataError(
                f"weight {self.name!r}: got {buf.size} bytes from {self.location}, expected {self.length}")
        stored = buf.view(self.dtype).reshape(self.stored_shape)
        perm = (0, 3, 1, 2) if len(self.stored_shape) == 4 else (0, 2, 1)
        return np.ascontiguousarray(stored.transpose(perm))


def nhwc_shape(nchw: tuple[int, ...]) -> tuple[int, ...]:
    """(O, I, kH, kW) → (O, kH, kW, I); 1-D convs (O, I, k) → (O, k, I)."""
    return (nchw[0], *nchw[2:], nchw[1])


def weight_ref(name: str, dtype: np.dtype, shape: tuple[int, ...], location: str,
               nhwc: bool = False) -> WeightRef:
    length = math.prod(shape) * dtype.itemsize
    if nhwc:
        return NhwcWeightRef(name, dtype, shape, location, 0, length, stored_shape=nhwc_shape(shape))
    return WeightRef(name, dtype, shape, location, 0, length)

"""Integer arithmetic of onnxruntime's dynamic quantisation: DynamicQuantizeLinear, MatMulInteger, ConvInteger.

``quantize_dynamic`` turns a float model into DynamicQuantizeLinear (each activation to uint8 with
its own range) feeding MatMulInteger/ConvInteger (int32 products of the zero-point-shifted
integers), then a float rescale. No frame model has these ops (frame's 8-bit weights are QDQ:
``ops.quant``); models from elsewhere quantised this way run as exported.

Both products run on float64 BLAS: exact for the int32 result range and far faster than numpy's
integer matmul, which has no BLAS path. ConvInteger uses the any-rank im2col convolution of
``ops.conv_im2col`` with float64 columns.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.conv_im2col import conv_nd, conv_work, spatial_params
from frame.engine.ops.cost import Cost
from frame.engine.ops.linalg import MATMUL_COST
from frame.engine.ops.registry import OUTPUT_ONLY, register


@register("DynamicQuantizeLinear", 11, cost=OUTPUT_ONLY)
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 quantisation whose range always includes 0 (onnx spec formula); returns y, scale, zero point."""
    low = np.minimum(np.float32(0), x.min()) if x.size else np.float32(0)
    high = np.maximum(np.float32(0), x.max()) if x.size else np.float32(0)
    scale = np.float32((high - low) / np.float32(255)) or np.float32(1)  # all zeros: scale 1, as onnxruntime
    zero_point = np.clip(np.rint(-low / scale), 0, 255)
    quantized = np.clip(np.rint(x / scale) + zero_point, 0, 255)
    return (quantized.astype(np.uint8), np.array(scale, dtype=np.float32),
            np.array(zero_point, dtype=np.uint8))


@register("MatMulInteger", 10, cost=MATMUL_COST)
def matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None = None,
                   b_zero_point: np.ndarray | None = None, /) -> np.ndarray:
    """(A - a_zp) @ (B - b_zp) as int32; a_zp per row of A or scalar, b_zp per column of B or scalar."""
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    if a_zero_point is not None:
        zp = a_zero_point.astype(np.float64)
        a64 -= zp.reshape(-1, 1) if zp.size > 1 else zp.reshape(())
    if b_zero_point is not None:
        b64 -= b_zero_point.astype(np.float64).reshape(-1) if b_zero_point.size > 1 else b_zero_point.reshape(())
    return np.matmul(a64, b64).astype(np.int32)


def _subtract_zero_point(values: np.ndarray, zero_point: np.ndarray | None, axis_size: int | None) -> np.ndarray:
    out = values.astype(np.float64)
    if zero_point is None:
        return out
    zp = np.asarray(zero_point, np.float64)
    if zp.size > 1:  # per output channel (weights only)
        if zp.size != axis_size:
            raise ValueError(f"ConvInteger: {zp.size} weight zero points for {axis_size} output channels")
        zp = zp.reshape((-1,) + (1,) * (values.ndim - 1))
    return out - zp.reshape(zp.shape if zp.size > 1 else ())


@register("ConvInteger", 10, cost=Cost(work=conv_work))
def conv_integer(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                 w_zero_point: np.ndarray | None = None, /, *, auto_pad: str = "NOTSET",
                 dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None,
                 pads: list[int] | None = None, strides: list[int] | None = None) -> np.ndarray:
    """int32 (x - x_zero_point) ⊛ (w - w_zero_point); padding contributes zero (after the shift)."""
    if x_zero_point is not None and np.asarray(x_zero_point).size != 1:
        raise ValueError("ConvInteger: the input zero point must be a scalar")
    strides, dilations, pads = spatial_params(w.shape[2:], x.shape[2:], strides, dilations, pads, auto_pad)
    shifted_x = _subtract_zero_point(x, x_zero_point, None)
    shifted_w = _subtract_zero_point(w, w_zero_point, w.shape[0])
    out = conv_nd(shifted_x, shifted_w, group, strides, dilations, pads, dtype=np.float64)
    return np.rint(out).astype(np.int32)

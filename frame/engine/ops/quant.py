"""Quantisation kernels: QuantizeLinear and DequantizeLinear, the two frame's own models use.

``frame model convert --weights uint8`` and the OnnxStream importer put a DequantizeLinear in front
of each 8-bit weight (the QDQ form: uint8 weights, float compute), and the OnnxStream importer's
calibrated activations go through QuantizeLinear/DequantizeLinear pairs; QDQ models exported
elsewhere run the same way. Scales are per tensor or per axis; blocked quantisation (opset 21
``block_size``) and float8 types are refused at load time. onnxruntime's dynamic quantisation
(DynamicQuantizeLinear, MatMulInteger, ConvInteger) is in ``optional.integer``: no frame model has it.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.convert import ONNX_TO_NUMPY
from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, register

_INTEGER_RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
                   np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767)}


def _validate_quant(attrs: dict) -> None:
    if attrs.get("block_size", 0):
        raise UnsupportedOp(f"attribute 'block_size' = {attrs['block_size']}: blocked quantisation is not supported")
    output_dtype = attrs.get("output_dtype", 0)
    if output_dtype and ONNX_TO_NUMPY.get(output_dtype) not in _INTEGER_RANGES:
        raise UnsupportedOp(f"attribute 'output_dtype' = {output_dtype}: only (u)int8/(u)int16 are supported")


def _per_axis(values: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast along ``axis`` (scalars stay scalars)."""
    if values.ndim == 0 or values.size == 1:
        return values.reshape(())
    shape = [1] * rank
    shape[axis % rank] = -1
    return values.reshape(shape)


@register("QuantizeLinear", 10, validate=_validate_quant, cost=OUTPUT_ONLY)
def quantize_linear(x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, /, *,
                    axis: int = 1, block_size: int = 0, output_dtype: int = 0, saturate: int = 1) -> np.ndarray:
    """y = saturate(round_half_even(x / scale) + zero_point) in the zero point's integer type."""
    if y_zero_point is not None:
        dtype = y_zero_point.dtype
    else:
        dtype = ONNX_TO_NUMPY[output_dtype] if output_dtype else np.dtype(np.uint8)
    low, high = _INTEGER_RANGES[np.dtype(dtype)]
    scale = _per_axis(y_scale.astype(np.float32), x.ndim, axis)
    q = np.rint(x.astype(np.float32) / scale)
    if y_zero_point is not None:
        q += _per_axis(y_zero_point.astype(np.float32), x.ndim, axis)
    return np.clip(q, low, high).astype(dtype)


@register("DequantizeLinear", 10, validate=_validate_quant, cost=OUTPUT_ONLY)
def dequantize_linear(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None, /, *,
                      axis: int = 1, block_size: int = 0) -> np.ndarray:
    """y = (x - zero_point) * scale, in the scale's float type (float32 or float16)."""
    values = x.astype(np.float32)
    if x_zero_point is not None:
        values -= _per_axis(x_zero_point.astype(np.float32), x.ndim, axis)
    values *= _per_axis(x_scale.astype(np.float32), x.ndim, axis)
    return values.astype(x_scale.dtype, copy=False)

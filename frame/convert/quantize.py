"""8-bit weight quantization per output channel, and the float16 rounding check.

A weight ``w`` becomes ``q`` (8-bit integers), ``scale`` (float32, one per channel along ``axis``) and
``zero_point`` (one per channel, the integer type of ``q``) such that ``(q - zero_point) * scale``
approximates ``w``: exactly what ONNX ``DequantizeLinear(q, scale, zero_point, axis)`` computes.

The ``Scheme`` holds the choices ``benchmarks/quant_schemes.py`` compares:

* ``symmetric``: int8 in [-127, 127] with zero point 0 (scale = max|w| / 127), or asymmetric uint8
  over [min(w, 0), max(w, 0)] with a per-channel zero point (scale = range / 255);
* ``percentile``: clip each channel's range to this percentile of its values (100 = no clipping);
* ``mse_search``: shrink each channel's range by the factor in ``MSE_RATIOS`` that gives the smallest
  squared error (clipping chosen per channel by measurement instead of a fixed percentile);
* ``rounding``: "nearest" (half to even, as QuantizeLinear) or "truncate" (toward zero, OnnxStream's);
* ``per_tensor``: one range for the whole tensor (OnnxStream's choice), still written per channel.

Channels are processed in blocks of at most ``BLOCK_BYTES`` of float32, so quantizing a 118 MB conv
weight needs a few MB beyond the weight and its 8-bit result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK_BYTES = 8 << 20
MSE_RATIOS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5)
FP16_MAX = float(np.finfo(np.float16).max)


@dataclass(frozen=True)
class Scheme:
    """How to map a channel's float range onto 8 bits (see the module docstring). The defaults are
    the measured choice (docs/benchmarks.md, "8-bit weights"): asymmetric uint8 over each channel's
    min/max, rounded to nearest: on trained weights (PP-OCRv4) it has 25-45 % less output error than
    symmetric int8, and every percentile clip or truncation was worse."""

    symmetric: bool = False
    percentile: float = 100.0
    mse_search: bool = False
    rounding: str = "nearest"
    per_tensor: bool = False

    @property
    def label(self) -> str:
        kind = "int8 symmetric" if self.symmetric else "uint8 asymmetric"
        clip = "MSE-searched range" if self.mse_search else (
            "min/max" if self.percentile >= 100 else f"{self.percentile:g}th percentile")
        granularity = ", per tensor" if self.per_tensor else ""
        return f"{kind}, {clip}, {'round to nearest' if self.rounding == 'nearest' else 'truncate'}{granularity}"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int8 if self.symmetric else np.uint8)


@dataclass
class Quantized:
    q: np.ndarray            # same shape as the weight, int8 or uint8
    scale: np.ndarray        # float32, shape (channels,)
    zero_point: np.ndarray   # q's dtype, shape (channels,)
    axis: int


def _round(values: np.ndarray, rounding: str) -> np.ndarray:
    return np.rint(values, out=values) if rounding == "nearest" else np.trunc(values, out=values)


def _ranges(rows: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per row of ``rows`` (channels × values), both including 0."""
    if scheme.symmetric:
        magnitude = np.abs(rows)
        if scheme.percentile >= 100:
            high = magnitude.max(axis=1)
        else:
            high = np.percentile(magnitude, scheme.percentile, axis=1).astype(np.float32)
        return -high, high
    if scheme.percentile >= 100:
        low, high = rows.min(axis=1), rows.max(axis=1)
    else:
        low = np.percentile(rows, 100 - scheme.percentile, axis=1).astype(np.float32)
        high = np.percentile(rows, scheme.percentile, axis=1).astype(np.float32)
    return np.minimum(low, 0), np.maximum(high, 0)


def _params(low: np.ndarray, high: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero point as float) for channel ranges; an all-zero channel gets scale 1."""
    if scheme.symmetric:
        scale = (high / np.float32(127)).astype(np.float32)
        zero = np.zeros_like(scale)
    else:
        scale = ((high - low) / np.float32(255)).astype(np.float32)
        zero = None
    scale[scale == 0] = 1.0
    if zero is None:
        zero = np.clip(np.rint(-low / scale), 0, 255).astype(np.float32)
    return scale, zero


def _encode(rows: np.ndarray, scale: np.ndarray, zero: np.ndarray, scheme: Scheme) -> np.ndarray:
    low, high = (-127, 127) if scheme.symmetric else (0, 255)
    values = rows / scale[:, None]
    _round(values, scheme.rounding)
    values += zero[:, None]
    np.clip(values, low, high, out=values)
    return values.astype(scheme.dtype)


def _squared_error(rows: np.ndarray, scale: np.ndarray, zero: np.ndarray, scheme: Scheme) -> np.ndarray:
    codes = _encode(rows, scale, zero, scheme).astype(np.float32)
    codes -= zero[:, None]
    codes *= scale[:, None]
    codes -= rows
    return np.einsum("ij,ij->i", codes, codes)


def _quantize_rows(rows: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    low, high = _ranges(rows, scheme)
    scale, zero = _params(low, high, scheme)
    if scheme.mse_search:
        best = _squared_error(rows, scale, zero, scheme)
        for ratio in MSE_RATIOS[1:]:
            trial_scale, trial_zero = _params(low * np.float32(ratio), high * np.float32(ratio), scheme)
            error = _squared_error(rows, trial_scale, trial_zero, scheme)
            better = error < best
            scale[better], zero[better], best[better] = trial_scale[better], trial_zero[better], error[better]
    return _encode(rows, scale, zero, scheme), scale, zero


def quantize(weight: np.ndarray, axis: int, scheme: Scheme) -> Quantized:
    """``weight`` (float) quantized per channel along ``axis`` with ``scheme``."""
    axis = axis % weight.ndim
    if scheme.per_tensor:
        return _quantize_per_tensor(weight, axis, scheme)
    channels = weight.shape[axis]
    per_channel = max(1, weight.size // max(channels, 1))
    block = max(1, BLOCK_BYTES // (4 * per_channel))
    q = np.empty(weight.shape, dtype=scheme.dtype)
    scale = np.empty(channels, dtype=np.float32)
    zero = np.empty(channels, dtype=np.float32)
    moved_q = np.moveaxis(q, axis, 0)
    moved_w = np.moveaxis(weight, axis, 0)
    for start in range(0, channels, block):
        stop = min(channels, start + block)
        rows = np.ascontiguousarray(moved_w[start:stop], dtype=np.float32).reshape(stop - start, -1)
        codes, scale[start:stop], zero[start:stop] = _quantize_rows(rows, scheme)
        moved_q[start:stop] = codes.reshape(moved_q[start:stop].shape)
    return Quantized(q, scale, zero.astype(scheme.dtype), axis)


def _quantize_per_tensor(weight: np.ndarray, axis: int, scheme: Scheme) -> Quantized:
    rows = np.asarray(weight, dtype=np.float32).reshape(1, -1)
    codes, scale, zero = _quantize_rows(rows, scheme)
    channels = weight.shape[axis]
    return Quantized(codes.reshape(weight.shape), np.repeat(scale, channels),
                     np.repeat(zero, channels).astype(scheme.dtype), axis)


def dequantize(quantized: Quantized) -> np.ndarray:
    """float32 ``(q - zero_point) * scale`` (what DequantizeLinear gives), for measuring error."""
    shape = [1] * quantized.q.ndim
    shape[quantized.axis] = -1
    values = quantized.q.astype(np.float32)
    values -= quantized.zero_point.astype(np.float32).reshape(shape)
    values *= quantized.scale.reshape(shape)
    return values


def fits_float16(weight: np.ndarray) -> bool:
    """False if a finite value would overflow float16 (such tensors stay float32)."""
    if not weight.size:
        return True
    finite = np.isfinite(weight)
    return float(np.max(np.abs(weight[finite]), initial=0.0)) <= FP16_MAX

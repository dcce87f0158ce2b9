"""Softmax and the normalisations (Layer, Group, Instance, Batch), in float32.

All of them reduce over a trailing block of dimensions, so each one reshapes its input to
(rows, row_length) and uses ``_normalize_rows``: mean, then the variance of the centred values as a
dot product (no squared temporary), so the only activation-sized allocation is the output itself.
fp16 inputs are widened to float32 and the result cast back (statistics always in float32); fp16
scale/bias handed over by the runtime for an fp32 graph leave the output float32.
"""

from __future__ import annotations

import numpy as np

from frame.engine import buffers
from frame.engine.ops.blocks import map_row_blocks
from frame.engine.ops.elementwise import can_reuse
from frame.engine.ops.linalg import float32_operands
from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, passes, register


def _normalize_rows(rows: np.ndarray, epsilon: float, out: np.ndarray | None = None):
    """(rows - mean) / sqrt(var + eps) per row of a 2-D float32 array; returns (y, mean, inv_std)."""
    mean = rows.mean(axis=1, keepdims=True, dtype=np.float32)
    centred = np.subtract(rows, mean, out=out)
    var = np.einsum("ij,ij->i", centred, centred)[:, None] / np.float32(rows.shape[1])
    inv_std = 1.0 / np.sqrt(var + np.float32(epsilon), dtype=np.float32)
    centred *= inv_std
    return centred, mean, inv_std


def _normalize_each_row(rows: np.ndarray, epsilon: float, out: np.ndarray) -> None:
    """``_normalize_rows`` in row blocks on the core pool (``map_row_blocks``; one row per block when rows
    are long): the GroupNorm rows of the SD VAE are 8 MB each, so the cores share the passes. Long
    rows are also more exact one at a time: einsum over several 2M-element rows at once accumulated
    6e-3 of error in the variance, one row at a time 1e-5."""
    map_row_blocks(lambda block, target: _normalize_rows(block, epsilon, out=target), rows, out)


def _softmax_block(x: np.ndarray, out: np.ndarray) -> None:
    """Stable softmax of each row of a 2-D block: subtract the row max, exp, scale by 1/sum."""
    np.subtract(x, x.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out *= np.reciprocal(out.sum(axis=1, keepdims=True))


def _log_softmax_block(x: np.ndarray, out: np.ndarray) -> None:
    np.subtract(x, x.max(axis=1, keepdims=True), out=out)
    out -= np.log(np.exp(out).sum(axis=1, keepdims=True))


def _softmax(x: np.ndarray, axis: int, reuse: bool, log: bool) -> np.ndarray:
    """Softmax along ``axis``, in cache-sized row blocks on all cores (see ``blocks``)."""
    (x32,), dtype = float32_operands(x)
    axis = axis % x.ndim if x.ndim else 0
    last = axis == x.ndim - 1 or x.ndim == 0
    moved = x32 if last else np.moveaxis(x32, axis, -1)
    rows = np.ascontiguousarray(moved).reshape(-1, moved.shape[-1] if moved.ndim else 1)
    if last and reuse and x32 is x and x.flags.c_contiguous and can_reuse(x, x.shape, x.dtype):
        full = x  # the runtime says x dies here: normalise it in place
    else:
        full = np.empty(moved.shape, dtype=rows.dtype)
    if rows.size:
        map_row_blocks(_log_softmax_block if log else _softmax_block, rows, full.reshape(rows.shape))
    result = full if last else np.ascontiguousarray(np.moveaxis(full, -1, axis))
    return result.astype(dtype, copy=False)


def _softmax_2d(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """Opset < 13 semantics: flatten to (prod(dims[:axis]), prod(dims[axis:])) and normalise rows."""
    axis = axis % x.ndim if x.ndim else 0
    rows = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
    return _softmax(rows, -1, False, log).reshape(x.shape)


@register("Softmax", 1, cost=passes(4.0))
def softmax_v1(x: np.ndarray, axis: int = 1) -> np.ndarray:
    return _softmax_2d(x, axis, log=False)


@register("Softmax", 13, inplace=True, cost=passes(4.0))
def softmax(x: np.ndarray, axis: int = -1, _reuse: bool = False) -> np.ndarray:
    return _softmax(x, axis, _reuse, log=False)


@register("LogSoftmax", 1, cost=passes(4.0))
def log_softmax_v1(x: np.ndarray, axis: int = 1) -> np.ndarray:
    return _softmax_2d(x, axis, log=True)


@register("LogSoftmax", 13, cost=passes(4.0))
def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return _softmax(x, axis, False, log=True)


@register("LayerNormalization", 17, cost=passes(3.5))
def layer_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None, /, *,
                        axis: int = -1, epsilon: float = 1e-5, stash_type: int = 1,
                        _num_outputs: int = 1) -> np.ndarray | tuple[np.ndarray, ...]:
    """Normalise over dims ``axis..`` (statistics in float32 whatever ``stash_type`` says); with one
    output, in row blocks on the core pool (``map_row_blocks``), the affine applied per block."""
    (x32, scale32, bias32), _ = float32_operands(x, scale, bias)
    axis = axis % x.ndim
    rows = x32.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
    y = buffers.empty(x.shape, np.float32)
    if _num_outputs == 1 and rows.size:  # the statistics stay inside the blocks
        row_scale = np.broadcast_to(scale32, x.shape[axis:]).reshape(-1)
        row_bias = None if bias32 is None else np.broadcast_to(bias32, x.shape[axis:]).reshape(-1)

        def block(part: np.ndarray, target: np.ndarray) -> None:
            _normalize_rows(part, epsilon, out=target)
            target *= row_scale
            if row_bias is not None:
                target += row_bias

        map_row_blocks(block, rows, y.reshape(rows.shape))
        return y.astype(x.dtype, copy=False)
    _, mean, inv_std = _normalize_rows(rows, epsilon, out=y.reshape(rows.shape))
    y *= scale32
    if bias32 is not None:
        y += bias32
    y = y.astype(x.dtype, copy=False)
    if _num_outputs == 1:
        return y
    stats_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
    return y, mean.reshape(stats_shape), inv_std.reshape(stats_shape)


def _channel_affine(y: np.ndarray, scale: np.ndarray, bias: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """y (N, C, ...) * scale[c] + bias[c], in place. Exported GroupNorm is InstanceNormalization with
    scale 1 and bias 0 followed by the real affine Mul/Add, so identity passes are skipped."""
    shape = (1, -1) + (1,) * (y.ndim - 2)
    if np.any(scale != 1):
        y *= scale.reshape(shape)
    if np.any(bias != 0):
        y += bias.reshape(shape)
    return y.astype(dtype, copy=False)


@register("InstanceNormalization", 6, cost=passes(3.5))
def instance_normalization(x: np.ndarray, scale: np.ndarray, b: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
    (x32, scale32, b32), _ = float32_operands(x, scale, b)
    y = buffers.empty(x.shape, np.float32)
    rows = x32.reshape(x.shape[0] * x.shape[1], -1)
    _normalize_each_row(rows, epsilon, y.reshape(rows.shape))
    return _channel_affine(y, scale32, b32, x.dtype)


def _group_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, num_groups: int | None,
                epsilon: float, per_group_affine: bool) -> np.ndarray:
    if num_groups is None:
        raise ValueError("GroupNormalization needs the 'num_groups' attribute")
    n, c = x.shape[:2]
    if c % num_groups:
        raise ValueError(f"GroupNormalization: {c} channels do not split into {num_groups} groups")
    (x32, scale32, bias32), _ = float32_operands(x, scale, bias)
    y = buffers.empty(x.shape, np.float32)
    rows = x32.reshape(n * num_groups, -1)
    _normalize_each_row(rows, epsilon, y.reshape(rows.shape))
    if per_group_affine:
        scale32 = np.repeat(scale32, c // num_groups)
        bias32 = np.repeat(bias32, c // num_groups)
    return _channel_affine(y, scale32, bias32, x.dtype)


@register("GroupNormalization", 18, cost=passes(3.5))
def group_normalization_v18(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5,
                            num_groups: int | None = None) -> np.ndarray:
    """Opset 18 has one scale/bias value per *group* (fixed to per channel in opset 21)."""
    per_group = scale.size == num_groups
    return _group_norm(x, scale, bias, num_groups, epsilon, per_group)


@register("GroupNormalization", 21, cost=passes(3.5))
def group_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5,
                        num_groups: int | None = None, stash_type: int = 1) -> np.ndarray:
    return _group_norm(x, scale, bias, num_groups, epsilon, False)


def _validate_batch_norm(attrs: dict) -> None:
    if attrs.get("training_mode", 0):
        raise UnsupportedOp("BatchNormalization attribute 'training_mode' = 1 (inference only)")


@register("BatchNormalization", 9, validate=_validate_batch_norm, cost=passes(2.0))
def batch_normalization(x: np.ndarray, scale: np.ndarray, b: np.ndarray, mean: np.ndarray, var: np.ndarray,
                        epsilon: float = 1e-5, momentum: float = 0.9, training_mode: int = 0) -> np.ndarray:
    """Inference form with running statistics: folds into one multiply-add per channel."""
    (x32, scale32, b32, mean32, var32), _ = float32_operands(x, scale, b, mean, var)
    factor = scale32 / np.sqrt(var32 + np.float32(epsilon))
    y = x32 * factor.reshape((1, -1) + (1,) * (x.ndim - 2))
    return _channel_affine(y, np.ones_like(factor), b32 - mean32 * factor, x.dtype)


@register("LpNormalization", 1, cost=OUTPUT_ONLY)
def lp_normalization(x: np.ndarray, axis: int = -1, p: int = 2) -> np.ndarray:
    if p not in (1, 2):
        raise ValueError(f"LpNormalization supports p = 1 or 2, got {p}")
    norm = np.abs(x).sum(axis=axis, keepdims=True) if p == 1 else np.sqrt((x * x).sum(axis=axis, keepdims=True))
    safe = np.where(norm == 0, 1, norm)  # an all-zero slice stays zero (onnx reference)
    return (x / safe).astype(x.dtype, copy=False)


@register("MeanVarianceNormalization", 9, cost=OUTPUT_ONLY)
def mean_variance_normalization(x: np.ndarray, axes: list[int] | None = None) -> np.ndarray:
    axes = tuple(axes) if axes is not None else (0, 2, 3)
    x32 = x.astype(np.float32, copy=False)
    centred = x32 - x32.mean(axis=axes, keepdims=True)
    std = np.sqrt((centred * centred).mean(axis=axes, keepdims=True))
    return (centred / (std + np.float32(1e-9))).astype(x.dtype, copy=False)

"""Pooling: MaxPool, AveragePool (any number of spatial dims) and the global variants.

Each kernel tap is a strided view of the padded input combined into the output (maximum or sum), so
the only allocations are the padded input and the output. Output sizes follow the ONNX formula
including ``ceil_mode``; positions past the input that ceil mode adds never count toward averages.
Output dtype is the input dtype (averages of float16 accumulate in float32).
"""

from __future__ import annotations

import itertools

import numpy as np

from frame.engine.ops.conv import validate_conv
from frame.engine.ops.conv_im2col import spatial_params
from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, register


def _out_size(size: int, k: int, s: int, d: int, pad_total: int, ceil_mode: int, pad_begin: int) -> int:
    span = size + pad_total - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pad_begin:
        out -= 1  # the last window must start inside the input or the left padding
    return out


def _geometry(x: np.ndarray, kernel, strides, dilations, pads, auto_pad, ceil_mode):
    """Per spatial dim: stride, dilation, begin pad, end pad (incl. ceil-mode extra), output size."""
    strides, dilations, pads = spatial_params(tuple(kernel), x.shape[2:], strides, dilations, pads, auto_pad)
    rank = len(kernel)
    dims = []
    for i, (size, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations)):
        begin, end = pads[i], pads[i + rank]
        out = _out_size(size, k, s, d, begin + end, ceil_mode, begin)
        extra = max((out - 1) * s + (k - 1) * d + 1 - (size + begin + end), 0)
        dims.append((s, d, begin, end, extra, out))
    return dims


def _tap_views(padded: np.ndarray, kernel, dims):
    """For each kernel tap, the strided view of ``padded`` it reads for every output position."""
    lead = (slice(None),) * (padded.ndim - len(kernel))
    for offsets in itertools.product(*[range(k) for k in kernel]):
        yield padded[lead + tuple(slice(o * d, o * d + (out - 1) * s + 1, s)
                                  for o, (s, d, _, _, _, out) in zip(offsets, dims))]


def _padded(x: np.ndarray, dims, fill, lead: int = 2) -> np.ndarray:
    widths = [(0, 0)] * lead + [(b, e + extra) for (_, _, b, e, extra, _) in dims]
    return np.pad(x, widths, constant_values=fill) if any(any(w) for w in widths) else x


def _pool(x: np.ndarray, kernel, dims, fill: float, combine) -> np.ndarray:
    result = None
    for view in _tap_views(_padded(x, dims, fill), kernel, dims):
        result = view.copy() if result is None else combine(result, view, out=result)
    return result


def _max_with_indices(x: np.ndarray, kernel, dims, fill, column_major: bool) -> tuple[np.ndarray, np.ndarray]:
    """Max pooling plus the flat index of each maximum: (n*C + c) * spatial + its position in the
    image, counted row-major (``storage_order`` 0) or column-major (1)."""
    spatial = int(np.prod(x.shape[2:], dtype=np.int64))
    if column_major:
        grid = np.arange(spatial, dtype=np.int64).reshape(x.shape[2:][::-1]).T
    else:
        grid = np.arange(spatial, dtype=np.int64).reshape(x.shape[2:])
    where = _padded(grid, dims, -1, lead=0)
    best, best_at = None, None
    for view, at in zip(_tap_views(_padded(x, dims, fill), kernel, dims), _tap_views(where, kernel, dims)):
        if best is None:
            best, best_at = view.copy(), np.broadcast_to(at, view.shape).copy()
            continue
        better = view > best  # strict: the first maximum in scan order wins
        best = np.where(better, view, best)
        best_at = np.where(better, at, best_at)
    planes = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
    return best, best_at + planes * spatial


def _validate_pool(attrs: dict) -> None:
    validate_conv({k: v for k, v in attrs.items() if k not in ("kernel_shape", "strides", "dilations")})
    if "kernel_shape" not in attrs:
        raise UnsupportedOp("pooling needs the attribute 'kernel_shape'")


@register("MaxPool", 1, validate=_validate_pool, cost=OUTPUT_ONLY)
def max_pool(x: np.ndarray, auto_pad: str = "NOTSET", ceil_mode: int = 0, dilations: list[int] | None = None,
             kernel_shape: list[int] | None = None, pads: list[int] | None = None, storage_order: int = 0,
             strides: list[int] | None = None, _num_outputs: int = 1) -> np.ndarray:
    """``_num_outputs`` = 2 also returns Indices (flat positions in the input tensor)."""
    dims = _geometry(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    if _num_outputs > 1:
        return _max_with_indices(x, kernel_shape, dims, fill, bool(storage_order))
    return _pool(x, kernel_shape, dims, fill, np.maximum)


@register("AveragePool", 1, validate=_validate_pool, cost=OUTPUT_ONLY)
def average_pool(x: np.ndarray, auto_pad: str = "NOTSET", ceil_mode: int = 0, count_include_pad: int = 0,
                 dilations: list[int] | None = None, kernel_shape: list[int] | None = None,
                 pads: list[int] | None = None, strides: list[int] | None = None) -> np.ndarray:
    dims = _geometry(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    x32 = x.astype(np.float32) if x.dtype == np.float16 else x
    total = _pool(x32, kernel_shape, dims, 0.0, np.add)
    # Count the cells each window covers: real input, plus explicit pads if count_include_pad.
    mask = np.ones((1, 1) + x.shape[2:], dtype=x32.dtype)
    if count_include_pad:
        mask = np.pad(mask, [(0, 0), (0, 0)] + [(b, e) for (_, _, b, e, _, _) in dims], constant_values=1)
        dims = [(s, d, 0, 0, extra, out) for (s, d, _, _, extra, out) in dims]
    counts = _pool(mask, kernel_shape, dims, 0.0, np.add)
    return (total / counts).astype(x.dtype, copy=False)


@register("GlobalAveragePool", 1, cost=OUTPUT_ONLY)
def global_average_pool(x: np.ndarray) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    return x.mean(axis=axes, keepdims=True, dtype=np.float32).astype(x.dtype, copy=False)


@register("GlobalMaxPool", 1, cost=OUTPUT_ONLY)
def global_max_pool(x: np.ndarray) -> np.ndarray:
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)
